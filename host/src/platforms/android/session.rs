//! One running Android experiment as the platform sees it: the readings of
//! its device turned into health, metrics, a report and, at the end, the
//! verdict on the request's expectations.
//!
//! Health, per reading: the mean over the apps of 1 when the app's process
//! runs, else 0, halved when a crash or ANR of the app came since the last
//! reading; times 1 − the error rate of the app's HTTP traffic when it goes
//! through the fault proxy. The baseline counts whether each app was in the
//! foreground, which `should_recover` expects back.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

use serde_json::{Value, json};

use super::options::Expected;
use super::readings::Reading;
use crate::capabilities::adb::events::{DeviceEvent, EventKind};
use crate::capabilities::proxy::Traffic;
use crate::platforms::{Observation, Verdict};

/// Readings in a row without the device before it counts as gone.
pub const LOST_AFTER_READINGS: u32 = 2;
/// Crashes and ANRs kept per app in the report.
const MAX_EVENTS: usize = 50;

pub struct Session {
    pub experiment: String,
    pub serial: String,
    pub packages: Vec<String>,
    pub expected: Expected,
    /// Device time at the start (seconds): logcat is read from there.
    pub since_s: i64,
    /// `dumpsys activity lastanr` at the start.
    pub anr_before: String,
    /// The app's HTTP traffic through the fault proxy, when it goes there.
    pub traffic: Option<Arc<Traffic>>,
    state: Mutex<State>,
}

#[derive(Default)]
struct State {
    phase: String,
    apps: BTreeMap<String, App>,
    /// Every crash and ANR seen, by package, in order.
    events: Vec<(String, DeviceEvent)>,
    /// How many of them earlier readings already counted.
    counted: usize,
    missing: u32,
    battery_level: Option<f64>,
    airplane_mode: Option<bool>,
}

#[derive(Default, Clone)]
struct App {
    running: bool,
    foreground: bool,
    /// It was in the foreground at some baseline reading.
    foreground_in_baseline: bool,
}

impl Session {
    pub fn new(experiment: &str, serial: &str, packages: Vec<String>, expected: Expected, since_s: i64, anr_before: String, traffic: Option<Arc<Traffic>>) -> Self {
        let state = State { phase: "baseline".into(), ..State::default() };
        Session {
            experiment: experiment.into(),
            serial: serial.into(),
            packages,
            expected,
            since_s,
            anr_before,
            traffic,
            state: Mutex::new(state),
        }
    }

    pub fn set_phase(&self, phase: &str) {
        self.state.lock().expect("session lock").phase = phase.into();
        if let Some(traffic) = &self.traffic {
            traffic.set_phase(phase);
        }
    }

