//! `signal`: sends a signal to processes by PID, from the host's PID
//! namespace: a SIGKILL from outside is a crash to Docker, so the target's
//! restart policy applies (Docker's own kill counts as a manual stop).
//! Prints `signalled PID` or `failed PID: why` for each PID.
//!
//! signal --signal NAME --pid PID [--pid PID ...]

use crate::flag;

fn number(name: &str) -> Option<i32> {
    let name = name.trim_start_matches("SIG");
    [("HUP", 1), ("INT", 2), ("QUIT", 3), ("KILL", 9), ("USR1", 10), ("USR2", 12), ("TERM", 15), ("STOP", 19), ("CONT", 18)]
        .into_iter()
        .find(|(n, _)| *n == name)
        .map(|(_, s)| s)
}

pub fn run(args: &[String]) -> Result<(), String> {
    let name = flag(args, "--signal").unwrap_or_else(|| "KILL".into());
    let sig = number(&name).ok_or_else(|| format!("unknown signal {name}"))?;
    let pids: Vec<&String> = args.windows(2).filter(|w| w[0] == "--pid").map(|w| &w[1]).collect();
    if pids.is_empty() {
        return Err("--pid PID is required".into());
    }
    for pid in pids {
        match pid.parse::<i32>() {
            Ok(p) if p > 1 => {
                // SAFETY: kill(2) with plain integers.
                if unsafe { libc::kill(p, sig) } == 0 {
                    println!("signalled {pid}");
                } else {
                    println!("failed {pid}: kill({pid}, {name}): {}", std::io::Error::last_os_error());
                }
            }
            _ => println!("failed {pid}: not a process id"),
        }
    }
    Ok(())
}
