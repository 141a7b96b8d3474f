//! Watchdogs: the time-to-live of an effect on a device. Each undoes its
//! effect after the time-to-live unless disarmed first, and lives apart
//! from the host so that a host that dies cannot take it along:
//! - shell commands run on the device itself, from a background shell
//!   started with nohup (it outlives the adb session that started it):
//!   `nohup sh -c 'sleep N; <commands>' faultline-watchdog-<id> >/dev/null 2>&1 &`,
//!   disarmed with `pkill -f '[f]aultline-watchdog-<id>'` (the brackets keep
//!   pkill's own command line, and the shell running it, from matching);
//! - emulator console commands cannot run on the device, so a process of
//!   the host's machine sends them (`faultline console-watchdog`), in a
//!   session of its own so that it outlives the host.

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

/// The name a device-side watchdog's shell carries, for pkill to find it.
pub fn device_tag(id: &str) -> String {
    format!("faultline-watchdog-{id}")
}

/// Quotes a word for a POSIX shell.
pub fn quote(word: &str) -> String {
    format!("'{}'", word.replace('\'', r"'\''"))
}

/// The command line that arms a device-side watchdog.
pub fn arm_on_device(id: &str, commands: &[String], ttl_seconds: u32) -> String {
    let mut script = format!("sleep {ttl_seconds}");
    for command in commands {
        script.push_str("; ");
        script.push_str(command);
    }
    format!("nohup sh -c {} {} >/dev/null 2>&1 &", quote(&script), device_tag(id))
}

/// The command line that disarms it.
pub fn disarm_on_device(id: &str) -> String {
    let tag = device_tag(id);
    format!("pkill -f '[{}]{}'", &tag[..1], &tag[1..])
}

/// The subcommand of the host's binary that runs a console watchdog.
pub const CONSOLE_SUBCOMMAND: &str = "console-watchdog";

/// Starts a console watchdog process, detached from the host.
pub fn arm_console(program: &Path, id: &str, port: u16, token_file: &Path, commands: &[String], ttl_seconds: u32) -> std::io::Result<u32> {
    let mut command = std::process::Command::new(program);
    command
        .arg(CONSOLE_SUBCOMMAND)
        .args(["--id", id, "--port", &port.to_string(), "--after-seconds", &ttl_seconds.to_string(), "--token-file"])
        .arg(token_file)
        .arg("--")
        .args(commands)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null());
    // A session of its own: a signal to the host's process group spares it.
    unsafe {
        use std::os::unix::process::CommandExt;
        command.pre_exec(|| {
            libc::setsid();
            Ok(())
        });
    }
    let child = command.spawn()?;
    let pid = child.id();
    // Reaped by a thread, so it never lingers as a zombie while the host lives.
    std::thread::spawn(move || {
        let mut child = child;
        let _ = child.wait();
    });
    Ok(pid)
}

/// Ends the console watchdog with this id, if one runs; true if one did.
pub fn disarm_console(id: &str) -> bool {
    let mut found = false;
    for pid in console_watchdogs(id) {
        // SAFETY: a plain kill(2) of a process found by its command line.
        unsafe { libc::kill(pid, libc::SIGTERM) };
        found = true;
    }
    found
}

/// Processes whose command line is a console watchdog with this id.
fn console_watchdogs(id: &str) -> Vec<i32> {
    let Ok(entries) = std::fs::read_dir("/proc") else { return vec![] };
    entries
        .filter_map(|e| e.ok())
        .filter_map(|e| e.file_name().to_str().and_then(|n| n.parse::<i32>().ok()))
        .filter(|pid| {
            let Ok(cmdline) = std::fs::read(format!("/proc/{pid}/cmdline")) else { return false };
            let args: Vec<&[u8]> = cmdline.split(|b| *b == 0).collect();
            args.iter().any(|a| *a == CONSOLE_SUBCOMMAND.as_bytes()) && args.windows(2).any(|w| w[0] == b"--id" && w[1] == id.as_bytes())
        })
        .collect()
}

/// What `faultline console-watchdog` does: waits, then sends each command.
pub async fn run_console_watchdog(port: u16, token_file: PathBuf, after: Duration, commands: Vec<String>) -> anyhow::Result<()> {
    tokio::time::sleep(after).await;
    for command in commands {
        if let Err(e) = super::console::send(port, &token_file, &command, Duration::from_secs(10)).await {
            eprintln!("console watchdog: `{command}` on port {port}: {e}");
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_device_watchdog_is_one_background_shell_that_pkill_finds_but_never_itself() {
        let line = arm_on_device("wd-01ab", &["dumpsys battery reset".into(), "settings put global http_proxy ':0'".into()], 95);
        assert_eq!(
            line,
            r#"nohup sh -c 'sleep 95; dumpsys battery reset; settings put global http_proxy '\'':0'\''' faultline-watchdog-wd-01ab >/dev/null 2>&1 &"#
        );
        assert_eq!(disarm_on_device("wd-01ab"), "pkill -f '[f]aultline-watchdog-wd-01ab'");
    }

    #[test]
    fn a_console_watchdog_is_found_by_its_id_and_ended() {
        // A shell whose command line carries the same words stands in for the host binary.
        let mut child = std::process::Command::new("sh")
            .args(["-c", "sleep 30; true", CONSOLE_SUBCOMMAND, "--id", "wd-77"])
            .spawn()
            .unwrap();
        assert!(console_watchdogs("wd-78").is_empty(), "another id is another watchdog");
        let deadline = std::time::Instant::now() + Duration::from_secs(5);
        while !disarm_console("wd-77") {
            assert!(std::time::Instant::now() < deadline, "the watchdog was never found");
            std::thread::sleep(Duration::from_millis(20));
        }
        let status = child.wait().unwrap();
        assert!(!status.success(), "ended by the signal: {status:?}");
    }
}
