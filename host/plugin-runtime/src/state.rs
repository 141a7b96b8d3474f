//! What one store (one plugin instance) holds: WASI with nothing ambient,
//! its limits, and one slot per capability, bound to the instance's scope.

use std::time::Instant;

use wasmtime::ResourceLimiter;
use wasmtime::component::ResourceTable;
use wasmtime_wasi::{WasiCtx, WasiCtxView, WasiView};

use crate::bindings;
use crate::capability::Slots;

pub struct StoreState {
    pub(crate) wasi: WasiCtx,
    pub(crate) table: ResourceTable,
    pub(crate) limits: Limits,
    pub(crate) caps: Slots,
}

impl WasiView for StoreState {
    fn ctx(&mut self) -> WasiCtxView<'_> {
        WasiCtxView { ctx: &mut self.wasi, table: &mut self.table }
    }
}

// `types` holds only types, but it is still an import to link.
impl bindings::types::Host for StoreState {}

/// Caps an instance's memory and tables, and remembers whether the memory
/// cap is what stopped it, so a failure can say so.
pub(crate) struct Limits {
    pub memory_bytes: usize,
    pub memory_cap_hit: bool,
}

/// Most table elements an instance may hold; far above what a driver needs.
const MAX_TABLE_ELEMENTS: usize = 100_000;

impl ResourceLimiter for Limits {
    fn memory_growing(&mut self, _current: usize, desired: usize, _max: Option<usize>) -> wasmtime::Result<bool> {
        if desired > self.memory_bytes {
            self.memory_cap_hit = true;
            wasmtime::bail!("memory cap of {} bytes reached", self.memory_bytes);
        }
        Ok(true)
    }

    fn table_growing(&mut self, _current: usize, desired: usize, _max: Option<usize>) -> wasmtime::Result<bool> {
        Ok(desired <= MAX_TABLE_ELEMENTS)
    }
}

/// Marks the error that the epoch callback raises at a call's deadline.
#[derive(Debug)]
pub(crate) struct DeadlineReached;

impl std::fmt::Display for DeadlineReached {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("deadline reached")
    }
}

impl std::error::Error for DeadlineReached {}

impl StoreState {
    pub(crate) fn deadline(&self) -> Instant {
        self.caps.clock.deadline
    }
}
