//! A host killed with SIGKILL while a fault is in effect: the fault ends
//! by its time-to-live even if no host comes back, and a restarted host
//! reverts what its journal holds at once. Checked with Docker's own CLI.

use std::time::{Duration, Instant};

use faultline_tests::{DemoSystem, HostProcess};
use serde_json::json;

/// Starts a long cpu_stress on the system and waits until it is in effect.
async fn long_cpu_stress(host: &HostProcess, system: &DemoSystem) -> String {
    host.api
        .start_in_effect(&json!({"targets": [system.selector()], "fault_type": "cpu_stress", "intensity": 20,
            "ramp": false, "phases": {"baseline_seconds": 0.3, "injecting_seconds": 5, "recovering_seconds": 0.3}}))
        .await
}

#[tokio::test]
async fn a_fault_of_a_killed_host_ends_by_its_time_to_live() {
    let system = DemoSystem::replicas(1, &[]);
    let dir = tempfile::tempdir().unwrap();
    // Effects may outlive the planned end (about 6 s) by 2 s.
    let host = HostProcess::start(dir.path(), &["--ttl-margin-seconds", "2"]);
    long_cpu_stress(&host, &system).await;
    let injected = Instant::now();
    host.kill9();
    assert_eq!(system.helpers_left().len(), 1, "the fault outlives the host");

    while !system.helpers_left().is_empty() {
        assert!(injected.elapsed() < Duration::from_secs(30), "the helper outlived its time-to-live of 7 s");
        std::thread::sleep(Duration::from_millis(250));
    }
    assert!(injected.elapsed() >= Duration::from_secs(4), "the helper did not end before its time");
    assert!(DemoSystem::running(&system.names[0]), "the target itself is untouched");
}

#[tokio::test]
async fn a_restarted_host_reverts_what_its_journal_holds_and_marks_the_experiment() {
    let system = DemoSystem::replicas(1, &[]);
    let dir = tempfile::tempdir().unwrap();
    let host = HostProcess::start(dir.path(), &[]);
    let key = host.api.key.clone();
    let id = long_cpu_stress(&host, &system).await;
    host.kill9();
    assert_eq!(system.helpers_left().len(), 1, "the fault outlives the host");

    let restarted = HostProcess::start(dir.path(), &[]);
    assert!(system.helpers_left().is_empty(), "the restart reverted the journaled fault before serving");
    let api = restarted.api.with_key(key.as_deref());
    let status = api.get(&format!("/experiments/backend/status?id={id}")).await.body;
    assert_eq!((status["state"].as_str(), status["stop_reason"].as_str()), (Some("failed"), Some("host restart")), "{status}");
    assert!(status["error"].as_str().unwrap().contains("reverted from the journal"));
    assert_eq!(status["targets"][0]["injection"], "reverted");
    let events: Vec<&str> = status["events"].as_array().unwrap().iter().map(|e| e["kind"].as_str().unwrap()).collect();
    assert!(events.contains(&"interrupted"), "{events:?}");
}

#[tokio::test]
async fn sigterm_rolls_back_before_the_host_exits() {
    let system = DemoSystem::replicas(1, &[]);
    let dir = tempfile::tempdir().unwrap();
    let host = HostProcess::start(dir.path(), &[]);
    let key = host.api.key.clone();
    let id = long_cpu_stress(&host, &system).await;
    assert_eq!(system.helpers_left().len(), 1);

    let exit = host.terminate();
    assert!(exit.success(), "a clean exit: {exit:?}");
    assert!(system.helpers_left().is_empty(), "the fault was rolled back before the host exited");

    let restarted = HostProcess::start(dir.path(), &[]);
    let status = restarted.api.with_key(key.as_deref()).get(&format!("/experiments/backend/status?id={id}")).await.body;
    assert_eq!((status["state"].as_str(), status["stop_reason"].as_str()), (Some("stopped"), Some("host shutdown")), "{status}");
    assert_eq!(status["targets"][0]["injection"], "reverted");
}

#[tokio::test]
async fn a_network_fault_of_a_killed_host_undoes_itself_at_its_time_to_live() {
    let mut system = DemoSystem::empty();
    let api = system.run("api", &[], &[], &[]);
    let dir = tempfile::tempdir().unwrap();
    let host = HostProcess::start(dir.path(), &["--ttl-margin-seconds", "2"]);
    host
        .api
        .start_in_effect(&json!({"targets": [system.selector()], "fault_type": "network_delay", "intensity": 80,
            "ramp": false, "phases": {"baseline_seconds": 0.3, "injecting_seconds": 5, "recovering_seconds": 0.3}}))
        .await;
    host.kill9();
    let injected = Instant::now();
    assert!(!DemoSystem::network_state(&api).is_empty(), "the fault outlives the host");
    assert!(system.measure_udp("api", 20).quantile(0.5) >= 80.0, "the delay outlives the host");

    while !system.helpers_left().is_empty() {
        assert!(injected.elapsed() < Duration::from_secs(30), "the helper outlived its time-to-live");
        std::thread::sleep(Duration::from_millis(250));
    }
    assert_eq!(DemoSystem::network_state(&api), Vec::<String>::new(), "the agent undid its rules when its time ran out");
    assert!(system.measure_udp("api", 20).quantile(0.5) < 20.0, "no delay is left");
}
