//! The fault proxy's cost: a Faultline listener in front of a fast origin,
//! beside a direct connection to that origin and beside nginx and HAProxy
//! as reverse proxies to the same origin on the same machine; then the
//! accuracy of a 100 ms delay rule.
//!
//! Load comes from Debian's `wrk`, one thread, in three shapes:
//! - one connection, one request at a time: the cost of one pass through
//!   the proxy, without queueing;
//! - 32 connections, each waiting 5 to 15 ms (at random) before each of
//!   its requests (wrk's `delay()` hook): concurrent traffic well below any
//!   proxy's capacity;
//! - 32 connections as fast as they go: throughput, and latency mostly
//!   made of queueing.
//!
//! Each proxy gets one core's worth: nginx `worker_processes 1`, HAProxy
//! `nbthread 1`, Faultline a tokio runtime with one worker thread (plus a
//! row with two, the host's default on this 2-core machine). All keep
//! connections to the origin alive and none logs requests. The origin is
//! the tests' hyper origin (`/hello`, 5 bytes) on a one-thread runtime in a
//! process of its own, so that every proxy reaches it across processes.
//! "hyper alone" is the floor of the listener's design: the same hyper
//! server and pooled client, with nothing else done per request. Beside
//! latency and rate, the CPU time each proxy and the origin spent per
//! request (from /proc), which contention on a shared machine skews less.
//! Every configuration is warmed up, then measured a few times, the
//! configurations taking turns; the tables show medians.
//!
//! cargo bench -p faultline-tests --bench frontend_proxy   (make bench-frontend)
//! FAULTLINE_BENCH_ROUNDS (3) and FAULTLINE_BENCH_SECONDS (10; the paced
//! and one-connection runs take half) to change the length;
//! FAULTLINE_BENCH_HOLD=<seconds> starts everything, prints the URLs and
//! waits that long instead of measuring (to profile by hand).

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use bytes::Bytes;
use faultline::capabilities::proxy::{FaultProxy, Listener, ListenerSpec, Traffic};
use faultline_plugin_runtime::capability::proxy::{Proxy, RequestMatch, Rule, RuleAction};
use faultline_tests::origin::Origin;
use tokio::runtime::Runtime;

const CONNECTIONS: u32 = 32;
/// Mean think time before a connection's requests in the paced runs
/// (uniform, ± half of it: fixed pauses would fire every connection's
/// timer in the same millisecond and measure bursts).
const PACE_MS: u32 = 10;
const DELAY_MS: u32 = 100;
const WARM_UP_SECONDS: u64 = 3;

fn env_or(name: &str, default: u64) -> u64 {
    std::env::var(name).ok().and_then(|v| v.parse().ok()).unwrap_or(default)
}

fn load_average() -> f64 {
    let text = std::fs::read_to_string("/proc/loadavg").unwrap_or_default();
    text.split_whitespace().next().and_then(|v| v.parse().ok()).unwrap_or(f64::NAN)
}

/// Children die with the bench (SIGTERM), even if it is killed: no nginx,
/// HAProxy or wrk is left behind. Only spawned from the main thread, which
/// lives as long as the bench.
fn die_with_parent(command: &mut Command) -> &mut Command {
    // SAFETY: prctl is async-signal-safe; nothing else runs between fork and exec.
    unsafe {
        command.pre_exec(|| {
            libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGTERM);
            Ok(())
        })
    }
}

#[derive(Clone, Copy, PartialEq)]
enum Load {
    OneConnection,
    Paced,
    Saturated,
}

impl Load {
    const ALL: [Load; 3] = [Load::OneConnection, Load::Paced, Load::Saturated];

    fn title(self) -> String {
        match self {
            Load::OneConnection => "1 connection, one request at a time".into(),
            Load::Paced => format!("{CONNECTIONS} connections, {}-{} ms pauses", PACE_MS / 2, PACE_MS * 3 / 2),
            Load::Saturated => format!("{CONNECTIONS} connections, as fast as they go"),
        }
    }
}

