//! The modelled apps: every installed app behaves as a simple one. Launched,
//! it gets a process and its activity comes to the front; it logs as a
//! real app would; told to trim memory, it logs `onTrimMemory(<level>)`;
//! with `--app-http` it GETs a URL while it runs (through the device's
//! global HTTP proxy when one is set, and through `adb reverse` for the
//! device's own loopback). With `--app-crash-on` / `--app-anr-on` it
//! crashes or stops responding when its condition becomes true while it
//! runs; otherwise it never does by itself.

use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};

use crate::config::Condition;
use crate::device::{Device, LAUNCHER, ProcessKind};

/// Starts an app (or brings it to the front); returns whether it was cold.
pub fn launch(device: &Arc<Device>, package: &str, activity: &str) -> bool {
    let cold;
    {
        let mut state = device.state();
        let system = state.system_server_pid();
        cold = state.app_pid(package).is_none();
        if cold {
            let user = format!("u0_a{}", state.packages.get(package).map_or(100, |p| p.uid % 1000));
            let pid = state.spawn(package, package, ProcessKind::App(package.into()), &user);
            let short = short_component(package, activity);
            state.log("system", system, 'I', "ActivityManager", &format!("Start proc {pid}:{package}/{user} for activity {{{short}}}"));
            let tag = device.config.tag_of(package);
            state.log("main", pid, 'I', &tag, "onCreate");
        }
        state.resumed = (package.into(), activity.into());
    }
    if cold {
        start_traffic(device, package);
        // A condition already true when the app starts acts at once.
        if device.state().airplane_mode() {
            react(device, |c| *c == Condition::AirplaneMode, package);
        }
    }
    cold
}

/// `pkg/.Act` when the activity is in the package, as Android prints components.
pub fn short_component(package: &str, activity: &str) -> String {
    match activity.strip_prefix(package) {
        Some(rest) if rest.starts_with('.') => format!("{package}/{rest}"),
        _ => format!("{package}/{activity}"),
    }
}

/// The launcher comes to the front; apps keep running behind it.
pub fn go_home(device: &Arc<Device>) {
    device.state().resumed = (LAUNCHER.0.into(), LAUNCHER.1.into());
}

/// An app's process is gone: force-stopped, killed, or crashed.
pub fn process_died(device: &Arc<Device>, package: &str, force_stop: bool) {
    let mut state = device.state();
    let Some(pid) = state.app_pid(package) else { return };
    state.processes.remove(&pid);
    let system = state.system_server_pid();
    if force_stop {
        let uid = state.packages.get(package).map_or(0, |p| p.uid);
        state.log("system", system, 'I', "ActivityManager", &format!("Force stopping {package} appid={uid} user=0: from pid {system}"));
    }
    state.log("system", system, 'I', "ActivityManager", &format!("Killing {pid}:{package}/u0a{} (adj 0): stop {package}", pid % 1000));
    if state.resumed.0 == package {
        state.resumed = (LAUNCHER.0.into(), LAUNCHER.1.into());
    }
}

/// The app crashes as an uncaught exception would end it.
pub fn crash(device: &Arc<Device>, package: &str, exception: &str) {
    {
        let mut state = device.state();
        let Some(pid) = state.app_pid(package) else { return };
        for line in ["FATAL EXCEPTION: main".to_string(), format!("Process: {package}, PID: {pid}"), exception.to_string(), format!("\tat {package}.MainActivity.onResume(MainActivity.java:42)")] {
            state.log("crash", pid, 'E', "AndroidRuntime", &line);
        }
        let system = state.system_server_pid();
        let activity = state.packages.get(package).map(|p| p.activity.clone()).unwrap_or_default();
        state.log("system", system, 'W', "ActivityTaskManager", &format!("  Force finishing activity {}", short_component(package, &activity)));
        state.log("system", system, 'I', "ActivityManager", &format!("Process {package} (pid {pid}) has died: fg  TOP "));
    }
    process_died(device, package, false);
}

