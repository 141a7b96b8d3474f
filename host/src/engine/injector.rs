//! One fault driver at work in one experiment: the primary fault and each
//! scenario have their own. It injects into targets, several at once, and
//! reverts, journaling every step: a row is pending before its driver is
//! called, active only once its revert token is stored, and a revert that
//! fails twice goes to the reconciler.

use std::sync::Arc;
use std::time::Instant;

use faultline_plugin_runtime::model::{FaultError, Settings, Target};
use faultline_plugin_runtime::{CallError, FaultInstance, Scope};

use super::fan_out::{Call, TokenJournal, fan_out};
use super::reconcile;
use crate::plugins::PluginEntry;
use crate::store::{InjectionRow, InjectionState, Store, now_ms};
use crate::telemetry::Metrics;

/// Attempts at reverting one injection before it goes to the reconciler
/// (each is one plugin call, up to its timeout: the run must stay well
/// within its margin).
const REVERT_ATTEMPTS: u32 = 2;

/// An injection that is in effect.
pub(super) struct Active {
    pub journal_id: String,
    pub target: Target,
    pub token: String,
}

pub(super) struct Injector {
    experiment: String,
    entry: Arc<PluginEntry>,
    /// The fault's name, for the metrics' labels.
    fault: String,
    unit: String,
    scope: Scope,
    ttl_seconds: u32,
    /// The scenario it serves (its index in the plan); none for the primary fault.
    scenario: Option<usize>,
    /// What its events start with: empty for the primary fault.
    label: String,
    instance: Option<FaultInstance>,
    store: Store,
    metrics: Arc<Metrics>,
}

impl Injector {
    #[allow(clippy::too_many_arguments)]
    pub(super) fn new(
        experiment: &str,
        entry: Arc<PluginEntry>,
        unit: &str,
        targets: &[Target],
        ttl_seconds: u32,
        scenario: Option<usize>,
        store: Store,
        metrics: Arc<Metrics>,
    ) -> Self {
        let fault = entry.plugin.info().name.clone();
        let label = scenario.map(|i| format!("scenario {i} ({fault}): ")).unwrap_or_default();
        Injector {
            experiment: experiment.into(),
            scope: Scope::of(experiment, targets),
            entry,
            fault,
            unit: unit.into(),
            ttl_seconds,
            scenario,
            label,
            instance: None,
            store,
            metrics,
        }
    }

    fn plugin(&self) -> &str {
        self.entry.plugin.name()
    }

    /// A usable instance for a single call: the last one, or a fresh one
    /// when it trapped (or a fan-out kept none).
    pub(super) async fn instance(&mut self) -> Result<&mut FaultInstance, CallError> {
        if !self.instance.as_ref().is_some_and(FaultInstance::is_usable) {
            self.instance = Some(self.entry.plugin.instantiate(self.scope.clone()).await?);
        }
        Ok(self.instance.as_mut().expect("just made usable"))
    }

    /// Drops the instance, so the next call starts from a fresh one.
    pub(super) fn release_instance(&mut self) {
        self.instance = None;
    }

