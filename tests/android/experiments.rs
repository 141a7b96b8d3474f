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

/// A host using a private adb server, with its HOME beside the server's
/// (the emulator console's token is there).
fn host_for(adb: &AdbServer, data: &std::path::Path, extra: &[&str]) -> HostProcess {
    let mut args: Vec<String> = adb.host_args();
    args.extend(extra.iter().map(|a| a.to_string()));
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let home = adb.home.path().display().to_string();
    HostProcess::start_with_env(data, &args, &[("HOME", &home)])
}

impl Bench {
    /// A simulated emulator (serial emulator-NNNN, with a console).
    fn start(sim: SimOptions, host_args: &[&str]) -> Bench {
        Self::with(SimOptions { emulator: true, ..sim }, host_args)
    }

    /// `sim` as given: a TCP device unless it asks for an emulator.
    fn with(sim: SimOptions, host_args: &[&str]) -> Bench {
        let adb = AdbServer::start();
        let device = SimDevice::start(&adb, sim);
        let data = tempfile::tempdir().unwrap();
        let host = host_for(&adb, data.path(), host_args);
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

#[tokio::test]
async fn every_android_example_request_passes_every_check_of_a_start() {
    let bench = Bench::start(SimOptions::default(), &[]);
    let apk = bench.upload().await;
    let mut checked = 0;
    for (_, path) in faultline_tests::paths::example_requests().into_iter().filter(|(platform, _)| platform == "android") {
        // The examples name the test app, and `APK_ID` where its upload's id goes.
        let body: Value = serde_json::from_str(&std::fs::read_to_string(&path).unwrap().replace("APK_ID", &apk)).unwrap();
        let reply = bench.host.api.post_json("/experiments/android/preview", &body).await;
        assert_eq!(reply.status, 200, "{}: {}", path.display(), reply.text);
        assert_eq!(reply.body["package"], TEST_APP, "{}", reply.text);
        checked += 1;
    }
    assert!(checked >= 5, "found {checked} Android example requests");
}

/// Phases of a short experiment: baseline, injecting, recovering (seconds).
fn phases(baseline: f64, injecting: f64, recovering: f64) -> Value {
    json!({"baseline_seconds": baseline, "injecting_seconds": injecting, "recovering_seconds": recovering})
}

/// Starts one fault held at its level for `injecting` seconds; the id.
async fn run_fault(bench: &Bench, fault: &str, intensity: Option<f64>, injecting: f64, extra: Value) -> String {
    let apk = bench.upload().await;
    let mut body = request(fault, &apk, 0, json!({"phases": phases(1.0, injecting, 1.0)}));
    body.as_object_mut().unwrap().remove("duration_seconds");
    if let Some(level) = intensity {
        body["intensity"] = json!(level);
        body["ramp"] = json!(false);
    }
    for (k, v) in extra.as_object().unwrap() {
        body[k] = v.clone();
    }
    let started = bench.host.api.start("android", &body).await;
    started["id"].as_str().unwrap().to_string()
}

async fn injected(bench: &Bench, id: &str) -> Value {
    bench.host.api.wait_status("android", id, 30, |s| s["targets"][0]["injection"] == "active" || s["state"] != "running").await
}

async fn finished(bench: &Bench, id: &str) -> Value {
    bench.host.api.wait_status("android", id, 60, |s| s["state"] != "running").await
}

#[tokio::test]
async fn battery_drain_and_airplane_mode_change_the_device_and_are_undone() {
    let bench = Bench::start(SimOptions::default(), &[]);
    let id = run_fault(&bench, "battery_drain", Some(12.0), 4.0, json!({})).await;
    injected(&bench, &id).await;
    let battery = bench.shell("dumpsys battery").1;
    assert!(battery.contains("level: 12") && battery.contains("AC powered: false"), "{battery}");
    let ended = finished(&bench, &id).await;
    assert_eq!(ended["state"], "completed", "{ended}");
    let battery = bench.shell("dumpsys battery").1;
    assert!(battery.contains("level: 100") && battery.contains("AC powered: true"), "reset: {battery}");

    let id = run_fault(&bench, "airplane_mode", None, 4.0, json!({})).await;
    injected(&bench, &id).await;
    assert_eq!(bench.shell("settings get global airplane_mode_on").1, "1");
    assert_eq!(bench.shell("cmd connectivity airplane-mode").1, "enabled");
    finished(&bench, &id).await;
    assert_eq!(bench.shell("cmd connectivity airplane-mode").1, "disabled", "airplane mode is off again");
    assert_eq!(bench.shell("pgrep -f '[f]aultline-watchdog'").0, 1, "no watchdog is left on the device");
}

#[tokio::test]
async fn memory_pressure_sends_the_trim_level_of_the_devices_api_level() {
    for (sdk, level) in [(34, 80), (29, 15)] {
        let bench = Bench::start(SimOptions { sdk: Some(sdk), ..SimOptions::default() }, &[]);
        let id = run_fault(&bench, "memory_pressure", Some(3.0), 3.0, json!({})).await;
        injected(&bench, &id).await;
        let log = bench.adb.adb(&["-s", bench.serial(), "logcat", "-d", "-s", "FaultlineTestApp"]);
        let log = String::from_utf8_lossy(&log.stdout).to_string();
        assert!(log.contains(&format!("onTrimMemory({level})")), "API {sdk}: the app was told {level}: {log}");
        assert_eq!(finished(&bench, &id).await["state"], "completed");
    }
}

#[tokio::test]
async fn network_throttle_takes_its_share_of_the_profile_through_the_console_and_puts_it_back() {
    let bench = Bench::start(SimOptions { args: vec!["--network".into(), "lte".into()], ..SimOptions::default() }, &["--network-profile", "LTE"]);
    let id = run_fault(&bench, "network_throttle", Some(75.0), 4.0, json!({})).await;
    injected(&bench, &id).await;
    let status = bench.adb.emu(bench.serial(), "network status");
    assert!(status.contains("upload speed:     14500000 bits/s") && status.contains("download speed:   43250000 bits/s"), "a quarter of LTE: {status}");
    assert_eq!(finished(&bench, &id).await["state"], "completed");
    let status = bench.adb.emu(bench.serial(), "network status");
    assert!(status.contains("upload speed:     58000000 bits/s"), "LTE again: {status}");

    // A device that is no emulator has no console: the experiment says so and ends.
    let plain = Bench::with(SimOptions::default(), &[]);
    let id = run_fault(&plain, "network_throttle", Some(50.0), 2.0, json!({})).await;
    let ended = finished(&plain, &id).await;
    assert_eq!(ended["state"], "failed", "{ended}");
    assert!(ended["error"].as_str().unwrap().contains("not an emulator"), "{ended}");
}

/// An experiment on an app the device already has (installed by `adb
/// install`, as a developer's device has it): nothing is uninstalled at
/// the end, so what the revert did can be seen afterwards.
async fn on_installed_app(bench: &Bench, fault: &str, phases_: Value, extra: Value) -> String {
    let out = bench.adb.adb(&["-s", bench.serial(), "install", "-r", &fixture_apk("testapp").display().to_string()]);
    assert!(out.status.success(), "adb install: {}", String::from_utf8_lossy(&out.stderr));
    let mut body = json!({"fault_type": fault, "targets": [TEST_APP], "target_type": "android", "observation_type": "android", "phases": phases_});
    for (k, v) in extra.as_object().unwrap() {
        body[k] = v.clone();
    }
    bench.host.api.start("android", &body).await["id"].as_str().unwrap().to_string()
}

#[tokio::test]
async fn kill_app_and_foreground_app_act_on_the_app_and_bring_back_what_was() {
    let bench = Bench::start(SimOptions::default(), &[]);
    let id = on_installed_app(&bench, "kill_app", phases(1.0, 3.0, 1.0), json!({"expected": {"should_recover": true, "running": true}})).await;
    injected(&bench, &id).await;
    assert!(!bench.running(), "killed");
    let ended = finished(&bench, &id).await;
    assert!(bench.running() && bench.in_front(), "brought back, as should_recover asks");
    assert_eq!(ended["result"]["expectations"]["should_recover"]["met"], true, "{ended}");
    assert_eq!(bench.shell(&format!("pm path {TEST_APP}")).0, 0, "an app the device had stays installed");

    // The app in the background: foreground_app brings it to the front, and the revert sends it home.
    let id = on_installed_app(&bench, "foreground_app", phases(2.0, 3.0, 1.0), json!({})).await;
    assert_eq!(bench.shell("input keyevent KEYCODE_HOME").0, 0);
    assert!(!bench.in_front() && bench.running(), "in the background, still running");
    injected(&bench, &id).await;
    assert!(bench.in_front(), "brought to the front");
    finished(&bench, &id).await;
    assert!(!bench.in_front() && bench.running(), "sent back home, as it was");
}

#[tokio::test]
async fn expectations_fail_when_the_app_crashes_or_stops_responding_and_the_score_shows_it() {
    let expected = json!({"expected": {"running": true, "not_crash": true, "not_anr": true, "should_recover": true}});
    let steady = Bench::start(SimOptions::default(), &[]);
    let id = run_fault(&steady, "airplane_mode", None, 3.0, expected.clone()).await;
    let calm = finished(&steady, &id).await;
    for name in ["running", "not_crash", "not_anr", "should_recover"] {
        assert_eq!(calm["result"]["expectations"][name]["met"], true, "{name}: {calm}");
    }

    let fragile = Bench::start(SimOptions { args: vec!["--app-crash-on".into(), "dev.faultline.testapp=airplane_mode".into()], ..SimOptions::default() }, &[]);
    let id = run_fault(&fragile, "airplane_mode", None, 3.0, expected.clone()).await;
    let crashed = finished(&fragile, &id).await;
    let e = &crashed["result"]["expectations"];
    assert_eq!((e["not_crash"]["met"].as_bool(), e["running"]["met"].as_bool()), (Some(false), Some(false)), "{crashed}");
    assert!(e["not_crash"]["detail"].as_str().unwrap().contains("IllegalStateException"), "{crashed}");
    let crash_seen = fragile.adb.adb(&["-s", fragile.serial(), "logcat", "-d", "-b", "crash"]);
    assert!(String::from_utf8_lossy(&crash_seen.stdout).contains("FATAL EXCEPTION"), "the device's own crash log");
    assert!(crashed["android"]["apps"][TEST_APP]["crashes"].as_array().is_some_and(|c| !c.is_empty()), "{crashed}");
    let (calm_score, crash_score) = (calm["score"].as_f64().unwrap(), crashed["score"].as_f64().unwrap());
    assert!(crash_score < calm_score, "a crash scores lower: {crash_score} vs {calm_score}");

    let stalling = Bench::start(SimOptions { args: vec!["--app-anr-on".into(), "dev.faultline.testapp=trim:COMPLETE".into()], ..SimOptions::default() }, &[]);
    let id = run_fault(&stalling, "memory_pressure", Some(3.0), 3.0, expected).await;
    let anr = finished(&stalling, &id).await;
    assert_eq!(anr["result"]["expectations"]["not_anr"]["met"], false, "{anr}");
    assert_eq!(anr["result"]["expectations"]["not_crash"]["met"], true, "an ANR is no crash: {anr}");
    let lastanr = stalling.shell("dumpsys activity lastanr").1;
    assert!(lastanr.contains(&format!("ANR in {TEST_APP}")), "{lastanr}");
    assert!(anr["score"].as_f64().unwrap() < calm_score);
}

#[tokio::test]
async fn a_killed_host_leaves_device_faults_that_end_by_their_watchdogs() {
    let bench = Bench::start(SimOptions { args: vec!["--network".into(), "lte".into()], ..SimOptions::default() }, &["--network-profile", "LTE", "--ttl-margin-seconds", "2"]);
    let apk = bench.upload().await;
    let body = request("network_throttle", &apk, 10, json!({"intensity": 50, "ramp": false, "scenarios": [{"type": "battery_drain", "at": 0, "duration_seconds": 9, "intensity": 5}]}));
    let id = bench.host.api.start("android", &body).await["id"].as_str().unwrap().to_string();
    bench.host.api.wait_status("android", &id, 30, |s| s["targets"][0]["injection"] == "active").await;
    assert!(bench.battery_level() == "5", "drained: {}", bench.battery_level());
    assert!(bench.adb.emu(bench.serial(), "network status").contains("29000000"), "throttled");
    let Bench { adb, device, host, _data } = bench;
    host.kill9();
    // Nothing of the host is left to revert: the device's watchdog and the console's do, at 10 s + 2 s.
    adb.wait_for("the battery reset by its watchdog", Duration::from_secs(30), || {
        let dump = adb.shell(&device.serial, "dumpsys battery").1;
        (!dump.contains("level: 100")).then_some(dump)
    });
    adb.wait_for("the network back to LTE", Duration::from_secs(30), || {
        let status = adb.emu(&device.serial, "network status");
        (!status.contains("58000000")).then_some(status)
    });
    assert_eq!(adb.shell(&device.serial, "pgrep -f '[f]aultline-watchdog'").0, 1, "the watchdogs are gone after firing");
}

#[tokio::test]
async fn a_device_that_goes_away_mid_run_ends_the_experiment_failed() {
    let mut bench = Bench::start(SimOptions::default(), &[]);
    let id = run_fault(&bench, "battery_drain", Some(20.0), 30.0, json!({})).await;
    injected(&bench, &id).await;
    bench.device.kill();
    let ended = bench.host.api.wait_status("android", &id, 60, |s| s["state"] != "running").await;
    assert_eq!(ended["state"], "failed", "{ended}");
    assert!(ended["error"].as_str().unwrap().contains("went away"), "{ended}");
    assert!(ended["timing"]["elapsed_ms"].as_i64().unwrap() < 30_000, "it ended when the device went, not at its planned end: {ended}");
    // The lease is free again: a new device can take the next experiment.
    let device = SimDevice::start(&bench.adb, SimOptions { emulator: true, ..SimOptions::default() });
    let reply = bench.host.api.post_json("/experiments/android/preview", &request("kill_app", &bench.upload().await, 10, json!({}))).await;
    assert_eq!(reply.status, 200, "{reply:?}");
    drop(device);
}

#[tokio::test]
async fn bad_android_starts_are_refused_with_their_codes_and_leave_nothing() {
    let bench = Bench::start(SimOptions::default(), &[]);
    let apk = bench.upload().await;
    let refused = |reply: faultline_tests::Reply, code: &str| {
        assert_eq!((reply.status, reply.code()), (422, code), "{}", reply.text);
    };
    refused(bench.host.api.post_json("/experiments/android/start", &request("kill_app", "apk-0000000000000000", 10, json!({}))).await, "unknown_apk");
    let mut other = request("kill_app", &apk, 10, json!({}));
    other["targets"] = json!(["com.example.other"]);
    refused(bench.host.api.post_json("/experiments/android/start", &other).await, "package_mismatch");
    let mut bad = request("kill_app", &apk, 10, json!({}));
    bad["targets"] = json!(["not a package"]);
    refused(bench.host.api.post_json("/experiments/android/start", &bad).await, "invalid_target");
    refused(bench.host.api.post_json("/experiments/android/start", &request("kill_app", &apk, 10, json!({"network_profile": "5G"}))).await, "invalid_field");
    refused(
        bench.host.api.post_json("/experiments/android/start", &request("kill_app", &apk, 10, json!({"emulator": {"sdk_version": 33}}))).await,
        "sdk_mismatch",
    );
    let without = request("kill_app", &apk, 10, json!({}));
    let mut without = without;
    without.as_object_mut().unwrap().remove("apk");
    refused(bench.host.api.post_json("/experiments/android/start", &without).await, "no_matching_target");
    assert_ne!(bench.shell(&format!("pm path {TEST_APP}")).0, 0, "a refused start installed nothing");

    // No device at all, and no emulator to launch.
    let empty = AdbServer::start();
    let data = tempfile::tempdir().unwrap();
    let host = host_for(&empty, data.path(), &[]);
    let apk = host.api.upload("/upload/apk", "file", std::fs::read(fixture_apk("testapp")).unwrap()).await.body["id"].as_str().unwrap().to_string();
    refused(host.api.post_json("/experiments/android/start", &request("kill_app", &apk, 10, json!({}))).await, "no_device");
    assert_eq!(host.api.get("/apks").await.status, 200);
}

// Multi-threaded: the app's backend runs in this process while the test
// waits on adb in blocking calls.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn http_faults_act_on_the_apps_traffic_through_the_devices_proxy_and_are_undone() {
    let backend = faultline_tests::WebApp::start().await;
    let url = backend.url("/api/items").replace("127.0.0.1", "10.0.2.2");
    let sim = SimOptions { args: vec!["--app-http".into(), format!("{TEST_APP}={url}"), "--app-http-interval-ms".into(), "200".into()], ..SimOptions::default() };
    let bench = Bench::start(sim, &[]);
    let id = run_fault(&bench, "http_latency", Some(700.0), 5.0, json!({})).await;
    let status = injected(&bench, &id).await;
    let proxy = status["resources"].as_array().unwrap().iter().find(|r| r["kind"] == "device_proxy").cloned().unwrap_or_else(|| panic!("{status}"));
    let port = proxy["address"].as_str().unwrap().rsplit(':').next().unwrap().to_string();
    assert_eq!(bench.shell("settings get global http_proxy").1, format!("127.0.0.1:{port}"));
    let reversed = String::from_utf8_lossy(&bench.adb.adb(&["-s", bench.serial(), "reverse", "--list"]).stdout).to_string();
    assert!(reversed.contains(&format!("tcp:{port}")), "{reversed}");
    // The app's own log says how long its requests took: the delay, through the proxy.
    let app_log = || String::from_utf8_lossy(&bench.adb.adb(&["-s", bench.serial(), "logcat", "-d", "-s", "FaultlineTestApp"]).stdout).to_string();
    bench.adb.wait_for("a slow request in the app's log", Duration::from_secs(20), || {
        let log = app_log();
        let slow = log.lines().filter_map(|l| l.split("-> 200 in ").nth(1)?.strip_suffix(" ms")?.parse::<u64>().ok()).any(|ms| ms >= 700);
        (!slow).then_some(log)
    });
    let ended = finished(&bench, &id).await;
    assert_eq!(ended["state"], "completed", "{ended}");
    assert_eq!(bench.shell("settings get global http_proxy").1, ":0", "the device's proxy is cleared");
    let reversed = String::from_utf8_lossy(&bench.adb.adb(&["-s", bench.serial(), "reverse", "--list"]).stdout).to_string();
    assert!(!reversed.contains(&format!("tcp:{port}")), "the reverse is removed: {reversed}");
    let metrics = bench.host.api.get(&format!("/experiments/android/metrics?id={id}")).await.body;
    assert!(metrics["phases"]["injecting"]["metrics"]["requests"]["max"].as_f64().unwrap_or(0.0) > 0.0, "the proxy saw the app's traffic: {metrics}");
    assert!(backend.hits("/api/items") > 0);

    // An error status reaches the app too.
    let id = run_fault(&bench, "http_error", Some(100.0), 3.0, json!({"params": {"status": 503}})).await;
    injected(&bench, &id).await;
    bench.until("a 503 in the app's log", 20, |b| {
        String::from_utf8_lossy(&b.adb.adb(&["-s", b.serial(), "logcat", "-d", "-s", "FaultlineTestApp"]).stdout).contains("-> 503")
    });
    finished(&bench, &id).await;
}

#[tokio::test]
async fn with_an_emulator_configured_each_experiment_launches_its_own_and_shuts_it_down() {
    let adb = AdbServer::start();
    let avd_home = tempfile::tempdir().unwrap();
    faultline_tests::android::create_avd(avd_home.path(), "Pixel_6_API_34", 34, 420);
    let data = tempfile::tempdir().unwrap();
    let standin = faultline_tests::paths::emulator_standin().display().to_string();
    let mut args: Vec<String> = adb.host_args();
    args.extend(["--emulator".into(), standin, "--emulator-boot-timeout-seconds".into(), "30".into()]);
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let home = adb.home.path().display().to_string();
    let avds = avd_home.path().display().to_string();
    let host = HostProcess::start_with_env(data.path(), &args, &[("HOME", &home), ("ANDROID_AVD_HOME", &avds)]);
    let apk = host.api.upload("/upload/apk", "file", std::fs::read(fixture_apk("testapp")).unwrap()).await.body["id"].as_str().unwrap().to_string();
    assert!(adb.online().is_empty(), "no device before the start");

    let mut body = request("kill_app", &apk, 0, json!({"phases": phases(1.0, 2.0, 1.0), "emulator": {"sdk_version": 34, "screen_density": 320}}));
    body.as_object_mut().unwrap().remove("duration_seconds");
    let started = host.api.start("android", &body).await;
    let id = started["id"].as_str().unwrap().to_string();
    let serial = started["device"].as_str().unwrap().to_string();
    assert!(serial.starts_with("emulator-"), "{started}");
    assert!(adb.online().contains(&serial), "launched and booted: {:?}", adb.online());
    assert_eq!(adb.shell(&serial, "getprop sys.boot_completed").1, "1");
    assert!(adb.shell(&serial, "wm density").1.contains("Override density: 320"), "the configured density");
    let ended = host.api.wait_status("android", &id, 60, |s| s["state"] != "running").await;
    assert_eq!(ended["state"], "completed", "{ended}");
    adb.wait_for("the emulator shut down", Duration::from_secs(20), || {
        let online = adb.online();
        online.contains(&serial).then(|| format!("{online:?}"))
    });

    // An AVD that does not exist: the emulator's own PANIC, as a refusal.
    body["android_run"]["avd_name"] = json!("No_Such_AVD");
    let refused = host.api.post_json("/experiments/android/start", &body).await;
    assert_eq!((refused.status, refused.code()), (422, "emulator_failed"), "{}", refused.text);
    assert!(refused.body["detail"].as_str().unwrap().contains("Unknown AVD name"), "{}", refused.text);
}
