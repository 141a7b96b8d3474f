//! A plugin's grant is not a blank cheque: granted docker, a plugin still
//! acts only on its experiment's targets. A hostile plugin reaches for a
//! bystander and a protected container, and for a helper with a Linux
//! capability outside the allowlist; every reach is denied, Docker's own
//! view shows both containers untouched, and the plugin's own target is
//! faulted and restored as usual.

use faultline_tests::docker::docker;
use faultline_tests::paths::test_plugin;
use faultline_tests::{DemoSystem, HostProcess};
use serde_json::json;

/// What a reach could change, as Docker sees it.
fn docker_view(name: &str) -> String {
    let state = docker(&["inspect", "-f", "{{.State.Status}} paused={{.State.Paused}} started={{.State.StartedAt}} restarts={{.RestartCount}} execs={{len .ExecIDs}}", name]);
    format!("{state} diff=[{}]", docker(&["diff", name]))
}

#[tokio::test]
async fn a_plugin_reaching_past_its_experiment_is_denied_and_leaves_everything_else_untouched() {
    let mut system = DemoSystem::empty();
    let target = system.run("target", &[], &[], &[]);
    let bystander = system.run("bystander", &[], &[], &[]);
    let guarded = system.run("guarded", &[("faultline.protected", "true")], &[], &[]);
    let id = |name: &str| docker(&["inspect", "-f", "{{.Id}}", name]);
    let before = [docker_view(&bystander), docker_view(&guarded)];
    assert!(before.iter().all(|v| v.starts_with("running paused=false")), "{before:?}");

    let dir = tempfile::tempdir().unwrap();
    let host = HostProcess::start(dir.path(), &["--grant", "reacher=docker,log"]);
    let loaded = host.api.send_raw("POST", "/plugins/reacher", "application/wasm", test_plugin("reacher")).await;
    assert_eq!(loaded.status, 201, "{loaded:?}");

    let started = host
        .api
        .post_json("/experiments/backend/start", &json!({"targets": [target], "fault_type": "test_reacher",
            "params": {"bystander": id(&bystander), "protected": id(&guarded), "selector": system.selector()},
            "phases": {"baseline_seconds": 0.2, "injecting_seconds": 3, "recovering_seconds": 0.5}}))
        .await;
    assert_eq!(started.status, 201, "{started:?}");
    assert_eq!(started.body["targets"], json!([target]), "the plan holds the target alone");
    let experiment = started.body["id"].as_str().unwrap().to_string();

    // Its own target: faulted as usual, while every reach beside it was denied.
    let injected = host.api.wait_status("backend", &experiment, 60, |s| s["targets"][0]["injection"] == "active" || s["state"] != "running").await;
    assert_eq!(injected["targets"][0]["injection"], "active", "a reach got through, and the plugin failed its injection: {injected}");
    assert_eq!(docker(&["inspect", "-f", "{{.State.Paused}}", &target]), "true", "the plugin paused its own target");
    let ended = host.api.wait_status("backend", &experiment, 60, |s| s["state"] != "running").await;
    assert_eq!(ended["state"], "completed", "no reach got through, or the injection would have failed: {ended}");
    assert_eq!(ended["targets"][0]["injection"], "reverted", "{ended}");
    assert_eq!(docker(&["inspect", "-f", "{{.State.Status}} {{.State.Paused}}", &target]), "running false", "and restored it");

    // What the plugin said each reach returned.
    let said: Vec<String> = ended["events"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["kind"] == "plugin")
        .filter_map(|e| e["detail"].as_str()?.strip_prefix("reacher: reach ").map(str::to_string))
        .collect();
    let denied = said.iter().filter(|s| s.contains(": denied: ")).count();
    assert_eq!(denied, 2 * 9 + 1, "nine calls on each of the two containers, and the SYS_ADMIN helper: {said:#?}");
    assert!(said.iter().any(|s| s.starts_with("find app=") && s.ends_with(": 0 other containers seen")), "{said:#?}");
    assert!(said.iter().any(|s| s.starts_with("run_helper with SYS_ADMIN: denied: helpers may not have SYS_ADMIN")), "{said:#?}");

    // Docker's own view: neither was signalled, paused, restarted, exec'd
    // into or written to, and no helper was started beside them.
    assert_eq!([docker_view(&bystander), docker_view(&guarded)], before);
    assert!(system.helpers_left().is_empty(), "helpers: {:?}", system.helpers_left());
}
