//! Every run is supervised. Whatever goes wrong inside it (a panic, a call
//! that never returns, a store that refused the last write), the experiment
//! must not stay `running` and no fault may stay in place: a run that
//! panics or outlives its planned end plus the margin is cut off, and
//! everything its journal holds open is reverted from there.

use std::sync::Arc;
use std::time::Duration;

use faultline_plugin_runtime::model::Target;
use futures_util::StreamExt;
use tokio::task::JoinError;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use super::run::Run;
use super::{Engine, Interrupt};
use crate::platforms::Platform;

/// What the supervisor needs of a run once the run itself is gone.
pub(super) struct Supervised {
    pub id: String,
    pub planned: Duration,
    pub cancel: CancellationToken,
    pub interrupt: Arc<std::sync::Mutex<Option<Interrupt>>>,
    pub platform: Arc<dyn Platform>,
    pub targets: Vec<Target>,
}

impl Engine {
    /// Runs `run` to its end. It is cut off at its planned end plus the
    /// margin, or a margin after a stop asked it to end; a run cut off or
    /// panicked is settled from the journal as `failed`.
    pub(super) async fn supervise(&self, run: Run, s: Supervised) {
        let margin = self.inner.run_margin;
        let deadline = Instant::now() + s.planned + margin;
        let mut handle = tokio::spawn(run.run());
        let stop_overdue = async {
            s.cancel.cancelled().await;
            tokio::time::sleep(margin).await;
        };
        let overdue = tokio::select! {
            // A run that has ended wins a tie with its deadline.
            biased;
            joined = &mut handle => Err(joined.err().map(panic_reason)),
            () = tokio::time::sleep_until(deadline) => Ok(format!("the run was still going {margin:?} after its planned end; cut off")),
            () = stop_overdue => Ok(format!("the run had not rolled back {margin:?} after it was asked to end; cut off")),
        };
        let broken = match overdue {
            Ok(reason) => {
                handle.abort();
                let _ = handle.await;
                Some(reason)
            }
            Err(panicked) => panicked,
        };
        let reason = match broken {
            Some(reason) => reason,
            // The run ended; make sure it said so.
            None => match self.store().experiment(&s.id).await {
                Ok(Some(row)) if row.state == "running" => "the run ended without recording its end".to_string(),
                _ => return,
            },
        };
        self.settle_broken(&s, &reason).await;
    }

    /// Rolls back what a broken run's journal holds, frees its targets and
    /// ends it `failed` with the reason.
    async fn settle_broken(&self, s: &Supervised, reason: &str) {
        tracing::error!(experiment = %s.id, "{reason}; rolling back from the journal");
        self.metrics().broken_run();
        let store = self.store();
        let _ = store.add_event(&s.id, "failed", reason).await;
        let open = store.open_injections_of(&s.id).await.unwrap_or_default();
        // As many at once as a run's own rollback; what fails or is skipped
        // here stays open for the reconciler.
        let mut settles = futures_util::stream::FuturesUnordered::new();
        let mut settled = vec![];
        for row in &open {
            if settles.len() == super::fan_out::LANES
                && let Some(done) = settles.next().await
            {
                settled.push(done);
            }
            settles.push(self.settle_row(row, "by the supervisor", "failure"));
        }
        while let Some(done) = settles.next().await {
            settled.push(done);
        }
        if let Some(Err(e)) = settled.iter().find(|r| r.is_err()) {
            tracing::error!(experiment = %s.id, "journal: {e}");
        }
        s.platform.unwatch(&s.id, &s.targets).await;
        let left: Vec<String> = store.open_injections_of(&s.id).await.unwrap_or_default().into_iter().map(|r| r.target_name).collect();
        let mut error = reason.to_string();
        if let Some(note) = super::reconcile::left_open(&left) {
            error = format!("{error}; {note}");
        }
        let stop_reason = s.interrupt.lock().expect("interrupt lock").as_ref().map(Interrupt::reason);
        let _ = store.add_event(&s.id, "phase", "completed").await;
        if let Err(e) = store.finish_experiment(&s.id, "failed", None, None, Some(&error), stop_reason.as_deref()).await {
            tracing::error!(experiment = %s.id, "could not record the end of a broken run: {e}");
        }
    }
}

/// What a run that did not return left: its panic message, if it panicked.
fn panic_reason(e: JoinError) -> String {
    if !e.is_panic() {
        return "the run was cancelled".into();
    }
    let payload = e.into_panic();
    let message = payload
        .downcast_ref::<&str>()
        .map(|s| s.to_string())
        .or_else(|| payload.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "no message".into());
    format!("the run failed inside the host (panic: {message})")
}
