//! Retention: stored samples, events and audit rows do not grow without
//! bound. What is older than the operator's setting (`--retention-days`)
//! is deleted at start and then every hour; the experiments themselves and
//! the journal are kept.

use std::time::Duration;

use super::Engine;
use crate::store::now_ms;

/// How often old rows are pruned.
const EVERY: Duration = Duration::from_secs(3600);

impl Engine {
    /// Prunes what is older than `keep` now and every hour until shutdown;
    /// `None` keeps everything.
    pub fn spawn_pruning(&self, keep: Option<Duration>) {
        let Some(keep) = keep else { return };
        let engine = self.clone();
        self.inner.tasks.spawn(async move {
            loop {
                let before = now_ms() - keep.as_millis() as i64;
                match engine.store().prune(before).await {
                    Ok(0) => {}
                    Ok(n) => tracing::info!(rows = n, "pruned samples, events and audit rows past their retention"),
                    Err(e) => tracing::warn!("pruning: {e}"),
                }
                tokio::select! {
                    () = tokio::time::sleep(EVERY) => {}
                    () = engine.inner.closing.cancelled() => return,
                }
            }
        });
    }
}
