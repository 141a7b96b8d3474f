//! Which device an experiment runs on, and holding it: a connected device
//! (the one named by `--adb-serial` / `ANDROID_SERIAL`, else the first
//! online one no other experiment holds), or an emulator the host launches
//! when the SDK's `emulator` binary is configured. An experiment holds a
//! lease on its device until it ends; a launched emulator is the
//! experiment's own and is shut down with it.

use std::collections::HashMap;
use std::net::TcpListener;
use std::path::Path;
use std::process::Stdio;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use faultline_plugin_runtime::model::CapabilityError;

use super::options::Settings;
use crate::capabilities::adb::AdbHost;
use crate::platforms::ResolveError;

/// Console ports the emulator accepts (`-port`): even, from 5554.
const EMULATOR_PORTS: std::ops::RangeInclusive<u16> = 5554..=5682;
/// How often a booting device is asked whether it is done.
const BOOT_POLL: Duration = Duration::from_millis(250);

/// Where an experiment will run.
#[derive(Debug, Clone, PartialEq)]
pub enum Placement {
    /// A device the adb server already lists.
    Connected { serial: String },
    /// An emulator to launch with this console port (its serial is `emulator-<port>`).
    Launch { port: u16, avd: String },
}

impl Placement {
    pub fn serial(&self) -> String {
        match self {
            Placement::Connected { serial } => serial.clone(),
            Placement::Launch { port, .. } => format!("emulator-{port}"),
        }
    }
}

/// Which experiment holds each device.
#[derive(Default)]
pub struct Leases(Mutex<HashMap<String, String>>);

impl Leases {
    /// Takes a device for an experiment; the holder's id if another holds it.
    pub fn take(&self, serial: &str, experiment: &str) -> Result<(), String> {
        let mut leases = self.0.lock().expect("leases lock");
        match leases.get(serial) {
            Some(holder) if holder != experiment => Err(holder.clone()),
            _ => {
                leases.insert(serial.into(), experiment.into());
                Ok(())
            }
        }
    }

    pub fn release(&self, serial: &str, experiment: &str) {
        let mut leases = self.0.lock().expect("leases lock");
        if leases.get(serial).is_some_and(|holder| holder == experiment) {
            leases.remove(serial);
        }
    }

    pub fn holder(&self, serial: &str) -> Option<String> {
        self.0.lock().expect("leases lock").get(serial).cloned()
    }
}

fn unavailable(e: CapabilityError) -> ResolveError {
    ResolveError::Unavailable(format!("the adb server cannot be reached: {e}"))
}

/// Picks where an experiment runs, launching nothing yet.
pub async fn place(adb: &AdbHost, settings: &Settings, emulator: Option<&Path>, wanted: Option<&str>, leases: &Leases) -> Result<Placement, ResolveError> {
    if emulator.is_some() {
        let avd = settings.avd.clone().ok_or_else(|| {
            ResolveError::Refused("missing_avd", "an emulator is configured: name the AVD to launch (android_run.avd_name, emulator.name or --emulator-name)".into())
        })?;
        let port = free_console_port(leases)
            .ok_or_else(|| ResolveError::Conflict(format!("no emulator console port is free in {EMULATOR_PORTS:?}")))?;
        return Ok(Placement::Launch { port, avd });
    }
    let devices = adb.devices().await.map_err(unavailable)?;
    let listed = || devices.iter().map(|d| format!("{} ({})", d.serial, d.state)).collect::<Vec<_>>().join(", ");
    if let Some(serial) = wanted {
        return match devices.iter().find(|d| d.serial == serial) {
            Some(d) if d.state == "device" => Ok(Placement::Connected { serial: serial.into() }),
            Some(d) => Err(ResolveError::Refused("no_device", format!("device {serial} is {}, not online", d.state))),
            None => Err(ResolveError::Refused("no_device", format!("device {serial} is not connected to the adb server (it lists: {})", or_none(listed())))),
        };
    }
    let online = devices.iter().filter(|d| d.state == "device");
    match online.clone().find(|d| leases.holder(&d.serial).is_none()) {
        Some(d) => Ok(Placement::Connected { serial: d.serial.clone() }),
        None if online.count() > 0 => Err(ResolveError::Conflict(format!("every connected device is held by another experiment: {}", listed()))),
        None => Err(ResolveError::Refused(
            "no_device",
            format!(
                "no Android device is online at the adb server {} (it lists: {}), and no emulator is configured to launch (--emulator)",
                adb.config().server,
                or_none(listed())
            ),
        )),
    }
}

