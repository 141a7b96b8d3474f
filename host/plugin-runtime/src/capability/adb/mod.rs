//! `faultline:plugin/adb`: Android devices through an adb server, within
//! scope: only the devices the experiment's targets run on, and on them
//! only the targets' packages. An Android target's id is
//! `<serial>/<package>`, so a revert from a journal row (which keeps only
//! the target's id) still knows its device and app. A shell command is
//! free text, so it is read first (`commands`): one plain command of
//! Android's own tools, naming no other package.

mod commands;

use std::sync::Arc;

use async_trait::async_trait;

use super::{CapResult, HostCapabilities, NotConfigured};
use crate::bindings::faultline::plugin::adb as wit;
use crate::model::CapabilityError;
use crate::scope::Scope;
use crate::state::StoreState;

pub use commands::{check_console, check_shell, words};
pub use wit::{Device, RevertCommand, ShellOutput};

type WitResult<T> = wasmtime::Result<Result<T, wit::CapabilityError>>;

/// What the host offers plugins on Android. The slot below has checked the
/// scope before any of these is called.
#[async_trait]
pub trait Adb: Send + Sync {
    async fn devices(&self) -> CapResult<Vec<Device>>;
    async fn shell(&self, serial: String, command: String, timeout_ms: u32) -> CapResult<ShellOutput>;
    async fn install(&self, serial: String, apk: String, replace: bool) -> CapResult<()>;
    async fn emulator_console(&self, serial: String, command: String) -> CapResult<String>;
    async fn arm_watchdog(&self, serial: String, commands: Vec<RevertCommand>, ttl_seconds: u32) -> CapResult<String>;
    async fn disarm_watchdog(&self, serial: String, id: String) -> CapResult<()>;
    /// The package of an uploaded APK, for the scope check of an install.
    async fn apk_package(&self, apk: &str) -> CapResult<String>;
}

#[async_trait]
impl Adb for NotConfigured {
    async fn devices(&self) -> CapResult<Vec<Device>> {
        self.refuse()
    }
    async fn shell(&self, _: String, _: String, _: u32) -> CapResult<ShellOutput> {
        self.refuse()
    }
    async fn install(&self, _: String, _: String, _: bool) -> CapResult<()> {
        self.refuse()
    }
    async fn emulator_console(&self, _: String, _: String) -> CapResult<String> {
        self.refuse()
    }
    async fn arm_watchdog(&self, _: String, _: Vec<RevertCommand>, _: u32) -> CapResult<String> {
        self.refuse()
    }
    async fn disarm_watchdog(&self, _: String, _: String) -> CapResult<()> {
        self.refuse()
    }
    async fn apk_package(&self, _: &str) -> CapResult<String> {
        self.refuse()
    }
}

/// A watchdog id: `wd-` and hex digits (it ends up in a device's command line).
pub fn is_watchdog_id(id: &str) -> bool {
    id.strip_prefix("wd-").is_some_and(|rest| !rest.is_empty() && rest.len() <= 64 && rest.bytes().all(|b| b.is_ascii_hexdigit()))
}

/// One instance's adb: the host's implementation behind its scope.
pub(crate) struct AdbSlot {
    host: Arc<dyn Adb>,
    scope: Scope,
}

impl AdbSlot {
    pub(crate) fn new(caps: &HostCapabilities, scope: &Scope) -> Self {
        AdbSlot { host: caps.adb.clone(), scope: scope.clone() }
    }

    /// The packages of the targets on a device.
    fn packages_on(&self, serial: &str) -> Vec<&str> {
        self.scope.targets().iter().filter_map(|t| t.split_once('/')).filter(|(device, _)| *device == serial).map(|(_, package)| package).collect()
    }

    fn in_scope(&self, serial: &str) -> bool {
        !self.packages_on(serial).is_empty()
    }

    /// The scope check of every call on a device.
    fn device(&self, serial: &str) -> CapResult<()> {
        match self.in_scope(serial) {
            true => Ok(()),
            false => Err(CapabilityError::Denied(format!("device `{serial}` runs none of this experiment's targets"))),
        }
    }

    /// The scope check of a shell command: its device, and what it names there.
    fn shell_command(&self, serial: &str, command: &str) -> CapResult<()> {
        self.device(serial)?;
        check_shell(command, &self.packages_on(serial)).map_err(|why| CapabilityError::Denied(format!("`{command}`: {why}")))
    }

    fn console_command(&self, serial: &str, command: &str) -> CapResult<()> {
        self.device(serial)?;
        check_console(command).map_err(CapabilityError::Denied)
    }
}

fn wit<T>(r: CapResult<T>) -> WitResult<T> {
    Ok(r.map_err(Into::into))
}

