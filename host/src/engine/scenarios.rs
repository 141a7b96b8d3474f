//! Timed scenarios: faults besides the primary one, each fired at its
//! offset from the experiment's start for its duration, on every target
//! (or, for a fault whose intensity is a share of the targets, on that
//! share), with its own driver instance, journal rows and rollback. They
//! run one at a time (the request's checks refuse overlaps) beside the
//! phases, whatever phase the clock is in.
//!
//! A scenario that fails to inject fails the experiment, like the primary
//! fault; a target that went away is skipped. A stop, a guardrail or a
//! failure of the primary fault ends the scenarios: the active one is
//! reverted and those to come never fire.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use faultline_plugin_runtime::model::{Settings, Target};
use tokio::sync::watch;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use super::injector::Injector;
use super::plan::{Plan, ScenarioPlan};
use crate::plugins::PluginEntry;
use crate::store::Store;
use crate::telemetry::Metrics;

/// What the run and the runner share.
#[derive(Default)]
struct Shared {
    failure: Mutex<Option<String>>,
    /// Targets whose scenario fault could not be reverted (the reconciler has them).
    revert_failures: Mutex<Vec<String>>,
}

/// The run's handle on its scenarios.
pub(super) struct Scenarios {
    runner: Option<Runner>,
    end: CancellationToken,
    done: watch::Receiver<bool>,
    shared: Arc<Shared>,
}

impl Scenarios {
    /// `run_cancel` is the run's: ending the run ends the scenarios, and a
    /// scenario that fails ends the run.
    pub(super) fn new(id: &str, plan: &Plan, entries: Vec<Arc<PluginEntry>>, store: &Store, metrics: &Arc<Metrics>, run_cancel: &CancellationToken) -> Self {
        let end = run_cancel.child_token();
        let (done_tx, done) = watch::channel(false);
        let shared = Arc::new(Shared::default());
        let mut scenarios: Vec<(usize, ScenarioPlan, Settings, Injector)> = plan
            .scenarios
            .iter()
            .cloned()
            .zip(entries)
            .enumerate()
            .map(|(index, (scenario, entry))| {
                let injector = Injector::new(id, entry, &scenario.unit, &plan.targets, plan.ttl_seconds, Some(index), store.clone(), metrics.clone());
                (index, plan.scenario_settings(&scenario), scenario, injector)
            })
            .map(|(index, settings, scenario, injector)| (index, scenario, settings, injector))
            .collect();
        scenarios.sort_by_key(|(_, s, _, _)| s.at_ms);
        let runner = Runner {
            scenarios,
            targets: plan.targets.clone(),
            end: end.clone(),
            run_cancel: run_cancel.clone(),
            done: done_tx,
            shared: shared.clone(),
        };
        Scenarios { runner: Some(runner), end, done, shared }
    }

    /// The task that fires them; taken once, by the run.
    pub(super) fn runner(&mut self) -> Runner {
        self.runner.take().expect("the scenario runner is taken once")
    }

    /// Why a scenario failed, if one did.
    pub(super) fn failure(&self) -> Option<String> {
        self.shared.failure.lock().expect("scenario failure lock").clone()
    }

    /// Ends them now: the active one is reverted, the others never fire.
    pub(super) fn end(&self) {
        self.end.cancel();
    }

    /// Becomes true once every scenario has ended (or will never fire).
    pub(super) fn done(&self) -> watch::Receiver<bool> {
        self.done.clone()
    }

    pub(super) fn revert_failures(&self) -> Vec<String> {
        self.shared.revert_failures.lock().expect("scenario revert failures lock").clone()
    }
}

pub(super) struct Runner {
    /// Index in the plan, the scenario, its settings and its driver, by start time.
    scenarios: Vec<(usize, ScenarioPlan, Settings, Injector)>,
    targets: Vec<Target>,
    end: CancellationToken,
    run_cancel: CancellationToken,
    done: watch::Sender<bool>,
    shared: Arc<Shared>,
}

impl Runner {
    pub(super) async fn run(mut self) {
        let started = Instant::now();
        for (_, scenario, settings, mut injector) in std::mem::take(&mut self.scenarios) {
            tokio::select! {
                () = tokio::time::sleep_until(started + Duration::from_millis(scenario.at_ms)) => {}
                () = self.end.cancelled() => break,
            }
            let targets = self.targets_of(&scenario);
            injector
                .event("scenario", &format!("fires on {} for {} s", names(&targets), scenario.duration_ms as f64 / 1000.0))
                .await;
            let (took, failure) = injector.inject(targets, &settings).await;
            if let Some(failure) = failure {
                let failures = injector.revert_all(took, "failure").await;
                self.keep_failures(failures);
                self.shared.failure.lock().expect("scenario failure lock").get_or_insert(failure);
                self.run_cancel.cancel();
                break;
            }
            let reason = tokio::select! {
                () = tokio::time::sleep(Duration::from_millis(scenario.duration_ms)) => "scenario_end",
                () = self.end.cancelled() => "scenario_cut",
            };
            let failures = injector.revert_all(took, reason).await;
            self.keep_failures(failures);
            injector.event("scenario", "ended").await;
            if self.end.is_cancelled() {
                break;
            }
        }
        self.done.send_replace(true);
    }

    /// Every target, or the share a share-of-targets fault asks for
    /// (rounded up, at least one).
    fn targets_of(&self, scenario: &ScenarioPlan) -> Vec<Target> {
        let n = self.targets.len();
        let take = match scenario.share_of_targets {
            true => ((n as f64 * scenario.intensity / 100.0).ceil() as usize).clamp(1, n.max(1)),
            false => n,
        };
        self.targets.iter().take(take).cloned().collect()
    }

    fn keep_failures(&self, failures: Vec<String>) {
        self.shared.revert_failures.lock().expect("scenario revert failures lock").extend(failures);
    }
}

fn names(targets: &[Target]) -> String {
    targets.iter().map(|t| t.name.as_str()).collect::<Vec<_>>().join(", ")
}
