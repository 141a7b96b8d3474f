//! Guardrails on real containers: a start that would reach too far is
//! refused before anything is injected, and an abort condition that trips
//! rolls the fault back and ends the experiment `aborted`. Effects are read
//! from Docker, the container's own network namespace and timed traffic.

use faultline_tests::{DemoSystem, HostProcess};
use serde_json::json;

const START: &str = "/experiments/backend/start";

/// One container and a host: the system, the container's name and address.
fn one_target(data_dir: &std::path::Path) -> (DemoSystem, String, String, HostProcess) {
    let system = DemoSystem::replicas(1, &[]);
    let target = system.names[0].clone();
    let ip = DemoSystem::ip(&target);
    (system, target, ip, HostProcess::start(data_dir, &[]))
}

#[tokio::test]
async fn a_start_beyond_its_max_blast_radius_or_max_targets_is_refused_before_anything_is_injected() {
    let system = DemoSystem::three_tier();
    let db = system.names[0].clone();
    let dir = tempfile::tempdir().unwrap();
    let host = HostProcess::start(dir.path(), &[]);
    let kill = |target: &str, guardrails: serde_json::Value| {
        json!({"targets": [target], "fault_type": "kill", "duration": 5, "guardrails": guardrails})
    };

    // db has two containers depending on it (api, and web through api).
    let refused = host.api.post_json(START, &kill(&db, json!({"max_blast_radius": 1}))).await;
    assert_eq!((refused.status, refused.code()), (422, "blast_radius_exceeded"), "{refused:?}");
    assert_eq!((refused.body["blast_radius"].clone(), refused.body["max_blast_radius"].clone()), (json!(2), json!(1)));
    let mut dependents: Vec<String> = refused.body["dependents"].as_array().unwrap().iter().map(|d| d.as_str().unwrap().into()).collect();
    dependents.sort();
    assert_eq!(dependents, vec![system.names[1].clone(), system.names[2].clone()]);
    let preview = host.api.post_json("/experiments/backend/preview", &kill(&db, json!({"max_blast_radius": 1}))).await;
    assert_eq!((preview.status, preview.code()), (422, "blast_radius_exceeded"), "a preview runs the same checks");

    // The selector matches all four containers.
    let too_many = host.api.post_json(START, &kill(&system.selector(), json!({"max_targets": 3}))).await;
    assert_eq!((too_many.status, too_many.code()), (422, "too_many_targets"), "{too_many:?}");
    assert_eq!(too_many.body["targets"].as_array().unwrap().len(), 4);

    std::thread::sleep(std::time::Duration::from_secs(1));
    for name in &system.names {
        assert!(DemoSystem::running(name), "{name} was not touched");
        assert_eq!(DemoSystem::restart_count(name), 0, "{name}");
    }
    assert!(system.helpers_left().is_empty(), "no helper was started");

    // Within its limits, the same start goes ahead and says what it allowed.
    let allowed = host.api.post_json("/experiments/backend/preview", &kill(&db, json!({"max_blast_radius": 2, "max_targets": 1}))).await;
    assert_eq!(allowed.status, 200, "{allowed:?}");
    assert_eq!(allowed.body["guardrails"]["max_blast_radius"], 2);
}

#[tokio::test]
async fn a_tripped_abort_condition_rolls_the_fault_back_and_ends_the_experiment_aborted() {
    let dir = tempfile::tempdir().unwrap();
    let (system, target, ip, host) = one_target(dir.path());

    // 300 ms on every round trip; the probe tolerates 150 ms. Planned for a
    // minute of injecting, it must end within seconds.
    let started = host
        .api
        .post_json(START, &json!({"targets": [target], "fault_type": "network_delay", "intensity": 300, "ramp": false,
            "probes": [{"type": "http", "url": format!("http://{ip}:8080/health"), "max_latency_ms": 150}],
            "guardrails": {"abort_when": [{"metric": "success_rate", "below": 0.5, "for_seconds": 5}]},
            "phases": {"baseline_seconds": 1, "injecting_seconds": 60, "recovering_seconds": 5}}))
        .await;
    assert_eq!(started.status, 201, "{started:?}");
    assert_eq!(started.body["guardrails"]["abort_when"][0]["metric"], "success_rate");
    let id = started.body["id"].as_str().unwrap();
    let active = host.api.wait_status("backend", id, 30, |s| s["targets"][0]["injection"] == "active" || s["state"] != "running").await;
    assert_eq!(active["targets"][0]["injection"], "active", "{active}");
    let during = system.measure_udp("replica-1", 10);
    assert!(during.quantile(0.5) > 250.0, "the delay was in effect: {during:?}");

    let ended = host.api.wait_status("backend", id, 30, |s| s["state"] != "running").await;
    assert_eq!(ended["state"], "aborted", "{ended}");
    let reason = ended["stop_reason"].as_str().unwrap();
    assert!(reason.contains("abort condition 0 tripped: the success rate of the probes was 0.00 over the last 5 s, below 0.5"), "{reason}");
    assert!(ended["events"].as_array().unwrap().iter().any(|e| e["kind"] == "guardrail" && e["detail"] == reason), "{ended}");
    assert_eq!(ended["targets"][0]["injection"], "reverted", "{ended}");
    assert!(ended["timing"]["elapsed_ms"].as_i64().unwrap() < 30_000, "long before the planned 66 s: {ended}");

    // Nothing left, by the container's own view and by the traffic.
    assert!(system.helpers_left().is_empty());
    assert_eq!(DemoSystem::network_state(&target), Vec::<String>::new());
    let after = system.measure_udp("replica-1", 20);
    assert!(after.quantile(0.95) < 50.0, "no delay left: {after:?}");
}

#[tokio::test]
async fn a_condition_that_trips_during_baseline_aborts_before_anything_is_injected() {
    let dir = tempfile::tempdir().unwrap();
    let (_system, target, ip, host) = one_target(dir.path());

    // Nothing listens on port 9: the system is unhealthy before any fault.
    let started = host
        .api
        .post_json(START, &json!({"targets": [target], "fault_type": "kill", "ramp": false,
            "probes": [{"type": "tcp", "address": format!("{ip}:9"), "timeout_ms": 300}],
            "guardrails": {"abort_when": [{"metric": "health", "below": 0.5, "for_seconds": 1}]},
            "phases": {"baseline_seconds": 10, "injecting_seconds": 5, "recovering_seconds": 1}}))
        .await;
    assert_eq!(started.status, 201, "{started:?}");
    let id = started.body["id"].as_str().unwrap();
    let ended = host.api.wait_status("backend", id, 30, |s| s["state"] != "running").await;
    assert_eq!(ended["state"], "aborted", "{ended}");
    let reason = ended["stop_reason"].as_str().unwrap();
    assert!(reason.contains("health was 0.00 over the last 1 s, below 0.5 (during baseline: nothing was injected)"), "{reason}");
    assert_eq!(ended["targets"][0]["injection"], "none", "{ended}");
    assert!(!ended["events"].as_array().unwrap().iter().any(|e| e["detail"] == "injecting"), "never entered injecting: {ended}");
    assert!(DemoSystem::running(&target) && DemoSystem::restart_count(&target) == 0, "the container was never killed");
}
