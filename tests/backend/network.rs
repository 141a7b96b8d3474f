//! network_delay (and its alias `latency`) and packet_loss on real
//! containers. The effect is measured from another container on the same
//! network (UDP round trips and echoes counted by the demo service's
//! `measure` mode), and what could be left behind is read from the target's
//! network namespace with the host's own `nft` and `tc`.

use faultline_tests::docker::docker;
use faultline_tests::{DemoSystem, HostProcess};
use serde_json::{Value, json};

/// Round trips are timed on a 2-core machine: these tests run one at a time.
static ONE_AT_A_TIME: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

fn phases(baseline: f64, injecting: f64, recovering: f64) -> Value {
    json!({"baseline_seconds": baseline, "injecting_seconds": injecting, "recovering_seconds": recovering})
}

/// A one-container system: `api`.
fn one_api() -> (DemoSystem, String) {
    let mut system = DemoSystem::empty();
    let api = system.run("api", &[], &[], &[]);
    (system, api)
}

async fn status(host: &HostProcess, id: &str) -> Value {
    host.api.get(&format!("/experiments/backend/status?id={id}")).await.body
}

/// What the plugin said about how it shaped the traffic (an event).
fn mechanism_reported(status: &Value) -> String {
    let events = status["events"].as_array().unwrap();
    let said = events.iter().find(|e| e["kind"] == "plugin").unwrap_or_else(|| panic!("no plugin event in {status}"));
    said["detail"].as_str().unwrap().to_string()
}

fn assert_nothing_left(system: &DemoSystem, container: &str) {
    assert_eq!(DemoSystem::network_state(container), Vec::<String>::new(), "rules or qdiscs left in {container}");
    assert!(system.helpers_left().is_empty(), "helpers left behind: {:?}", system.helpers_left());
}

#[tokio::test]
async fn network_delay_adds_its_delay_to_round_trips_measured_from_another_container_and_leaves_nothing() {
    let _alone = ONE_AT_A_TIME.lock().await;
    let (system, api) = one_api();
    let before = system.measure_udp("api", 100);
    let dir = tempfile::tempdir().unwrap();
    let host = HostProcess::start(dir.path(), &[]);
    let id = host.api.start_in_effect(&json!({"targets": [system.selector()], "fault_type": "network_delay", "intensity": 100,
        "ramp": false, "phases": phases(0.5, 60.0, 1.0)}))
    .await;

    let during = system.measure_udp("api", 100);
    let added = during.quantile(0.5) - before.quantile(0.5);
    assert!((99.0..=110.0).contains(&added), "asked for 100 ms, round trips grew by {added:.2} ms (median)");
    assert!(during.quantile(0.05) - before.quantile(0.5) >= 99.0, "every packet is delayed: {during:?}");
    assert_eq!(during.received, during.sent, "a delay loses nothing");
    let state = DemoSystem::network_state(&api);
    assert!(!state.is_empty(), "the fault is visible in the target's namespace");
    let said = mechanism_reported(&status(&host, &id).await);
    assert!(said.contains("netem") || said.contains("NFQUEUE"), "the plugin says which mechanism it used: {said}");

    let stopped = host.api.stop("backend", &id).await;
    assert_eq!(stopped.body["state"], "stopped", "{stopped:?}");
    assert_nothing_left(&system, &api);
    let after = system.measure_udp("api", 100);
    assert!(after.quantile(0.5) < before.quantile(0.5) + 5.0, "the delay ended with the experiment: {after:?}");
    let metrics = host.api.get(&format!("/experiments/backend/metrics?id={id}")).await.body;
    assert!(metrics["phases"]["injecting"]["metrics"]["running"]["min"] == 1.0, "the target kept running: {metrics}");
}

