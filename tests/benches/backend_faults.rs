//! Backend faults on real containers, beside the raw Docker operation on
//! the same containers in the same run:
//!
//! - time from the start of injecting (the host's `injecting` phase event)
//!   to the effect being observable on every target, and from the stop
//!   request to everything reverted, for 1, 10 and 50 label-matched
//!   containers, for `kill` (raw: a parallel `docker kill` / `docker start`
//!   per container) and `network_delay` (raw: a parallel `docker run` of the
//!   same agent image in each container's network namespace / `docker rm -f`);
//! - delay accuracy: the measured increase of UDP round trips against the
//!   requested delay.
//!
//! Effects are observed independently of the host: containers' states from
//! `docker ps`, delays by timing UDP echoes from this process.
//!
//! cargo bench -p faultline-tests --bench backend_faults   (make bench-backend)
//! FAULTLINE_BENCH_SIZES=1,10 to choose the sizes.

use std::collections::HashMap;
use std::net::UdpSocket;
use std::process::Command;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use faultline_tests::docker::docker;
use faultline_tests::{DemoSystem, HostProcess};
use serde_json::{Value, json};

const DELAY_MS: f64 = 100.0;
/// A round trip at least this long shows the delay.
const DELAYED_MS: f64 = 90.0;
/// A round trip this short shows no delay.
const UNDELAYED_MS: f64 = 20.0;
const GIVE_UP: Duration = Duration::from_secs(180);

fn now_ms() -> i64 {
    SystemTime::now().duration_since(UNIX_EPOCH).unwrap().as_millis() as i64
}

/// Waits until `done` holds; milliseconds from `since_ms` (wall clock).
fn until(since_ms: i64, what: &str, mut done: impl FnMut() -> bool) -> i64 {
    let start = Instant::now();
    while !done() {
        assert!(start.elapsed() < GIVE_UP, "gave up waiting for {what}");
        std::thread::sleep(Duration::from_millis(10));
    }
    now_ms() - since_ms
}

fn running(system: &DemoSystem) -> usize {
    docker(&["ps", "-q", "--filter", &format!("label={}", system.selector()), "--filter", "status=running"]).lines().count()
}

/// Runs one docker command per container, all at once; waits for them all.
fn parallel_docker(args: &[&str], containers: &[String]) {
    let children: Vec<_> = containers
        .iter()
        .map(|c| Command::new("docker").args(args.iter().map(|a| a.replace("{}", c))).stdout(std::process::Stdio::null()).spawn().unwrap())
        .collect();
    for mut child in children {
        assert!(child.wait().unwrap().success(), "docker {args:?}");
    }
}

/// UDP round trips from this process to each address (the demo service
/// echoes on 8080); none for an address that did not answer within 500 ms.
fn round_trips(ips: &[String]) -> Vec<Option<f64>> {
    let socket = UdpSocket::bind("0.0.0.0:0").unwrap();
    let start = Instant::now();
    let mut sent = HashMap::new();
    for (i, ip) in ips.iter().enumerate() {
        sent.insert(i as u32, start.elapsed());
        let _ = socket.send_to(&(i as u32).to_be_bytes(), format!("{ip}:8080"));
    }
    let mut rtts = vec![None; ips.len()];
    let mut buffer = [0u8; 16];
    let deadline = start + Duration::from_millis(500);
    while let Some(left) = deadline.checked_duration_since(Instant::now()) {
        socket.set_read_timeout(Some(left.max(Duration::from_millis(1)))).unwrap();
        if let Ok(4) = socket.recv(&mut buffer) {
            let i = u32::from_be_bytes(buffer[..4].try_into().unwrap());
            rtts[i as usize] = Some((start.elapsed() - sent[&i]).as_secs_f64() * 1000.0);
        }
    }
    rtts
}

fn all_delayed(ips: &[String]) -> bool {
    round_trips(ips).iter().all(|r| r.is_some_and(|ms| ms >= DELAYED_MS))
}

fn none_delayed(ips: &[String]) -> bool {
    round_trips(ips).iter().all(|r| r.is_some_and(|ms| ms < UNDELAYED_MS))
}

async fn injecting_since(host: &HostProcess, id: &str) -> i64 {
    let status = host.api.wait_status("backend", id, 120, |s| s["phase"] != "baseline").await;
    let events = status["events"].as_array().unwrap();
    events.iter().find(|e| e["kind"] == "phase" && e["detail"] == "injecting").expect("an injecting event")["at"].as_i64().unwrap()
}

async fn start(host: &HostProcess, request: Value) -> String {
    let started = host.api.post_json("/experiments/backend/start", &request).await;
    assert_eq!(started.status, 201, "{started:?}");
    started.body["id"].as_str().unwrap().to_string()
}

/// Stops an experiment; milliseconds from the request until `reverted` holds.
async fn stop(host: &HostProcess, id: &str, reverted: impl FnMut() -> bool) -> i64 {
    let asked = now_ms();
    let stopped = host.api.stop("backend", id).await;
    assert_eq!(stopped.status, 200, "{stopped:?}");
    until(asked, "the revert", reverted)
}

struct Row {
    fault: &'static str,
    containers: usize,
    faultline_effect: i64,
    raw_effect: i64,
    faultline_revert: i64,
    raw_revert: i64,
}

