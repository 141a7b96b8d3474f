//! Reverting from the journal. A revert that fails leaves its row open; the
//! reconciler retries it with backoff until it is reverted or the fault's
//! own time-to-live has ended it. The same step serves the start-up
//! recovery and a run that broke.

use std::time::Duration;

use faultline_plugin_runtime::{CallError, Scope};
use faultline_plugin_runtime::model::FaultError;

use faultline_plugin_runtime::model::Platform as PlatformKind;

use super::Engine;
use crate::platforms::Resource;
use crate::store::{InjectionRow, InjectionState, StoreError, now_ms};

/// How often the reconciler looks for due retries.
const TICK: Duration = Duration::from_secs(1);
/// How long one revert attempt holds a row against other attempts; past
/// it (a host that died mid-attempt) the row is fair game again.
const CLAIM_MS: i64 = 120_000;
/// Backoff between attempts: 1 s, doubling, at most a minute.
const FIRST_BACKOFF_MS: i64 = 1000;
const MAX_BACKOFF_MS: i64 = 60_000;

/// What an experiment's end says of the targets whose faults are still open.
pub(super) fn left_open(targets: &[String]) -> Option<String> {
    (!targets.is_empty()).then(|| format!("could not revert on {}; the reconciler retries until reverted or expired", targets.join(", ")))
}

/// When a row handed to the reconciler is first retried.
pub(super) fn first_retry_at() -> i64 {
    now_ms() + FIRST_BACKOFF_MS
}

/// The next attempt after `attempts` failures; never past the row's
/// expiry, when it is closed as ended by its time-to-live.
fn retry_at(attempts: i64, expires_at: Option<i64>) -> i64 {
    let next = now_ms() + (FIRST_BACKOFF_MS << attempts.clamp(0, 6)).min(MAX_BACKOFF_MS);
    expires_at.map_or(next, |at| next.min(at))
}

/// What became of an open journal row.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Settled {
    Reverted,
    /// Past its time-to-live: the effect ended itself.
    Expired,
    /// The driver never returned a token; its time-to-live ends the effect.
    NoToken,
    /// The revert failed again; the reconciler tries later.
    Retrying,
    /// Another attempt holds the row, or it is closed already.
    Held,
}

impl Engine {
    /// Reverts one journaled injection from its token alone, with the
    /// plugin build that made it (or, when that build is gone, the plugin
    /// of that name loaded now).
    async fn revert_from_journal(&self, row: &InjectionRow, token: &str) -> Result<(), String> {
        if let Some(kind) = row.plugin.strip_prefix(super::PLATFORM_ROW) {
            let resource: Resource = serde_json::from_str(token).map_err(|e| format!("the journaled resource is unreadable: {e}"))?;
            let platform = PlatformKind::parse(kind)
                .and_then(|k| self.inner.platforms.get(k))
                .ok_or_else(|| format!("the {kind} platform is not served by this host; the release waits for it"))?;
            return platform.release(&resource).await;
        }
        let entry = self
            .plugins()
            .build(&row.plugin, row.plugin_digest.as_deref())
            .await
            .ok_or_else(|| format!("plugin `{}` is not loaded; the revert waits for it", row.plugin))?;
        // Scoped to the one target the row names, as the run that made it was.
        let scope = Scope::experiment(&row.experiment_id, [row.target_id.clone()]);
        let mut instance = entry.plugin.instantiate(scope).await.map_err(|e| e.to_string())?;
        match instance.revert(token).await {
            Ok(()) | Err(CallError::Fault(FaultError::TargetUnavailable(_))) => Ok(()),
            Err(e) => Err(e.to_string()),
        }
    }

    /// Settles one open row: reverted, expired, closed without a token, or
    /// back to the reconciler. `how` says who did it, for the timeline;
    /// `label` is the rollback reason in the metrics.
    pub(super) async fn settle_row(&self, row: &InjectionRow, how: &str, label: &str) -> Result<Settled, StoreError> {
        let store = self.store();
        let now = now_ms();
        if !store.journal_claim(&row.id, now, now + CLAIM_MS).await? {
            return Ok(Settled::Held);
        }
        let Some(token) = row.token.as_deref().filter(|_| row.state != InjectionState::Pending.as_str()) else {
            let why = "the driver never returned a revert token; the fault's time-to-live ends it";
            store.journal_close(&row.id, InjectionState::Unknown, Some(why)).await?;
            return Ok(Settled::NoToken);
        };
        if row.expires_at.is_some_and(|at| at <= now_ms()) {
            store.journal_close(&row.id, InjectionState::Expired, Some("never reverted; its time-to-live has ended it")).await?;
            store.add_event(&row.experiment_id, "expired", &format!("{}: never reverted, but past its time-to-live", row.target_name)).await?;
            self.metrics().rollback(label, "expired");
            return Ok(Settled::Expired);
        }
        match self.revert_from_journal(row, token).await {
            Ok(()) => {
                store.journal_close(&row.id, InjectionState::Reverted, None).await?;
                store.add_event(&row.experiment_id, "reverted", &format!("{} ({how})", row.target_name)).await?;
                self.metrics().rollback(label, "reverted");
                Ok(Settled::Reverted)
            }
            Err(e) => {
                store.journal_retry(&row.id, token, &e, retry_at(row.attempts, row.expires_at)).await?;
                self.metrics().rollback(label, "failed");
                Ok(Settled::Retrying)
            }
        }
    }

    /// One pass: every due retry and every open row no run holds any more,
    /// then the retired plugin builds that neither an open row nor a
    /// running experiment needs. Returns how many rows it closed.
    pub async fn reconcile_once(&self) -> Result<usize, StoreError> {
        let mut closed = 0;
        for row in self.store().due_open_injections(now_ms()).await? {
            // A running experiment's pending and active rows are its run's.
            if row.state != InjectionState::Retrying.as_str() && self.is_running(&row.experiment_id) {
                continue;
            }
            if matches!(self.settle_row(&row, "by the reconciler", "reconciler").await?, Settled::Reverted | Settled::Expired | Settled::NoToken) {
                closed += 1;
            }
        }
        for digest in self.plugins().retired() {
            if !self.build_running(&digest) && !self.store().build_has_open_injections(&digest).await? {
                self.plugins().release(&digest);
            }
        }
        Ok(closed)
    }

    /// Runs the reconciler until the host shuts down.
    pub fn spawn_reconciler(&self) {
        let engine = self.clone();
        self.inner.tasks.spawn(async move {
            loop {
                tokio::select! {
                    () = tokio::time::sleep(TICK) => {}
                    () = engine.inner.closing.cancelled() => return,
                }
                if let Err(e) = engine.reconcile_once().await {
                    tracing::warn!("reconciler: {e}");
                }
            }
        });
    }
}