    /// Takes a reading in; what the engine observes of it.
    pub fn record(&self, reading: Reading) -> Observation {
        let mut state = self.state.lock().expect("session lock");
        let mut metrics = BTreeMap::new();
        metrics.insert("device_online".to_string(), f64::from(u8::from(reading.online)));
        if !reading.online {
            state.missing += 1;
            let lost = (state.missing >= LOST_AFTER_READINGS)
                .then(|| format!("device {} went away: the adb server no longer lists it online", self.serial));
            return Observation { health: 0.0, metrics, lost };
        }
        state.missing = 0;
        let baseline = state.phase == "baseline";
        for app in &reading.apps {
            let entry = state.apps.entry(app.package.clone()).or_default();
            entry.running = app.running;
            entry.foreground = app.foreground;
            entry.foreground_in_baseline |= baseline && app.foreground;
        }
        // Readings return every event since the start: keep the new ones.
        for (package, event) in reading.events {
            if !state.events.iter().any(|(p, e)| *p == package && *e == event) {
                state.events.push((package, event));
            }
        }
        let fresh = &state.events[state.counted..];
        let hit = |package: &str| fresh.iter().any(|(p, _)| p == package);
        let per_app: Vec<f64> = reading
            .apps
            .iter()
            .map(|a| if a.running { 1.0 } else { 0.0 } * if hit(&a.package) { 0.5 } else { 1.0 })
            .collect();
        state.counted = state.events.len();
        let mut health = if per_app.is_empty() { 1.0 } else { per_app.iter().sum::<f64>() / per_app.len() as f64 };
        let share = |f: fn(&super::readings::AppReading) -> bool| {
            reading.apps.iter().filter(|a| f(a)).count() as f64 / reading.apps.len().max(1) as f64
        };
        metrics.insert("running".into(), share(|a| a.running));
        metrics.insert("foreground".into(), share(|a| a.foreground));
        metrics.insert("crashes".into(), state.events.iter().filter(|(_, e)| e.kind == EventKind::Crash).count() as f64);
        metrics.insert("anrs".into(), state.events.iter().filter(|(_, e)| e.kind == EventKind::Anr).count() as f64);
        state.battery_level = reading.battery_level.or(state.battery_level);
        state.airplane_mode = reading.airplane_mode.or(state.airplane_mode);
        if let Some(level) = reading.battery_level {
            metrics.insert("battery_level".into(), level);
        }
        if let Some(on) = reading.airplane_mode {
            metrics.insert("airplane_mode".into(), f64::from(u8::from(on)));
        }
        if let Some(traffic) = &self.traffic {
            let window = traffic.take_window();
            metrics.insert("requests".into(), window.requests as f64);
            metrics.insert("errors".into(), window.errors as f64);
            if window.requests > 0 {
                metrics.insert("error_rate".into(), window.error_rate);
                health *= 1.0 - window.error_rate;
            }
            if let Some(p50) = window.latency_ms.p50 {
                metrics.insert("latency_p50_ms".into(), p50);
            }
        }
        Observation { health, metrics, lost: None }
    }