async fn kill(host: &HostProcess, system: &DemoSystem) -> Row {
    let n = system.names.len();
    let id = start(host, json!({"targets": [system.selector()], "fault_type": "kill", "intensity": 100, "ramp": false,
        "params": {"restart_after": true}, "phases": {"baseline_seconds": 0.2, "injecting_seconds": 300, "recovering_seconds": 0.5}}))
    .await;
    let since = injecting_since(host, &id).await;
    let faultline_effect = until(since, "every container killed", || running(system) == 0);
    let faultline_revert = stop(host, &id, || running(system) == n).await;

    let since = now_ms();
    parallel_docker(&["kill", "{}"], &system.names);
    let raw_effect = until(since, "docker kill", || running(system) == 0);
    let since = now_ms();
    parallel_docker(&["start", "{}"], &system.names);
    let raw_revert = until(since, "docker start", || running(system) == n);
    Row { fault: "kill", containers: n, faultline_effect, raw_effect, faultline_revert, raw_revert }
}

fn agent_image() -> String {
    docker(&["images", "faultline-agent", "--format", "{{.Repository}}:{{.Tag}}"]).lines().next().expect("the agent image").to_string()
}

async fn delay(host: &HostProcess, system: &DemoSystem) -> Row {
    // Read now: a restart may have moved a container to another address.
    let ips: Vec<String> = system
        .names
        .iter()
        .map(|c| DemoSystem::ip(c))
        .collect();
    let ips = &ips[..];
    let id = start(host, json!({"targets": [system.selector()], "fault_type": "network_delay", "intensity": DELAY_MS, "ramp": false,
        "phases": {"baseline_seconds": 0.2, "injecting_seconds": 300, "recovering_seconds": 0.5}}))
    .await;
    let since = injecting_since(host, &id).await;
    let faultline_effect = until(since, "every container delayed", || all_delayed(ips));
    let faultline_revert = stop(host, &id, || none_delayed(ips) && system.helpers_left().is_empty()).await;

    let image = agent_image();
    let sidecars: Vec<String> = system.names.iter().map(|n| format!("{n}-raw-delay")).collect();
    let since = now_ms();
    let children: Vec<_> = system
        .names
        .iter()
        .zip(&sidecars)
        .map(|(target, sidecar)| {
            Command::new("docker")
                .args(["run", "-d", "--name", sidecar, "--label", &format!("faultline.test={}", system.id)])
                .args(["--network", &format!("container:{target}"), "--cap-add", "NET_ADMIN", &image])
                .args(["--ttl", "300", "net", "--delay-ms", &DELAY_MS.to_string()])
                .stdout(std::process::Stdio::null())
                .spawn()
                .unwrap()
        })
        .collect();
    for mut child in children {
        assert!(child.wait().unwrap().success());
    }
    let raw_effect = until(since, "raw delay", || all_delayed(ips));
    let since = now_ms();
    parallel_docker(&["rm", "-f", "{}"], &sidecars);
    let raw_revert = until(since, "raw delay removed", || none_delayed(ips));
    Row { fault: "network_delay", containers: system.names.len(), faultline_effect, raw_effect, faultline_revert, raw_revert }
}

/// Requested delay against the measured increase of the median and 95th
/// percentile round trip, from a container next to the target.
async fn accuracy(host: &HostProcess) -> Vec<(f64, f64, f64)> {
    let mut system = DemoSystem::empty();
    system.run("api", &[], &[], &[]);
    let base = system.measure_udp("api", 200);
    let mut rows = vec![];
    for requested in [10.0, 50.0, 100.0, 200.0] {
        let id = start(host, json!({"targets": [system.selector()], "fault_type": "network_delay", "intensity": requested,
            "ramp": false, "phases": {"baseline_seconds": 0.2, "injecting_seconds": 300, "recovering_seconds": 0.5}}))
        .await;
        host.api.wait_status("backend", &id, 60, |s| s["targets"][0]["injection"] == "active").await;
        let during = system.measure_udp("api", 200);
        rows.push((requested, during.quantile(0.5) - base.quantile(0.5), during.quantile(0.95) - base.quantile(0.95)));
        host.api.stop("backend", &id).await;
    }
    rows
}

#[tokio::main]
async fn main() {
    let sizes: Vec<usize> = std::env::var("FAULTLINE_BENCH_SIZES")
        .unwrap_or_else(|_| "1,10,50".into())
        .split(',')
        .map(|s| s.trim().parse().expect("FAULTLINE_BENCH_SIZES: numbers"))
        .collect();
    let dir = tempfile::tempdir().unwrap();
    let host = HostProcess::start(dir.path(), &[]);
    let mut rows = vec![];
    for n in sizes {
        let system = DemoSystem::replicas(n, &[]);
        eprintln!("{n} containers: kill");
        rows.push(kill(&host, &system).await);
        eprintln!("{n} containers: network_delay");
        rows.push(delay(&host, &system).await);
    }
    eprintln!("delay accuracy");
    let accuracy = accuracy(&host).await;

    println!("| fault | containers | Faultline: to effect | raw Docker: to effect | Faultline: stop to reverted | raw Docker: to reverted |");
    println!("|---|---|---|---|---|---|");
    for r in &rows {
        println!(
            "| {} | {} | {} ms | {} ms | {} ms | {} ms |",
            r.fault, r.containers, r.faultline_effect, r.raw_effect, r.faultline_revert, r.raw_revert
        );
    }
    println!();
    println!("| requested delay | measured increase, median | measured increase, p95 |");
    println!("|---|---|---|");
    for (requested, p50, p95) in accuracy {
        println!("| {requested} ms | {p50:.2} ms | {p95:.2} ms |");
    }
}
