//! Backend: Docker containers. A target is a container name, or
//! comma-separated `key=value` label selectors that must all hold
//! (`app=shop,tier=web`); each entry of `targets` adds what it matches.

use std::collections::BTreeMap;
use std::sync::Arc;

use async_trait::async_trait;
use faultline_plugin_runtime::capability::docker::{Container, Docker};
use faultline_plugin_runtime::model::{CapabilityError, Platform as PlatformKind, Target};

use super::{Observation, Platform, ResolveError};

pub struct BackendPlatform {
    docker: Arc<dyn Docker>,
}

impl BackendPlatform {
    pub fn new(docker: Arc<dyn Docker>) -> Self {
        BackendPlatform { docker }
    }
}

fn target_of(c: Container) -> Target {
    Target { platform: PlatformKind::Backend, id: c.id, name: c.name, attributes: c.labels }
}

/// Splits one entry of `targets` into the selectors that must all hold.
fn selectors(entry: &str) -> Result<Vec<String>, ResolveError> {
    let parts: Vec<String> = entry.split(',').map(|s| s.trim().to_string()).collect();
    let bad = parts.iter().find(|p| p.is_empty() || p.starts_with('=') || p.matches('=').count() > 1);
    match bad {
        Some(p) => Err(ResolveError::Invalid(format!("`{entry}`: `{p}` is neither a container name nor key=value"))),
        None => Ok(parts),
    }
}

#[async_trait]
impl Platform for BackendPlatform {
    fn kind(&self) -> PlatformKind {
        PlatformKind::Backend
    }

    /// Every running container any entry matches, in name order.
    async fn resolve(&self, entries: &[String]) -> Result<Vec<Target>, ResolveError> {
        let mut found = BTreeMap::new();
        for entry in entries {
            let matches = self.docker.find(selectors(entry)?).await.map_err(|e| match e {
                CapabilityError::Unavailable(why) | CapabilityError::Timeout(why) => ResolveError::Unavailable(why),
                other => ResolveError::Invalid(other.to_string()),
            })?;
            for c in matches.into_iter().filter(|c| c.state == "running") {
                found.entry(c.name.clone()).or_insert(c);
            }
        }
        if found.is_empty() {
            return Err(ResolveError::NoMatch(entries.to_vec()));
        }
        Ok(found.into_values().map(target_of).collect())
    }

    /// A target counts as healthy while it runs and its health check, if it
    /// has one, does not say unhealthy; health is the share of such targets.
    async fn observe(&self, targets: &[Target]) -> Observation {
        let (mut healthy, mut running, mut restarts) = (0.0, 0.0, 0.0);
        for target in targets {
            let Ok(c) = self.docker.inspect(target.id.clone()).await else { continue };
            if c.state == "running" {
                running += 1.0;
                if c.health.as_deref() != Some("unhealthy") {
                    healthy += 1.0;
                }
            }
            restarts += f64::from(c.restart_count);
        }
        let total = targets.len().max(1) as f64;
        Observation {
            health: healthy / total,
            metrics: BTreeMap::from([
                ("running".to_string(), running),
                ("restarts".to_string(), restarts),
                ("healthy".to_string(), healthy),
            ]),
        }
    }
}
