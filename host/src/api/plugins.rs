use axum::{Extension, Json};
use axum::extract::{Request, State};
use axum::http::StatusCode;
use faultline_plugin_runtime::LoadError;
use serde::Serialize;
use serde_json::json;
use utoipa::ToSchema;

use super::audit::AuditNote;
use super::extract::{PathParam, body_bytes};
use super::{ApiError, AppState, MAX_BODY_BYTES};
use crate::auth::{Caller, Role};
use crate::plugins::{PluginEntry, RegistryError, Source};

/// A loaded plugin.
#[derive(Serialize, ToSchema)]
pub struct PluginInfo {
    name: String,
    /// The fault type it provides.
    fault_type: String,
    aliases: Vec<String>,
    source: Source,
    /// SHA-256 of the component.
    digest: String,
    /// Capabilities granted by the operator.
    grants: Vec<String>,
    loaded_at: i64,
}

impl From<&PluginEntry> for PluginInfo {
    fn from(e: &PluginEntry) -> Self {
        PluginInfo {
            name: e.plugin.name().into(),
            fault_type: e.plugin.info().name.clone(),
            aliases: e.plugin.info().aliases.clone(),
            source: e.source,
            digest: e.plugin.digest().into(),
            grants: e.plugin.grants().iter().map(|c| c.interface().to_string()).collect(),
            loaded_at: e.loaded_at,
        }
    }
}

impl From<RegistryError> for ApiError {
    fn from(e: RegistryError) -> Self {
        let detail = e.to_string();
        match e {
            RegistryError::Load(LoadError::NotGranted { import, granted }) => {
                ApiError::unprocessable("capability_not_granted", detail).with(json!({ "import": import, "granted": granted }))
            }
            RegistryError::Load(LoadError::Invalid(_)) => ApiError::unprocessable("invalid_component", detail),
            RegistryError::Load(LoadError::Describe(_)) => ApiError::unprocessable("plugin_describe_failed", detail),
            RegistryError::Load(LoadError::Cache(_)) | RegistryError::Io(_) => ApiError::internal(detail),
            RegistryError::BadName(_) => ApiError::unprocessable("invalid_plugin_name", detail),
            RegistryError::Exists(_) => ApiError::conflict("plugin_exists", detail),
            RegistryError::NotFound(_) => ApiError::not_found("plugin_not_found", detail),
            RegistryError::Builtin(_) => ApiError::conflict("builtin_plugin", detail),
            RegistryError::FaultTaken { .. } => ApiError::conflict("fault_type_taken", detail),
        }
    }
}

const NAME: &str = "The plugin's name: 1 to 64 lowercase letters, digits, `-` and `_`";
const COMPONENT: &str = "The WebAssembly component, as `cargo build --target wasm32-wasip2` writes it";
const INSTALL_REFUSALS: &str = "`invalid_plugin_name`; `invalid_component`: the body is empty or not a component; \
    `capability_not_granted`: it imports a capability its operator did not grant; `plugin_describe_failed`";

/// A WebAssembly component's bytes.
#[derive(ToSchema)]
#[schema(value_type = String, format = Binary)]
pub struct Component(#[allow(dead_code, reason = "documents the body only")] Vec<u8>);

/// Lists loaded plugins (viewer).
#[utoipa::path(get, path = "/plugins", responses((status = 200, description = "Every loaded plugin, built-in ones included", body = [PluginInfo])))]
pub async fn list_plugins(State(state): State<AppState>, caller: Caller) -> Result<Json<Vec<PluginInfo>>, ApiError> {
    caller.require(Role::Viewer)?;
    Ok(Json(state.plugins.list().iter().map(|e| PluginInfo::from(e.as_ref())).collect()))
}

/// One loaded plugin (viewer).
#[utoipa::path(get, path = "/plugins/{name}", params(("name" = String, Path, description = NAME)),
    responses((status = 200, body = PluginInfo), (status = 404, description = "`plugin_not_found`")))]
pub async fn get_plugin(State(state): State<AppState>, caller: Caller, PathParam(name): PathParam<String>) -> Result<Json<PluginInfo>, ApiError> {
    caller.require(Role::Viewer)?;
    let entry = state.plugins.plugin(&name).ok_or(RegistryError::NotFound(name))?;
    Ok(Json(PluginInfo::from(entry.as_ref())))
}

