//! A tiny HTTP service for demo systems (web → api → db). `GET /` answers
//! after asking its upstream, if it has one, so a fault in one tier shows up
//! in the tiers above it. `GET /health` answers at once.
//!
//! demo-service --name web --listen 0.0.0.0:8080 --upstream api:8080

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream, ToSocketAddrs};
use std::time::Duration;

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

fn main() {
    // As PID 1 in a container, SIGTERM and SIGINT do nothing unless handled.
    // SAFETY: installs a handler that only calls _exit.
    unsafe {
        signal(15, on_term);
        signal(2, on_term);
    }
    let config = config();
    let listener = TcpListener::bind(&config.listen).unwrap_or_else(|e| panic!("binding {}: {e}", config.listen));
    let config: &'static Config = Box::leak(Box::new(config));
    for stream in listener.incoming().flatten() {
        std::thread::spawn(move || serve(stream, config));
    }
}