    /// Each expectation the request set: expected, observed, met, and why.
    fn expectations(&self, state: &State) -> BTreeMap<&'static str, Value> {
        let crashes: Vec<&DeviceEvent> = state.events.iter().filter(|(_, e)| e.kind == EventKind::Crash).map(|(_, e)| e).collect();
        let anrs: Vec<&DeviceEvent> = state.events.iter().filter(|(_, e)| e.kind == EventKind::Anr).map(|(_, e)| e).collect();
        let apps = || self.packages.iter().map(|p| (p, state.apps.get(p).cloned().unwrap_or_default()));
        let running = apps().all(|(_, a)| a.running);
        let recovered = apps().all(|(_, a)| a.running && (a.foreground || !a.foreground_in_baseline));
        let not_running: Vec<&String> = apps().filter(|(_, a)| !a.running).map(|(p, _)| p).collect();
        let checks = [
            ("running", self.expected.running, running, format!("not running at the end: {not_running:?}")),
            ("not_crash", self.expected.not_crash, crashes.is_empty(), format!("{} crash(es): {:?}", crashes.len(), crashes.iter().map(|e| &e.detail).collect::<Vec<_>>())),
            ("not_anr", self.expected.not_anr, anrs.is_empty(), format!("{} ANR(s): {:?}", anrs.len(), anrs.iter().map(|e| &e.detail).collect::<Vec<_>>())),
            ("should_recover", self.expected.should_recover, recovered, "after the faults were reverted the app was not running, or not back in the foreground it had in the baseline".to_string()),
        ];
        checks
            .into_iter()
            .filter_map(|(name, expected, observed, why)| {
                let expected = expected?;
                let met = expected == observed;
                Some((name, json!({ "expected": expected, "observed": observed, "met": met, "detail": if observed { Value::Null } else { Value::String(why) } })))
            })
            .collect()
    }

    /// What status and metrics show: the device, each app, its crashes and
    /// ANRs, and the expectations as they stand.
    pub fn report(&self) -> Value {
        let state = self.state.lock().expect("session lock");
        let apps: BTreeMap<&String, Value> = self
            .packages
            .iter()
            .map(|p| {
                let app = state.apps.get(p).cloned().unwrap_or_default();
                let of = |kind: EventKind| -> Vec<&DeviceEvent> {
                    state.events.iter().filter(|(q, e)| q == p && e.kind == kind).map(|(_, e)| e).take(MAX_EVENTS).collect()
                };
                (p, json!({ "running": app.running, "foreground": app.foreground, "crashes": of(EventKind::Crash), "anrs": of(EventKind::Anr) }))
            })
            .collect();
        json!({
            "serial": self.serial,
            "online": state.missing == 0,
            "battery_level": state.battery_level,
            "airplane_mode": state.airplane_mode,
            "apps": apps,
            "expectations": self.expectations(&state),
        })
    }

    /// The verdict on the expectations, once the experiment is over.
    pub fn verdict(&self) -> Option<Verdict> {
        let state = self.state.lock().expect("session lock");
        let checks = self.expectations(&state);
        if checks.is_empty() {
            return None;
        }
        let met = checks.values().filter(|c| c["met"] == true).count() as u32;
        Some(Verdict { met, given: checks.len() as u32, report: serde_json::to_value(&checks).unwrap_or_default() })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::platforms::android::readings::AppReading;

    fn reading(running: bool, foreground: bool, events: Vec<DeviceEvent>) -> Reading {
        Reading {
            online: true,
            apps: vec![AppReading { package: "app".into(), running, foreground }],
            events: events.into_iter().map(|e| ("app".to_string(), e)).collect(),
            battery_level: Some(80.0),
            airplane_mode: Some(false),
        }
    }

    fn crash(at_ms: i64) -> DeviceEvent {
        DeviceEvent { kind: EventKind::Crash, at_ms, detail: "boom".into() }
    }

    fn session(expected: Expected) -> Session {
        Session::new("exp", "emulator-5554", vec!["app".into()], expected, 0, String::new(), None)
    }

    #[test]
    fn a_crash_halves_one_reading_and_a_dead_app_reads_zero() {
        let s = session(Expected::default());
        assert_eq!(s.record(reading(true, true, vec![])).health, 1.0);
        assert_eq!(s.record(reading(true, true, vec![crash(1)])).health, 0.5);
        // The same crash again (logcat is read from the start) is not new.
        assert_eq!(s.record(reading(true, true, vec![crash(1)])).health, 1.0);
        let down = s.record(reading(false, false, vec![crash(1)]));
        assert_eq!((down.health, down.metrics["crashes"]), (0.0, 1.0));
    }

    #[test]
    fn expectations_are_met_when_what_was_seen_is_what_was_expected() {
        let s = session(Expected { running: Some(true), not_crash: Some(true), not_anr: Some(true), should_recover: Some(true) });
        s.record(reading(true, true, vec![]));
        s.set_phase("injecting");
        s.record(reading(false, false, vec![crash(5)]));
        s.set_phase("recovering");
        s.record(reading(true, true, vec![crash(5)]));
        let verdict = s.verdict().unwrap();
        assert_eq!((verdict.met, verdict.given), (3, 4), "{}", verdict.report);
        assert_eq!(verdict.report["not_crash"]["met"], false);
        assert_eq!(verdict.report["should_recover"]["met"], true);
        // Expecting a crash is met by one.
        let expecting = session(Expected { not_crash: Some(false), ..Expected::default() });
        expecting.record(reading(true, true, vec![crash(9)]));
        assert_eq!(expecting.verdict().unwrap().met, 1);
        assert!(session(Expected::default()).verdict().is_none(), "no expectations, no verdict");
    }

    #[test]
    fn an_app_left_in_the_background_has_not_recovered_when_it_began_in_the_foreground() {
        let s = session(Expected { should_recover: Some(true), ..Expected::default() });
        s.record(reading(true, true, vec![]));
        s.set_phase("recovering");
        s.record(reading(true, false, vec![]));
        assert_eq!(s.verdict().unwrap().met, 0);
    }

    #[test]
    fn a_device_missing_two_readings_in_a_row_is_lost() {
        let s = session(Expected::default());
        let gone = Reading { online: false, apps: vec![], events: vec![], battery_level: None, airplane_mode: None };
        assert!(s.record(gone.clone()).lost.is_none());
        assert!(s.record(gone).lost.unwrap().contains("emulator-5554"));
    }
}
