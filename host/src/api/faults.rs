use axum::Json;
use axum::extract::State;
use faultline_plugin_runtime::model::{FaultInfo, IntensitySpec, ParamSpec, Platform};
use serde::Serialize;
use utoipa::ToSchema;

use super::{ApiError, AppState};
use crate::auth::{Caller, Role};
use crate::plugins::Source;

/// A fault type as users see it.
#[derive(Serialize, ToSchema)]
pub struct FaultType {
    name: String,
    aliases: Vec<String>,
    description: String,
    #[schema(value_type = Vec<String>)]
    platforms: Vec<Platform>,
    /// Unit, range, default and step; null for on/off faults.
    #[schema(value_type = Option<Object>)]
    intensity: Option<IntensitySpec>,
    #[schema(value_type = Vec<Object>)]
    params: Vec<ParamSpec>,
    conflicts_with: Vec<String>,
    /// The plugin that provides it.
    plugin: String,
    source: Source,
}

impl FaultType {
    fn new(info: &FaultInfo, plugin: &str, source: Source) -> Self {
        FaultType {
            name: info.name.clone(),
            aliases: info.aliases.clone(),
            description: info.description.clone(),
            platforms: info.platforms.clone(),
            intensity: info.intensity.clone(),
            params: info.params.clone(),
            conflicts_with: info.conflicts_with.clone(),
            plugin: plugin.into(),
            source,
        }
    }
}

/// Lists every fault type this host can inject (viewer).
#[utoipa::path(get, path = "/fault-types", responses((status = 200, body = [FaultType])))]
pub async fn list_fault_types(State(state): State<AppState>, caller: Caller) -> Result<Json<Vec<FaultType>>, ApiError> {
    caller.require(Role::Viewer)?;
    let mut types: Vec<_> = state
        .plugins
        .list()
        .iter()
        .map(|e| FaultType::new(e.plugin.info(), e.plugin.name(), e.source))
        .collect();
    types.sort_by(|a, b| a.name.cmp(&b.name));
    Ok(Json(types))
}
