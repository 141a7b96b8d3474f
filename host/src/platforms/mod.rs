//! Platforms plug into the engine through one trait: they resolve a
//! request's targets and observe the system's health. Each platform
//! (backend, frontend, android) lives in a folder of its own.

pub mod android;
pub mod backend;
pub mod frontend;
pub mod probes;

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

use async_trait::async_trait;
use faultline_plugin_runtime::model::{Platform as PlatformKind, Target};

/// One observation of the system under test.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Observation {
    /// 1 is fully healthy, 0 is down; the adaptive controller and the score
    /// compare it with the baseline.
    pub health: f64,
    /// Named measurements behind the health figure (cpu_percent, p95_ms ...).
    pub metrics: BTreeMap<String, f64>,
    /// The platform lost the system under test for good (an Android
    /// device that went away): the experiment ends `failed`, rolled back,
    /// with this reason.
    pub lost: Option<String>,
}

/// What the platform found of the request's expectations, at the end.
#[derive(Debug, Clone, PartialEq)]
pub struct Verdict {
    pub met: u32,
    pub given: u32,
    /// Each expectation, what was expected, what was seen and why.
    pub report: serde_json::Value,
}

/// Something a selector matched that is never a target, and why.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize, utoipa::ToSchema)]
pub struct Excluded {
    pub id: String,
    pub name: String,
    pub reason: String,
}

/// What a request's selectors come to: the targets, and what was left out.
#[derive(Debug, Clone, Default)]
pub struct Resolved {
    pub targets: Vec<Target>,
    pub excluded: Vec<Excluded>,
}

#[derive(Debug, thiserror::Error)]
pub enum ResolveError {
    #[error("no target matches {}", .0.join(", "))]
    NoMatch(Vec<String>),
    #[error("everything {} matches is protected: {}", .0.join(", "), .1.iter().map(|e| format!("{} ({})", e.name, e.reason)).collect::<Vec<_>>().join("; "))]
    OnlyProtected(Vec<String>, Vec<Excluded>),
    #[error("{0}")]
    Invalid(String),
    #[error("the platform is unavailable: {0}")]
    Unavailable(String),
    /// What the experiment needs is taken (an address already in use).
    #[error("{0}")]
    Conflict(String),
    /// Valid JSON whose meaning the platform refuses, with its own code
    /// (an unknown APK, no device to run on).
    #[error("{1}")]
    Refused(&'static str, String),
}

/// How far a fault on the targets can reach (the spec's dependency information).
pub use backend::dependencies::Impact;

/// Something a platform puts in place for an experiment besides its
/// faults (a proxy listener): journaled like an injection, released on
/// every exit path and at the next start after a crash, and ending by
/// itself at `expires_at` whatever the host does.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize, utoipa::ToSchema)]
pub struct Resource {
    /// What it is, such as `proxy_listener`.
    pub kind: String,
    /// The target it serves (a site).
    pub target: String,
    /// Where users reach it, such as the listener's URL.
    pub address: String,
    /// The platform's handle, for the release.
    #[serde(default)]
    pub handle: String,
    /// Epoch milliseconds at which it ends by itself.
    pub expires_at: i64,
    /// Its journal row.
    #[serde(default)]
    pub journal_id: String,
}

#[async_trait]
pub trait Platform: Send + Sync {
    fn kind(&self) -> PlatformKind;

    /// The targets the selectors match, leaving out what must never be a
    /// target (and saying so). `options` are the request's platform
    /// settings (the frontend's mode and routes).
    async fn resolve(&self, selectors: &[String], options: &serde_json::Value) -> Result<Resolved, ResolveError>;

    /// Observes an experiment's targets once. A target that is gone counts
    /// as unhealthy; observing never fails the experiment.
    async fn observe(&self, experiment: &str, targets: &[Target]) -> Observation;

    /// Puts in place what the experiment needs on the platform before its
    /// baseline; the engine journals each resource and calls `release`.
    /// A failure refuses the start, with nothing left behind.
    async fn acquire(&self, _experiment: &str, _plan: &crate::engine::Plan) -> Result<Vec<Resource>, ResolveError> {
        Ok(vec![])
    }

    /// Releases a resource `acquire` returned, possibly after a restart
    /// (from the journal). Releasing one that is gone succeeds.
    async fn release(&self, _resource: &Resource) -> Result<(), String> {
        Ok(())
    }

    /// An experiment on these targets begins: start whatever observing
    /// them needs (stats streams). Paired with `unwatch`.
    async fn watch(&self, _experiment: &str, _targets: &[Target]) {}

    /// The experiment entered a phase.
    async fn phase(&self, _experiment: &str, _phase: &str) {}

    /// The experiment has ended.
    async fn unwatch(&self, _experiment: &str, _targets: &[Target]) {}

    /// Dependencies, blast radius and cascade depth of the targets, where the
    /// platform can know them.
    async fn impact(&self, _targets: &[Target]) -> Option<Impact> {
        None
    }

    /// The request's expectations of the system, checked against what was
    /// observed; called once the faults are reverted and recovery watched,
    /// before the score is computed. None when the request set none.
    async fn verdict(&self, _experiment: &str) -> Option<Verdict> {
        None
    }
}

/// The platforms this host serves.
#[derive(Clone, Default)]
pub struct Platforms(HashMap<PlatformKind, Arc<dyn Platform>>);

impl Platforms {
    pub fn with(mut self, platform: Arc<dyn Platform>) -> Self {
        self.0.insert(platform.kind(), platform);
        self
    }

    pub fn get(&self, kind: PlatformKind) -> Option<Arc<dyn Platform>> {
        self.0.get(&kind).cloned()
    }
}
