//! What a device says about the apps under test, through adb: whether each
//! app's process runs (`pidof`), which activity is in the foreground
//! (`dumpsys activity activities`), its crashes and ANRs (logcat's crash
//! and system buffers, `dumpsys activity lastanr`), the battery level
//! (`dumpsys battery`) and airplane mode (`settings get global
//! airplane_mode_on`). Only commands and output formats of a real device.

use std::time::Duration;

use crate::capabilities::adb::AdbHost;
use crate::capabilities::adb::events::{self, DeviceEvent, EventKind};

/// Budget of one reading's command.
const READ_TIMEOUT: Duration = Duration::from_secs(10);

/// One app, at one reading.
#[derive(Debug, Clone, PartialEq)]
pub struct AppReading {
    pub package: String,
    pub running: bool,
    pub foreground: bool,
}

/// One reading of the device.
#[derive(Debug, Clone, PartialEq)]
pub struct Reading {
    /// Whether the adb server lists the device as online.
    pub online: bool,
    pub apps: Vec<AppReading>,
    /// Every crash and ANR of the apps since `since_s`, by package.
    pub events: Vec<(String, DeviceEvent)>,
    pub battery_level: Option<f64>,
    pub airplane_mode: Option<bool>,
}

/// The package of the resumed activity in `dumpsys activity activities`:
/// `mResumedActivity: ActivityRecord{… u0 pkg/.Act t12}` up to Android 11,
/// `topResumedActivity=ActivityRecord{…}` and `ResumedActivity: …` since.
pub fn resumed_package(dump: &str) -> Option<String> {
    dump.lines().find_map(|line| {
        let line = line.trim();
        let record = ["mResumedActivity:", "topResumedActivity=", "ResumedActivity:"].iter().find_map(|key| line.strip_prefix(key))?;
        let inside = record.trim().strip_prefix("ActivityRecord{")?;
        let component = inside.split_whitespace().find(|w| w.contains('/'))?;
        Some(component.split('/').next()?.to_string())
    })
}

/// `level: N` in `dumpsys battery`.
pub fn battery_level(dump: &str) -> Option<f64> {
    dump.lines().find_map(|l| l.trim().strip_prefix("level:").and_then(|v| v.trim().parse().ok()))
}

/// The device's clock, in seconds since the epoch (`date +%s`).
pub async fn device_time(adb: &AdbHost, serial: &str) -> Result<i64, String> {
    let out = adb.shell(serial, "date +%s", READ_TIMEOUT).await.map_err(|e| e.to_string())?;
    out.stdout.trim().parse().map_err(|_| format!("the device's clock reads `{}`", out.stdout.trim()))
}

/// `dumpsys activity lastanr`, to compare with later ones.
pub async fn last_anr(adb: &AdbHost, serial: &str) -> String {
    adb.shell(serial, "dumpsys activity lastanr", READ_TIMEOUT).await.map(|o| o.stdout).unwrap_or_default()
}

/// Reads the device once. A device that is not online reads as such, and
/// nothing else is asked of it.
pub async fn read(adb: &AdbHost, serial: &str, packages: &[String], since_s: i64, anr_before: &str) -> Reading {
    let online = adb.devices().await.is_ok_and(|list| list.iter().any(|d| d.serial == serial && d.state == "device"));
    let mut reading = Reading { online, apps: vec![], events: vec![], battery_level: None, airplane_mode: None };
    if !online {
        return reading;
    }
    let shell = |command: String| async move { adb.shell(serial, &command, READ_TIMEOUT).await.ok() };
    let resumed = shell("dumpsys activity activities".into()).await.and_then(|o| resumed_package(&o.stdout));
    for package in packages {
        let running = shell(format!("pidof {package}")).await.is_some_and(|o| o.ok() && !o.stdout.trim().is_empty());
        reading.apps.push(AppReading { package: package.clone(), running, foreground: resumed.as_deref() == Some(package) });
    }
    // The events since the start, every time: logcat's own -t, on the device's clock.
    let logcat = format!("logcat -d -v epoch -b crash -b system -t {since_s}.000");
    let dump = shell(logcat).await.map(|o| o.stdout).unwrap_or_default();
    let anr_now = shell("dumpsys activity lastanr".into()).await.map(|o| o.stdout).unwrap_or_default();
    for package in packages {
        let found = events::from_logcat(&dump, package);
        let logged_anr = found.iter().any(|e| e.kind == EventKind::Anr);
        reading.events.extend(found.into_iter().map(|e| (package.clone(), e)));
        // An ANR whose log lines have rotated away still shows in dumpsys.
        if !logged_anr && events::new_anr_in_dumpsys(anr_before, &anr_now, package) {
            let detail = anr_now.lines().map(str::trim).find(|l| l.starts_with("ANR in")).unwrap_or("ANR").to_string();
            reading.events.push((package.clone(), DeviceEvent { kind: EventKind::Anr, at_ms: 0, detail }));
        }
    }
    reading.battery_level = shell("dumpsys battery".into()).await.and_then(|o| battery_level(&o.stdout));
    reading.airplane_mode = shell("settings get global airplane_mode_on".into()).await.map(|o| o.stdout.trim() == "1");
    reading
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_resumed_activity_is_read_in_every_android_versions_format() {
        let android_10 = "  Stack #1:\n    mResumedActivity: ActivityRecord{6c9b9c7 u0 dev.faultline.testapp/.MainActivity t42}\n";
        let android_14 = "  topResumedActivity=ActivityRecord{1f0e3a2 u0 com.android.launcher3/.uioverrides.QuickstepLauncher t3}\n";
        let android_12 = "      ResumedActivity: ActivityRecord{aa u0 dev.faultline.testapp/dev.faultline.testapp.MainActivity t9}\n";
        assert_eq!(resumed_package(android_10).as_deref(), Some("dev.faultline.testapp"));
        assert_eq!(resumed_package(android_14).as_deref(), Some("com.android.launcher3"));
        assert_eq!(resumed_package(android_12).as_deref(), Some("dev.faultline.testapp"));
        assert_eq!(resumed_package("  mResumedActivity: null\n"), None);
    }

    #[test]
    fn the_battery_level_is_read_from_dumpsys() {
        let dump = "Current Battery Service state:\n  AC powered: false\n  USB powered: true\n  level: 15\n  scale: 100\n";
        assert_eq!(battery_level(dump), Some(15.0));
        assert_eq!(battery_level("nothing"), None);
    }
}
