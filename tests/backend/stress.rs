//! cpu_stress and memory_stress on real containers, measured with Docker's
//! own `docker stats`.

use faultline_tests::docker::docker;
use faultline_tests::{DemoSystem, HostProcess};
use serde_json::json;

/// The stress tests measure the machine's CPU: they run one at a time.
static ONE_AT_A_TIME: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

/// `docker stats` once: (CPU percent, memory in MiB).
fn stats(container: &str) -> (f64, f64) {
    let line = docker(&["stats", "--no-stream", "--format", "{{.CPUPerc}} {{.MemUsage}}", container]);
    let mut parts = line.split_whitespace();
    let cpu = parts.next().unwrap().trim_end_matches('%').parse().unwrap();
    let memory = parts.next().unwrap();
    let (number, unit) = memory.split_at(memory.find(|c: char| c.is_alphabetic()).unwrap());
    let number: f64 = number.parse().unwrap();
    let mib = match unit {
        "B" => number / 1048576.0,
        "KiB" => number / 1024.0,
        "MiB" => number,
        "GiB" => number * 1024.0,
        other => panic!("unit {other} in {line}"),
    };
    (cpu, mib)
}

/// Starts a constant-intensity fault on the system and waits until it is in effect.
async fn inject(host: &HostProcess, system: &DemoSystem, fault: &str, intensity: f64) -> String {
    host.api
        .start_in_effect(&json!({"targets": [system.selector()], "fault_type": fault, "intensity": intensity,
            "ramp": false, "phases": {"baseline_seconds": 0.5, "injecting_seconds": 60, "recovering_seconds": 1}}))
        .await
}

async fn stop(host: &HostProcess, id: &str) -> serde_json::Value {
    let stopped = host.api.post_json(&format!("/experiments/backend/stop?id={id}"), &json!({})).await;
    assert_eq!(stopped.status, 200, "{stopped:?}");
    stopped.body
}

#[tokio::test]
async fn cpu_stress_at_half_of_a_one_cpu_container_shows_in_its_stats_and_ends_with_the_experiment() {
    let _alone = ONE_AT_A_TIME.lock().await;
    let system = DemoSystem::replicas(1, &["--cpus", "1"]);
    let container = system.names[0].clone();
    let dir = tempfile::tempdir().unwrap();
    let host = HostProcess::start(dir.path(), &[]);
    let id = inject(&host, &system, "cpu_stress", 50.0).await;
    std::thread::sleep(std::time::Duration::from_secs(1));
    let (busy, _) = stats(&container);
    assert!((35.0..=65.0).contains(&busy), "asked for 50 % of one CPU, Docker measured {busy} %");

    let stopped = stop(&host, &id).await;
    assert_eq!(stopped["state"], "stopped");
    let metrics = host.api.get(&format!("/experiments/backend/metrics?id={id}")).await.body;
    let seen = metrics["phases"]["injecting"]["metrics"]["cpu_percent"]["max"].as_f64().unwrap_or_default();
    assert!(seen >= 35.0, "the experiment's own readings saw the burn: {seen} % in {metrics}");
    assert!(system.helpers_left().is_empty(), "helpers left behind: {:?}", system.helpers_left());
    let (idle, _) = stats(&container);
    assert!(idle < 10.0, "the burn ended with the experiment, Docker measures {idle} %");
}

#[tokio::test]
async fn memory_stress_at_half_of_a_256_mib_container_fills_half_and_releases_it() {
    let _alone = ONE_AT_A_TIME.lock().await;
    let system = DemoSystem::replicas(1, &["--memory", "256m"]);
    let container = system.names[0].clone();
    let dir = tempfile::tempdir().unwrap();
    let host = HostProcess::start(dir.path(), &[]);
    let (_, before) = stats(&container);
    let id = inject(&host, &system, "memory_stress", 50.0).await;
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    let mut used = 0.0;
    while std::time::Instant::now() < deadline {
        used = stats(&container).1;
        if used >= 120.0 {
            break;
        }
    }
    assert!((120.0..=150.0).contains(&used), "asked for 128 MiB of 256, Docker measured {used} MiB (before: {before})");

    stop(&host, &id).await;
    assert!(system.helpers_left().is_empty(), "helpers left behind: {:?}", system.helpers_left());
    let metrics = host.api.get(&format!("/experiments/backend/metrics?id={id}")).await.body;
    let seen = metrics["phases"]["injecting"]["metrics"]["memory_bytes"]["max"].as_f64().unwrap_or_default() / 1048576.0;
    assert!(seen >= 120.0, "the experiment's own readings saw the memory: {seen} MiB");
    let (_, after) = stats(&container);
    assert!(after < before + 20.0, "the memory was released: {after} MiB now, {before} MiB before");
    assert!(DemoSystem::running(&container), "half the limit does not kill the container");
}