#[tokio::test]
async fn latency_is_network_delay_under_another_name_and_jitter_spreads_round_trips() {
    let _alone = ONE_AT_A_TIME.lock().await;
    let (system, api) = one_api();
    let before = system.measure_udp("api", 50);
    let dir = tempfile::tempdir().unwrap();
    let host = HostProcess::start(dir.path(), &[]);
    let id = host.api.start_in_effect(&json!({"targets": [system.selector()], "fault_type": "latency", "intensity": 60,
        "params": {"jitter_ms": 20}, "ramp": false, "phases": phases(0.5, 8.0, 1.0)}))
    .await;

    let during = system.measure_udp("api", 200);
    let median = during.quantile(0.5) - before.quantile(0.5);
    assert!((55.0..=68.0).contains(&median), "60 ± 20 ms: the median grew by {median:.2} ms");
    // Uniform in ±20 ms: 90 % of the draws span 36 ms. The delay line is
    // userspace: a busy machine widens it (the lower bound is the claim).
    let spread = during.quantile(0.95) - during.quantile(0.05);
    assert!((25.0..=90.0).contains(&spread), "jitter of ±20 ms spreads the 5th to 95th percentile over {spread:.2} ms");

    let ended = host.api.wait_status("backend", &id, 60, |s| s["state"] != "running").await;
    assert_eq!((ended["state"].as_str(), ended["fault_type"].as_str(), ended["fault"].as_str()), (Some("completed"), Some("latency"), Some("network_delay")));
    assert!(ended["score"].is_number(), "{ended}");
    assert_nothing_left(&system, &api);
}

#[tokio::test]
async fn packet_loss_drops_its_share_counted_by_a_probe_and_ends_with_the_experiment() {
    let _alone = ONE_AT_A_TIME.lock().await;
    let (system, api) = one_api();
    let dir = tempfile::tempdir().unwrap();
    let host = HostProcess::start(dir.path(), &[]);
    let id = host.api.start_in_effect(&json!({"targets": [system.selector()], "fault_type": "packet_loss", "intensity": 30,
        "ramp": false, "phases": phases(0.5, 60.0, 1.0)}))
    .await;

    let during = system.measure_udp("api", 400);
    let loss = during.loss();
    assert!((0.22..=0.38).contains(&loss), "asked for 30 % loss, {} of {} echoes missing", during.sent - during.received, during.sent);
    let said = mechanism_reported(&status(&host, &id).await);
    assert!(said.contains("loss"), "{said}");

    let stopped = host.api.stop("backend", &id).await;
    assert_eq!(stopped.body["state"], "stopped", "{stopped:?}");
    assert_nothing_left(&system, &api);
    let after = system.measure_udp("api", 200);
    assert!(after.loss() <= 0.01, "the loss ended with the experiment: {after:?}");
}

#[tokio::test]
async fn adaptive_delay_climbs_until_a_latency_probe_fails_then_backs_off() {
    let _alone = ONE_AT_A_TIME.lock().await;
    let (system, api) = one_api();
    let ip = DemoSystem::ip(&api);
    let dir = tempfile::tempdir().unwrap();
    let host = HostProcess::start(dir.path(), &[]);
    // A TCP connect takes one round trip: it fails the probe from 250 ms of delay on.
    let started = host
        .api
        .post_json("/experiments/backend/start", &json!({"targets": [system.selector()], "fault_type": "network_delay",
            "intensity": 500, "adaptive": true,
            "probes": [{"type": "tcp", "address": format!("{ip}:8080"), "timeout_ms": 1000, "max_latency_ms": 230}],
            "phases": phases(1.0, 14.0, 1.0)}))
        .await;
    assert_eq!(started.status, 201, "{started:?}");
    let id = started.body["id"].as_str().unwrap();
    let ended = host.api.wait_status("backend", id, 90, |s| s["state"] != "running").await;
    assert_eq!(ended["state"], "completed", "{ended}");
    assert_eq!(ended["intensity"]["max_tolerated"], 200.0, "{ended}");

    let series = host.api.get(&format!("/experiments/backend/metrics?id={id}")).await.body["series"].clone();
    let injecting: Vec<&Value> = series.as_array().unwrap().iter().filter(|s| s["phase"] == "injecting").collect();
    let levels: Vec<f64> = injecting.iter().map(|s| s["intensity"].as_f64().unwrap()).collect();
    assert_eq!(levels.iter().copied().fold(0.0, f64::max), 250.0, "one step past what the probe tolerates, never two: {levels:?}");
    let backed_off = injecting.windows(2).filter(|p| p[0]["health"].as_f64().unwrap() < 1.0 && p[1]["intensity"].as_f64() < p[0]["intensity"].as_f64()).count();
    assert!(backed_off >= 1, "poor health at 250 ms brought the delay down: {injecting:?}");
    assert_nothing_left(&system, &api);
}