fn or_none(list: String) -> String {
    if list.is_empty() { "nothing".into() } else { list }
}

/// An even console port whose adb port (the next one) is free too.
fn free_console_port(leases: &Leases) -> Option<u16> {
    EMULATOR_PORTS.step_by(2).find(|port| {
        leases.holder(&format!("emulator-{port}")).is_none()
            && TcpListener::bind(("127.0.0.1", *port)).is_ok()
            && TcpListener::bind(("127.0.0.1", port + 1)).is_ok()
    })
}

/// Launches the emulator as the SDK's tools do, headless unless asked
/// otherwise, in the network profile, and talking to the host's adb
/// server. It dies with the host (the parent-death signal), so a host
/// that dies leaves no emulator behind.
pub fn launch(program: &Path, avd: &str, port: u16, settings: &Settings, adb_server_port: u16) -> std::io::Result<tokio::process::Child> {
    let mut command = tokio::process::Command::new(program);
    command.args(["-avd", avd, "-port", &port.to_string(), "-no-audio", "-no-boot-anim", "-no-snapshot"]);
    command.args(["-netspeed", settings.profile.emulator, "-netdelay", settings.profile.emulator]);
    if settings.headless {
        command.arg("-no-window");
    }
    command.env("ANDROID_ADB_SERVER_PORT", adb_server_port.to_string()).stdin(Stdio::null()).stdout(Stdio::null()).stderr(Stdio::piped()).kill_on_drop(true);
    // SAFETY: prctl(2) in the child before exec, async-signal-safe.
    unsafe {
        command.pre_exec(|| {
            libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGTERM);
            Ok(())
        });
    }
    command.spawn()
}

/// Waits until the device is online and has booted
/// (`getprop sys.boot_completed` is 1).
pub async fn wait_for_boot(adb: &AdbHost, serial: &str, timeout: Duration, mut exited: impl FnMut() -> Option<String>) -> Result<(), String> {
    let deadline = Instant::now() + timeout;
    loop {
        if let Some(why) = exited() {
            return Err(why);
        }
        let online = adb.devices().await.map(|list| list.iter().any(|d| d.serial == serial && d.state == "device")).unwrap_or(false);
        if online
            && let Ok(out) = adb.shell(serial, "getprop sys.boot_completed", Duration::from_secs(10)).await
            && out.stdout.trim() == "1"
        {
            return Ok(());
        }
        if Instant::now() >= deadline {
            return Err(format!("{serial} did not finish booting within {timeout:?}"));
        }
        tokio::time::sleep(BOOT_POLL).await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_lease_is_held_by_one_experiment_until_it_releases_it() {
        let leases = Leases::default();
        leases.take("emulator-5554", "a").unwrap();
        leases.take("emulator-5554", "a").unwrap();
        assert_eq!(leases.take("emulator-5554", "b"), Err("a".into()));
        leases.release("emulator-5554", "b");
        assert_eq!(leases.holder("emulator-5554").as_deref(), Some("a"));
        leases.release("emulator-5554", "a");
        leases.take("emulator-5554", "b").unwrap();
    }

    #[test]
    fn a_free_console_port_is_even_and_skips_leased_emulators() {
        let leases = Leases::default();
        let first = free_console_port(&leases).unwrap();
        assert_eq!(first % 2, 0);
        leases.take(&format!("emulator-{first}"), "x").unwrap();
        assert_ne!(free_console_port(&leases), Some(first));
    }
}
