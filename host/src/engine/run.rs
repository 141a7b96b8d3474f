//! One experiment, from baseline to completed.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use faultline_plugin_runtime::CallError;
use faultline_plugin_runtime::model::{IntensityScope, Target};
use serde_json::json;
use tokio_util::sync::CancellationToken;

use super::guardrails::AbortWatch;
use super::injector::{Active, Injector};
use super::intensity::{Adaptive, Ramp};
use super::plan::Plan;
use super::reconcile;
use super::scenarios::Scenarios;
use super::score::{ScoreInputs, score};
use super::{Interrupt, Phase};
use crate::platforms::probes::Prober;
use crate::platforms::{Observation, Platform};
use crate::plugins::PluginEntry;
use crate::store::{InjectionState, SampleRow, Store, now_ms};
use crate::telemetry::Metrics;

/// In-band observations in a row that count as recovered.
const RECOVERED_AFTER_SAMPLES: usize = 2;

/// Why injecting ended early with a failure.
struct Failure(String);

pub(super) struct Run {
    id: String,
    plan: Plan,
    /// The primary fault's driver.
    injector: Injector,
    scenarios: Scenarios,
    platform: Arc<dyn Platform>,
    prober: Prober,
    abort_watch: AbortWatch,
    store: Store,
    metrics: Arc<Metrics>,
    cancel: CancellationToken,
    interrupt: Arc<Mutex<Option<Interrupt>>>,
    active: Vec<Active>,
    /// Share-of-targets mode: the next target not yet tried.
    next_target: usize,
    /// Whether any injection ever took: targets vanishing later is not a failure.
    injected_once: bool,
    level: f64,
    max_tolerated: Option<f64>,
    seq: i64,
    baseline: Vec<f64>,
    injecting: Vec<f64>,
    /// Why the platform lost the system under test, if it did.
    lost: Option<String>,
}

impl Run {
    #[allow(clippy::too_many_arguments)]
    pub(super) fn new(
        id: String,
        plan: Plan,
        plugin: Arc<PluginEntry>,
        scenarios: Vec<Arc<PluginEntry>>,
        platform: Arc<dyn Platform>,
        store: Store,
        metrics: Arc<Metrics>,
        cancel: CancellationToken,
        interrupt: Arc<Mutex<Option<Interrupt>>>,
    ) -> Self {
        let injector = Injector::new(&id, plugin, &plan.intensity.unit, &plan.targets, plan.ttl_seconds, None, store.clone(), metrics.clone());
        let scenarios = Scenarios::new(&id, &plan, scenarios, &store, &metrics, &cancel);
        Run {
            id,
            prober: Prober::new(plan.probes.clone()),
            abort_watch: AbortWatch::new(&plan.guardrails.abort_when),
            plan,
            injector,
            scenarios,
            platform,
            store,
            metrics,
            cancel,
            interrupt,
            active: vec![],
            next_target: 0,
            injected_once: false,
            level: 0.0,
            max_tolerated: None,
            seq: 0,
            baseline: vec![],
            injecting: vec![],
            lost: None,
        }
    }

    pub(super) async fn run(mut self) {
        self.platform.watch(&self.id, &self.plan.targets).await;
        self.platform.phase(&self.id, Phase::Baseline.as_str()).await;
        // The scenarios keep their own time, from the start, beside the phases.
        let runner = self.scenarios.runner();
        let ((), ()) = tokio::join!(self.drive(), runner.run());
    }

    async fn drive(&mut self) {
        let mut failure = match self.baseline_and_inject().await {
            Ok(()) => None,
            Err(Failure(reason)) => Some(reason),
        };
        failure = failure.or_else(|| self.lost.clone()).or_else(|| self.scenarios.failure());
        self.enter(Phase::Recovering).await;
        let mut rollback_failures = self.rollback(failure.as_deref()).await;
        // A stopped or failed run is watched just long enough to take one
        // reading: the user asked for it to end.
        let ending = failure.is_some() || self.interrupt.lock().expect("interrupt lock").is_some();
        if ending {
            self.scenarios.end();
        }
        let watch_ms = if ending { 0 } else { self.plan.phases.recovering_ms };
        let recovered_after_ms = self.watch_recovery(watch_ms).await;
        // Scenarios still to come keep the experiment, and its readings, going.
        let mut done = self.scenarios.done();
        while !*done.borrow() {
            let nap = tokio::time::sleep(ms(self.plan.sample_interval_ms));
            tokio::select! {
                _ = done.wait_for(|d| *d) => break,
                () = nap => {}
            }
            self.sample(Phase::Recovering).await;
        }
        rollback_failures.extend(self.scenarios.revert_failures());
        let failure = failure.or_else(|| self.lost.clone()).or_else(|| self.scenarios.failure());
        self.release_resources().await;
        // Read again: a stop may have come while recovery was watched.
        let interrupt = self.interrupt.lock().expect("interrupt lock").clone();
        self.finish(failure, interrupt, rollback_failures, recovered_after_ms).await;
        self.platform.unwatch(&self.id, &self.plan.targets).await;
    }

