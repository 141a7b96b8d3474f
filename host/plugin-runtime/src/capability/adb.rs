//! `faultline:plugin/adb`: Android devices through an adb server, within
//! scope: only the devices the experiment's targets run on. An Android
//! target's id is `<serial>/<package>`, so a revert from a journal row
//! (which keeps only the target's id) still knows its device. A shell
//! command is free text, so the scope stops at the device, not the package.

use std::sync::Arc;

use async_trait::async_trait;

use super::{CapResult, HostCapabilities, NotConfigured};
use crate::bindings::faultline::plugin::adb as wit;
use crate::model::CapabilityError;
use crate::scope::Scope;
use crate::state::StoreState;

pub use wit::{Device, ShellOutput};

type WitResult<T> = wasmtime::Result<Result<T, wit::CapabilityError>>;

/// What the host offers plugins on Android. The slot below has checked the
/// scope before any of these is called.
#[async_trait]
pub trait Adb: Send + Sync {
    async fn devices(&self) -> CapResult<Vec<Device>>;
    async fn shell(&self, serial: String, command: String, timeout_ms: u32) -> CapResult<ShellOutput>;
    async fn install(&self, serial: String, apk: String, replace: bool) -> CapResult<()>;
    async fn emulator_console(&self, serial: String, command: String) -> CapResult<String>;
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

    fn in_scope(&self, serial: &str) -> bool {
        self.scope.targets().iter().any(|t| t.split_once('/').is_some_and(|(device, _)| device == serial))
    }

    /// The scope check of every call on a device.
    fn device(&self, serial: &str) -> CapResult<()> {
        match self.in_scope(serial) {
            true => Ok(()),
            false => Err(CapabilityError::Denied(format!("device `{serial}` runs none of this experiment's targets"))),
        }
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
        wit(async { self.device(&serial)?; self.host.shell(serial, command, timeout_ms).await }.await)
    }
    async fn install(&mut self, serial: String, apk: String, replace: bool) -> WitResult<()> {
        wit(async { self.device(&serial)?; self.host.install(serial, apk, replace).await }.await)
    }
    async fn emulator_console(&mut self, serial: String, command: String) -> WitResult<String> {
        wit(async { self.device(&serial)?; self.host.emulator_console(serial, command).await }.await)
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
        let own = slot.shell("emulator-5554".into(), "true".into(), 1000).await.unwrap();
        assert!(matches!(own, Err(wit::CapabilityError::Unavailable(_))), "passed the scope to an unconfigured host: {own:?}");
        let none = AdbSlot::new(&HostCapabilities::default(), &Scope::none());
        assert!(!none.in_scope("emulator-5554"));
    }
}