#[tokio::test]
async fn a_delayed_target_removed_mid_fault_still_ends_cleanly() {
    let _alone = ONE_AT_A_TIME.lock().await;
    let mut system = DemoSystem::replicas(2, &[]);
    let victim = system.names[0].clone();
    let survivor = system.names[1].clone();
    let bystander = system.run("bystander", &[("role", "bystander")], &[], &[]);
    let dir = tempfile::tempdir().unwrap();
    let host = HostProcess::start(dir.path(), &[]);
    let id = host.api.start_in_effect(&json!({"targets": [format!("{},tier=replica", system.selector())], "fault_type": "packet_loss",
        "intensity": 50, "ramp": false, "phases": phases(0.5, 4.0, 1.0)}))
    .await;
    host.api.wait_status("backend", &id, 60, |s| s["targets"][1]["injection"] == "active").await;
    docker(&["rm", "-f", &victim]);

    let ended = host.api.wait_status("backend", &id, 60, |s| s["state"] != "running").await;
    assert_eq!(ended["state"], "completed", "{ended}");
    let injections: Vec<&str> = ended["targets"].as_array().unwrap().iter().map(|t| t["injection"].as_str().unwrap()).collect();
    assert_eq!(injections, ["reverted", "reverted"], "{ended}");
    assert_nothing_left(&system, &survivor);
    assert_eq!(DemoSystem::network_state(&bystander), Vec::<String>::new(), "an untargeted container is untouched");
}

/// Downloads `bytes` from the demo service at `ip`; kilobits per second.
async fn download_kbit(ip: &str, bytes: usize) -> f64 {
    let started = std::time::Instant::now();
    let body = reqwest::get(format!("http://{ip}:8080/bytes/{bytes}")).await.unwrap().bytes().await.unwrap();
    assert_eq!(body.len(), bytes);
    bytes as f64 * 8.0 / 1000.0 / started.elapsed().as_secs_f64()
}

#[tokio::test]
async fn bandwidth_limit_caps_what_a_container_sends_and_ends_with_the_experiment() {
    let _alone = ONE_AT_A_TIME.lock().await;
    let (system, api) = one_api();
    let ip = DemoSystem::ip(&api);
    let dir = tempfile::tempdir().unwrap();
    let host = HostProcess::start(dir.path(), &[]);
    let refused = host
        .api
        .post_json("/experiments/backend/start", &json!({"targets": [system.selector()], "fault_type": "bandwidth_limit", "duration": 5}))
        .await;
    assert_eq!((refused.status, refused.code()), (422, "missing_param"), "the rate is required: {refused:?}");

    let id = host.api.start_in_effect(&json!({"targets": [system.selector()], "fault_type": "bandwidth_limit", "params": {"rate_kbit": 4000},
        "phases": phases(0.5, 60.0, 1.0)}))
    .await;
    let during = download_kbit(&ip, 1_000_000).await;
    assert!((2800.0..=4400.0).contains(&during), "capped at 4000 kbit/s, a download ran at {during:.0} kbit/s");
    assert!(mechanism_reported(&status(&host, &id).await).contains("rate"));

    let stopped = host.api.stop("backend", &id).await;
    assert_eq!(stopped.body["state"], "stopped", "{stopped:?}");
    assert_nothing_left(&system, &api);
    let after = download_kbit(&ip, 4_000_000).await;
    assert!(after > 5.0 * 4000.0, "the cap ended with the experiment: {after:.0} kbit/s");
}