/// One wrk run. Latencies in µs.
#[derive(Clone, Copy, Debug)]
struct Run {
    p50: f64,
    p99: f64,
    rps: f64,
    /// Socket errors and non-2xx answers.
    failed: u64,
    load: f64,
    /// Connections the origin accepted during the run.
    origin_connections: usize,
    /// CPU time per request of the proxy's threads and of the origin's
    /// process, in µs.
    proxy_cpu: f64,
    origin_cpu: f64,
}

/// What wrk reports.
struct Wrk {
    p50: f64,
    p99: f64,
    rps: f64,
    requests: u64,
    failed: u64,
}

fn micros(text: &str) -> f64 {
    let split = text.find(|c: char| c.is_ascii_alphabetic()).unwrap_or(text.len());
    let (number, unit) = text.split_at(split);
    let n: f64 = number.parse().unwrap_or_else(|_| panic!("a duration from wrk: {text}"));
    match unit {
        "us" => n,
        "ms" => n * 1e3,
        "s" => n * 1e6,
        "m" => n * 60e6,
        _ => panic!("a duration unit from wrk: {text}"),
    }
}

/// Reads wrk's "Latency Distribution" 50 % and 99 % lines, "Requests/sec",
/// the request count and whatever failed.
fn parse_wrk(output: &str) -> Wrk {
    let (mut p50, mut p99, mut rps, mut requests, mut failed) = (None, None, None, None, 0);
    for line in output.lines().map(str::trim) {
        let fields: Vec<&str> = line.split_whitespace().collect();
        match fields.as_slice() {
            ["50%", v] => p50 = Some(micros(v)),
            ["99%", v] => p99 = Some(micros(v)),
            ["Requests/sec:", v] => rps = v.parse().ok(),
            [n, "requests", "in", ..] => requests = n.parse().ok(),
            ["Non-2xx", "or", "3xx", "responses:", n] => failed += n.parse::<u64>().unwrap_or(0),
            ["Socket", "errors:", rest @ ..] => {
                failed += rest.iter().filter_map(|f| f.trim_end_matches(',').parse::<u64>().ok()).sum::<u64>();
            }
            _ => {}
        }
    }
    match (p50, p99, rps, requests) {
        (Some(p50), Some(p99), Some(rps), Some(requests)) => Wrk { p50, p99, rps, requests, failed },
        _ => panic!("wrk's output lacks its latency distribution, rate or count:\n{output}"),
    }
}

fn wrk(url: &str, load: Load, seconds: u64, pace_script: &Path) -> Wrk {
    let connections = if load == Load::OneConnection { 1 } else { CONNECTIONS };
    let mut command = Command::new("wrk");
    command.args(["-t1", "--latency", "--timeout", "5s"]);
    command.args(["-c", &connections.to_string(), "-d", &format!("{seconds}s")]);
    if load == Load::Paced {
        command.arg("-s").arg(pace_script);
    }
    command.arg(url).stdin(Stdio::null());
    let output = die_with_parent(&mut command).output().expect("wrk runs (`make bench-frontend` installs it)");
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(output.status.success(), "wrk failed: {stdout}{}", String::from_utf8_lossy(&output.stderr));
    parse_wrk(&stdout)
}

/// CPU time so far of these tasks (threads' `/proc` directories), in µs,
/// from the scheduler's own count (`schedstat`), which is exact where the
/// tick-based times of `stat` are not.
fn cpu_micros(tasks: &[PathBuf]) -> f64 {
    let nanos: u64 = tasks
        .iter()
        .filter_map(|task| std::fs::read_to_string(task.join("schedstat")).ok())
        .filter_map(|stat| stat.split_whitespace().next()?.parse::<u64>().ok())
        .sum();
    nanos as f64 / 1000.0
}

