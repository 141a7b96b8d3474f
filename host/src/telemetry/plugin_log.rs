//! Plugin logs: every line goes to the host's logs; what a plugin says at
//! info level or above during an experiment also joins that experiment's
//! timeline, so its status shows, for example, which kernel mechanism a
//! network fault used.

use std::sync::Arc;

use faultline_plugin_runtime::capability::log::{Level, LogSink};

use crate::store::Store;

pub struct ExperimentLog {
    pub store: Store,
    pub inner: Arc<dyn LogSink>,
}

impl LogSink for ExperimentLog {
    fn write(&self, plugin: &str, experiment: Option<&str>, level: Level, message: &str) {
        self.inner.write(plugin, experiment, level, message);
        let (Some(experiment), false, Ok(runtime)) = (experiment, matches!(level, Level::Debug), tokio::runtime::Handle::try_current())
        else {
            return;
        };
        let (store, experiment, detail) = (self.store.clone(), experiment.to_string(), format!("{plugin}: {message}"));
        runtime.spawn(async move {
            if let Err(e) = store.add_event(&experiment, "plugin", &detail).await {
                tracing::warn!(%experiment, "recording a plugin's log line: {e}");
            }
        });
    }
}
