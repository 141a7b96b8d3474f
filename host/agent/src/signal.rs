//! `signal`: sends a signal to a process of the target's PID namespace. Sent
//! from inside, a SIGKILL to PID 1 is a crash to Docker, so the target's
//! restart policy applies (Docker's own kill counts as a manual stop).

use crate::flag;

fn number(name: &str) -> Option<i32> {
    let name = name.trim_start_matches("SIG");
    [("HUP", 1), ("INT", 2), ("QUIT", 3), ("KILL", 9), ("USR1", 10), ("USR2", 12), ("TERM", 15), ("STOP", 19), ("CONT", 18)]
        .into_iter()
        .find(|(n, _)| *n == name)
        .map(|(_, s)| s)
}

pub fn run(args: &[String]) -> Result<(), String> {
    let pid: i32 = flag(args, "--pid").and_then(|p| p.parse().ok()).ok_or("--pid PID is required")?;
    let name = flag(args, "--signal").unwrap_or_else(|| "KILL".into());
    let sig = number(&name).ok_or_else(|| format!("unknown signal {name}"))?;
    // SAFETY: kill(2) with plain integers.
    if unsafe { libc::kill(pid, sig) } != 0 {
        return Err(format!("kill({pid}, {name}): {}", std::io::Error::last_os_error()));
    }
    Ok(())
}
