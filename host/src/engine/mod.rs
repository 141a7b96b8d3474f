//! The experiment engine: phases, intensity, rollback and the journal.
//!
//! `state` is `running` until the end, then one of `completed`, `stopped` (a
//! user, an emergency stop, or the host shutting down), `aborted` (a
//! guardrail) or `failed` (a driver or platform failed, a fault could not
//! be reverted, the run broke inside the host, or the host died mid-run). `phase` moves
//! baseline → injecting → recovering → completed; every exit path passes
//! through the rollback.

mod fan_out;
pub mod guardrails;
mod injector;
pub mod intensity;
pub mod plan;
mod planner;
mod reconcile;
mod recovery;
mod retention;
mod run;
mod scenarios;
pub mod score;
mod supervisor;

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde::Serialize;
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

pub use guardrails::Guardrails;
pub use plan::{DEFAULT_SPLIT, Intensity, PhaseLengths, Plan, ScenarioPlan};
pub use planner::{PlanError, Planned};
pub use recovery::RecoveryReport;

use crate::plugins::PluginRegistry;
use crate::platforms::Platforms;
use crate::store::{EmergencyStopRow, ExperimentRow, InjectionRow, InjectionState, Store, StoreError, now_ms};
use crate::telemetry::Metrics;

/// How long a shutdown waits for running experiments to roll back, and
/// then for the engine's tasks to end.
const SHUTDOWN_GRACE: Duration = Duration::from_secs(60);

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Phase {
    Baseline,
    Injecting,
    Recovering,
    Completed,
}

impl Phase {
    pub fn as_str(self) -> &'static str {
        match self {
            Phase::Baseline => "baseline",
            Phase::Injecting => "injecting",
            Phase::Recovering => "recovering",
            Phase::Completed => "completed",
        }
    }
}

/// Why an experiment is ending before its natural end.
#[derive(Debug, Clone)]
pub enum Interrupt {
    Stopped { by: String },
    /// An emergency stop halted every experiment.
    Emergency { by: String },
    Shutdown,
    Aborted(String),
}

impl Interrupt {
    /// The state an experiment ends in when this ended it.
    pub fn end_state(&self) -> &'static str {
        match self {
            Interrupt::Aborted(_) => "aborted",
            _ => "stopped",
        }
    }

    /// The `stop_reason` it leaves.
    pub fn reason(&self) -> String {
        match self {
            Interrupt::Stopped { by } => format!("stopped by {by}"),
            Interrupt::Emergency { by } => format!("emergency stop by {by}"),
            Interrupt::Shutdown => "host shutdown".into(),
            Interrupt::Aborted(why) => why.clone(),
        }
    }

    /// The rollback's reason, as the metrics label it.
    pub fn rollback_label(&self) -> &'static str {
        match self {
            Interrupt::Stopped { .. } => "stop",
            Interrupt::Emergency { .. } => "emergency_stop",
            Interrupt::Shutdown => "shutdown",
            Interrupt::Aborted(_) => "guardrail",
        }
    }
}

#[derive(Debug, thiserror::Error)]
pub enum EngineError {
    #[error("no experiment with id `{0}`")]
    NotFound(String),
    #[error("the host is shutting down")]
    Closed,
    /// An emergency stop is in force: nothing starts until an admin lifts it.
    #[error("an emergency stop by {} is in force; nothing starts until an admin lifts it", .0.engaged_by)]
    Halted(EmergencyStopRow),
    #[error("no emergency stop is in force")]
    NotHalted,
    /// A running experiment already holds a fault of this kind (or one
    /// its driver declares a conflict with) on some of the targets.
    #[error("experiment `{experiment}` already runs {fault} on {}", targets.join(", "))]
    Overlap { experiment: String, fault: String, targets: Vec<String> },
    /// The platform could not put in place what the experiment needs.
    #[error("{0}")]
    Platform(crate::platforms::ResolveError),
    #[error(transparent)]
    Store(#[from] StoreError),
}

/// Journal rows of platform resources name `platform:<platform>` where a
/// fault's rows name its plugin (plugin names cannot hold a colon).
pub const PLATFORM_ROW: &str = "platform:";

struct Running {
    cancel: CancellationToken,
    interrupt: Arc<Mutex<Option<Interrupt>>>,
    done: watch::Receiver<bool>,
    /// The primary fault's driver first, then each scenario's.
    drivers: Vec<Driver>,
    /// (id, name) of every target the experiment holds.
    targets: Vec<(String, String)>,
}

/// A fault driver a running experiment uses.
#[derive(Clone)]
struct Driver {
    plugin: String,
    /// The plugin build it runs on: kept while it runs, even if replaced.
    digest: String,
    /// The driver's fault name and the fault names it conflicts with.
    fault: String,
    conflicts_with: Vec<String>,
}

impl Driver {
    fn of(entry: &crate::plugins::PluginEntry) -> Driver {
        let info = entry.plugin.info();
        Driver {
            plugin: entry.plugin.name().to_string(),
            digest: entry.plugin.digest().to_string(),
            fault: info.name.clone(),
            conflicts_with: info.conflicts_with.clone(),
        }
    }

