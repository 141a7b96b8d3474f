//! `faultline:plugin/clock`: time, with waits capped by the call's deadline.

use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use crate::bindings::faultline::plugin::clock as wit;
use crate::state::StoreState;

pub(crate) struct ClockSlot {
    /// When the current call must end; a sleep never runs past it.
    pub deadline: Instant,
    pub origin: Instant,
}

impl ClockSlot {
    pub(crate) fn new() -> Self {
        ClockSlot { deadline: Instant::now(), origin: Instant::now() }
    }
}

impl wit::Host for ClockSlot {
    async fn now_ms(&mut self) -> wasmtime::Result<u64> {
        let now = SystemTime::now().duration_since(UNIX_EPOCH).unwrap_or_default();
        Ok(now.as_millis() as u64)
    }

    async fn monotonic_ms(&mut self) -> wasmtime::Result<u64> {
        Ok(self.origin.elapsed().as_millis() as u64)
    }

    async fn sleep_ms(&mut self, ms: u32) -> wasmtime::Result<()> {
        let left = self.deadline.saturating_duration_since(Instant::now());
        tokio::time::sleep(Duration::from_millis(ms.into()).min(left)).await;
        Ok(())
    }
}

struct HasClock;
impl wasmtime::component::HasData for HasClock {
    type Data<'a> = &'a mut ClockSlot;
}

pub(crate) fn link(linker: &mut wasmtime::component::Linker<StoreState>) -> wasmtime::Result<()> {
    wit::add_to_linker::<StoreState, HasClock>(linker, |s| &mut s.caps.clock)
}