    /// Injects into targets, several at once. Returns what took, and the
    /// first failure: every outcome is recorded before it, so what did
    /// take is rolled back. A target that went away is skipped.
    pub(super) async fn inject(&mut self, targets: Vec<Target>, settings: &Settings) -> (Vec<Active>, Option<String>) {
        let level = settings.intensity;
        let mut journal_ids = Vec::with_capacity(targets.len());
        for target in &targets {
            let row = InjectionRow {
                id: uuid::Uuid::new_v4().to_string(),
                experiment_id: self.experiment.clone(),
                plugin: self.plugin().to_string(),
                target_id: target.id.clone(),
                target_name: target.name.clone(),
                intensity: level,
                token: None,
                state: InjectionState::Pending.as_str().into(),
                error: None,
                injected_at: now_ms(),
                reverted_at: None,
                plugin_digest: Some(self.entry.plugin.digest().to_string()),
                expires_at: Some(now_ms() + i64::from(self.ttl_seconds) * 1000),
                attempts: 0,
                next_attempt_at: None,
                scenario: self.scenario.map(|i| i as i64),
            };
            if let Err(e) = self.store.journal_pending(&row).await {
                return (vec![], Some(format!("journal: {e}")));
            }
            journal_ids.push(row.id);
        }
        let calls = targets.iter().map(|t| Call::Inject(t.clone(), settings.clone())).collect();
        let journal = TokenJournal { store: &self.store, rows: &journal_ids, level, failed: Default::default() };
        let outcomes = fan_out(&self.entry.plugin, &self.scope, &mut self.instance, calls, Some(&journal)).await;
        let mut first_failure = journal.failed.into_inner().expect("journal failure lock");
        let mut took = vec![];
        for ((target, journal_id), (outcome, elapsed)) in targets.into_iter().zip(journal_ids).zip(outcomes) {
            self.metrics.plugin_call(self.entry.plugin.name(), "inject", elapsed);
            match outcome.map(Option::unwrap_or_default) {
                Ok(token) => {
                    self.metrics.injection(&self.fault, "injected");
                    self.event("injected", &format!("{} at {level} {}", target.name, self.unit)).await;
                    took.push(Active { journal_id, target, token });
                }
                Err(CallError::Fault(FaultError::TargetUnavailable(why))) => {
                    let _ = self.store.journal_close(&journal_id, InjectionState::Failed, Some(&why)).await;
                    self.metrics.injection(&self.fault, "skipped");
                    self.event("skipped", &format!("{}: {why}", target.name)).await;
                }
                Err(e) => {
                    let _ = self.store.journal_close(&journal_id, InjectionState::Failed, Some(&e.to_string())).await;
                    self.metrics.injection(&self.fault, "failed");
                    first_failure.get_or_insert(format!("{}injecting into {} failed: {e}", self.label, target.name));
                }
            }
        }
        (took, first_failure)
    }

    /// Stores an adjusted injection's new token and level.
    pub(super) async fn adjusted(&mut self, active: &Active, level: f64) -> Result<(), String> {
        self.store.journal_active(&active.journal_id, &active.token, level).await.map_err(|e| format!("journal: {e}"))
    }

    /// Reverts every injection at once; what fails gets `revert_one`'s
    /// retries. Returns the targets that could not be reverted.
    pub(super) async fn revert_all(&mut self, active: Vec<Active>, reason: &str) -> Vec<String> {
        let calls = active.iter().map(|a| Call::Revert(a.token.clone())).collect();
        let outcomes = fan_out(&self.entry.plugin, &self.scope, &mut self.instance, calls, None).await;
        let mut failures = vec![];
        for (active, (outcome, elapsed)) in active.into_iter().zip(outcomes) {
            self.metrics.plugin_call(self.entry.plugin.name(), "revert", elapsed);
            match outcome {
                Ok(_) | Err(CallError::Fault(FaultError::TargetUnavailable(_))) => self.reverted(&active, reason).await,
                Err(_) => {
                    let name = active.target.name.clone();
                    if !self.revert_one(active, reason).await {
                        failures.push(name);
                    }
                }
            }
        }
        failures
    }

    /// Reverts one injection, with a fresh instance when the current one is
    /// unusable. Returns whether it was reverted; if not, the journal row
    /// stays open and goes to the reconciler, which keeps trying.
    pub(super) async fn revert_one(&mut self, active: Active, reason: &str) -> bool {
        let mut last_error = String::new();
        for _ in 0..REVERT_ATTEMPTS {
            let took = Instant::now();
            let outcome = match self.instance().await {
                Ok(instance) => instance.revert(&active.token).await,
                Err(e) => Err(e),
            };
            self.metrics.plugin_call(self.entry.plugin.name(), "revert", took.elapsed());
            match outcome {
                Ok(()) | Err(CallError::Fault(FaultError::TargetUnavailable(_))) => {
                    self.reverted(&active, reason).await;
                    return true;
                }
                Err(e) => last_error = e.to_string(),
            }
        }
        let _ = self.store.journal_retry(&active.journal_id, &active.token, &last_error, reconcile::first_retry_at()).await;
        self.metrics.rollback(reason, "failed");
        self.event("revert_failed", &format!("{}: {last_error}; the reconciler keeps trying", active.target.name)).await;
        false
    }

    async fn reverted(&mut self, active: &Active, reason: &str) {
        let _ = self.store.journal_close(&active.journal_id, InjectionState::Reverted, None).await;
        self.metrics.rollback(reason, "reverted");
        self.event("reverted", &active.target.name).await;
    }

    /// An event on the experiment's timeline, marked with the scenario.
    pub(super) async fn event(&mut self, kind: &str, detail: &str) {
        if let Err(e) = self.store.add_event(&self.experiment, kind, &format!("{}{detail}", self.label)).await {
            tracing::warn!(experiment = %self.experiment, "recording event {kind}: {e}");
        }
    }
}