/// This process's threads of that name (a tokio runtime's workers).
fn threads(name: &str) -> Vec<PathBuf> {
    let tasks = std::fs::read_dir("/proc/self/task").unwrap().filter_map(Result::ok).map(|t| t.path());
    tasks.filter(|t| std::fs::read_to_string(t.join("comm")).is_ok_and(|c| c.trim() == name)).collect()
}

/// The threads of a process and of its children (nginx's master and worker).
fn process_tree(pid: u32) -> Vec<PathBuf> {
    let parent_of = |stat: String| -> Option<u32> { stat[stat.rfind(')')? + 2..].split_whitespace().nth(1)?.parse().ok() };
    let children = std::fs::read_dir("/proc").unwrap().filter_map(Result::ok).filter_map(|e| e.file_name().to_str()?.parse::<u32>().ok());
    let children: Vec<u32> = children.filter(|c| std::fs::read_to_string(format!("/proc/{c}/stat")).ok().and_then(parent_of) == Some(pid)).collect();
    let tasks = |p: u32| std::fs::read_dir(format!("/proc/{p}/task")).into_iter().flatten().filter_map(Result::ok).map(|t| t.path());
    std::iter::once(pid).chain(children).flat_map(tasks).collect()
}

/// The origin, in a process of its own (this bench, run again), so every
/// proxy, Faultline included, talks to it across processes. Asked over its
/// stdin how many connections it accepted; it ends when its stdin closes.
struct OriginProcess {
    child: Child,
    ask: Option<ChildStdin>,
    answers: BufReader<ChildStdout>,
    address: SocketAddr,
}

const ORIGIN_CHILD: &str = "FAULTLINE_BENCH_ORIGIN_CHILD";

impl OriginProcess {
    fn start() -> OriginProcess {
        let mut command = Command::new(std::env::current_exe().unwrap());
        command.env(ORIGIN_CHILD, "1").stdin(Stdio::piped()).stdout(Stdio::piped());
        let mut child = die_with_parent(&mut command).spawn().expect("the origin process starts");
        let (ask, mut answers) = (child.stdin.take(), BufReader::new(child.stdout.take().unwrap()));
        let mut line = String::new();
        answers.read_line(&mut line).unwrap();
        let address = line.trim().parse().unwrap_or_else(|_| panic!("the origin's address, not {line:?}"));
        OriginProcess { child, ask, answers, address }
    }

    fn url(&self) -> String {
        format!("http://{}", self.address)
    }

    fn connections(&mut self) -> usize {
        writeln!(self.ask.as_mut().unwrap(), "connections").unwrap();
        let mut line = String::new();
        self.answers.read_line(&mut line).unwrap();
        line.trim().parse().unwrap()
    }

    fn tasks(&self) -> Vec<PathBuf> {
        process_tree(self.child.id())
    }

    /// What the child runs: the tests' origin on a one-thread runtime.
    fn serve() {
        let runtime = runtime("origin", 1);
        let origin = runtime.block_on(Origin::start());
        println!("{}", origin.address);
        for line in std::io::stdin().lock().lines() {
            match line.as_deref() {
                Ok("connections") => println!("{}", origin.connections.load(Ordering::SeqCst)),
                _ => break,
            }
        }
    }
}

