//! Driver calls on many targets at once. A call mostly waits on Docker or
//! adb (a helper container takes about half a second to start), so fifty
//! targets one after another would take fifty times as long as one. Each
//! lane has its own plugin instance (instances are cheap, about 0.1 ms, and
//! a store cannot run two calls at once); a lane whose instance trapped
//! gets a fresh one for its next call.

use std::sync::Mutex;
use std::time::{Duration, Instant};

use faultline_plugin_runtime::model::{Settings, Target};
use faultline_plugin_runtime::{CallError, FaultInstance, LoadedPlugin, Scope};

use crate::store::Store;

/// Calls in flight at once for one experiment.
pub const LANES: usize = 25;

/// What a call returned (a new token for an injection), and how long it took.
pub type Outcome = (Result<Option<String>, CallError>, Duration);

/// One driver call.
pub enum Call {
    Inject(Target, Settings),
    Revert(String),
}

impl Call {
    /// The new token for an injection, none for a revert.
    async fn on(self, instance: &mut FaultInstance) -> Result<Option<String>, CallError> {
        match self {
            Call::Inject(target, settings) => instance.inject(&target, &settings).await.map(Some),
            Call::Revert(token) => instance.revert(&token).await.map(|()| None),
        }
    }
}

/// Journals each injection's token the moment its call returns it, not
/// when the slowest lane is done: should the run be cut off while other
/// lanes still wait, the supervisor can revert what did take.
pub struct TokenJournal<'a> {
    pub store: &'a Store,
    /// The journal row of each call, by the call's index.
    pub rows: &'a [String],
    pub level: f64,
    /// The first journal write that failed.
    pub failed: Mutex<Option<String>>,
}

impl TokenJournal<'_> {
    async fn record(&self, index: usize, outcome: &Result<Option<String>, CallError>) {
        if let Ok(Some(token)) = outcome
            && let Err(e) = self.store.journal_active(&self.rows[index], token, self.level).await
        {
            self.failed.lock().expect("journal failure lock").get_or_insert(format!("journal: {e}"));
        }
    }
}

/// Makes every call, up to [`LANES`] at a time; the outcomes and how long
/// each took, in the calls' order. `spare` lends its instance to the first
/// lane and gets back a usable one for later calls.
pub async fn fan_out(
    plugin: &LoadedPlugin,
    scope: &Scope,
    spare: &mut Option<FaultInstance>,
    items: Vec<Call>,
    journal: Option<&TokenJournal<'_>>,
) -> Vec<Outcome> {
    let count = items.len();
    let lanes = count.clamp(1, LANES);
    let mut work: Vec<Vec<(usize, Call)>> = (0..lanes).map(|_| vec![]).collect();
    for (index, item) in items.into_iter().enumerate() {
        work[index % lanes].push((index, item));
    }
    let mut lent = spare.take().filter(FaultInstance::is_usable);
    let mut runs = Vec::with_capacity(lanes);
    for lane in work {
        let own = lent.take();
        runs.push(async move {
            let mut instance = match own {
                Some(instance) => Ok(instance),
                None => plugin.instantiate(scope.clone()).await,
            };
            let mut done = Vec::with_capacity(lane.len());
            for (index, item) in lane {
                let took = Instant::now();
                let outcome = match &mut instance {
                    Ok(instance) => item.on(instance).await,
                    Err(e) => Err(CallError::Trap { call: "instantiate", detail: e.to_string() }),
                };
                let took = took.elapsed();
                if let Some(journal) = journal {
                    journal.record(index, &outcome).await;
                }
                done.push((index, outcome, took));
                if instance.as_ref().is_ok_and(|i| !i.is_usable()) {
                    instance = plugin.instantiate(scope.clone()).await;
                }
            }
            (instance.ok(), done)
        });
    }
    let mut outcomes: Vec<Option<Outcome>> = (0..count).map(|_| None).collect();
    for (instance, done) in futures_util::future::join_all(runs).await {
        if spare.is_none() {
            *spare = instance.filter(FaultInstance::is_usable);
        }
        for (index, outcome, took) in done {
            outcomes[index] = Some((outcome, took));
        }
    }
    outcomes.into_iter().map(|o| o.expect("every item ran in a lane")).collect()
}