    /// Releases what the platform put in place for the experiment (proxy
    /// listeners, a device's lease and settings), last first: what came
    /// later may need what came before (an installed app, the emulator it
    /// is on). One that fails stays open for the reconciler.
    async fn release_resources(&mut self) {
        for resource in self.plan.resources.clone().into_iter().rev() {
            let what = format!("{} {} for {}", resource.kind, resource.address, resource.target);
            match self.platform.release(&resource).await {
                Ok(()) => {
                    if let Err(e) = self.store.journal_close(&resource.journal_id, InjectionState::Reverted, None).await {
                        tracing::error!(experiment = %self.id, "journal: {e}");
                    }
                    self.event("released", &what).await;
                }
                Err(e) => {
                    let token = serde_json::to_string(&resource).unwrap_or_default();
                    if let Err(e) = self.store.journal_retry(&resource.journal_id, &token, &e, reconcile::first_retry_at()).await {
                        tracing::error!(experiment = %self.id, "journal: {e}");
                    }
                    self.event("release_failed", &format!("{what}: {e}")).await;
                }
            }
        }
    }

    async fn baseline_and_inject(&mut self) -> Result<(), Failure> {
        let until = Instant::now() + ms(self.plan.phases.baseline_ms);
        while Instant::now() < until {
            let health = self.sample(Phase::Baseline).await.health;
            self.baseline.push(health);
            if !self.pause_until(until).await {
                return Ok(());
            }
        }
        if self.cancel.is_cancelled() {
            return Ok(());
        }

        self.enter(Phase::Injecting).await;
        let started = Instant::now();
        let until = started + ms(self.plan.phases.injecting_ms);
        let baseline_health = mean(&self.baseline).unwrap_or(1.0);
        let ramp = Ramp::new(&self.plan.intensity, self.plan.phases.injecting_ms);
        let mut adaptive = self
            .plan
            .adaptive
            .then(|| Adaptive::new(&self.plan.intensity, baseline_health, self.plan.tolerance));
        let first = adaptive.as_ref().map_or(ramp.level_at(0), Adaptive::current);

        self.apply(first).await?;

        while Instant::now() < until {
            if !self.pause_until(until).await {
                break;
            }
            let health = self.sample(Phase::Injecting).await.health;
            self.injecting.push(health);
            if self.cancel.is_cancelled() {
                break;
            }
            let next = match adaptive.as_mut() {
                Some(a) => {
                    let next = a.observe(health);
                    self.max_tolerated = a.max_tolerated();
                    next
                }
                None => ramp.level_at(started.elapsed().as_millis() as u64),
            };
            if Instant::now() < until && next != self.level {
                self.apply(next).await?;
            }
        }
        Ok(())
    }

    /// Brings the fault to `level`: adjusts per-target faults, or injects
    /// into / reverts from more targets when intensity is a share of them.
    /// `self.level` becomes `level` once it is in effect.
    async fn apply(&mut self, level: f64) -> Result<(), Failure> {
        let previous = self.level;
        let share = self.plan.intensity.scope == IntensityScope::ShareOfTargets && self.plan.intensity.graded;
        if share {
            let n = self.plan.targets.len();
            // Rounded up, at least one: 50 % of 3 containers is 2.
            let want = ((n as f64 * level / 100.0).ceil() as usize).clamp(1, n);
            // A target that went away is skipped for the next one.
            while self.active.len() < want && self.next_target < n {
                let take = (want - self.active.len()).min(n - self.next_target);
                let targets = self.plan.targets[self.next_target..self.next_target + take].to_vec();
                self.next_target += take;
                self.inject(targets, level).await?;
            }
            while self.active.len() > want {
                let active = self.active.pop().expect("more active than wanted");
                self.injector.revert_one(active, "adjust").await;
            }
        } else if !self.injected_once {
            self.inject(self.plan.targets.clone(), level).await?;
        } else {
            // By journal id: an adjust may revert and re-inject, or drop a
            // target that went away, so positions do not stay put.
            let ids: Vec<String> = self.active.iter().map(|a| a.journal_id.clone()).collect();
            for id in ids {
                self.adjust(&id, level).await?;
            }
        }
        if !self.injected_once {
            return Err(Failure("no target could be injected: every one was unavailable".into()));
        }
        self.level = level;
        let _ = self.store.set_intensity(&self.id, level, self.max_tolerated).await;
        if previous != level {
            self.event("intensity", &format!("{previous} -> {level} {}", self.plan.intensity.unit)).await;
        }
        Ok(())
    }

