//! The device services a stream may open (AOSP adb `SERVICES.TXT`):
//! `shell[,v2][,raw|,pty][,TERM=..]:<command>` (with the shell protocol v2
//! framing when `v2` is asked: stdout, stderr and the exit code apart),
//! `exec:<command>` (raw bytes both ways, as `adb install` streams an APK
//! to `cmd package install -S`), and `reverse:forward|killforward|
//! killforward-all|list-forward`. Anything else is refused.

use std::sync::Arc;

use crate::device::Device;
use crate::shell;
use crate::transport::{Service, Stream, Transport};

const STDIN: u8 = 0;
const STDOUT: u8 = 1;
const STDERR: u8 = 2;
const EXIT: u8 = 3;
const CLOSE_STDIN: u8 = 4;

/// The service for a stream, or none when the device has no such service.
pub fn open(device: &Arc<Device>, service: &str, stream: Stream, _transport: Arc<Transport>) -> Option<Service> {
    let device = device.clone();
    if let Some(rest) = service.strip_prefix("shell") {
        let (options, command) = rest.split_once(':')?;
        let v2 = options.split(',').any(|o| o == "v2");
        let command = command.to_string();
        return Some(Box::pin(async move { run_shell(&device, stream, &command, v2).await }));
    }
    if let Some(command) = service.strip_prefix("exec:") {
        let command = command.to_string();
        return Some(Box::pin(async move { run_exec(&device, stream, &command).await }));
    }
    if let Some(request) = service.strip_prefix("reverse:") {
        let request = request.to_string();
        return Some(Box::pin(async move { reverse(&device, stream, &request).await }));
    }
    None
}

/// Whether a command reads an APK from its input.
fn reads_input(command: &str) -> Option<usize> {
    if !command.contains("install") {
        return None;
    }
    let words: Vec<&str> = command.split_whitespace().collect();
    words.windows(2).find(|w| w[0] == "-S").and_then(|w| w[1].trim_matches('\'').parse().ok())
}

fn packet(id: u8, data: &[u8]) -> Vec<u8> {
    let mut p = Vec::with_capacity(5 + data.len());
    p.push(id);
    p.extend_from_slice(&(data.len() as u32).to_le_bytes());
    p.extend_from_slice(data);
    p
}

/// Standard input of a shell v2 session: data packets until close-stdin.
async fn v2_stdin(stream: &mut Stream, want: usize) -> Vec<u8> {
    let (mut input, mut pending) = (vec![], vec![]);
    while input.len() < want {
        let Some(data) = stream.read().await else { break };
        pending.extend(data);
        while pending.len() >= 5 {
            let len = u32::from_le_bytes([pending[1], pending[2], pending[3], pending[4]]) as usize;
            if pending.len() < 5 + len {
                break;
            }
            let (id, body): (u8, Vec<u8>) = (pending[0], pending[5..5 + len].to_vec());
            pending.drain(..5 + len);
            match id {
                STDIN => input.extend(body),
                CLOSE_STDIN => return input,
                _ => {}
            }
        }
    }
    input
}

async fn run_shell(device: &Arc<Device>, mut stream: Stream, command: &str, v2: bool) {
    let stdin = match reads_input(command) {
        Some(size) if v2 => v2_stdin(&mut stream, size).await,
        Some(size) => raw_stdin(&mut stream, size).await,
        None => vec![],
    };
    let (status, out) = shell::session(device, command, &stdin).await;
    if v2 {
        if !out.stdout.is_empty() && !stream.write(&packet(STDOUT, &out.stdout)).await {
            return;
        }
        if !out.stderr.is_empty() && !stream.write(&packet(STDERR, &out.stderr)).await {
            return;
        }
        stream.write(&packet(EXIT, &[status as u8])).await;
    } else {
        let mut all = out.stdout;
        all.extend(out.stderr);
        stream.write(&all).await;
    }
    stream.close();
}

async fn raw_stdin(stream: &mut Stream, want: usize) -> Vec<u8> {
    let mut input = vec![];
    while input.len() < want {
        match stream.read().await {
            Some(data) => input.extend(data),
            None => break,
        }
    }
    input
}

async fn run_exec(device: &Arc<Device>, mut stream: Stream, command: &str) {
    let stdin = match reads_input(command) {
        Some(size) => raw_stdin(&mut stream, size).await,
        None => vec![],
    };
    let (_, out) = shell::session(device, command, &stdin).await;
    let mut all = out.stdout;
    all.extend(out.stderr);
    stream.write(&all).await;
    stream.close();
}

/// `adb reverse`: the device's reverse service answers OKAY, or FAIL and a
/// length-prefixed message; a list is the length-prefixed listing alone
/// (AOSP adb.cpp `handle_forward_request`, built for the device).
async fn reverse(device: &Arc<Device>, stream: Stream, request: &str) {
    let fail = |why: &str| format!("FAIL{:04x}{why}", why.len());
    let answer = match request.split_once(':').map_or((request, ""), |(a, b)| (a, b)) {
        ("forward", spec) => {
            let spec = spec.strip_prefix("norebind:").unwrap_or(spec);
            match spec.split_once(';').and_then(|(local, remote)| Some((local.strip_prefix("tcp:")?.parse::<u16>().ok()?, remote))) {
                Some((port, remote)) if remote.starts_with("tcp:") => {
                    device.state().reverses.insert(port, remote.to_string());
                    "OKAY".to_string()
                }
                _ => fail(&format!("cannot bind listener: {spec}")),
            }
        }
        ("killforward", spec) => {
            let removed = spec.strip_prefix("tcp:").and_then(|p| p.parse::<u16>().ok()).and_then(|p| device.state().reverses.remove(&p));
            match removed {
                Some(_) => "OKAY".to_string(),
                None => fail(&format!("listener '{spec}' not found")),
            }
        }
        ("killforward-all", _) => {
            device.state().reverses.clear();
            "OKAY".to_string()
        }
        ("list-forward", _) => {
            let listing: String = device.state().reverses.iter().map(|(port, remote)| format!("{} tcp:{port} {remote}\n", device.config.serial)).collect();
            // adbd answers a list with the listing alone (the host's OKAY is the server's).
            format!("{:04x}{listing}", listing.len())
        }
        _ => fail(&format!("unknown reverse request: {request}")),
    };
    stream.write(answer.as_bytes()).await;
    stream.close();
}