impl wit::Host for AdbSlot {
    async fn devices(&mut self) -> WitResult<Vec<Device>> {
        wit(self.host.devices().await.map(|all| all.into_iter().filter(|d| self.in_scope(&d.serial)).collect()))
    }
    async fn shell(&mut self, serial: String, command: String, timeout_ms: u32) -> WitResult<ShellOutput> {
        wit(async { self.shell_command(&serial, &command)?; self.host.shell(serial, command, timeout_ms).await }.await)
    }
    async fn install(&mut self, serial: String, apk: String, replace: bool) -> WitResult<()> {
        wit(async {
            self.device(&serial)?;
            let package = self.host.apk_package(&apk).await?;
            if !self.packages_on(&serial).contains(&package.as_str()) {
                return Err(CapabilityError::Denied(format!("APK `{apk}` is {package}, none of this experiment's targets")));
            }
            self.host.install(serial, apk, replace).await
        }
        .await)
    }
    async fn emulator_console(&mut self, serial: String, command: String) -> WitResult<String> {
        wit(async { self.console_command(&serial, &command)?; self.host.emulator_console(serial, command).await }.await)
    }
    async fn arm_watchdog(&mut self, serial: String, commands: Vec<RevertCommand>, ttl_seconds: u32) -> WitResult<String> {
        wit(async {
            for command in &commands {
                match command {
                    RevertCommand::Shell(c) => self.shell_command(&serial, c)?,
                    RevertCommand::Console(c) => self.console_command(&serial, c)?,
                }
            }
            self.host.arm_watchdog(serial, commands, ttl_seconds).await
        }
        .await)
    }
    async fn disarm_watchdog(&mut self, serial: String, id: String) -> WitResult<()> {
        wit(async {
            self.device(&serial)?;
            if !is_watchdog_id(&id) {
                return Err(CapabilityError::Denied(format!("`{id}` is not a watchdog id")));
            }
            self.host.disarm_watchdog(serial, id).await
        }
        .await)
    }
}

struct HasAdb;
impl wasmtime::component::HasData for HasAdb {
    type Data<'a> = &'a mut AdbSlot;
}

pub(crate) fn link(linker: &mut wasmtime::component::Linker<StoreState>) -> wasmtime::Result<()> {
    wit::add_to_linker::<StoreState, HasAdb>(linker, |s| &mut s.caps.adb)
}

#[cfg(test)]
mod tests {
    use wit::Host as _;

    use super::*;

    #[tokio::test]
    async fn only_the_devices_of_the_targets_are_reachable() {
        let scope = Scope::experiment("exp-1", ["emulator-5554/com.shop".to_string()]);
        let mut slot = AdbSlot::new(&HostCapabilities::default(), &scope);
        let other = slot.shell("emulator-5556".into(), "reboot".into(), 1000).await.unwrap();
        assert!(matches!(other, Err(wit::CapabilityError::Denied(_))), "{other:?}");
        let own = slot.shell("emulator-5554".into(), "pidof com.shop".into(), 1000).await.unwrap();
        assert!(matches!(own, Err(wit::CapabilityError::Unavailable(_))), "passed the scope to an unconfigured host: {own:?}");
        let none = AdbSlot::new(&HostCapabilities::default(), &Scope::none());
        assert!(!none.in_scope("emulator-5554"));
    }

    #[tokio::test]
    async fn on_its_device_a_plugin_reaches_only_its_apps_and_plain_commands() {
        let scope = Scope::experiment("exp-1", ["emulator-5554/com.shop".to_string()]);
        let mut slot = AdbSlot::new(&HostCapabilities::default(), &scope);
        let denied = |r: &WitResult<ShellOutput>| matches!(r, Ok(Err(wit::CapabilityError::Denied(_))));
        assert!(denied(&slot.shell("emulator-5554".into(), "am force-stop com.bank".into(), 1000).await));
        assert!(denied(&slot.shell("emulator-5554".into(), "am force-stop com.shop; reboot".into(), 1000).await));
        let watchdog = slot.arm_watchdog("emulator-5554".into(), vec![RevertCommand::Shell("pm uninstall com.bank".into())], 60).await.unwrap();
        assert!(matches!(watchdog, Err(wit::CapabilityError::Denied(_))), "{watchdog:?}");
        let console = slot.emulator_console("emulator-5554".into(), "kill".into()).await.unwrap();
        assert!(matches!(console, Err(wit::CapabilityError::Denied(_))), "{console:?}");
        let disarm = slot.disarm_watchdog("emulator-5554".into(), "wd-1; reboot".into()).await.unwrap();
        assert!(matches!(disarm, Err(wit::CapabilityError::Denied(_))), "{disarm:?}");
        assert!(is_watchdog_id("wd-0123abcd") && !is_watchdog_id("wd-") && !is_watchdog_id("0123"));
    }
}
