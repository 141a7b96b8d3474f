//! Probes against a real container: availability and latency are measured
//! at every reading, count in health, and show in the metrics.

use faultline_tests::{DemoSystem, HostProcess};
use serde_json::json;

#[tokio::test]
async fn probes_measure_availability_and_latency_and_count_in_health() {
    let system = DemoSystem::replicas(1, &[]);
    let ip = DemoSystem::ip(&system.names[0]);
    let dir = tempfile::tempdir().unwrap();
    let host = HostProcess::start(dir.path(), &[]);
    let started = host
        .api
        .post_json("/experiments/backend/start", &json!({"targets": [system.selector()], "fault_type": "kill", "ramp": false,
            "probes": [{"type": "http", "url": format!("http://{ip}:8080/health"), "timeout_ms": 500},
                       {"type": "tcp", "address": format!("{ip}:8080"), "timeout_ms": 500}],
            "phases": {"baseline_seconds": 1, "injecting_seconds": 1.5, "recovering_seconds": 1}}))
        .await;
    assert_eq!(started.status, 201, "{started:?}");
    let id = started.body["id"].as_str().unwrap();
    let status = host.api.wait_status("backend", id, 60, |s| s["state"] != "running").await;
    assert_eq!(status["state"], "completed", "{status}");

    let metrics = host.api.get(&format!("/experiments/backend/metrics?id={id}")).await.body;
    let baseline = &metrics["phases"]["baseline"]["metrics"];
    assert_eq!(baseline["probe_success"]["min"], 1.0, "the service answered before the fault: {metrics}");
    let p50 = baseline["probe_latency_ms"]["p50"].as_f64().unwrap();
    assert!(p50 > 0.0 && p50 < 500.0, "latency was measured: {p50} ms");
    let during = &metrics["phases"]["injecting"];
    assert_eq!(during["metrics"]["probe_success"]["max"], 0.0, "the killed service answered no probe: {metrics}");
    assert_eq!(during["health"]["max"], 0.0, "probes count in health");
}
