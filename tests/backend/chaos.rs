//! Our own chaos, on real containers, with default settings: for every
//! backend fault, ramped and held, three of four targets are removed,
//! restarted or paused at a random moment of baseline, of injecting and of
//! recovering. Every experiment must end in a documented state within its
//! planned length plus the margin, its journal must close, and nothing may
//! be left on the containers that remain (read from outside: Docker for
//! helpers, the target's own network namespace for rules and qdiscs).
//!
//! The moments and kinds are drawn from a seed printed by each test; set
//! FAULTLINE_CHAOS_SEED to replay one.

use std::io::Write;
use std::time::{Duration, Instant};

use faultline_tests::docker::try_docker;
use faultline_tests::{DemoSystem, HostProcess};
use serde_json::{Value, json};

/// The host's margin (`--ttl-margin-seconds`): how long past its planned
/// end a run may go on, and effects may live.
const MARGIN_SECONDS: u64 = 20;
/// Seconds of each experiment: default phases, 2 s / 6 s / 2 s.
const DURATION_SECONDS: u64 = 10;
/// A run cut off at its planned end plus the margin is then rolled back
/// from its journal; that takes a moment more.
const SETTLE: Duration = Duration::from_secs(5);

/// A small deterministic generator (xorshift), so a seed replays a run.
struct Draw(u64);

impl Draw {
    fn seeded(test: &str) -> Draw {
        let seed = std::env::var("FAULTLINE_CHAOS_SEED").ok().and_then(|s| s.parse().ok()).unwrap_or_else(|| {
            std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_nanos() as u64 | 1
        });
        println!("{test}: FAULTLINE_CHAOS_SEED={seed}");
        Draw(seed)
    }

    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }

    /// In [0, 1).
    fn unit(&mut self) -> f64 {
        (self.next() >> 11) as f64 / (1u64 << 53) as f64
    }
}

#[derive(Debug, Clone, Copy)]
enum Disruption {
    Remove,
    Restart,
    Pause,
}

fn disrupt(how: Disruption, container: &str) {
    let outcome = match how {
        Disruption::Remove => try_docker(&["rm", "-f", container]),
        Disruption::Restart => try_docker(&["restart", "-t", "0", container]),
        Disruption::Pause => try_docker(&["pause", container]),
    };
    // A container a kill fault just stopped cannot be paused; that is chaos too.
    if let Err(e) = outcome {
        println!("{how:?} {container}: {e}");
    }
}

