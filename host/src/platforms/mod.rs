//! Platforms plug into the engine through one trait: they resolve a
//! request's targets and observe the system's health. Each platform
//! (backend, frontend, android) lives in a folder of its own.

pub mod backend;
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
}

/// How far a fault on the targets can reach (the spec's dependency information).
pub use backend::dependencies::Impact;

#[async_trait]
pub trait Platform: Send + Sync {
    fn kind(&self) -> PlatformKind;

    /// Turns the request's selectors into every target they match.
    /// The targets the selectors match, leaving out what must never be a
    /// target (and saying so).
    async fn resolve(&self, selectors: &[String]) -> Result<Resolved, ResolveError>;

    /// Observes the targets once. A target that is gone counts as unhealthy;
    /// observing never fails the experiment.
    async fn observe(&self, targets: &[Target]) -> Observation;

    /// An experiment on these targets begins: start whatever observing
    /// them needs (stats streams). Paired with `unwatch`.
    async fn watch(&self, _targets: &[Target]) {}

    /// The experiment has ended.
    async fn unwatch(&self, _targets: &[Target]) {}

    /// Dependencies, blast radius and cascade depth of the targets, where the
    /// platform can know them.
    async fn impact(&self, _targets: &[Target]) -> Option<Impact> {
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
