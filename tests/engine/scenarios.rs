//! Timed scenarios, on every platform's engine: each fires at its offset
//! from the start for its duration with its own driver, journal rows and
//! rollback. Checked through the test plugins' own log records (what each
//! plugin injected and reverted) and the status the API answers.

use std::sync::Arc;

use faultline_tests::{InProcessHost, Options, RecordingLog};
use serde_json::{Value, json};

fn phases(baseline: f64, injecting: f64, recovering: f64) -> Value {
    json!({"baseline_seconds": baseline, "injecting_seconds": injecting, "recovering_seconds": recovering})
}

fn ended(status: &Value) -> bool {
    status["state"] != "running"
}

fn options(plugins: Vec<&'static str>) -> Options {
    Options { plugins, ..Options::default() }
}

/// The `kind` events of a status, by detail.
fn events(status: &Value, kind: &str) -> Vec<String> {
    status["events"].as_array().unwrap().iter().filter(|e| e["kind"] == kind).map(|e| e["detail"].as_str().unwrap().to_string()).collect()
}

#[tokio::test]
async fn scenarios_fire_at_their_offsets_for_their_duration_with_their_own_driver_and_are_reverted() {
    let dir = tempfile::tempdir().unwrap();
    let host = InProcessHost::start(dir.path(), options(vec!["steady", "share"])).await;
    let started = host
        .api
        .start(
            "backend",
            &json!({"fault_type": "test_steady", "targets": ["svc-a", "svc-b"], "intensity": 40, "phases": phases(1.0, 2.0, 3.0),
                    "scenarios": [{"type": "test_share", "at": 1, "duration_seconds": 1, "intensity": 50},
                                  {"type": "test_share", "at": 4, "duration_seconds": 1}]}),
        )
        .await;
    let id = started["id"].as_str().unwrap().to_string();
    let created_at = started["created_at"].as_i64().unwrap();

    let active = host.api.wait_status("backend", &id, 30, |s| s["scenarios"][0]["state"] == "active" || ended(s)).await;
    assert_eq!(active["scenarios"][0]["type"], "test_share");
    // Half of two targets, rounded up: one, by the scenario's own driver.
    assert_eq!(host.log.in_effect_of("share").len(), 1, "{:?}", host.log.records());
    assert_eq!(active["scenarios"][1]["state"], "scheduled");

    let status = host.api.wait_status("backend", &id, 60, ended).await;
    assert_eq!(status["state"], "completed", "{status}");
    for (i, (at, length)) in [(1000, 1000), (4000, 1000)].into_iter().enumerate() {
        let scenario = &status["scenarios"][i];
        assert_eq!(scenario["state"], "ended", "{status}");
        let fired = scenario["fired_at"].as_i64().unwrap() - created_at;
        let held = scenario["ended_at"].as_i64().unwrap() - scenario["fired_at"].as_i64().unwrap();
        assert!((at..at + 1500).contains(&fired), "scenario {i} fired {fired} ms after the start");
        assert!((length..length + 1500).contains(&held), "scenario {i} held {held} ms");
    }
    // The second scenario fires in recovering, and the experiment waits for it.
    assert!(status["timing"]["elapsed_ms"].as_i64().unwrap() >= 5000, "{status}");
    assert_eq!(host.log.messages(&id, "inject ").len(), 2 + 1 + 2, "two primary, one then two scenario injections");
    assert!(host.log.in_effect().is_empty(), "left behind: {:?}", host.log.in_effect());
    assert!(status["open_injections"].as_array().unwrap().is_empty());
    // The primary fault's targets show its own injections, not the scenarios'.
    for target in status["targets"].as_array().unwrap() {
        assert_eq!((target["injection"].as_str(), target["intensity"].as_f64()), (Some("reverted"), Some(40.0)), "{target}");
    }
    assert_eq!(events(&status, "scenario").len(), 4, "{status}");
}

#[tokio::test]
async fn overlapping_late_and_unknown_scenarios_are_refused_before_anything_starts() {
    let dir = tempfile::tempdir().unwrap();
    let host = InProcessHost::start(dir.path(), options(vec!["steady", "share"])).await;
    let base = json!({"fault_type": "test_steady", "targets": ["svc-a"], "duration": 10});
    let cases = [
        (json!([{"type": "test_share", "at": 1, "duration_seconds": 3}, {"type": "test_share", "at": 3, "duration_seconds": 2}]), "invalid_scenario"),
        (json!([{"type": "test_share", "at": 8, "duration_seconds": 3}]), "invalid_scenario"),
        (json!([{"type": "test_share", "at": 1, "duration_seconds": 0}]), "invalid_scenario"),
        (json!([{"type": "no_such_fault", "at": 1, "duration_seconds": 1}]), "unknown_fault_type"),
        (json!([{"type": "test_share", "at": 1, "duration_seconds": 1, "intensity": 500}]), "intensity_out_of_range"),
        (json!([{"type": "test_share", "at": 1, "duration_seconds": 1, "params": {"nope": 1}}]), "unknown_param"),
        // The primary fault's own kind, while it is injected (2 s to 8 s).
        (json!([{"type": "test_steady", "at": 3, "duration_seconds": 1}]), "invalid_scenario"),
    ];
    for (scenarios, code) in cases {
        let mut request = base.clone();
        request["scenarios"] = scenarios.clone();
        let refused = host.api.post_json("/experiments/backend/start", &request).await;
        assert_eq!((refused.status, refused.body["code"].as_str()), (422, Some(code)), "{scenarios}: {refused:?}");
        assert!(refused.body["detail"].as_str().unwrap().contains("scenarios["), "the detail names the scenario: {refused:?}");
    }
    // A type given as a JSON number is a field of the wrong kind, not a fault.
    let mut request = base.clone();
    request["scenarios"] = json!([{"type": 3, "at": 1, "duration_seconds": 1}]);
    let refused = host.api.post_json("/experiments/backend/start", &request).await;
    assert_eq!((refused.status, refused.body["code"].as_str()), (422, Some("invalid_field")), "{refused:?}");
    assert!(host.log.records().is_empty(), "nothing was injected: {:?}", host.log.records());
    // Outside the primary fault's injecting phase, its own kind may run.
    let mut request = base.clone();
    request["scenarios"] = json!([{"type": "test_steady", "at": 9, "duration_seconds": 1}]);
    assert_eq!(host.api.post_json("/experiments/backend/preview", &request).await.status, 200);
}

