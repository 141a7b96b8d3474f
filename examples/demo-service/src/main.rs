//! A tiny HTTP service for demo systems (web → api → db). `GET /` answers
//! after asking its upstream, if it has one, so a fault in one tier shows up
//! in the tiers above it. `GET /health` answers at once; `GET /bytes/N`
//! sends N bytes (for measuring bandwidth). The same port
//! echoes UDP datagrams, so another container can time round trips and
//! count losses (`measure`).
//!
//! demo-service --name web --listen 0.0.0.0:8080 --upstream api:8080
//! demo-service measure --udp api:8080 [--count 100] [--interval-ms 10]
//!   prints {"sent":N,"received":R,"rtt_ms":[...]} on one line

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream, ToSocketAddrs, UdpSocket};
use std::time::{Duration, Instant};

const UPSTREAM_TIMEOUT: Duration = Duration::from_secs(2);

struct Config {
    name: String,
    listen: String,
    upstream: Option<String>,
}

fn config() -> Config {
    let mut c = Config { name: "demo".into(), listen: "0.0.0.0:8080".into(), upstream: None };
    let mut args = std::env::args().skip(1);
    while let Some(flag) = args.next() {
        let value = args.next().unwrap_or_else(|| panic!("{flag} needs a value"));
        match flag.as_str() {
            "--name" => c.name = value,
            "--listen" => c.listen = value,
            "--upstream" => c.upstream = Some(value),
            other => panic!("unknown flag {other}"),
        }
    }
    c
}

/// Asks the upstream for `/`; its status line, or why it failed.
fn ask_upstream(upstream: &str) -> Result<String, String> {
    let addr = upstream.to_socket_addrs().map_err(|e| e.to_string())?.next().ok_or("no address")?;
    let mut stream = TcpStream::connect_timeout(&addr, UPSTREAM_TIMEOUT).map_err(|e| e.to_string())?;
    stream.set_read_timeout(Some(UPSTREAM_TIMEOUT)).map_err(|e| e.to_string())?;
    write!(stream, "GET / HTTP/1.0\r\nHost: {upstream}\r\n\r\n").map_err(|e| e.to_string())?;
    let mut answer = String::new();
    stream.read_to_string(&mut answer).map_err(|e| e.to_string())?;
    let status = answer.lines().next().unwrap_or_default().to_string();
    if status.contains(" 200 ") { Ok(status) } else { Err(format!("upstream answered `{status}`")) }
}

fn respond(mut stream: TcpStream, status: &str, body: &str) {
    let _ = write!(stream, "HTTP/1.0 {status}\r\nContent-Type: text/plain\r\nContent-Length: {}\r\n\r\n{body}", body.len());
}

const MAX_BYTES: usize = 100_000_000;

fn send_bytes(mut stream: TcpStream, n: usize) {
    let _ = write!(stream, "HTTP/1.0 200 OK\r\nContent-Type: application/octet-stream\r\nContent-Length: {n}\r\n\r\n");
    let chunk = [b'x'; 64 * 1024];
    let mut left = n;
    while left > 0 {
        let size = left.min(chunk.len());
        if stream.write_all(&chunk[..size]).is_err() {
            return;
        }
        left -= size;
    }
}

fn serve(stream: TcpStream, config: &Config) {
    let _ = stream.set_read_timeout(Some(Duration::from_secs(5)));
    let mut request_line = String::new();
    let mut reader = BufReader::new(stream.try_clone().expect("cloning a socket"));
    if reader.read_line(&mut request_line).is_err() {
        return;
    }
    // Drain the headers.
    let mut line = String::new();
    while reader.read_line(&mut line).is_ok_and(|n| n > 2) {
        line.clear();
    }
    let path = request_line.split_whitespace().nth(1).unwrap_or("/");
    match (path, &config.upstream) {
        ("/health", _) | ("/", None) => respond(stream, "200 OK", &format!("{} ok\n", config.name)),
        ("/", Some(upstream)) => match ask_upstream(upstream) {
            Ok(_) => respond(stream, "200 OK", &format!("{} ok via {upstream}\n", config.name)),
            Err(why) => respond(stream, "502 Bad Gateway", &format!("{}: {upstream} failed: {why}\n", config.name)),
        },
        (path, _) if path.starts_with("/bytes/") => match path["/bytes/".len()..].parse::<usize>() {
            Ok(n) if n <= MAX_BYTES => send_bytes(stream, n),
            _ => respond(stream, "400 Bad Request", "GET /bytes/N, N up to 100000000\n"),
        },
        _ => respond(stream, "404 Not Found", "not found\n"),
    }
}

