//! The kill fault on real containers. What was killed is read from Docker
//! itself (`docker inspect`), not from the host's answers.

use faultline_tests::{DemoSystem, HostProcess};
use serde_json::{Value, json};

fn ended(s: &Value) -> bool {
    s["state"] != "running"
}

fn phases(baseline: f64, injecting: f64, recovering: f64) -> Value {
    json!({"baseline_seconds": baseline, "injecting_seconds": injecting, "recovering_seconds": recovering})
}

#[tokio::test]
async fn kill_at_half_intensity_kills_two_of_three_label_matched_containers_rounding_up() {
    let system = DemoSystem::replicas(3, &[]);
    let dir = tempfile::tempdir().unwrap();
    let host = HostProcess::start(dir.path(), &[]);
    let started = host
        .api
        .post_json("/experiments/backend/start", &json!({"targets": [system.selector()], "fault_type": "kill", "intensity": 50,
            "duration": 5, "phases": phases(1.0, 2.0, 2.0)}))
        .await;
    assert_eq!(started.status, 201, "{started:?}");
    assert_eq!(started.body["targets"].as_array().unwrap().len(), 3, "every matching container is a target");
    let id = started.body["id"].as_str().unwrap();

    let status = host.api.wait_status("backend", id, 60, ended).await;
    assert_eq!(status["state"], "completed", "{status}");
    assert_eq!(system.running_count(), 1, "Docker says two of three were killed");
    assert!(system.helpers_left().is_empty(), "helpers left behind: {:?}", system.helpers_left());
    let killed: Vec<&Value> = status["targets"].as_array().unwrap().iter().filter(|t| t["injection"] != "none").collect();
    assert_eq!(killed.len(), 2, "{status}");
    for target in &killed {
        assert!(!DemoSystem::running(target["name"].as_str().unwrap()), "{} was reported killed", target["name"]);
    }
    // The ramp killed one container first, then a second.
    let levels: Vec<&str> =
        status["events"].as_array().unwrap().iter().filter(|e| e["kind"] == "injected").map(|e| e["detail"].as_str().unwrap()).collect();
    assert_eq!(levels.len(), 2, "{status}");

    let metrics = host.api.get(&format!("/experiments/backend/metrics?id={id}")).await.body;
    assert_eq!(metrics["phases"]["baseline"]["health"]["min"], 1.0, "{metrics}");
    // The second kill may land just before the phase ends: read the lowest
    // health the platform observed from injecting on.
    let worst = ["injecting", "recovering"].iter().filter_map(|p| metrics["phases"][p]["health"]["min"].as_f64()).fold(1.0, f64::min);
    assert!((worst - 1.0 / 3.0).abs() < 0.01, "one of three was left running: {metrics}");
    let score = status["score"].as_f64().unwrap();
    assert!(score < 60.0, "two dead containers that never recover score low: {score}");
}

#[tokio::test]
async fn kill_with_a_restart_policy_is_recovered_from_and_the_recovery_is_scored() {
    let system = DemoSystem::replicas(2, &["--restart", "always"]);
    let dir = tempfile::tempdir().unwrap();
    let host = HostProcess::start(dir.path(), &[]);
    let before: Vec<u32> = system.names.iter().map(|n| DemoSystem::restart_count(n)).collect();
    let started = host
        .api
        .post_json("/experiments/backend/start", &json!({"targets": [system.selector()], "fault_type": "kill", "intensity": 100,
            "ramp": false, "phases": phases(1.0, 1.0, 4.0)}))
        .await;
    assert_eq!(started.status, 201, "{started:?}");
    let status = host.api.wait_status("backend", started.body["id"].as_str().unwrap(), 60, ended).await;
    assert_eq!(status["state"], "completed", "{status}");
    for (name, before) in system.names.iter().zip(before) {
        assert!(DemoSystem::running(name), "{name} is back");
        assert!(DemoSystem::restart_count(name) > before, "{name} was restarted by its policy");
    }
    assert!(status["result"]["recovered_after_ms"].is_number(), "recovery was observed: {status}");
    assert!(system.helpers_left().is_empty(), "helpers left behind: {:?}", system.helpers_left());
    assert!(status["score"].as_f64().unwrap() > 0.0);
}

#[tokio::test]
async fn a_target_removed_mid_fault_still_ends_cleanly() {
    let mut system = DemoSystem::replicas(1, &[]);
    let victim = system.names[0].clone();
    let bystander = system.run("bystander", &[], &[], &[]);
    let dir = tempfile::tempdir().unwrap();
    let host = HostProcess::start(dir.path(), &[]);
    let started = host
        .api
        .post_json("/experiments/backend/start", &json!({"targets": [victim], "fault_type": "kill",
            "params": {"restart_after": true}, "phases": phases(0.5, 3.0, 1.0)}))
        .await;
    assert_eq!(started.status, 201, "{started:?}");
    let id = started.body["id"].as_str().unwrap();
    host.api.wait_status("backend", id, 30, |s| s["targets"][0]["injection"] == "active").await;
    faultline_tests::docker::docker(&["rm", "-f", &victim]);

    let status = host.api.wait_status("backend", id, 60, ended).await;
    assert_eq!(status["state"], "completed", "{status}");
    assert_eq!(status["targets"][0]["injection"], "reverted", "{status}");
    assert!(DemoSystem::running(&bystander), "a container that was not targeted is untouched");
}

#[tokio::test]
async fn selectors_that_match_nothing_or_make_no_sense_are_refused_naming_them() {
    let system = DemoSystem::replicas(1, &[]);
    let dir = tempfile::tempdir().unwrap();
    let host = HostProcess::start(dir.path(), &[]);
    let nothing = format!("{},tier=none", system.selector());
    let reply = host
        .api
        .post_json("/experiments/backend/start", &json!({"targets": [nothing], "fault_type": "kill", "duration": 5}))
        .await;
    assert_eq!((reply.status, reply.code()), (422, "no_matching_target"));
    assert_eq!(reply.body["selectors"], json!([nothing]));
    assert!(reply.body["detail"].as_str().unwrap().contains(&nothing));

    let nonsense = host.api.post_json("/experiments/backend/start", &json!({"targets": ["=oops"], "fault_type": "kill", "duration": 5})).await;
    assert_eq!((nonsense.status, nonsense.code()), (422, "invalid_target"));
    assert_eq!(system.running_count(), 1, "nothing was killed");
}
