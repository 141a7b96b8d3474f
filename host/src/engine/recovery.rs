//! At start: undo what a previous process left in the journal, and close
//! the experiments it was running.

use serde::Serialize;

use super::Engine;
use crate::store::{InjectionState, StoreError};

/// What the start-up recovery found and did.
#[derive(Debug, Default, Clone, Serialize)]
pub struct RecoveryReport {
    /// Injections reverted from their journaled tokens.
    pub reverted: usize,
    /// Injections whose driver never returned a token: their time-to-live ends them.
    pub without_token: usize,
    /// Injections that could not be reverted now; they stay in the journal.
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
            let Some(token) = row.token.as_deref().filter(|_| row.state == "active") else {
                let why = "the host stopped before the driver returned a revert token; the fault's time-to-live ends it";
                store.journal_close(&row.id, InjectionState::Unknown, Some(why)).await?;
                report.without_token += 1;
                continue;
            };
            let Some(entry) = self.plugins().plugin(&row.plugin) else {
                store.journal_note(&row.id, &format!("plugin `{}` is not loaded; revert deferred", row.plugin)).await?;
                report.still_open += 1;
                continue;
            };
            let outcome = match entry.plugin.instantiate(Some(&row.experiment_id)).await {
                Ok(mut instance) => instance.revert(token).await.map_err(|e| e.to_string()),
                Err(e) => Err(e.to_string()),
            };
            match outcome {
                Ok(()) => {
                    store.journal_close(&row.id, InjectionState::Reverted, None).await?;
                    store.add_event(&row.experiment_id, "reverted", &format!("{} (from the journal, at restart)", row.target_name)).await?;
                    self.metrics().rollback("restart", "reverted");
                    report.reverted += 1;
                }
                Err(e) => {
                    store.journal_note(&row.id, &e).await?;
                    self.metrics().rollback("restart", "failed");
                    report.still_open += 1;
                }
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
        if report.reverted + report.without_token + report.still_open + report.interrupted_experiments > 0 {
            tracing::warn!(?report, "recovered from a previous run");
        }
        Ok(report)
    }
}
