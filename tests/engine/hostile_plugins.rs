//! Hostile plugins, built by the tests: one loops forever, one grows memory
//! without bound, one traps, one imports a capability it was not granted.
//! Each misbehaves only on targets named `bad...`, after a good target has
//! been injected; the host must stop it, fail the experiment with the
//! reason, revert the good injection, and go on serving.

use std::time::Duration;

use faultline_tests::paths::test_plugin;
use faultline_tests::{InProcessHost, Options};
use serde_json::json;

async fn hostile_host(dir: &std::path::Path) -> InProcessHost {
    InProcessHost::start(
        dir,
        Options {
            call_timeout: Duration::from_secs(1),
            memory_limit: 32 << 20,
            plugins: vec!["steady", "looper", "hog", "trapper"],
            ..Options::default()
        },
    )
    .await
}

async fn assert_contained(host: &InProcessHost, fault_type: &str, reason: &str) {
    let id = host
        .start_experiment(json!({"fault_type": fault_type, "targets": ["good-1", "bad-1"], "intensity": 30,
            "phases": {"baseline_seconds": 0.2, "injecting_seconds": 2, "recovering_seconds": 0.2}}))
        .await;
    let status = host.api.wait_status("backend", &id, 60, |s| s["state"] != "running").await;
    assert_eq!(status["state"], "failed", "{status}");
    let error = status["error"].as_str().unwrap();
    assert!(error.contains(reason), "the experiment says why it failed: {error}");
    assert!(status["score"].is_null());

    assert_eq!(status["targets"][0]["injection"], "reverted", "the good injection was rolled back: {status}");
    assert_eq!(status["targets"][1]["injection"], "failed");
    assert!(host.log.in_effect().is_empty(), "left behind: {:?}", host.log.in_effect());
    assert_eq!(host.log.messages(&id, "revert ").len(), 1);

    // The host still serves, and still runs experiments.
    assert_eq!(host.api.get("/health").await.status, 200);
    let next = host
        .start_experiment(json!({"fault_type": "test_steady", "targets": ["svc"],
            "phases": {"baseline_seconds": 0.2, "injecting_seconds": 0.6, "recovering_seconds": 0.2}}))
        .await;
    let after = host.api.wait_status("backend", &next, 30, |s| s["state"] != "running").await;
    assert_eq!(after["state"], "completed", "{after}");
}

#[tokio::test]
async fn a_plugin_that_loops_forever_is_stopped_by_the_deadline() {
    let dir = tempfile::tempdir().unwrap();
    let host = hostile_host(dir.path()).await;
    assert_contained(&host, "test_looper", "exceeded its deadline").await;
}

#[tokio::test]
async fn a_plugin_that_grows_memory_without_bound_is_stopped_by_the_cap() {
    let dir = tempfile::tempdir().unwrap();
    let host = hostile_host(dir.path()).await;
    assert_contained(&host, "test_hog", "exceeded the memory cap").await;
}

#[tokio::test]
async fn a_plugin_that_traps_fails_its_experiment_and_nothing_else() {
    let dir = tempfile::tempdir().unwrap();
    let host = hostile_host(dir.path()).await;
    assert_contained(&host, "test_trapper", "trapped").await;
}

#[tokio::test]
async fn a_plugin_that_imports_an_ungranted_capability_is_refused_at_load() {
    let dir = tempfile::tempdir().unwrap();
    let host = hostile_host(dir.path()).await;
    let refused = host.api.send_raw("POST", "/plugins/overreach", "application/wasm", test_plugin("overreach")).await;
    assert_eq!((refused.status, refused.code()), (422, "capability_not_granted"));
    assert!(refused.body["detail"].as_str().unwrap().contains("faultline:plugin/docker@0.1.0"));
    assert_eq!(host.api.get("/health").await.status, 200);
    let types = host.api.get("/fault-types").await.body;
    assert!(types.as_array().unwrap().iter().all(|t| t["name"] != "test_overreach"));
}