async fn install(state: &AppState, caller: &Caller, name: &str, req: Request, replace: bool) -> Result<(StatusCode, Extension<AuditNote>, Json<PluginInfo>), ApiError> {
    // Read before refusing a known key, so its client can read the refusal.
    let bytes = body_bytes(req, MAX_BODY_BYTES).await?;
    caller.require(Role::Admin)?;
    let existed = state.plugins.plugin(name).is_some();
    if bytes.is_empty() {
        return Err(ApiError::unprocessable("invalid_component", "the body is empty; send the component's bytes"));
    }
    let entry = state.plugins.install(name, &bytes, replace).await?;
    tracing::info!(plugin = name, fault = %entry.plugin.info().name, by = %caller.name, replaced = existed, "plugin loaded");
    let status = if existed { StatusCode::OK } else { StatusCode::CREATED };
    let info = entry.plugin.info();
    let detail = json!({ "fault": info.name, "digest": entry.plugin.digest(), "bytes": bytes.len(), "replaced": existed });
    let note = AuditNote { subject: Some(name.into()), detail: Some(detail) };
    Ok((status, Extension(note), Json(PluginInfo::from(entry.as_ref()))))
}

/// Loads a new plugin from the component in the body (admin). It is
/// available at once, and kept in the plugins directory.
#[utoipa::path(post, path = "/plugins/{name}", params(("name" = String, Path, min_length = 1, max_length = 64, pattern = "^[a-z0-9_-]+$", description = NAME)),
    request_body(content = Component, description = COMPONENT, content_type = "application/octet-stream"),
    responses((status = 201, description = "Loaded, and available at once", body = PluginInfo),
        (status = 403, description = "`forbidden`: plugins are managed by admins"),
        (status = 409, description = "`plugin_exists` (replace it with PUT), `builtin_plugin`, `fault_type_taken`: another plugin provides its fault type"),
        (status = 413, description = "`payload_too_large`: the component is larger than 16 MiB"),
        (status = 422, description = INSTALL_REFUSALS)))]
pub async fn create_plugin(
    State(state): State<AppState>,
    caller: Caller,
    PathParam(name): PathParam<String>,
    req: Request,
) -> Result<(StatusCode, Extension<AuditNote>, Json<PluginInfo>), ApiError> {
    install(&state, &caller, &name, req, false).await
}

/// Loads or replaces a plugin (admin). Experiments already running on the
/// old version finish on it.
#[utoipa::path(put, path = "/plugins/{name}", params(("name" = String, Path, min_length = 1, max_length = 64, pattern = "^[a-z0-9_-]+$", description = NAME)),
    request_body(content = Component, description = COMPONENT, content_type = "application/octet-stream"),
    responses((status = 200, description = "Replaced", body = PluginInfo), (status = 201, description = "Loaded: there was none by that name", body = PluginInfo),
        (status = 403, description = "`forbidden`: plugins are managed by admins"),
        (status = 409, description = "`builtin_plugin`, `fault_type_taken`: another plugin provides its fault type"),
        (status = 413, description = "`payload_too_large`: the component is larger than 16 MiB"),
        (status = 422, description = INSTALL_REFUSALS)))]
pub async fn replace_plugin(
    State(state): State<AppState>,
    caller: Caller,
    PathParam(name): PathParam<String>,
    req: Request,
) -> Result<(StatusCode, Extension<AuditNote>, Json<PluginInfo>), ApiError> {
    install(&state, &caller, &name, req, true).await
}

/// Unloads a plugin (admin); refused while an
/// experiment runs on it. A build whose faults are not all reverted yet is
/// kept, out of sight, until the reconciler has reverted them.
#[utoipa::path(delete, path = "/plugins/{name}", params(("name" = String, Path, description = NAME)),
    responses((status = 204, description = "Unloaded, and its file deleted"),
        (status = 403, description = "`forbidden`: plugins are managed by admins"),
        (status = 404, description = "`plugin_not_found`"),
        (status = 409, description = "`plugin_in_use`: an experiment runs on it; `builtin_plugin`")))]
pub async fn delete_plugin(State(state): State<AppState>, caller: Caller, PathParam(name): PathParam<String>) -> Result<StatusCode, ApiError> {
    caller.require(Role::Admin)?;
    if state.plugins.plugin(&name).is_none() {
        return Err(RegistryError::NotFound(name).into());
    }
    // Faults it made that are not reverted yet do not hold it: the registry
    // keeps that build for the reconciler.
    if state.engine.plugin_running(&name) {
        return Err(ApiError::conflict("plugin_in_use", format!("plugin `{name}` has a running experiment")));
    }
    state.plugins.unload(&name)?;
    tracing::info!(plugin = %name, by = %caller.name, "plugin unloaded");
    Ok(StatusCode::NO_CONTENT)
}
