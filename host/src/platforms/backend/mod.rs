//! Backend: Docker containers. A target is a container name, or
//! comma-separated `key=value` label selectors that must all hold
//! (`app=shop,tier=web`); each entry of `targets` adds what it matches.

pub mod dependencies;
mod stats;

pub use crate::capabilities::docker::protection;

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

use async_trait::async_trait;
use bollard::query_parameters::{InspectContainerOptions, ListContainersOptionsBuilder};
use bollard::secret::ContainerInspectResponse;
use faultline_plugin_runtime::capability::docker::{Container, Docker};
use faultline_plugin_runtime::model::{CapabilityError, Platform as PlatformKind, Target};
use futures_util::future;

use self::dependencies::{Impact, Node, impact, words};
use super::{Excluded, Observation, Platform, ResolveError, Resolved};
use crate::capabilities::docker::{DockerEngine, HELPER_LABEL};

pub struct BackendPlatform {
    docker: Arc<DockerEngine>,
    stats: stats::StatsWatcher,
}

impl BackendPlatform {
    /// Never-targets are the docker capability's (see `protection`).
    pub fn new(docker: Arc<DockerEngine>) -> Self {
        BackendPlatform { stats: stats::StatsWatcher::new(docker.client().clone()), docker }
    }

    /// A container's IP addresses, on every network.
    async fn addresses(&self, id: &str) -> Vec<std::net::IpAddr> {
        let Ok(c) = self.docker.client().inspect_container(id, None::<InspectContainerOptions>).await else { return vec![] };
        protection::addresses(&c)
    }

    /// Every running container but the host's helpers, as graph nodes.
    async fn nodes(&self) -> Result<Vec<Node>, bollard::errors::Error> {
        let client = self.docker.client();
        let listed = client.list_containers(Some(ListContainersOptionsBuilder::default().build())).await?;
        let ids = listed
            .into_iter()
            .filter(|c| !c.labels.as_ref().is_some_and(|l| l.contains_key(HELPER_LABEL)))
            .filter_map(|c| c.id);
        let inspected = future::join_all(ids.map(|id| async move {
            client.inspect_container(&id, None::<InspectContainerOptions>).await
        }))
        .await;
        Ok(inspected.into_iter().filter_map(Result::ok).map(node_of).collect())
    }
}

/// What the dependency graph needs from one container.
fn node_of(c: ContainerInspectResponse) -> Node {
    let config = c.config.unwrap_or_default();
    let labels: HashMap<String, String> = config.labels.unwrap_or_default();
    let endpoints = c.network_settings.and_then(|n| n.networks).unwrap_or_default();
    let compose_service = labels.get("com.docker.compose.service").cloned();
    let mut aliases: std::collections::BTreeSet<String> =
        endpoints.values().flat_map(|e| e.aliases.clone().unwrap_or_default()).collect();
    aliases.extend(compose_service.clone());
    let depends_on = labels.get("com.docker.compose.depends_on").map(String::as_str).unwrap_or_default();
    // Environment values (not their keys) and command arguments.
    let values = config.env.unwrap_or_default().into_iter().filter_map(|e| e.split_once('=').map(|(_, v)| v.to_string()));
    let args = config.cmd.unwrap_or_default();
    Node {
        id: c.id.unwrap_or_default(),
        name: c.name.unwrap_or_default().trim_start_matches('/').to_string(),
        aliases,
        networks: endpoints.keys().cloned().collect(),
        compose_project: labels.get("com.docker.compose.project").cloned(),
        compose_service,
        depends_on_services: depends_on.split(',').filter_map(|d| d.split(':').next()).filter(|d| !d.is_empty()).map(String::from).collect(),
        links: c
            .host_config
            .and_then(|h| h.links)
            .unwrap_or_default()
            .iter()
            .filter_map(|l| l.split(':').next())
            .map(|l| l.trim_start_matches('/').to_string())
            .collect(),
        words: values.chain(args).flat_map(|v| words(&v).collect::<Vec<_>>()).collect(),
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

    /// Every running container any entry matches, in name order, but the
    /// never-targets (see `protection`), which are listed with the reason.
    async fn resolve(&self, entries: &[String], _options: &serde_json::Value) -> Result<Resolved, ResolveError> {
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
        let mut resolved = Resolved::default();
        for c in found.into_values() {
            let protection = self.docker.protection();
            let addresses = if protection.needs_addresses() { self.addresses(&c.id).await } else { vec![] };
            match protection.reason(&c, &addresses) {
                Some(reason) => resolved.excluded.push(Excluded { id: c.id, name: c.name, reason }),
                None => resolved.targets.push(target_of(c)),
            }
        }
        match (resolved.targets.is_empty(), resolved.excluded.is_empty()) {
            (true, true) => Err(ResolveError::NoMatch(entries.to_vec())),
            (true, false) => Err(ResolveError::OnlyProtected(entries.to_vec(), resolved.excluded)),
            _ => Ok(resolved),
        }
    }

    /// A target counts as healthy while it runs and its health check, if it
    /// has one, does not say unhealthy; health is the share of such targets.
    /// CPU (percent of one CPU) and memory are summed over the targets.
    async fn observe(&self, _experiment: &str, targets: &[Target]) -> Observation {
        let (mut healthy, mut running, mut restarts) = (0.0, 0.0, 0.0);
        let mut usage: Option<(f64, f64)> = None;
        for target in targets {
            if let Some(u) = self.stats.latest(&target.id) {
                let (cpu, memory) = usage.unwrap_or_default();
                usage = Some((cpu + u.cpu_percent, memory + u.memory_bytes as f64));
            }
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
        let mut metrics = BTreeMap::from([
            ("running".to_string(), running),
            ("restarts".to_string(), restarts),
            ("healthy".to_string(), healthy),
        ]);
        if let Some((cpu, memory)) = usage {
            metrics.insert("cpu_percent".to_string(), cpu);
            metrics.insert("memory_bytes".to_string(), memory);
        }
        Observation { health: healthy / total, metrics, ..Default::default() }
    }

    async fn watch(&self, _experiment: &str, targets: &[Target]) {
        self.stats.watch(&targets.iter().map(|t| t.id.clone()).collect::<Vec<_>>());
    }

    async fn unwatch(&self, _experiment: &str, targets: &[Target]) {
        self.stats.unwatch(&targets.iter().map(|t| t.id.clone()).collect::<Vec<_>>());
    }

    async fn impact(&self, targets: &[Target]) -> Option<Impact> {
        match self.nodes().await {
            Ok(nodes) => Some(impact(&nodes, &targets.iter().map(|t| t.name.clone()).collect::<Vec<_>>())),
            Err(e) => {
                tracing::warn!("dependency detection failed: {e}");
                None
            }
        }
    }
}
