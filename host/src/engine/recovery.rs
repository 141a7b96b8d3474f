//! At start: undo what a previous process left in the journal, and close
//! the experiments it was running.

use serde::Serialize;

use super::Engine;
use super::reconcile::Settled;
use crate::store::StoreError;

/// What the start-up recovery found and did.
#[derive(Debug, Default, Clone, Serialize)]
pub struct RecoveryReport {
    /// Injections reverted from their journaled tokens.
    pub reverted: usize,
    /// Injections whose driver never returned a token: their time-to-live ends them.
    pub without_token: usize,
    /// Injections past their time-to-live: they ended themselves.
    pub expired: usize,
    /// Injections that could not be reverted now; the reconciler retries them.
    pub still_open: usize,
    /// Experiments that were running when the previous process ended.
    pub interrupted_experiments: usize,
}

impl Engine {
    /// Runs once at start, before the API serves.
    pub async fn recover(&self) -> Result<RecoveryReport, StoreError> {
        let store = self.store();
        let mut report = RecoveryReport::default();
        for row in store.open_injections().await? {
            match self.settle_row(&row, "from the journal, at restart", "restart").await? {
                Settled::Reverted => report.reverted += 1,
                Settled::NoToken => report.without_token += 1,
                Settled::Expired => report.expired += 1,
                Settled::Retrying | Settled::Held => report.still_open += 1,
            }
        }
        for experiment in store.experiments_in_state("running").await? {
            if self.is_running(&experiment.id) {
                continue;
            }
            let error = format!(
                "the host stopped during this experiment (in phase {}); its faults were reverted from the journal at restart",
                experiment.phase
            );
            store.add_event(&experiment.id, "interrupted", &error).await?;
            store.finish_experiment(&experiment.id, "failed", None, None, Some(&error), Some("host restart")).await?;
            report.interrupted_experiments += 1;
        }
        if report.reverted + report.without_token + report.expired + report.still_open + report.interrupted_experiments > 0 {
            tracing::warn!(?report, "recovered from a previous run");
        }
        Ok(report)
    }
}