    /// Whether the two may not act on one target at once.
    fn clashes(&self, other: &Driver) -> bool {
        self.plugin == other.plugin || other.conflicts_with.contains(&self.fault) || self.conflicts_with.contains(&other.fault)
    }
}

impl Running {
    /// Ends the run with `interrupt` unless it is already ending; the
    /// receiver says when its rollback is done.
    fn interrupt_with(&self, interrupt: Interrupt) -> watch::Receiver<bool> {
        self.interrupt.lock().expect("interrupt lock").get_or_insert(interrupt);
        self.cancel.cancel();
        self.done.clone()
    }

    /// The fault of this experiment that may not share targets with a new
    /// one's drivers, and the targets they would share.
    fn overlap(&self, drivers: &[Driver], targets: &[(String, String)]) -> Option<(String, Vec<String>)> {
        let mine = self.drivers.iter().find(|m| drivers.iter().any(|d| d.clashes(m)))?;
        let shared: Vec<String> = targets.iter().filter(|t| self.targets.iter().any(|own| own.0 == t.0)).map(|t| t.1.clone()).collect();
        (!shared.is_empty()).then(|| (mine.fault.clone(), shared))
    }
}

#[derive(Clone)]
pub struct Engine {
    inner: Arc<Inner>,
}

struct Inner {
    store: Store,
    plugins: Arc<PluginRegistry>,
    /// The platforms whose resources the journal may hold.
    platforms: Platforms,
    metrics: Arc<Metrics>,
    running: Mutex<HashMap<String, Running>>,
    /// The emergency stop in force. Checked under the `running` lock, so a
    /// start cannot slip past one being engaged.
    halted: Mutex<Option<EmergencyStopRow>>,
    tasks: TaskTracker,
    /// Set under the `running` lock, so no start slips past a shutdown.
    closed: AtomicBool,
    /// Ends the engine's own background work (the reconciler) at shutdown.
    closing: CancellationToken,
    /// How long past its planned end (or past a stop) a run may go on
    /// before its supervisor cuts it off.
    run_margin: Duration,
}

impl Engine {
    pub fn new(store: Store, plugins: Arc<PluginRegistry>, platforms: Platforms, metrics: Arc<Metrics>, run_margin: Duration) -> Self {
        Engine {
            inner: Arc::new(Inner {
                store,
                plugins,
                platforms,
                metrics,
                running: Mutex::default(),
                halted: Mutex::default(),
                tasks: TaskTracker::new(),
                closed: AtomicBool::new(false),
                closing: CancellationToken::new(),
                run_margin,
            }),
        }
    }

    pub fn store(&self) -> &Store {
        &self.inner.store
    }

    pub fn plugins(&self) -> &Arc<PluginRegistry> {
        &self.inner.plugins
    }

    pub fn metrics(&self) -> &Arc<Metrics> {
        &self.inner.metrics
    }

