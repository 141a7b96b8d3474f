//! `faultline:plugin/log`: plugin logs, attributed to plugin and experiment.

use std::sync::Arc;

use crate::bindings::faultline::plugin::log as wit;
use crate::state::StoreState;

pub use wit::Level;

/// Longest message kept; a plugin cannot flood the host's logs with one call.
const MAX_MESSAGE: usize = 4096;

/// Where plugin logs go.
pub trait LogSink: Send + Sync {
    fn write(&self, plugin: &str, experiment: Option<&str>, level: Level, message: &str);
}

/// The default sink: the host's tracing logs.
pub struct TracingLog;

impl LogSink for TracingLog {
    fn write(&self, plugin: &str, experiment: Option<&str>, level: Level, message: &str) {
        let experiment = experiment.unwrap_or("-");
        match level {
            Level::Debug => tracing::debug!(plugin, experiment, "{message}"),
            Level::Info => tracing::info!(plugin, experiment, "{message}"),
            Level::Warn => tracing::warn!(plugin, experiment, "{message}"),
            Level::Error => tracing::error!(plugin, experiment, "{message}"),
        }
    }
}

pub(crate) struct LogSlot {
    pub sink: Arc<dyn LogSink>,
    pub plugin: Arc<str>,
    pub experiment: Option<String>,
}

impl wit::Host for LogSlot {
    async fn write(&mut self, level: Level, message: String) -> wasmtime::Result<()> {
        let mut end = message.len().min(MAX_MESSAGE);
        while !message.is_char_boundary(end) {
            end -= 1;
        }
        self.sink.write(&self.plugin, self.experiment.as_deref(), level, &message[..end]);
        Ok(())
    }
}

struct HasLog;
impl wasmtime::component::HasData for HasLog {
    type Data<'a> = &'a mut LogSlot;
}

pub(crate) fn link(linker: &mut wasmtime::component::Linker<StoreState>) -> wasmtime::Result<()> {
    wit::add_to_linker::<StoreState, HasLog>(linker, |s| &mut s.log)
}