/// The app stops responding: the system logs an ANR and keeps its report.
pub fn anr(device: &Arc<Device>, package: &str, reason: &str) {
    let mut state = device.state();
    let Some(pid) = state.app_pid(package) else { return };
    let system = state.system_server_pid();
    let activity = state.packages.get(package).map(|p| p.activity.clone()).unwrap_or_default();
    let component = short_component(package, &activity);
    for line in [format!("ANR in {package} ({component})"), format!("PID: {pid}"), format!("Reason: {reason}"), "Parent: ".to_string()] {
        state.log("system", system, 'E', "ActivityManager", &line);
    }
    state.last_anr = Some(format!("  ANR in {package} ({component})\n  PID: {pid}\n  Reason: {reason}\n"));
}

/// The app reacts to a condition that just became true, if it was told to.
pub fn react(device: &Arc<Device>, matches: impl Fn(&Condition) -> bool, package: &str) {
    let chosen: Vec<_> = device.config.behaviours.iter().filter(|b| b.package == package && matches(&b.when)).cloned().collect();
    for behaviour in chosen {
        if device.state().app_pid(package).is_none() {
            return;
        }
        let why = match behaviour.when {
            Condition::AirplaneMode => "the network went away",
            Condition::Trim(_) => "memory ran short",
            Condition::BatteryBelow(_) => "the battery ran low",
            Condition::HttpFailures(_) => "its requests kept failing",
        };
        match behaviour.anr {
            true => anr(device, package, &format!("Input dispatching timed out (Waiting because {why})")),
            false => crash(device, package, &format!("java.lang.IllegalStateException: {why}")),
        }
    }
}

/// Every running app reacts to a condition.
pub fn react_all(device: &Arc<Device>, matches: impl Fn(&Condition) -> bool) {
    let running: Vec<String> =
        device.state().processes.values().filter_map(|p| if let ProcessKind::App(a) = &p.kind { Some(a.clone()) } else { None }).collect();
    for package in running {
        react(device, &matches, &package);
    }
}

/// Airplane mode, as `cmd connectivity airplane-mode` and the setting change it.
pub fn set_airplane_mode(device: &Arc<Device>, on: bool) {
    {
        let mut state = device.state();
        let was = state.airplane_mode();
        state.settings.insert(("global".into(), "airplane_mode_on".into()), if on { "1" } else { "0" }.into());
        if was == on {
            return;
        }
        let system = state.system_server_pid();
        state.log("system", system, 'I', "ConnectivityService", &format!("setAirplaneMode({on})"));
    }
    if on {
        react_all(device, |c| *c == Condition::AirplaneMode);
    }
}

/// The app's HTTP traffic loop, when `--app-http` names it.
fn start_traffic(device: &Arc<Device>, package: &str) {
    let Some((_, url)) = device.config.http.iter().find(|(p, _)| p == package).cloned() else { return };
    let (device, package) = (device.clone(), package.to_string());
    tokio::spawn(async move {
        let interval = Duration::from_millis(device.config.http_interval_ms);
        loop {
            let running = device.state().app_pid(&package);
            let Some(pid) = running else { return };
            let started = Instant::now();
            let result = tokio::time::timeout(Duration::from_secs(30), get(&device, &url)).await.unwrap_or_else(|_| Err("java.net.SocketTimeoutException: timeout".into()));
            let ms = started.elapsed().as_millis();
            let tag = device.config.tag_of(&package);
            let failures = {
                let mut state = device.state();
                if state.app_pid(&package) != Some(pid) {
                    return;
                }
                let failures = state.http_failures.entry(package.clone()).or_default();
                match &result {
                    Ok(status) if *status < 500 => *failures = 0,
                    _ => *failures += 1,
                }
                let failures = *failures;
                match &result {
                    Ok(status) => state.log("main", pid, 'I', &tag, &format!("GET {url} -> {status} in {ms} ms")),
                    Err(why) => state.log("main", pid, 'W', &tag, &format!("GET {url} failed: {why}")),
                }
                failures
            };
            react(&device, |c| matches!(c, Condition::HttpFailures(n) if failures >= *n), &package);
            tokio::time::sleep(interval.saturating_sub(started.elapsed())).await;
        }
    });
}