    /// Injects into targets; what took is active (and rolled back even if
    /// another target failed).
    async fn inject(&mut self, targets: Vec<Target>, level: f64) -> Result<(), Failure> {
        let (took, failure) = self.injector.inject(targets, &self.plan.settings(level)).await;
        self.injected_once |= !took.is_empty();
        self.active.extend(took);
        failure.map_or(Ok(()), |f| Err(Failure(f)))
    }

    /// Changes one injection's intensity; a driver that cannot adjust in
    /// place is reverted and injected again (a target that went away is
    /// then skipped).
    async fn adjust(&mut self, journal_id: &str, level: f64) -> Result<(), Failure> {
        let Some(index) = self.active.iter().position(|a| a.journal_id == journal_id) else { return Ok(()) };
        let settings = self.plan.settings(level);
        let token = self.active[index].token.clone();
        let took = Instant::now();
        let outcome = match self.injector.instance().await {
            Ok(instance) => instance.adjust(&token, &settings).await,
            Err(e) => Err(e),
        };
        self.metrics.plugin_call(&self.plan.plugin, "adjust", took.elapsed());
        match outcome {
            Ok(token) => {
                self.active[index].token = token;
                self.injector.adjusted(&self.active[index], level).await.map_err(Failure)
            }
            Err(CallError::Fault(_)) => {
                let active = self.active.remove(index);
                let target = active.target.clone();
                if self.injector.revert_one(active, "adjust").await {
                    self.inject(vec![target], level).await?;
                }
                Ok(())
            }
            Err(e) => Err(Failure(format!("adjusting {} failed: {e}", self.active[index].target.name))),
        }
    }

    /// Reverts every active injection; returns what could not be reverted.
    async fn rollback(&mut self, failure: Option<&str>) -> Vec<String> {
        let interrupt = self.interrupt.lock().expect("interrupt lock").clone();
        let reason = match (failure, interrupt) {
            (Some(_), _) => "failure",
            (None, Some(i)) => i.rollback_label(),
            (None, None) => "end",
        };
        let active = std::mem::take(&mut self.active);
        let failures = self.injector.revert_all(active, reason).await;
        self.injector.release_instance();
        failures
    }

    /// Watches for health to come back within the band of the baseline;
    /// returns how long that took, or none if it did not within `watch_ms`.
    async fn watch_recovery(&mut self, watch_ms: u64) -> Option<u64> {
        let started = Instant::now();
        let until = started + ms(watch_ms);
        let band = mean(&self.baseline).unwrap_or(1.0) * (1.0 - self.plan.tolerance);
        let mut in_band_since: Option<u64> = None;
        let mut in_band = 0;
        loop {
            // A reading counts from when it was taken, not from when it returned.
            let taken_at = started.elapsed().as_millis() as u64;
            let health = self.sample(Phase::Recovering).await.health;
            if health >= band {
                in_band_since.get_or_insert(taken_at);
                in_band += 1;
            } else {
                in_band_since = None;
                in_band = 0;
            }
            let settled = in_band >= RECOVERED_AFTER_SAMPLES || (watch_ms == 0 && in_band > 0);
            if settled || Instant::now() >= until || !self.pause_until(until).await {
                return in_band_since;
            }
        }
    }

    async fn finish(
        &mut self,
        failure: Option<String>,
        interrupt: Option<Interrupt>,
        rollback_failures: Vec<String>,
        recovered_after_ms: Option<u64>,
    ) {
        let (mut state, stop_reason) = match (&failure, &interrupt) {
            (Some(_), _) => ("failed", None),
            (None, Some(i)) => (i.end_state(), Some(i.reason())),
            (None, None) => ("completed", None),
        };
        let mut error = failure;
        // Whatever the run believes, the journal says what is still open
        // (a revert that failed during a ramp step counts too): no clean end then.
        let open = self.store.open_injections_of(&self.id).await.map(|rows| rows.into_iter().map(|r| r.target_name).collect());
        let open: Vec<String> = open.unwrap_or(rollback_failures);
        if let Some(note) = reconcile::left_open(&open) {
            state = "failed";
            error = Some(error.map_or(note.clone(), |e| format!("{e}; {note}")));
        }
        let verdict = self.platform.verdict(&self.id).await;
        let score = (state != "failed").then(|| {
            score(&ScoreInputs {
                baseline: self.baseline.clone(),
                injecting: self.injecting.clone(),
                recovered_after_ms,
                recovering_ms: self.plan.phases.recovering_ms,
                expectations: verdict.as_ref().map(|v| (v.met, v.given)),
            })
        });
        let mut result = json!({
            "score": score,
            "max_tolerated_intensity": self.max_tolerated,
            "recovered_after_ms": recovered_after_ms,
        });
        if let Some(verdict) = verdict {
            result["expectations"] = verdict.report;
        }
        if let Some(e) = &error {
            self.event("failed", e).await;
        }
        self.event("phase", "completed").await;
        let outcome = self
            .store
            .finish_experiment(
                &self.id,
                state,
                score.as_ref().map(|s| s.value),
                Some(&result.to_string()),
                error.as_deref(),
                stop_reason.as_deref(),
            )
            .await;
        if let Err(e) = outcome {
            tracing::error!(experiment = %self.id, "could not record the end of the experiment: {e}");
        }
        tracing::info!(experiment = %self.id, state, score = score.map(|s| s.value), "experiment ended");
    }

