//! What a listener saw: requests, errors and latency, per observation
//! window (the frontend's health signal) and per phase (its metrics).

use std::collections::BTreeMap;
use std::sync::Mutex;
use std::time::Duration;

use rand::RngExt;
use serde::{Deserialize, Serialize};

/// Latencies kept per phase: past this, a uniform sample of them
/// (reservoir sampling), so a long experiment stays bounded.
const KEPT_LATENCIES: usize = 20_000;

/// How one request through the proxy ended.
#[derive(Debug, Clone, Copy)]
pub struct Outcome {
    /// The status the client got; `None`: the connection was cut.
    pub status: Option<u16>,
    /// Whether a rule acted on it.
    pub faulted: bool,
    /// From the request's arrival to the response's head.
    pub latency: Duration,
}

impl Outcome {
    /// A server error or a cut connection: what a user sees as failure.
    pub fn failed(&self) -> bool {
        self.status.is_none_or(|s| s >= 500)
    }
}

#[derive(Default)]
struct Counts {
    requests: u64,
    errors: u64,
    faulted: u64,
    latencies_ms: Vec<f64>,
}

impl Counts {
    fn add(&mut self, o: &Outcome) {
        self.requests += 1;
        self.errors += u64::from(o.failed());
        self.faulted += u64::from(o.faulted);
        let ms = o.latency.as_secs_f64() * 1000.0;
        if self.latencies_ms.len() < KEPT_LATENCIES {
            self.latencies_ms.push(ms);
        } else {
            let slot = rand::rng().random_range(0..self.requests) as usize;
            if slot < KEPT_LATENCIES {
                self.latencies_ms[slot] = ms;
            }
        }
    }

    fn summary(&self) -> TrafficSummary {
        let mut sorted = self.latencies_ms.clone();
        sorted.sort_by(f64::total_cmp);
        let rank = |p: f64| (!sorted.is_empty()).then(|| sorted[((p * sorted.len() as f64).ceil() as usize).clamp(1, sorted.len()) - 1]);
        TrafficSummary {
            requests: self.requests,
            errors: self.errors,
            faulted: self.faulted,
            error_rate: if self.requests == 0 { 0.0 } else { self.errors as f64 / self.requests as f64 },
            latency_ms: Percentiles { p50: rank(0.5), p95: rank(0.95), p99: rank(0.99) },
        }
    }
}

/// Requests, errors and latency of a stretch of traffic.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq, utoipa::ToSchema)]
pub struct TrafficSummary {
    pub requests: u64,
    /// Answers of 500 and above, and connections cut.
    pub errors: u64,
    /// Requests a rule acted on.
    pub faulted: u64,
    pub error_rate: f64,
    /// From a request's arrival at the proxy to its answer's head.
    pub latency_ms: Percentiles,
}

#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq, utoipa::ToSchema)]
pub struct Percentiles {
    pub p50: Option<f64>,
    pub p95: Option<f64>,
    pub p99: Option<f64>,
}

#[derive(Default)]
struct State {
    phase: String,
    window: Counts,
    phases: BTreeMap<String, Counts>,
}

/// One experiment's traffic, across its listeners.
#[derive(Default)]
pub struct Traffic(Mutex<State>);

impl std::fmt::Debug for Traffic {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Traffic")
    }
}

impl Traffic {
    pub fn record(&self, outcome: Outcome) {
        let mut s = self.0.lock().expect("traffic lock");
        s.window.add(&outcome);
        let phase = s.phase.clone();
        s.phases.entry(phase).or_default().add(&outcome);
    }

    /// Requests from now on count in this phase.
    pub fn set_phase(&self, phase: &str) {
        self.0.lock().expect("traffic lock").phase = phase.into();
    }

    /// The traffic since the last call, and a fresh window.
    pub fn take_window(&self) -> TrafficSummary {
        std::mem::take(&mut self.0.lock().expect("traffic lock").window).summary()
    }

    /// Each phase's traffic so far.
    pub fn phases(&self) -> BTreeMap<String, TrafficSummary> {
        let s = self.0.lock().expect("traffic lock");
        s.phases.iter().filter(|(p, _)| !p.is_empty()).map(|(p, c)| (p.clone(), c.summary())).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn outcome(status: Option<u16>, ms: u64) -> Outcome {
        Outcome { status, faulted: false, latency: Duration::from_millis(ms) }
    }

    #[test]
    fn windows_and_phases_count_errors_and_latency() {
        let t = Traffic::default();
        t.set_phase("baseline");
        for ms in 1..=100 {
            t.record(outcome(Some(200), ms));
        }
        t.set_phase("injecting");
        t.record(outcome(Some(503), 10));
        t.record(outcome(None, 10));
        t.record(outcome(Some(404), 10));
        let window = t.take_window();
        assert_eq!((window.requests, window.errors), (103, 2), "a 404 is the app's answer, not a failure");
        assert_eq!(t.take_window().requests, 0, "a window starts empty");
        let phases = t.phases();
        assert_eq!(phases["baseline"].latency_ms.p50, Some(50.0));
        assert_eq!(phases["baseline"].latency_ms.p99, Some(99.0));
        assert_eq!(phases["injecting"].requests, 3);
        assert!((phases["injecting"].error_rate - 2.0 / 3.0).abs() < 1e-9);
    }
}