/// Runs one fault, ramped or held, on four replicas while three of them
/// are disrupted, one in each phase; checks how it ended and what is left.
async fn under_chaos(fault: &str, intensity: f64, params: Value, ramp: bool, draw: &mut Draw) {
    // Limits, so percentages of a container stay small on a 2-core machine.
    let system = DemoSystem::replicas(4, &["--memory", "128m", "--cpus", "0.25"]);
    let dir = tempfile::tempdir().unwrap();
    let host = HostProcess::start(dir.path(), &["--ttl-margin-seconds", &MARGIN_SECONDS.to_string()]);
    let request = json!({"targets": [format!("{},tier=replica", system.selector())], "fault_type": fault,
        "intensity": intensity, "params": params, "ramp": ramp, "duration": DURATION_SECONDS});
    let phase_ms = [2000.0, 6000.0, 2000.0];
    let mut plan = vec![];
    for (phase, victim) in system.names[..3].iter().enumerate() {
        let start: f64 = phase_ms[..phase].iter().sum();
        let at = Duration::from_millis((start + draw.unit() * phase_ms[phase]) as u64);
        let how = [Disruption::Remove, Disruption::Restart, Disruption::Pause][(draw.next() % 3) as usize];
        plan.push((at, how, victim.clone()));
    }
    let what = format!("{fault} {} with {plan:?}", if ramp { "ramped" } else { "held" });
    println!("{what}");

    let started = host.api.post_json("/experiments/backend/start", &request).await;
    assert_eq!(started.status, 201, "{what}: {started:?}");
    let begun = Instant::now();
    let id = started.body["id"].as_str().unwrap().to_string();
    for (at, how, victim) in &plan {
        tokio::time::sleep(at.saturating_sub(begun.elapsed())).await;
        let (how, victim) = (*how, victim.clone());
        tokio::task::spawn_blocking(move || disrupt(how, &victim));
    }

    let planned = Duration::from_secs(DURATION_SECONDS + MARGIN_SECONDS);
    let ended = host.api.wait_status("backend", &id, planned.as_secs() + 10, |s| s["state"] != "running").await;
    let took = Duration::from_millis((ended["timing"]["ended_at"].as_i64().unwrap() - ended["timing"]["created_at"].as_i64().unwrap()) as u64);
    assert!(took <= planned + SETTLE, "{what}: ended after {took:?}, past its planned length plus the margin: {ended}");
    let state = ended["state"].as_str().unwrap();
    assert!(state == "completed" || state == "failed", "{what}: ended {state}: {ended}");
    if state == "failed" {
        assert!(ended["error"].as_str().is_some_and(|e| !e.is_empty()), "{what}: a failure says why: {ended}");
    }

    for (_, how, victim) in &plan {
        if matches!(how, Disruption::Pause) {
            let _ = try_docker(&["unpause", victim]);
        }
    }
    // Whatever could not be reverted at once closes within its time-to-live.
    let closed = host.api.wait_status("backend", &id, MARGIN_SECONDS + DURATION_SECONDS + 10, |s| s["open_injections"] == json!([])).await;
    for target in closed["targets"].as_array().unwrap() {
        let injection = target["injection"].as_str().unwrap();
        assert!(["none", "reverted", "failed", "expired"].contains(&injection), "{what}: {target} in {closed}");
    }
    // A helper that never became ready on a frozen target is removed once
    // the target thaws, by a retry with backoff (at most 10 s apart).
    let deadline = Instant::now() + Duration::from_secs(30);
    while !system.helpers_left().is_empty() {
        assert!(Instant::now() < deadline, "{what}: helpers left: {:?}", system.helpers_left());
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    for name in &system.names {
        if try_docker(&["inspect", name]).is_ok() && DemoSystem::running(name) {
            assert_eq!(DemoSystem::network_state(name), Vec::<String>::new(), "{what}: rules or qdiscs left in {name}");
        }
    }
    let _ = std::io::stdout().flush();
}

async fn every_way(fault: &str, intensity: f64, params: Value) {
    let mut draw = Draw::seeded(fault);
    for ramp in [true, false] {
        under_chaos(fault, intensity, params.clone(), ramp, &mut draw).await;
    }
}

#[tokio::test]
async fn kill_under_chaos_ends_on_time_with_nothing_left() {
    every_way("kill", 50.0, json!({"restart_after": true})).await;
}

#[tokio::test]
async fn cpu_stress_under_chaos_ends_on_time_with_nothing_left() {
    every_way("cpu_stress", 50.0, json!({})).await;
}

#[tokio::test]
async fn memory_stress_under_chaos_ends_on_time_with_nothing_left() {
    every_way("memory_stress", 50.0, json!({})).await;
}

#[tokio::test]
async fn network_delay_under_chaos_ends_on_time_with_nothing_left() {
    every_way("network_delay", 200.0, json!({})).await;
}

#[tokio::test]
async fn packet_loss_under_chaos_ends_on_time_with_nothing_left() {
    every_way("packet_loss", 40.0, json!({})).await;
}

#[tokio::test]
async fn bandwidth_limit_under_chaos_ends_on_time_with_nothing_left() {
    every_way("bandwidth_limit", 0.0, json!({"rate_kbit": 1000})).await;
}

/// A client that hangs up while its start is under way: the start is whole
/// or never began. Either the retry finds the experiment the first request
/// made (its idempotency key settled), or the first never got that far and
/// the retry starts it; never a claimed target without a run (the retry
/// would meet `target_busy`) or a key stuck "in use". It ends with nothing left.
#[tokio::test]
async fn a_client_that_disconnects_mid_start_leaves_a_whole_experiment_that_a_retry_finds() {
    let system = DemoSystem::replicas(2, &[]);
    let dir = tempfile::tempdir().unwrap();
    let host = HostProcess::start(dir.path(), &["--ttl-margin-seconds", &MARGIN_SECONDS.to_string()]);
    let body = json!({"targets": [system.selector()], "fault_type": "network_delay", "intensity": 100, "duration": 6}).to_string();
    let key = host.api.key.clone().unwrap();
    let address = host.api.base.trim_start_matches("http://").to_string();
    let request = format!(
        "POST /experiments/backend/start HTTP/1.1\r\nhost: {address}\r\nx-api-key: {key}\r\ncontent-type: application/json\r\n\
         idempotency-key: hang-up-1\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
        body.len()
    );
    {
        let mut socket = std::net::TcpStream::connect(&address).unwrap();
        socket.write_all(request.as_bytes()).unwrap();
        // Gone before any answer, while the host is resolving the targets.
        std::thread::sleep(Duration::from_millis(50));
    }
    let request: Value = serde_json::from_str(&body).unwrap();
    let deadline = Instant::now() + Duration::from_secs(30);
    let replay = loop {
        let reply = host.api.post_json_with("/experiments/backend/start", &request, &[("idempotency-key", "hang-up-1")]).await;
        if reply.status == 201 {
            break reply;
        }
        assert_eq!(reply.status, 409, "only 'still starting' may come before the replay: {reply:?}");
        assert!(Instant::now() < deadline, "the detached start never settled");
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    let replayed = replay.headers.get("idempotent-replayed").is_some();
    println!("the first request's start {}", if replayed { "completed; the retry replayed it" } else { "never began" });
    let id = replay.body["id"].as_str().unwrap().to_string();
    let ended = host.api.wait_status("backend", &id, 6 + MARGIN_SECONDS, |s| s["state"] != "running").await;
    assert_eq!(ended["state"], "completed", "{ended}");
    assert!(system.helpers_left().is_empty(), "helpers left: {:?}", system.helpers_left());
    for name in &system.names {
        assert_eq!(DemoSystem::network_state(name), Vec::<String>::new(), "rules or qdiscs left in {name}");
    }
}

/// A stop while the system is watched in recovering: the experiment ends
/// `stopped` with its reason at once (its faults were already reverted),
/// and nothing is left on the containers.
#[tokio::test]
async fn a_stop_during_recovering_ends_stopped_with_its_reason_and_nothing_left() {
    let mut system = DemoSystem::replicas(2, &[]);
    let watched = system.run("watched", &[], &[], &[]);
    let dir = tempfile::tempdir().unwrap();
    let host = HostProcess::start(dir.path(), &["--ttl-margin-seconds", &MARGIN_SECONDS.to_string()]);
    // A probe on a service that stops answering once injecting begins keeps
    // health below the baseline band, so recovery is watched for its whole phase.
    let probe = json!({"type": "tcp", "address": format!("{}:8080", DemoSystem::ip(&watched)), "timeout_ms": 500});
    let request = json!({"targets": [format!("{},tier=replica", system.selector())], "fault_type": "network_delay", "intensity": 100,
        "probes": [probe], "phases": {"baseline_seconds": 1, "injecting_seconds": 2, "recovering_seconds": 60}});
    let id = host.api.start_in_effect(&request).await;
    try_docker(&["pause", &watched]).unwrap();
    host.api.wait_status("backend", &id, 30, |s| s["phase"] == "recovering").await;
    let asked = Instant::now();
    let stopped = host.api.stop("backend", &id).await;
    assert!(asked.elapsed() < Duration::from_secs(10), "{:?}", asked.elapsed());
    assert_eq!(stopped.body["state"], "stopped", "{stopped:?}");
    assert!(stopped.body["stop_reason"].as_str().unwrap().starts_with("stopped by"), "{stopped:?}");
    assert_eq!(stopped.body["open_injections"], json!([]), "{stopped:?}");
    assert!(system.helpers_left().is_empty(), "helpers left: {:?}", system.helpers_left());
    for name in &system.names[..2] {
        assert_eq!(DemoSystem::network_state(name), Vec::<String>::new(), "rules or qdiscs left in {name}");
    }
    let _ = try_docker(&["unpause", &watched]);
}