    /// Records a planned experiment and starts running it; returns its stored row.
    pub async fn start(&self, planned: Planned, created_by: &str) -> Result<ExperimentRow, EngineError> {
        let Planned { mut plan, plugin, scenarios, platform } = planned;
        let now = now_ms();
        let id = uuid::Uuid::new_v4().to_string();
        let cancel = CancellationToken::new();
        let interrupt = Arc::new(Mutex::new(None));
        let (done_tx, done) = watch::channel(false);
        let targets: Vec<(String, String)> = plan.targets.iter().map(|t| (t.id.clone(), t.name.clone())).collect();
        let drivers: Vec<Driver> = std::iter::once(&plugin).chain(&scenarios).map(|e| Driver::of(e)).collect();
        // Checked and claimed under one lock: two starts at once cannot both pass.
        {
            let mut running = self.inner.running.lock().expect("running lock");
            if self.inner.closed.load(Ordering::SeqCst) {
                return Err(EngineError::Closed);
            }
            if let Some(halt) = self.inner.halted.lock().expect("halted lock").clone() {
                return Err(EngineError::Halted(halt));
            }
            for (other, r) in running.iter() {
                if let Some((fault, shared)) = r.overlap(&drivers, &targets) {
                    return Err(EngineError::Overlap { experiment: other.clone(), fault, targets: shared });
                }
            }
            let entry = Running { cancel: cancel.clone(), interrupt: interrupt.clone(), done, drivers, targets };
            running.insert(id.clone(), entry);
        }
        // What the platform puts in place (proxy listeners) exists before
        // the baseline, and is journaled before anything else happens.
        plan.resources = match platform.acquire(&id, &plan).await {
            Ok(resources) => resources,
            Err(e) => {
                self.inner.running.lock().expect("running lock").remove(&id);
                return Err(EngineError::Platform(e));
            }
        };
        for resource in &mut plan.resources {
            resource.journal_id = uuid::Uuid::now_v7().to_string();
        }
        let row = ExperimentRow {
            id,
            platform: plan.platform.as_str().into(),
            fault_type: plan.fault_type.clone(),
            plugin: plan.plugin.clone(),
            state: "running".into(),
            phase: Phase::Baseline.as_str().into(),
            plan: serde_json::to_string(&plan).expect("a plan serializes"),
            intensity: None,
            max_tolerated: None,
            score: None,
            result: None,
            error: None,
            stop_reason: None,
            created_by: created_by.into(),
            created_at: now,
            phase_started_at: now,
            ended_at: None,
        };
        let stored = async {
            self.inner.store.insert_experiment(&row).await?;
            self.journal_resources(&row.id, &plan).await?;
            self.inner.store.add_event(&row.id, "phase", "baseline").await
        };
        if let Err(e) = stored.await {
            for resource in &plan.resources {
                if let Err(why) = platform.release(resource).await {
                    tracing::error!(experiment = %row.id, "releasing {} {}: {why}; it ends at its time-to-live", resource.kind, resource.address);
                }
            }
            platform.unwatch(&row.id, &plan.targets).await;
            // If its row was written, it must not stay `running`.
            let why = format!("the start could not be recorded: {e}");
            let _ = self.inner.store.finish_experiment(&row.id, "failed", None, None, Some(&why), None).await;
            self.inner.running.lock().expect("running lock").remove(&row.id);
            return Err(e.into());
        }
        let supervised = supervisor::Supervised {
            id: row.id.clone(),
            planned: Duration::from_millis(plan.phases.total_ms()),
            cancel: cancel.clone(),
            interrupt: interrupt.clone(),
            platform: platform.clone(),
            targets: plan.targets.clone(),
        };
        let run = run::Run::new(row.id.clone(), plan, plugin, scenarios, platform, self.inner.store.clone(), self.inner.metrics.clone(), cancel, interrupt);
        // Only once the supervisor has settled the run, whatever happened
        // inside (even a panic of the supervisor itself unwinds through this
        // guard), are its targets free and its stop answered.
        let released = Released { engine: self.clone(), id: row.id.clone(), done: done_tx };
        self.inner.tasks.spawn(async move {
            released.engine.supervise(run, supervised).await;
            drop(released);
        });
        Ok(row)
    }

    /// Journals the platform's resources as open rows, so that a crash
    /// leaves them to the next start's recovery.
    async fn journal_resources(&self, id: &str, plan: &Plan) -> Result<(), StoreError> {
        for resource in &plan.resources {
            let row = InjectionRow {
                id: resource.journal_id.clone(),
                experiment_id: id.into(),
                plugin: format!("{PLATFORM_ROW}{}", plan.platform.as_str()),
                target_id: resource.target.clone(),
                target_name: format!("{} {}", resource.kind, resource.address),
                intensity: 0.0,
                token: None,
                state: InjectionState::Pending.as_str().into(),
                error: None,
                injected_at: now_ms(),
                reverted_at: None,
                plugin_digest: None,
                expires_at: Some(resource.expires_at),
                attempts: 0,
                next_attempt_at: None,
                scenario: None,
            };
            self.inner.store.journal_pending(&row).await?;
            let token = serde_json::to_string(resource).expect("a resource serializes");
            self.inner.store.journal_active(&row.id, &token, 0.0).await?;
        }
        Ok(())
    }

    /// Stops an experiment: faults are rolled back before this returns.
    /// Stopping one that has already ended changes nothing.
    pub async fn stop(&self, id: &str, by: &str) -> Result<(), EngineError> {
        let done = {
            let running = self.inner.running.lock().expect("running lock");
            running.get(id).map(|r| r.interrupt_with(Interrupt::Stopped { by: by.into() }))
        };
        match done {
            Some(mut done) => {
                let _ = done.wait_for(|d| *d).await;
                Ok(())
            }
            None if self.inner.store.experiment(id).await?.is_some() => Ok(()),
            None => Err(EngineError::NotFound(id.into())),
        }
    }

    /// Ends every running experiment with `interrupt`, waiting for their
    /// rollbacks; returns their ids.
    async fn interrupt_all(&self, interrupt: Interrupt) -> Vec<String> {
        let waits = {
            let running = self.inner.running.lock().expect("running lock");
            running.iter().map(|(id, r)| (id.clone(), r.interrupt_with(interrupt.clone()))).collect::<Vec<_>>()
        };
        let mut ids = vec![];
        for (id, mut done) in waits {
            let _ = done.wait_for(|d| *d).await;
            ids.push(id);
        }
        ids
    }

