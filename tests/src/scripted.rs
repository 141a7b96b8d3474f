//! A scripted platform for engine tests whose plugins use only log and
//! clock. The test plugins log every inject, adjust and revert with its
//! token; `RecordingLog` keeps those records and, from them alone, what is
//! in effect on each target. `ScriptedPlatform` turns that into health, so
//! the engine's loop (inject → observe → adapt → revert) closes through
//! what the plugins did, not through the engine's own bookkeeping.

use std::collections::BTreeMap;
use std::sync::Mutex;

use async_trait::async_trait;
use faultline::platforms::{Observation, Platform, ResolveError, Resolved};
use faultline_plugin_runtime::capability::log::{Level, LogSink};
use faultline_plugin_runtime::model::{Platform as PlatformKind, Target};

/// One log record of a plugin.
#[derive(Debug, Clone)]
pub struct Record {
    pub plugin: String,
    pub experiment: Option<String>,
    pub message: String,
}

#[derive(Default)]
pub struct RecordingLog {
    records: Mutex<Vec<Record>>,
    /// (plugin, target id) → level in effect, as the plugins' own records
    /// say: a scenario's plugin and the primary one each have their own.
    in_effect: Mutex<BTreeMap<(String, String), f64>>,
}

/// `target@level#nonce` → (target, level).
fn parse_token(token: &str) -> Option<(String, f64)> {
    let (target, rest) = token.rsplit_once('@')?;
    let level = rest.split('#').next()?.parse().ok()?;
    Some((target.to_string(), level))
}

impl LogSink for RecordingLog {
    fn write(&self, plugin: &str, experiment: Option<&str>, _level: Level, message: &str) {
        let mut in_effect = self.in_effect.lock().unwrap();
        let key = |target: String| (plugin.to_string(), target);
        if let Some(token) = message.strip_prefix("inject ") {
            if let Some((target, level)) = parse_token(token) {
                in_effect.insert(key(target), level);
            }
        } else if let Some((_, new)) = message.strip_prefix("adjust ").and_then(|m| m.split_once(" -> ")) {
            if let Some((target, level)) = parse_token(new) {
                in_effect.insert(key(target), level);
            }
        } else if let Some((target, _)) = message.strip_prefix("revert ").and_then(parse_token) {
            in_effect.remove(&key(target));
        }
        self.records.lock().unwrap().push(Record {
            plugin: plugin.into(),
            experiment: experiment.map(Into::into),
            message: message.into(),
        });
    }
}

impl RecordingLog {
    pub fn records(&self) -> Vec<Record> {
        self.records.lock().unwrap().clone()
    }

    /// Messages of one experiment that start with `prefix`.
    pub fn messages(&self, experiment: &str, prefix: &str) -> Vec<String> {
        self.records()
            .into_iter()
            .filter(|r| r.experiment.as_deref() == Some(experiment) && r.message.starts_with(prefix))
            .map(|r| r.message)
            .collect()
    }

    /// What the plugins' records say is still in effect, by target id:
    /// the highest level any plugin holds there.
    pub fn in_effect(&self) -> BTreeMap<String, f64> {
        let mut by_target = BTreeMap::new();
        for ((_, target), level) in self.in_effect.lock().unwrap().iter() {
            let held: &mut f64 = by_target.entry(target.clone()).or_insert(*level);
            *held = held.max(*level);
        }
        by_target
    }

    /// What one plugin's records say is still in effect, by target id.
    pub fn in_effect_of(&self, plugin: &str) -> BTreeMap<String, f64> {
        let in_effect = self.in_effect.lock().unwrap();
        in_effect.iter().filter(|((p, _), _)| p == plugin).map(|((_, t), l)| (t.clone(), *l)).collect()
    }
}

/// Targets are whatever the selectors name, except selectors starting with
/// `missing`, which match nothing. Health is 1 while every level in effect
/// is at most `tolerated`, and `degraded` above it.
pub struct ScriptedPlatform {
    log: std::sync::Arc<RecordingLog>,
    pub tolerated: Mutex<f64>,
    pub degraded: f64,
    /// What the next observation does instead of answering: stands in for a
    /// bug inside the host, which the run's supervisor must survive.
    pub misbehave: Mutex<Option<Misbehaviour>>,
    /// Health reported whatever is in effect, when set.
    pub forced_health: Mutex<Option<f64>>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Misbehaviour {
    /// Observing panics.
    Panic,
    /// Observing never returns.
    Hang,
}

impl ScriptedPlatform {
    pub fn new(log: std::sync::Arc<RecordingLog>, tolerated: f64) -> Self {
        ScriptedPlatform { log, tolerated: Mutex::new(tolerated), degraded: 0.3, misbehave: Mutex::new(None), forced_health: Mutex::new(None) }
    }

    pub fn misbehave(&self, how: Misbehaviour) {
        *self.misbehave.lock().unwrap() = Some(how);
    }
}

#[async_trait]
impl Platform for ScriptedPlatform {
    fn kind(&self) -> PlatformKind {
        PlatformKind::Backend
    }

    async fn resolve(&self, selectors: &[String], _options: &serde_json::Value) -> Result<Resolved, ResolveError> {
        if selectors.iter().any(|s| s.starts_with("missing")) {
            return Err(ResolveError::NoMatch(selectors.to_vec()));
        }
        let targets = selectors
            .iter()
            .map(|s| Target { platform: PlatformKind::Backend, id: s.clone(), name: s.clone(), attributes: vec![] })
            .collect();
        Ok(Resolved { targets, excluded: vec![] })
    }

    async fn observe(&self, _experiment: &str, targets: &[Target]) -> Observation {
        let misbehave = *self.misbehave.lock().unwrap();
        match misbehave {
            Some(Misbehaviour::Panic) => panic!("the scripted platform was told to panic"),
            Some(Misbehaviour::Hang) => std::future::pending::<()>().await,
            None => {}
        }
        let in_effect = self.log.in_effect();
        let worst = targets.iter().filter_map(|t| in_effect.get(&t.id)).copied().fold(0.0, f64::max);
        let health = if worst <= *self.tolerated.lock().unwrap() { 1.0 } else { self.degraded };
        let health = self.forced_health.lock().unwrap().unwrap_or(health);
        Observation { health, metrics: BTreeMap::from([("level_in_effect".to_string(), worst)]), ..Default::default() }
    }
}
