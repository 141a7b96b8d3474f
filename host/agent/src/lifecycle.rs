//! How an agent ends: when the host stops it (SIGTERM, or SIGINT by hand)
//! or when its time-to-live runs out, whichever comes first. A command
//! that changed nothing outside itself (a CPU burn, held memory) ends at
//! once; a command that changed the kernel's state (network shaping) asks
//! for a stop flag instead and gets a grace period to undo its changes.

use std::io::Write;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

static STOP: AtomicBool = AtomicBool::new(false);
static UNDOES: AtomicBool = AtomicBool::new(false);

/// How long a command that undoes its changes may take before the agent exits anyway.
const GRACE: Duration = Duration::from_secs(5);

/// Arms the time-to-live and the stop signals. Call before any other thread
/// starts, so every thread inherits the blocked signal mask and only the
/// waiting thread receives them (PID 1 of a container ignores signals it
/// has no handler for, but never blocked ones).
pub fn install(ttl: Duration) {
    let set = stop_signals();
    // SAFETY: plain libc calls on a sigset we own.
    unsafe { libc::pthread_sigmask(libc::SIG_BLOCK, &set, std::ptr::null_mut()) };
    std::thread::spawn(move || {
        let mut signal = 0;
        // SAFETY: as above; sigwait writes the signal number.
        unsafe { libc::sigwait(&set, &mut signal) };
        end(&format!("signal {signal}"));
    });
    std::thread::spawn(move || {
        std::thread::sleep(ttl);
        end(&format!("time-to-live of {}s reached", ttl.as_secs()));
    });
}

fn stop_signals() -> libc::sigset_t {
    // SAFETY: sigemptyset initialises the set before it is read.
    unsafe {
        let mut set = std::mem::zeroed();
        libc::sigemptyset(&mut set);
        libc::sigaddset(&mut set, libc::SIGTERM);
        libc::sigaddset(&mut set, libc::SIGINT);
        set
    }
}

fn end(why: &str) {
    eprintln!("faultline-agent: {why}, ending");
    if UNDOES.load(Ordering::SeqCst) {
        STOP.store(true, Ordering::SeqCst);
        std::thread::sleep(GRACE);
        eprintln!("faultline-agent: undoing took longer than {}s, exiting", GRACE.as_secs());
        std::process::exit(1);
    }
    std::process::exit(0);
}

/// The running command has changes to undo: from now on an end request
/// sets [`stopping`] instead of exiting.
pub fn undo_on_stop() {
    UNDOES.store(true, Ordering::SeqCst);
}

/// Whether the agent has been asked to end.
pub fn stopping() -> bool {
    STOP.load(Ordering::SeqCst)
}

/// Tells the host the effect is in place: the host waits for this line
/// before it reports the injection done, and passes the text on.
pub fn ready(report: &str) {
    let mut out = std::io::stdout().lock();
    let _ = writeln!(out, "ready: {report}");
    let _ = out.flush();
}