#[tokio::test]
async fn a_stop_during_a_scenario_reverts_it_and_the_scenarios_to_come_never_fire() {
    let dir = tempfile::tempdir().unwrap();
    let host = InProcessHost::start(dir.path(), options(vec!["steady", "share"])).await;
    let started = host
        .api
        .start(
            "backend",
            &json!({"fault_type": "test_steady", "targets": ["svc-a"], "phases": phases(0.5, 20.0, 1.0),
                    "scenarios": [{"type": "test_share", "at": 1, "duration_seconds": 15},
                                  {"type": "test_share", "at": 18, "duration_seconds": 1}]}),
        )
        .await;
    let id = started["id"].as_str().unwrap().to_string();
    host.api.wait_status("backend", &id, 30, |s| s["scenarios"][0]["state"] == "active").await;
    let stopped = host.api.post_json(&format!("/experiments/backend/stop?id={id}"), &json!({})).await;
    assert_eq!(stopped.status, 200, "{stopped:?}");
    assert_eq!(stopped.body["state"], "stopped");
    assert_eq!(stopped.body["scenarios"][0]["state"], "ended", "{}", stopped.body);
    assert_eq!(stopped.body["scenarios"][1]["state"], "not_run", "{}", stopped.body);
    assert!(host.log.in_effect().is_empty(), "left behind: {:?}", host.log.in_effect());
}

#[tokio::test]
async fn a_scenario_that_fails_fails_the_experiment_and_rolls_everything_back() {
    let dir = tempfile::tempdir().unwrap();
    let host = InProcessHost::start(dir.path(), options(vec!["steady", "trapper"])).await;
    let started = host
        .api
        .start(
            "backend",
            &json!({"fault_type": "test_steady", "targets": ["svc-a", "bad-b"], "phases": phases(0.5, 10.0, 1.0),
                    "scenarios": [{"type": "test_trapper", "at": 2, "duration_seconds": 2}]}),
        )
        .await;
    let id = started["id"].as_str().unwrap().to_string();
    let status = host.api.wait_status("backend", &id, 30, ended).await;
    assert_eq!(status["state"], "failed", "{status}");
    let error = status["error"].as_str().unwrap();
    assert!(error.contains("scenario 0 (test_trapper)") && error.contains("bad-b"), "{error}");
    assert_eq!(status["scenarios"][0]["state"], "ended", "what took on svc-a was reverted: {status}");
    assert!(status["timing"]["elapsed_ms"].as_i64().unwrap() < 9000, "it ended at the failure, not at its planned end: {status}");
    assert!(host.log.in_effect().is_empty(), "left behind: {:?}", host.log.in_effect());
}

/// A crash is simulated by dropping the runtime the host runs on, as in
/// `engine.rs`: the scenario's fault is reverted from its journal row.
#[test]
fn a_scenario_fault_a_crashed_host_left_is_reverted_from_the_journal_on_the_next_start() {
    let dir = tempfile::tempdir().unwrap();
    let log = Arc::new(RecordingLog::default());
    let crashed = tokio::runtime::Runtime::new().unwrap();
    let id = crashed.block_on(async {
        let host = InProcessHost::start_with_log(dir.path(), options(vec!["steady", "share"]), log.clone()).await;
        let id = host
            .start_experiment(json!({"fault_type": "test_steady", "targets": ["svc-a"], "phases": phases(300.0, 300.0, 1.0),
                                     "scenarios": [{"type": "test_share", "at": 0, "duration_seconds": 500}]}))
            .await;
        host.api.wait_status("backend", &id, 30, |s| s["scenarios"][0]["state"] == "active").await;
        id
    });
    drop(crashed);
    assert_eq!(log.in_effect_of("share").len(), 1, "the crash left the scenario's fault in effect");
    let restarted = tokio::runtime::Runtime::new().unwrap();
    restarted.block_on(async {
        let host = InProcessHost::start_with_log(dir.path(), options(vec!["steady", "share"]), log.clone()).await;
        assert_eq!(host.recovery.reverted, 1, "{:?}", host.recovery);
        assert!(log.in_effect().is_empty(), "the restart reverted it");
        let status = host.api.get(&format!("/experiments/backend/status?id={id}")).await.body;
        assert_eq!((status["state"].as_str(), status["scenarios"][0]["state"].as_str()), (Some("failed"), Some("ended")), "{status}");
    });
}