impl Drop for OriginProcess {
    fn drop(&mut self) {
        drop(self.ask.take());
        let deadline = Instant::now() + Duration::from_secs(5);
        while Instant::now() < deadline {
            if let Ok(Some(_)) = self.child.try_wait() {
                return;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port()
}

/// A reverse proxy run in the foreground; stopped (SIGTERM, then SIGKILL)
/// when dropped.
struct Daemon {
    name: &'static str,
    child: Child,
}

impl Daemon {
    fn start(name: &'static str, command: &mut Command, log: &Path, address: SocketAddr) -> Daemon {
        let log_file = std::fs::File::create(log).unwrap();
        let child = die_with_parent(command.stdin(Stdio::null()).stdout(log_file.try_clone().unwrap()).stderr(log_file))
            .spawn()
            .unwrap_or_else(|e| panic!("{name} starts (`make bench-frontend` installs it): {e}"));
        let mut daemon = Daemon { name, child };
        let deadline = Instant::now() + Duration::from_secs(10);
        while TcpStream::connect(address).is_err() {
            if let Ok(Some(status)) = daemon.child.try_wait() {
                panic!("{name} exited ({status}):\n{}", std::fs::read_to_string(log).unwrap_or_default());
            }
            assert!(Instant::now() < deadline, "{name} does not listen on {address}");
            std::thread::sleep(Duration::from_millis(20));
        }
        daemon
    }
}

impl Drop for Daemon {
    fn drop(&mut self) {
        // nginx's master stops its worker on SIGTERM before it exits itself.
        unsafe { libc::kill(self.child.id() as i32, libc::SIGTERM) };
        let deadline = Instant::now() + Duration::from_secs(5);
        while Instant::now() < deadline {
            if let Ok(Some(_)) = self.child.try_wait() {
                return;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        eprintln!("{} did not stop on SIGTERM; killing it", self.name);
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn nginx(dir: &Path, origin: SocketAddr) -> (Daemon, String) {
    let port = free_port();
    let dir = dir.join("nginx");
    std::fs::create_dir_all(&dir).unwrap();
    let d = dir.display();
    // Run as root, nginx would switch its worker to `nobody`, which cannot
    // enter the private temporary directory.
    let user = if unsafe { libc::geteuid() } == 0 { "user root;" } else { "" };
    let config = format!(
        "{user}
daemon off;
worker_processes 1;
pid {d}/nginx.pid;
error_log {d}/error.log warn;
events {{ worker_connections 4096; }}
http {{
    access_log off;
    keepalive_requests 1000000;
    client_body_temp_path {d}/body;
    proxy_temp_path {d}/proxy;
    fastcgi_temp_path {d}/fastcgi;
    uwsgi_temp_path {d}/uwsgi;
    scgi_temp_path {d}/scgi;
    upstream origin {{
        server {origin};
        keepalive 64;
        keepalive_requests 1000000;
    }}
    server {{
        listen 127.0.0.1:{port};
        location / {{
            proxy_pass http://origin;
            proxy_http_version 1.1;
            proxy_set_header Connection \"\";
        }}
    }}
}}
"
    );
    let path = dir.join("nginx.conf");
    std::fs::write(&path, config).unwrap();
    let mut command = Command::new(which("nginx", &["/usr/sbin/nginx"]));
    command.arg("-p").arg(&dir).arg("-e").arg(dir.join("error.log")).arg("-c").arg(&path);
    let address = SocketAddr::from(([127, 0, 0, 1], port));
    (Daemon::start("nginx", &mut command, &dir.join("stderr.log"), address), format!("http://{address}"))
}

fn haproxy(dir: &Path, origin: SocketAddr) -> (Daemon, String) {
    let port = free_port();
    let dir = dir.join("haproxy");
    std::fs::create_dir_all(&dir).unwrap();
    let config = format!(
        "global
    nbthread 1
    maxconn 4096
defaults
    mode http
    option http-keep-alive
    http-reuse always
    timeout connect 5s
    timeout client 60s
    timeout server 60s
    timeout http-keep-alive 60s
frontend bench
    bind 127.0.0.1:{port}
    default_backend origin
backend origin
    server origin {origin}
"
    );
    let path = dir.join("haproxy.cfg");
    std::fs::write(&path, config).unwrap();
    let mut command = Command::new(which("haproxy", &["/usr/sbin/haproxy"]));
    command.arg("-db").arg("-f").arg(&path).arg("-p").arg(dir.join("haproxy.pid"));
    let address = SocketAddr::from(([127, 0, 0, 1], port));
    (Daemon::start("haproxy", &mut command, &dir.join("haproxy.log"), address), format!("http://{address}"))
}

/// `name` from PATH, or where Debian puts it (sbin is not always on PATH).
fn which(name: &str, fallbacks: &[&str]) -> PathBuf {
    let on_path = std::env::var_os("PATH").into_iter().flat_map(|p| std::env::split_paths(&p).collect::<Vec<_>>()).map(|d| d.join(name));
    on_path.chain(fallbacks.iter().map(PathBuf::from)).find(|p| p.is_file()).unwrap_or_else(|| PathBuf::from(name))
}

/// A plain HTTP/1.1 GET, to check a path answers what the origin says.
fn check_hello(url: &str) {
    let address = url.trim_start_matches("http://");
    let mut stream = TcpStream::connect(address).unwrap();
    stream.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    write!(stream, "GET /hello HTTP/1.1\r\nHost: {address}\r\nConnection: close\r\n\r\n").unwrap();
    let mut answer = String::new();
    stream.read_to_string(&mut answer).unwrap();
    assert!(answer.starts_with("HTTP/1.1 200") && answer.ends_with("hello"), "{url}/hello answered:\n{answer}");
}

fn runtime(name: &str, workers: usize) -> Runtime {
    tokio::runtime::Builder::new_multi_thread().worker_threads(workers).thread_name(name).enable_all().build().unwrap()
}

/// A fault proxy with one listener in front of the origin, served by `runtime`.
fn faultline(runtime: &Runtime, origin: &OriginProcess, delay: Option<u32>) -> (FaultProxy, Arc<Listener>) {
    let proxy = FaultProxy::default();
    let spec = ListenerSpec {
        site: origin.url(),
        forward: false,
        loopback_alias: None,
        experiment: "bench".into(),
        bind: "127.0.0.1:0".parse().unwrap(),
        apply_rules: true,
        ttl: Duration::from_secs(3600),
        worker_script: Bytes::from_static(b"/* worker */"),
        traffic: Arc::new(Traffic::default()),
    };
    let listener = runtime.block_on(proxy.open(spec)).expect("the listener opens");
    if let Some(ms) = delay {
        let rule = Rule {
            match_: RequestMatch { methods: vec![], path: "/*".into() },
            action: RuleAction::Delay((ms, 0)),
            probability: 1.0,
            ttl_seconds: 3600,
        };
        runtime.block_on(proxy.add_rule(origin.url(), rule, "bench")).expect("the rule is accepted");
    }
    (proxy, listener)
}

/// The floor of the listener's design: the same hyper server (auto
/// HTTP/1-HTTP/2, upgrades) and pooled hyper client, forwarding with
/// nothing else done per request (no rules, no counting, no header work).
fn bare_hyper(runtime: &Runtime, origin: &OriginProcess) -> String {
    use http_body_util::BodyExt;
    use http_body_util::combinators::BoxBody;
    use hyper_util::client::legacy::Client;
    use hyper_util::rt::{TokioExecutor, TokioIo};
    type BoxError = Box<dyn std::error::Error + Send + Sync>;

    let _entered = runtime.enter();
    let socket = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    socket.set_nonblocking(true).unwrap();
    let address = socket.local_addr().unwrap();
    let socket = tokio::net::TcpListener::from_std(socket).unwrap();
    let mut connector = hyper_util::client::legacy::connect::HttpConnector::new();
    connector.set_nodelay(true);
    let client: Client<_, hyper::body::Incoming> = Client::builder(TokioExecutor::new()).build(connector);
    let (site, authority) = (origin.url(), hyper::header::HeaderValue::from_str(&origin.address.to_string()).unwrap());
    runtime.spawn(async move {
        loop {
            let Ok((stream, _)) = socket.accept().await else { continue };
            let _ = stream.set_nodelay(true);
            let (client, site, authority) = (client.clone(), site.clone(), authority.clone());
            tokio::spawn(async move {
                let service = hyper::service::service_fn(move |req: hyper::Request<hyper::body::Incoming>| {
                    let (client, site, authority) = (client.clone(), site.clone(), authority.clone());
                    async move {
                        let (mut parts, body) = req.into_parts();
                        let path = parts.uri.path_and_query().map_or("/", |p| p.as_str());
                        parts.uri = format!("{site}{path}").parse().expect("an origin URL");
                        parts.headers.insert(hyper::header::HOST, authority);
                        let response = client.request(hyper::Request::from_parts(parts, body)).await;
                        response.map(|r| r.map(|b| BoxBody::new(b.map_err(|e| Box::new(e) as BoxError))))
                    }
                });
                let builder = hyper_util::server::conn::auto::Builder::new(TokioExecutor::new());
                let _ = builder.serve_connection_with_upgrades(TokioIo::new(stream), service).await;
            });
        }
    });
    format!("http://{address}")
}

/// A Markdown table, columns padded (the first to the left, the others to the right).
fn print_table(header: &[&str], rows: &[Vec<String>]) {
    let widths: Vec<usize> = (0..header.len()).map(|c| rows.iter().map(|r| r[c].chars().count()).chain([header[c].chars().count()]).max().unwrap()).collect();
    let line = |cells: Vec<String>| {
        let padded: Vec<String> = cells.iter().zip(&widths).enumerate().map(|(c, (v, w))| if c == 0 { format!("{v:<w$}") } else { format!("{v:>w$}") }).collect();
        println!("| {} |", padded.join(" | "));
    };
    line(header.iter().map(|h| h.to_string()).collect());
    println!("|{}|", widths.iter().enumerate().map(|(c, w)| if c == 0 { "-".repeat(w + 2) } else { format!("{}:", "-".repeat(w + 1)) }).collect::<Vec<_>>().join("|"));
    for row in rows {
        line(row.clone());
    }
}

fn median(mut values: Vec<f64>) -> f64 {
    values.sort_by(f64::total_cmp);
    let n = values.len();
    if n % 2 == 1 { values[n / 2] } else { (values[n / 2 - 1] + values[n / 2]) / 2.0 }
}

struct Target {
    name: &'static str,
    url: String,
    /// Where the proxy's CPU time is counted (its threads).
    cpu: Vec<PathBuf>,
    runs: Vec<(Load, Run)>,
}

impl Target {
    fn runs(&self, load: Load) -> impl Iterator<Item = &Run> {
        self.runs.iter().filter(move |(l, _)| *l == load).map(|(_, r)| r)
    }

    fn median(&self, load: Load, field: fn(&Run) -> f64) -> f64 {
        median(self.runs(load).map(field).collect())
    }
}

fn main() {
    if std::env::var_os(ORIGIN_CHILD).is_some() {
        return OriginProcess::serve();
    }
    // `cargo bench` passes --bench; a plain `cargo test` run must not bench.
    if !std::env::args().any(|a| a == "--bench") {
        return;
    }
    let rounds = env_or("FAULTLINE_BENCH_ROUNDS", 3).max(1);
    let seconds = env_or("FAULTLINE_BENCH_SECONDS", 10).max(2);
    let dir = tempfile::tempdir().unwrap();
    let pace_script = dir.path().join("pace.lua");
    let pace = format!("function delay()\n  return math.random({}, {})\nend\n", PACE_MS / 2, PACE_MS * 3 / 2);
    std::fs::write(&pace_script, pace).unwrap();

    let mut origin = OriginProcess::start();
    let proxy_runtime = runtime("faultline-1", 1);
    let wide_runtime = runtime("faultline-2", 2);
    let (_plain, plain) = faultline(&proxy_runtime, &origin, None);
    let (_wide, wide) = faultline(&wide_runtime, &origin, None);
    let (_delayed, delayed) = faultline(&proxy_runtime, &origin, Some(DELAY_MS));
    let bare_runtime = runtime("bare-hyper", 1);
    let bare_url = bare_hyper(&bare_runtime, &origin);
    let (_nginx, nginx_url) = nginx(dir.path(), origin.address);
    let (_haproxy, haproxy_url) = haproxy(dir.path(), origin.address);

    let mut targets: Vec<Target> = [
        ("direct to the origin", origin.url(), vec![]),
        ("nginx 1.22, 1 worker", nginx_url, process_tree(_nginx.child.id())),
        ("HAProxy 2.6, 1 thread", haproxy_url, process_tree(_haproxy.child.id())),
        ("Faultline, 1 worker thread", plain.url(), threads("faultline-1")),
        ("Faultline, 2 worker threads", wide.url(), threads("faultline-2")),
        ("Faultline, 1 thread, 100 ms delay rule", delayed.url(), threads("faultline-1")),
        ("hyper alone, 1 thread", bare_url, threads("bare-hyper")),
    ]
    .into_iter()
    .map(|(name, url, cpu)| Target { name, url, cpu, runs: vec![] })
    .collect();
    let origin_cpu = origin.tasks();

    if let Some(hold) = std::env::var("FAULTLINE_BENCH_HOLD").ok().and_then(|v| v.parse().ok()) {
        for target in &targets {
            println!("{:<40} {}/hello", target.name, target.url);
        }
        println!("holding for {hold} s; threads: faultline-1, faultline-2, bare-hyper; origin: pid {}", origin.child.id());
        std::thread::sleep(Duration::from_secs(hold));
        return;
    }
    let loads_at_start = std::fs::read_to_string("/proc/loadavg").unwrap_or_default();
    let started = Instant::now();
    for target in &targets {
        check_hello(&target.url);
        wrk(&format!("{}/hello", target.url), Load::Saturated, WARM_UP_SECONDS, &pace_script);
    }
    for round in 1..=rounds {
        for load in Load::ALL {
            let length = if load == Load::Saturated { seconds } else { seconds / 2 };
            for target in &mut targets {
                let (before, load_now) = (origin.connections(), load_average());
                let (proxy_before, origin_before) = (cpu_micros(&target.cpu), cpu_micros(&origin_cpu));
                let w = wrk(&format!("{}/hello", target.url), load, length, &pace_script);
                let per_request = |micros: f64| micros / w.requests.max(1) as f64;
                let run = Run {
                    p50: w.p50,
                    p99: w.p99,
                    rps: w.rps,
                    failed: w.failed,
                    load: load_now,
                    origin_connections: origin.connections() - before,
                    proxy_cpu: per_request(cpu_micros(&target.cpu) - proxy_before),
                    origin_cpu: per_request(cpu_micros(&origin_cpu) - origin_before),
                };
                target.runs.push((load, run));
            }
        }
        eprintln!("round {round}/{rounds} done after {:.0} s, load {:.2}", started.elapsed().as_secs_f64(), load_average());
    }
    let loads_at_end = std::fs::read_to_string("/proc/loadavg").unwrap_or_default();

    println!("\nFaultline's fault proxy beside nginx and HAProxy; wrk -t1 on /hello (5 bytes) of a hyper origin.");
    println!("Medians of {rounds} runs per cell ({seconds} s flat out, {} s otherwise), after {WARM_UP_SECONDS} s of warm-up.", seconds / 2);
    println!("Latencies in µs; +p50 / +p99: over the direct connection's. CPU/req: µs on a core per request, of the");
    println!("proxy's process or runtime threads and of the origin's process. New conns: the origin accepted, per run.");
    for load in Load::ALL {
        println!("\n{}\n", load.title());
        let (base50, base99) = (targets[0].median(load, |r| r.p50), targets[0].median(load, |r| r.p99));
        let rows: Vec<Vec<String>> = targets
            .iter()
            .enumerate()
            .map(|(i, t)| {
                let (p50, p99) = (t.median(load, |r| r.p50), t.median(load, |r| r.p99));
                let lows = t.runs(load).map(|r| r.p50).fold(f64::INFINITY, f64::min);
                let highs = t.runs(load).map(|r| r.p50).fold(0.0, f64::max);
                let added = |v: f64| if i == 0 { "-".to_string() } else { format!("{v:.0}") };
                vec![
                    t.name.to_string(),
                    format!("{p50:.0}"),
                    format!("{p99:.0}"),
                    added(p50 - base50),
                    added(p99 - base99),
                    format!("{:.0}", t.median(load, |r| r.rps)),
                    format!("{lows:.0}-{highs:.0}"),
                    if i == 0 { "-".into() } else { format!("{:.1}", t.median(load, |r| r.proxy_cpu)) },
                    format!("{:.1}", t.median(load, |r| r.origin_cpu)),
                    format!("{:.0}", t.median(load, |r| r.origin_connections as f64)),
                ]
            })
            .collect();
        let header = ["path", "p50", "p99", "+p50", "+p99", "req/s", "p50 of runs", "CPU/req", "origin CPU/req", "new conns"];
        print_table(&header, &rows);
    }

    let plain_rps = targets[3].median(Load::Saturated, |r| r.rps);
    let nginx_rps = targets[1].median(Load::Saturated, |r| r.rps);
    let added = targets[3].median(Load::OneConnection, |r| r.p50) - targets[0].median(Load::OneConnection, |r| r.p50);
    println!("\nAim: under 100 µs added at the median with no rule, throughput at least nginx's.");
    println!(
        "  added p50, one connection: {added:.0} µs ({}); flat-out throughput: {plain_rps:.0} req/s, {:.0} % of nginx's ({})",
        if added < 100.0 { "met" } else { "missed" },
        100.0 * plain_rps / nginx_rps,
        if plain_rps >= nginx_rps { "met" } else { "missed" }
    );
    println!("\nDelay rule: {DELAY_MS} ms requested; added over the direct connection (medians of runs):");
    for load in Load::ALL {
        let plus = |field: fn(&Run) -> f64| (targets[5].median(load, field) - targets[0].median(load, field)) / 1000.0;
        println!("  {:<58} p50 +{:.2} ms, p99 +{:.2} ms", load.title(), plus(|r| r.p50), plus(|r| r.p99));
    }
    let failed: u64 = targets.iter().flat_map(|t| t.runs.iter()).map(|(_, r)| r.failed).sum();
    if failed > 0 {
        println!("\nWARNING: {failed} requests failed (socket errors or non-2xx); see the runs:");
        for t in &targets {
            for (load, r) in t.runs.iter().filter(|(_, r)| r.failed > 0) {
                println!("  {} / {}: {} failed", t.name, load.title(), r.failed);
            }
        }
    }
    let loads: Vec<f64> = targets.iter().flat_map(|t| t.runs.iter()).map(|(_, r)| r.load).collect();
    println!(
        "\nLoad average (1 min) before the runs: min {:.2}, median {:.2}, max {:.2}; /proc/loadavg at start: {}, at end: {}",
        loads.iter().copied().fold(f64::INFINITY, f64::min),
        median(loads.clone()),
        loads.iter().copied().fold(0.0, f64::max),
        loads_at_start.trim(),
        loads_at_end.trim()
    );

    // The daemons stop as they drop; then the listeners and the origin.
    drop((_nginx, _haproxy));
    for (runtime, proxy, listener) in [(&proxy_runtime, &_plain, &plain), (&wide_runtime, &_wide, &wide), (&proxy_runtime, &_delayed, &delayed)] {
        runtime.block_on(proxy.close(&listener.id));
    }
    drop(origin);
}
