//! faultline-agent: the helper the host runs in a target container's
//! namespaces. Every run carries a time-to-live: whatever happens to the
//! host, the agent ends itself, and with it its effect.
//!
//! faultline-agent [--ttl SECONDS] COMMAND ...
//!   signal --pid PID --signal NAME
//!   cpu --percent P [--cpus C]
//!   memory --bytes B
//!   net [--delay-ms D [--jitter-ms J]] [--loss-percent P] [--rate-kbit R]
//!
//! A long-running command prints `ready: ...` on stdout once its effect is
//! in place; the host waits for that line.

mod cpu;
mod lifecycle;
mod memory;
mod net;
mod signal;

use std::time::Duration;

/// Without --ttl, an agent lives at most this long.
const DEFAULT_TTL: Duration = Duration::from_secs(3600);

fn usage() -> ! {
    eprintln!(
        "usage: faultline-agent [--ttl SECONDS] (signal --pid PID --signal NAME | cpu --percent P [--cpus C] | memory --bytes B | net [--delay-ms D [--jitter-ms J]] [--loss-percent P] [--rate-kbit R])"
    );
    std::process::exit(2)
}

/// Reads `--flag value` pairs after the subcommand.
pub(crate) fn flag(args: &[String], name: &str) -> Option<String> {
    args.windows(2).find(|w| w[0] == name).map(|w| w[1].clone())
}

fn main() {
    let mut args: Vec<String> = std::env::args().skip(1).collect();
    let mut ttl = DEFAULT_TTL;
    if args.first().map(String::as_str) == Some("--ttl") {
        let seconds = args.get(1).and_then(|s| s.parse().ok()).unwrap_or_else(|| usage());
        ttl = Duration::from_secs(seconds);
        args.drain(..2);
    }
    // The dead man's switch: the effect ends when the agent does.
    lifecycle::install(ttl);
    let Some(command) = args.first().cloned() else { usage() };
    let rest = &args[1..];
    let outcome = match command.as_str() {
        "signal" => signal::run(rest),
        "cpu" => cpu::run(rest),
        "memory" => memory::run(rest),
        "net" => net::run(rest),
        _ => usage(),
    };
    if let Err(e) = outcome {
        eprintln!("faultline-agent {command}: {e}");
        std::process::exit(1);
    }
}