/// Where a host:port the device names leads: the emulator's 10.0.2.2 is
/// the host machine's loopback; the device's own loopback reaches the host
/// only through `adb reverse`.
enum Route {
    Host(u16),
    Reverse(String),
    Refused,
}

fn route(device: &Arc<Device>, host: &str, port: u16) -> Route {
    match host {
        "10.0.2.2" => Route::Host(port),
        "127.0.0.1" | "localhost" => match device.state().reverses.get(&port) {
            Some(target) => Route::Reverse(target.clone()),
            None => Route::Refused,
        },
        _ => Route::Refused,
    }
}

trait Io: AsyncRead + AsyncWrite + Unpin + Send {}
impl<T: AsyncRead + AsyncWrite + Unpin + Send> Io for T {}

async fn connect(device: &Arc<Device>, host: &str, port: u16) -> Result<Box<dyn Io>, String> {
    let refused = || format!("java.net.ConnectException: Failed to connect to /{host}:{port}");
    match route(device, host, port) {
        Route::Host(port) => tokio::net::TcpStream::connect(("127.0.0.1", port)).await.map(|s| Box::new(s) as Box<dyn Io>).map_err(|_| refused()),
        Route::Reverse(target) => {
            let transport = device.transport().ok_or_else(refused)?;
            let stream = transport.open(&target).await.ok_or_else(refused)?;
            Ok(Box::new(crate::tunnel::Tunnel::new(stream)))
        }
        Route::Refused => Err(refused()),
    }
}

fn host_port(authority: &str) -> (String, u16) {
    match authority.rsplit_once(':') {
        Some((h, p)) => (h.to_string(), p.parse().unwrap_or(80)),
        None => (authority.to_string(), 80),
    }
}

/// One GET as the app's HTTP client makes it; the status.
async fn get(device: &Arc<Device>, url: &str) -> Result<u16, String> {
    if device.state().airplane_mode() {
        return Err("java.net.UnknownHostException: Unable to resolve host: No address associated with hostname".into());
    }
    let rest = url.strip_prefix("http://").ok_or("only http:// is modelled")?;
    let (authority, path) = rest.split_once('/').map(|(a, p)| (a, format!("/{p}"))).unwrap_or((rest, "/".into()));
    let proxy = device.state().setting("global", "http_proxy").cloned().filter(|p| !p.is_empty() && p != ":0" && p != "null");
    let (request_target, (host, port)) = match &proxy {
        Some(proxy) => (url.to_string(), host_port(proxy)),
        None => (path, host_port(authority)),
    };
    let mut io = connect(device, &host, port).await?;
    let request = format!("GET {request_target} HTTP/1.1\r\nHost: {authority}\r\nUser-Agent: Dalvik/2.1.0 (Linux; U; Android)\r\nConnection: close\r\n\r\n");
    io.write_all(request.as_bytes()).await.map_err(|e| format!("java.io.IOException: {e}"))?;
    let mut head = vec![];
    let mut buf = [0u8; 4096];
    while !head.windows(2).any(|w| w == b"\r\n") {
        let n = io.read(&mut buf).await.map_err(|e| format!("java.io.IOException: {e}"))?;
        if n == 0 {
            return Err("java.io.IOException: unexpected end of stream".into());
        }
        head.extend_from_slice(&buf[..n]);
    }
    // Read the rest, so the exchange completes as a client's would.
    let _ = tokio::time::timeout(Duration::from_secs(10), async {
        while let Ok(n) = io.read(&mut buf).await {
            if n == 0 {
                break;
            }
        }
    })
    .await;
    let line = String::from_utf8_lossy(&head);
    line.split_whitespace().nth(1).and_then(|s| s.parse().ok()).ok_or_else(|| format!("java.net.ProtocolException: bad status line {line:?}"))
}
