//! Planning a start: one engine step that the API, the demo and a CLI call
//! alike. It finds the fault's plugin, lets the caller turn its
//! platform-specific request into a draft plan, resolves the targets,
//! computes their impact, checks the size guardrails and has the driver
//! validate the settings. Nothing is injected; a refusal changes nothing.

use std::sync::Arc;

use faultline_plugin_runtime::{CallError, Scope};
use faultline_plugin_runtime::model::{FaultInfo, Platform as PlatformKind};

use super::{Engine, Plan};
use crate::platforms::{Platform, Platforms, ResolveError};
use crate::plugins::PluginEntry;

/// A plan ready to start, with the plugin and platform it runs on.
pub struct Planned {
    pub plan: Plan,
    pub plugin: Arc<PluginEntry>,
    /// Each scenario's plugin, in the plan's order.
    pub scenarios: Vec<Arc<PluginEntry>>,
    pub platform: Arc<dyn Platform>,
}

/// Why a start cannot go ahead.
#[derive(Debug, thiserror::Error)]
pub enum PlanError {
    #[error("no fault type or alias `{fault_type}`")]
    UnknownFault { fault_type: String, known: Vec<String> },
    #[error("the {0} platform is not configured on this host")]
    PlatformUnavailable(&'static str),
    #[error(transparent)]
    Resolve(#[from] ResolveError),
    #[error("the selectors match {} targets, more than max_targets {max}; nothing was injected", targets.len())]
    TooManyTargets { targets: Vec<String>, max: usize },
    #[error("the {0} platform cannot compute a blast radius, so max_blast_radius cannot be checked")]
    BlastRadiusUnknown(&'static str),
    #[error(
        "the blast radius is {blast_radius} (dependents: {}), more than max_blast_radius {max}; nothing was injected",
        dependents.join(", ")
    )]
    BlastRadiusExceeded { blast_radius: usize, max: usize, dependents: Vec<String>, targets: Vec<String> },
    /// The driver refused the settings or the target, or failed.
    #[error(transparent)]
    Driver(#[from] CallError),
}

impl Engine {
    /// Plans a start on `kind` for `fault_type`. `draft` turns the
    /// caller's request into a plan whose targets are not resolved yet.
    pub async fn plan<E: From<PlanError>>(
        &self,
        platforms: &Platforms,
        kind: PlatformKind,
        fault_type: &str,
        draft: impl FnOnce(&FaultInfo, &str) -> Result<Plan, E>,
    ) -> Result<Planned, E> {
        let plugin = self.plugins().fault(fault_type).ok_or_else(|| PlanError::UnknownFault {
            fault_type: fault_type.into(),
            known: self.plugins().fault_names(),
        })?;
        let mut plan = draft(plugin.plugin.info(), plugin.plugin.name())?;
        plan.capabilities = capabilities(&plugin, &plan, self.plugins());
        let platform = platforms.get(kind).ok_or(PlanError::PlatformUnavailable(kind.as_str()))?;
        let resolved = platform.resolve(&plan.selectors, &plan.options).await.map_err(PlanError::from)?;
        (plan.targets, plan.excluded) = (resolved.targets, resolved.excluded);
        plan.impact = platform.impact(&plan.targets).await;
        check_size(&plan)?;
        let mut instance = plugin.plugin.instantiate(Scope::none()).await.map_err(PlanError::from)?;
        instance.validate(&plan.settings(plan.intensity.requested)).await.map_err(PlanError::from)?;
        let mut scenarios = Vec::with_capacity(plan.scenarios.len());
        for scenario in &plan.scenarios {
            // Looked up again by plugin name: it may have been unloaded since the request was read.
            let entry = self.plugins().plugin(&scenario.plugin).ok_or_else(|| PlanError::UnknownFault {
                fault_type: scenario.fault_type.clone(),
                known: self.plugins().fault_names(),
            })?;
            let mut instance = entry.plugin.instantiate(Scope::none()).await.map_err(PlanError::from)?;
            instance.validate(&plan.scenario_settings(scenario)).await.map_err(PlanError::from)?;
            scenarios.push(entry);
        }
        Ok(Planned { plan, plugin, scenarios, platform })
    }
}

/// What the primary fault's and the scenarios' plugins may use, by name.
fn capabilities(primary: &PluginEntry, plan: &Plan, plugins: &crate::plugins::PluginRegistry) -> Vec<String> {
    let scenarios = plan.scenarios.iter().filter_map(|s| plugins.plugin(&s.plugin));
    let mut names: Vec<String> = std::iter::once(primary.plugin.grants().clone())
        .chain(scenarios.map(|e| e.plugin.grants().clone()))
        .flat_map(|grants| grants.iter().map(|c| c.interface().to_string()).collect::<Vec<_>>())
        .collect();
    names.sort();
    names.dedup();
    names
}

/// The guardrails on size: how many targets, and how far a fault on them can reach.
fn check_size(plan: &Plan) -> Result<(), PlanError> {
    let targets: Vec<String> = plan.targets.iter().map(|t| t.name.clone()).collect();
    if let Some(max) = plan.guardrails.max_targets.filter(|max| targets.len() > *max) {
        return Err(PlanError::TooManyTargets { targets, max });
    }
    let Some(max) = plan.guardrails.max_blast_radius else { return Ok(()) };
    let Some(impact) = &plan.impact else {
        return Err(PlanError::BlastRadiusUnknown(plan.platform.as_str()));
    };
    if impact.blast_radius > max {
        let dependents = impact.dependents.clone();
        return Err(PlanError::BlastRadiusExceeded { blast_radius: impact.blast_radius, max, dependents, targets });
    }
    Ok(())
}
