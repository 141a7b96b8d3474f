//! Android experiments through the API of the real `faultline` binary, on
//! the device simulator reached through a private server of the real
//! Debian `adb`. Every effect is checked the way a user would check it on
//! a device, through `adb shell` and `adb emu`, never through the
//! simulator's own state or the host's bookkeeping.

use std::time::Duration;

use faultline_tests::HostProcess;
use faultline_tests::android::{AdbServer, SimDevice, SimOptions, TEST_APP, fixture_apk};
use serde_json::{Value, json};

/// A private adb server, a simulated emulator, and a host using them.
struct Bench {
    adb: AdbServer,
    device: SimDevice,
    host: HostProcess,
    _data: tempfile::TempDir,
}

impl Bench {
    fn start(sim: SimOptions, host_args: &[&str]) -> Bench {
        let adb = AdbServer::start();
        let device = SimDevice::start(&adb, SimOptions { emulator: true, ..sim });
        let data = tempfile::tempdir().unwrap();
        let mut args: Vec<String> = adb.host_args();
        args.push("--emulator-console-token".into());
        args.push(adb.home.path().join(".emulator_console_auth_token").display().to_string());
        args.extend(host_args.iter().map(|a| a.to_string()));
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        let host = HostProcess::start(data.path(), &args);
        Bench { adb, device, host, _data: data }
    }

    fn serial(&self) -> &str {
        &self.device.serial
    }

    fn shell(&self, command: &str) -> (i32, String) {
        self.adb.shell(self.serial(), command)
    }

    fn running(&self) -> bool {
        self.shell(&format!("pidof {TEST_APP}")).0 == 0
    }

    fn in_front(&self) -> bool {
        self.shell("dumpsys activity activities").1.lines().any(|l| l.contains("ResumedActivity") && l.contains(TEST_APP))
    }

    fn battery_level(&self) -> String {
        let dump = self.shell("dumpsys battery").1;
        dump.lines().find_map(|l| l.trim().strip_prefix("level:").map(|v| v.trim().to_string())).unwrap_or_default()
    }

    async fn upload(&self) -> String {
        let reply = self.host.api.upload("/upload/apk", "file", std::fs::read(fixture_apk("testapp")).unwrap()).await;
        assert!(reply.status == 201 || reply.status == 200, "{reply:?}");
        reply.body["id"].as_str().unwrap().to_string()
    }

    /// Polls a condition on the device until it holds.
    fn until(&self, what: &str, secs: u64, check: impl Fn(&Bench) -> bool) {
        self.adb.wait_for(what, Duration::from_secs(secs), || (!check(self)).then(|| what.to_string()));
    }
}

fn request(fault: &str, apk: &str, seconds: u64, extra: Value) -> Value {
    let mut body = json!({
        "fault_type": fault, "targets": [TEST_APP], "target_type": "android", "observation_type": "android",
        "duration_seconds": seconds, "apk": apk,
        "android_run": {"avd_name": "Pixel_6_API_34", "headless": true, "reset_app_state": true},
    });
    for (k, v) in extra.as_object().unwrap() {
        body[k] = v.clone();
    }
    body
}


#[tokio::test]
async fn the_specs_flow_installs_runs_two_scenarios_is_polled_and_stopped() {
    let bench = Bench::start(SimOptions::default(), &[]);
    let apk = bench.upload().await;
    assert_ne!(bench.shell(&format!("pm path {TEST_APP}")).0, 0, "not installed before the start");
    let body = request(
        "battery_drain",
        &apk,
        30,
        json!({"intensity": 20, "scenarios": [{"type": "kill_app", "at": 5, "duration_seconds": 3}, {"type": "foreground_app", "at": 10, "duration_seconds": 2}],
               "expected": {"running": true, "not_crash": true, "not_anr": true, "should_recover": true}}),
    );
    let started = bench.host.api.start("android", &body).await;
    let id = started["id"].as_str().unwrap().to_string();
    assert_eq!((started["state"].as_str(), started["phase"].as_str()), (Some("running"), Some("baseline")));
    assert_eq!((started["fault_type"].as_str(), started["package"].as_str()), (Some("battery_drain"), Some(TEST_APP)));
    // Installed, started, in front.
    assert_eq!(bench.shell(&format!("pm path {TEST_APP}")).0, 0, "installed by the start");
    assert!(bench.running() && bench.in_front(), "the app runs in the foreground from the start");

    // kill_app at 5 s for 3 s: the app is gone, then brought back (should_recover).
    bench.until("the app killed by the scenario", 15, |b| !b.running());
    let status = bench.host.api.get(&format!("/experiments/android/status?id={id}")).await.body;
    assert_eq!(status["scenarios"][0]["state"], "active", "{status}");
    bench.until("the app back after the scenario", 15, |b| b.running());
    bench.host.api.wait_status("android", &id, 20, |s| s["scenarios"][1]["state"] == "ended").await;

    // The primary fault: the battery drains while injecting.
    bench.until("the battery drained", 20, |b| b.battery_level().parse::<f64>().is_ok_and(|l| l <= 30.0));
    let metrics = bench.host.api.get(&format!("/experiments/android/metrics?id={id}")).await;
    assert_eq!(metrics.status, 200);
    assert!(metrics.body["phases"]["baseline"]["samples"].as_u64().unwrap() > 0, "{}", metrics.body);
    assert_eq!(metrics.body["android"]["apps"][TEST_APP]["running"], true, "{}", metrics.body);

    let stopped = bench.host.api.stop("android", &id).await;
    assert_eq!(stopped.status, 200, "{stopped:?}");
    assert_eq!(stopped.body["state"], "stopped");
    assert_eq!(bench.battery_level(), "100", "the battery is reset by the rollback");
    assert!(stopped.body["open_injections"].as_array().unwrap().is_empty(), "{}", stopped.body);
    for resource in stopped.body["resources"].as_array().unwrap() {
        assert_eq!(resource["state"], "released", "{resource}");
    }
    assert_ne!(bench.shell(&format!("pm path {TEST_APP}")).0, 0, "the APK installed for it is uninstalled");
    let expectations = &stopped.body["result"]["expectations"];
    assert!(expectations.is_object(), "{}", stopped.body);
    assert!(stopped.body["score"].as_f64().is_some());
}
