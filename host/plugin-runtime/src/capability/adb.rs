//! `faultline:plugin/adb`: Android devices through an adb server.

use std::sync::Arc;

use async_trait::async_trait;

use super::{CapResult, NotConfigured};
use crate::bindings::faultline::plugin::adb as wit;
use crate::state::StoreState;

pub use wit::{Device, ShellOutput};

type WitResult<T> = wasmtime::Result<Result<T, wit::CapabilityError>>;

/// What the host offers plugins on Android.
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

pub(crate) struct AdbSlot(pub Arc<dyn Adb>);

impl wit::Host for AdbSlot {
    async fn devices(&mut self) -> WitResult<Vec<Device>> {
        Ok(self.0.devices().await.map_err(Into::into))
    }
    async fn shell(&mut self, serial: String, command: String, timeout_ms: u32) -> WitResult<ShellOutput> {
        Ok(self.0.shell(serial, command, timeout_ms).await.map_err(Into::into))
    }
    async fn install(&mut self, serial: String, apk: String, replace: bool) -> WitResult<()> {
        Ok(self.0.install(serial, apk, replace).await.map_err(Into::into))
    }
    async fn emulator_console(&mut self, serial: String, command: String) -> WitResult<String> {
        Ok(self.0.emulator_console(serial, command).await.map_err(Into::into))
    }
}

struct HasAdb;
impl wasmtime::component::HasData for HasAdb {
    type Data<'a> = &'a mut AdbSlot;
}

pub(crate) fn link(linker: &mut wasmtime::component::Linker<StoreState>) -> wasmtime::Result<()> {
    wit::add_to_linker::<StoreState, HasAdb>(linker, |s| &mut s.adb)
}