unsafe extern "C" {
    fn signal(signum: i32, handler: extern "C" fn(i32)) -> usize;
    fn _exit(status: i32) -> !;
}

extern "C" fn on_term(_: i32) {
    // SAFETY: _exit is async-signal-safe.
    unsafe { _exit(0) }
}

/// Echoes every datagram back to its sender.
fn echo(socket: UdpSocket) {
    let mut buffer = [0u8; 2048];
    while let Ok((n, from)) = socket.recv_from(&mut buffer) {
        let _ = socket.send_to(&buffer[..n], from);
    }
}

/// Sends numbered datagrams to an echoing peer at a steady pace and times
/// each echo; a datagram without an echo 2 s after the last send is lost.
fn measure(args: &[String]) {
    let flag = |name: &str| args.windows(2).find(|w| w[0] == name).map(|w| w[1].clone());
    let peer = flag("--udp").expect("--udp HOST:PORT is required");
    let count: u32 = flag("--count").map_or(100, |c| c.parse().expect("--count"));
    let interval = Duration::from_millis(flag("--interval-ms").map_or(10, |i| i.parse().expect("--interval-ms")));
    let socket = UdpSocket::bind("0.0.0.0:0").expect("binding a UDP socket");
    socket.connect(&peer).unwrap_or_else(|e| panic!("resolving {peer}: {e}"));
    let receiver = socket.try_clone().expect("cloning a socket");
    let start = Instant::now();
    let sender = std::thread::spawn(move || {
        let mut sent_at = Vec::new();
        for seq in 0..count {
            sent_at.push(start.elapsed());
            let _ = socket.send(&seq.to_be_bytes());
            std::thread::sleep(interval);
        }
        sent_at
    });
    let done = start + interval * count + Duration::from_secs(2);
    let mut echoed = Vec::new();
    let mut buffer = [0u8; 64];
    while let Some(left) = done.checked_duration_since(Instant::now()) {
        receiver.set_read_timeout(Some(left.max(Duration::from_millis(1)))).expect("setting a timeout");
        if let Ok(4) = receiver.recv(&mut buffer) {
            echoed.push((u32::from_be_bytes(buffer[..4].try_into().unwrap()), start.elapsed()));
        }
    }
    let sent_at = sender.join().expect("the sender");
    let rtts: Vec<String> = echoed
        .iter()
        .filter_map(|(seq, at)| sent_at.get(*seq as usize).map(|sent| format!("{:.3}", (*at - *sent).as_secs_f64() * 1000.0)))
        .collect();
    println!("{{\"sent\":{count},\"received\":{},\"rtt_ms\":[{}]}}", rtts.len(), rtts.join(","));
}

fn main() {
    // As PID 1 in a container, SIGTERM and SIGINT do nothing unless handled.
    // SAFETY: installs a handler that only calls _exit.
    unsafe {
        signal(15, on_term);
        signal(2, on_term);
    }
    let args: Vec<String> = std::env::args().skip(1).collect();
    if args.first().map(String::as_str) == Some("measure") {
        return measure(&args[1..]);
    }
    let config = config();
    let listener = TcpListener::bind(&config.listen).unwrap_or_else(|e| panic!("binding {}: {e}", config.listen));
    let udp = UdpSocket::bind(&config.listen).unwrap_or_else(|e| panic!("binding UDP {}: {e}", config.listen));
    std::thread::spawn(move || echo(udp));
    let config: &'static Config = Box::leak(Box::new(config));
    for stream in listener.incoming().flatten() {
        std::thread::spawn(move || serve(stream, config));
    }
}