    async fn enter(&mut self, phase: Phase) {
        if let Err(e) = self.store.set_phase(&self.id, phase.as_str()).await {
            tracing::error!(experiment = %self.id, "recording phase {}: {e}", phase.as_str());
        }
        self.event("phase", phase.as_str()).await;
        self.platform.phase(&self.id, phase.as_str()).await;
        tracing::info!(experiment = %self.id, phase = phase.as_str(), "phase");
    }

    async fn event(&mut self, kind: &str, detail: &str) {
        if let Err(e) = self.store.add_event(&self.id, kind, detail).await {
            tracing::warn!(experiment = %self.id, "recording event {kind}: {e}");
        }
    }

    /// One reading: the platform's view of the targets, times the probes'
    /// success rate when the experiment has probes.
    async fn sample(&mut self, phase: Phase) -> Observation {
        let taken_at = Instant::now();
        let (mut observation, probed) = tokio::join!(self.platform.observe(&self.id, &self.plan.targets), self.prober.read());
        let checks = probed.as_ref().map(|p| p.checks.clone()).unwrap_or_default();
        if let Some(why) = observation.lost.clone()
            && self.lost.is_none()
        {
            // The system under test is gone: end now, rolled back, as failed.
            tracing::warn!(experiment = %self.id, "{why}");
            self.event("lost", &why).await;
            self.lost = Some(why);
            self.scenarios.end();
            self.cancel.cancel();
        }
        if let Some(reading) = probed {
            observation.health *= reading.success;
            observation.metrics.extend(reading.metrics);
        }
        // Abort conditions watch the phases where a fault is coming or in effect.
        if phase != Phase::Recovering
            && let Some(reason) = self.abort_watch.observe(taken_at, observation.health, &checks)
        {
            self.abort(phase, reason).await;
        }
        self.seq += 1;
        let level = (phase == Phase::Injecting).then_some(self.level);
        let row = SampleRow {
            seq: self.seq,
            at_ms: now_ms(),
            phase: phase.as_str().into(),
            intensity: level,
            health: observation.health,
            metrics: serde_json::to_string(&observation.metrics).unwrap_or_default(),
        };
        if let Err(e) = self.store.insert_sample(&self.id, &row).await {
            tracing::warn!(experiment = %self.id, "recording a sample: {e}");
        }
        observation
    }

    /// A guardrail tripped: the run ends `aborted`, through the rollback.
    async fn abort(&mut self, phase: Phase, reason: String) {
        let reason = match phase {
            Phase::Baseline => format!("{reason} (during baseline: nothing was injected)"),
            _ => reason,
        };
        let first = {
            let mut interrupt = self.interrupt.lock().expect("interrupt lock");
            let first = interrupt.is_none();
            interrupt.get_or_insert(Interrupt::Aborted(reason.clone()));
            first
        };
        if first {
            tracing::warn!(experiment = %self.id, "{reason}");
            self.event("guardrail", &reason).await;
        }
        self.cancel.cancel();
    }

    /// Sleeps one sampling interval (or to `until`); false if the run was cancelled.
    async fn pause_until(&mut self, until: Instant) -> bool {
        let left = until.saturating_duration_since(Instant::now());
        let nap = left.min(ms(self.plan.sample_interval_ms));
        tokio::select! {
            () = tokio::time::sleep(nap) => !self.cancel.is_cancelled(),
            () = self.cancel.cancelled() => false,
        }
    }
}

fn ms(ms: u64) -> Duration {
    Duration::from_millis(ms)
}

fn mean(v: &[f64]) -> Option<f64> {
    (!v.is_empty()).then(|| v.iter().sum::<f64>() / v.len() as f64)
}