    /// Reads the emergency stop in force from the store (at start).
    pub async fn load_emergency_stop(&self) -> Result<Option<EmergencyStopRow>, StoreError> {
        let engaged = self.inner.store.engaged_emergency_stop().await?;
        self.inner.halted.lock().expect("halted lock").clone_from(&engaged);
        Ok(engaged)
    }

    /// The emergency stop in force, if any.
    pub fn emergency_stop_in_force(&self) -> Option<EmergencyStopRow> {
        self.inner.halted.lock().expect("halted lock").clone()
    }

    /// Emergency stop: from now on nothing starts, and every running
    /// experiment is rolled back. Returns the stop in force and the
    /// experiments it halted, once their rollbacks are done. Engaging it
    /// again keeps the first one and halts whatever runs.
    pub async fn emergency_stop(&self, by: &str, reason: Option<String>) -> Result<(EmergencyStopRow, Vec<String>), EngineError> {
        let (halt, fresh) = {
            let _running = self.inner.running.lock().expect("running lock");
            let mut halted = self.inner.halted.lock().expect("halted lock");
            match halted.as_ref() {
                Some(h) => (h.clone(), false),
                None => {
                    let h = EmergencyStopRow {
                        id: uuid::Uuid::now_v7().to_string(),
                        engaged_by: by.into(),
                        engaged_at: now_ms(),
                        reason,
                        lifted_by: None,
                        lifted_at: None,
                    };
                    *halted = Some(h.clone());
                    (h, true)
                }
            }
        };
        // Halted in memory first: the rollbacks must not wait on the store.
        let halting = self.interrupt_all(Interrupt::Emergency { by: by.into() });
        let recorded = async {
            if fresh {
                self.inner.store.insert_emergency_stop(&halt).await?;
            }
            Ok::<_, StoreError>(())
        };
        let (halted, recorded) = tokio::join!(halting, recorded);
        recorded?;
        Ok((halt, halted))
    }

    /// Lifts the emergency stop in force: starts are accepted again.
    pub async fn lift_emergency_stop(&self, by: &str) -> Result<EmergencyStopRow, EngineError> {
        let Some(mut halt) = self.emergency_stop_in_force() else {
            return Err(EngineError::NotHalted);
        };
        let now = now_ms();
        self.inner.store.lift_emergency_stops(by, now).await?;
        (halt.lifted_by, halt.lifted_at) = (Some(by.into()), Some(now));
        *self.inner.halted.lock().expect("halted lock") = None;
        Ok(halt)
    }

    /// Refuses new experiments, rolls back the running ones, and waits for
    /// them, for a bounded time: what is left stays in the journal for the
    /// next start, and every effect has its time-to-live anyway.
    pub async fn shutdown(&self) {
        {
            // Under the lock starts check it: no start is accepted after this.
            let _running = self.inner.running.lock().expect("running lock");
            self.inner.closed.store(true, Ordering::SeqCst);
        }
        if tokio::time::timeout(SHUTDOWN_GRACE, self.interrupt_all(Interrupt::Shutdown)).await.is_err() {
            tracing::error!("rollbacks did not finish within {SHUTDOWN_GRACE:?}; the journal keeps what is left for the next start");
        }
        self.inner.closing.cancel();
        self.inner.tasks.close();
        if tokio::time::timeout(SHUTDOWN_GRACE, self.inner.tasks.wait()).await.is_err() {
            tracing::error!("the engine's tasks did not end within {SHUTDOWN_GRACE:?}; leaving them");
        }
    }

    pub fn is_running(&self, id: &str) -> bool {
        self.inner.running.lock().expect("running lock").contains_key(id)
    }

    /// Whether a running experiment uses the plugin build with this digest.
    pub(crate) fn build_running(&self, digest: &str) -> bool {
        self.inner.running.lock().expect("running lock").values().any(|r| r.drivers.iter().any(|d| d.digest == digest))
    }

    /// Whether an experiment runs on a plugin. (Open journal rows do not
    /// hold a plugin: the registry keeps the build that made them.)
    pub fn plugin_running(&self, plugin: &str) -> bool {
        self.inner.running.lock().expect("running lock").values().any(|r| r.drivers.iter().any(|d| d.plugin == plugin))
    }
}

/// Frees a run's targets and answers its stop when dropped.
struct Released {
    engine: Engine,
    id: String,
    done: watch::Sender<bool>,
}

impl Drop for Released {
    fn drop(&mut self) {
        if let Ok(mut running) = self.engine.inner.running.lock() {
            running.remove(&self.id);
        }
        let _ = self.done.send(true);
    }
}
