//! `/experiments/{platform}/start|status|metrics|stop`: the same four routes
//! for every platform.

mod idempotency;
mod request;
mod view;

use std::sync::Arc;

use axum::{Extension, Json};
use axum::extract::{Path, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use faultline_plugin_runtime::CallError;
use faultline_plugin_runtime::model::{FaultError, Platform};
use serde_json::json;

pub use request::StartRequest;
pub use view::{Metrics, PlanSummary, Started, Status};

use super::audit::AuditNote;
use super::extract::{HashedJsonBody, IdParam, JsonBody};
use super::{ApiError, AppState, Problem};
use crate::auth::{Caller, Role};
use crate::engine::{EngineError, Plan};
use crate::plugins::PluginEntry;
use crate::platforms::ResolveError;
use crate::store::{Claim, ExperimentRow};

impl From<EngineError> for ApiError {
    fn from(e: EngineError) -> Self {
        match e {
            EngineError::NotFound(id) => ApiError::not_found("experiment_not_found", format!("no experiment with id `{id}`")),
            EngineError::Closed => ApiError::unavailable("shutting_down", "the host is shutting down and starts nothing new"),
            EngineError::Halted(ref halt) => super::emergency::engaged_error(halt),
            EngineError::NotHalted => super::emergency::not_engaged(),
            EngineError::Overlap { ref experiment, ref fault, ref targets } => {
                ApiError::new(StatusCode::CONFLICT, "target_busy", e.to_string()).with(json!({ "experiment": experiment, "fault": fault, "targets": targets }))
            }
            EngineError::Store(e) => e.into(),
        }
    }
}

fn platform(name: &str) -> Result<Platform, ApiError> {
    Platform::parse(name).ok_or_else(|| {
        ApiError::not_found("unknown_platform", format!("platform `{name}` is not one of backend, frontend, android"))
    })
}

/// The experiment, if it exists on this platform.
async fn experiment(state: &AppState, platform_name: &str, id: &str) -> Result<ExperimentRow, ApiError> {
    let platform = platform(platform_name)?;
    state
        .store
        .experiment(id)
        .await?
        .filter(|row| row.platform == platform.as_str())
        .ok_or_else(|| ApiError::not_found("experiment_not_found", format!("no {platform_name} experiment with id `{id}`")))
}

/// The status body of an experiment on this platform.
async fn status_of(state: &AppState, platform_name: &str, id: &str) -> Result<Status, ApiError> {
    let row = experiment(state, platform_name, id).await?;
    let (injections, events) = (state.store.injections(id).await?, state.store.events(id).await?);
    Ok(Status::new(row, injections, events)?)
}

/// Everything a start checks and computes before injecting: the fault, the
/// plan, the targets, their impact, and the driver's own validation.
async fn prepare(
    state: &AppState,
    platform_name: &str,
    request: &StartRequest,
) -> Result<(Plan, Arc<PluginEntry>, Arc<dyn crate::platforms::Platform>), ApiError> {
    let platform_kind = platform(platform_name)?;
    let entry = state.plugins.fault(&request.fault_type).ok_or_else(|| {
        ApiError::unprocessable("unknown_fault_type", format!("no fault type or alias `{}`", request.fault_type))
            .with(json!({ "known": state.plugins.fault_names() }))
    })?;
    let mut plan = request.plan(platform_kind, entry.plugin.info(), entry.plugin.name(), &state.limits)?;

    let platform = state.platforms.get(platform_kind).ok_or_else(|| {
        ApiError::unavailable("platform_unavailable", format!("the {platform_name} platform is not configured on this host"))
    })?;
    let resolved = platform.resolve(&plan.selectors).await.map_err(|e| match e {
        ResolveError::NoMatch(ref selectors) => ApiError::unprocessable("no_matching_target", e.to_string()).with(json!({ "selectors": selectors })),
        ResolveError::OnlyProtected(ref selectors, ref excluded) => ApiError::unprocessable("only_protected_targets", e.to_string())
            .with(json!({ "selectors": selectors, "excluded": excluded })),
        ResolveError::Invalid(_) => ApiError::unprocessable("invalid_target", e.to_string()),
        ResolveError::Unavailable(_) => ApiError::unavailable("platform_unavailable", e.to_string()),
    })?;
    (plan.targets, plan.excluded) = (resolved.targets, resolved.excluded);

    plan.impact = platform.impact(&plan.targets).await;
    check_size(&plan, platform_name)?;

    let mut instance = entry.plugin.instantiate(faultline_plugin_runtime::Scope::none()).await.map_err(plugin_failure)?;
    instance.validate(&plan.settings(plan.intensity.requested)).await.map_err(plugin_failure)?;
    Ok((plan, entry, platform))
}

/// Starts an experiment (engineer). Everything is checked before anything
/// is injected; the experiment begins in its baseline phase. Backend answers
/// include the dependency information. With an `Idempotency-Key`, a retry
/// answers with the first request's experiment; a target already under the
/// same kind of fault is a 409.
#[utoipa::path(post, path = "/experiments/{platform}/start", params(("platform" = String, Path, description = "backend, frontend or android"),
        ("Idempotency-Key" = Option<String>, Header, description = "a retry with the same key and body returns the first request's experiment")),
    request_body = StartRequest,
    responses((status = 201, body = Started), (status = 400, body = Problem), (status = 401, body = Problem), (status = 403, body = Problem),
        (status = 409, body = Problem), (status = 415, body = Problem), (status = 422, body = Problem), (status = 503, body = Problem)))]
pub async fn start(
    State(state): State<AppState>,
    caller: Caller,
    Path(platform_name): Path<String>,
    headers: HeaderMap,
    HashedJsonBody(request, body_hash): HashedJsonBody<StartRequest>,
) -> Result<(StatusCode, HeaderMap, Extension<AuditNote>, Json<Started>), ApiError> {
    caller.require(Role::Engineer)?;
    let Some(key) = idempotency::key(&headers)? else {
        let (row, plan) = start_experiment(&state, &caller, &platform_name, &request).await?;
        return Ok(started(&platform_name, &row, &plan, false));
    };
    let claim = state.store.claim_idempotency_key(&caller.key_id, &key, &platform_name, &body_hash, idempotency::TTL_MS).await?;
    match claim {
        Claim::New => {
            let outcome = start_experiment(&state, &caller, &platform_name, &request).await;
            let created = outcome.as_ref().ok().map(|(row, _)| row.id.as_str());
            state.store.settle_idempotency_key(&caller.key_id, &key, created).await?;
            let (row, plan) = outcome?;
            Ok(started(&platform_name, &row, &plan, false))
        }
        Claim::Replay(id) => {
            let row = experiment(&state, &platform_name, &id).await?;
            let plan = view::plan_of(&row)?;
            Ok(started(&platform_name, &row, &plan, true))
        }
        Claim::Mismatch => Err(idempotency::reused(&key)),
        Claim::InFlight => Err(idempotency::in_flight(&key)),
    }
}

async fn start_experiment(
    state: &AppState,
    caller: &Caller,
    platform_name: &str,
    request: &StartRequest,
) -> Result<(ExperimentRow, Plan), ApiError> {
    // Refused before anything is resolved; the engine checks again as it starts.
    if let Some(halt) = state.engine.emergency_stop_in_force() {
        return Err(super::emergency::engaged_error(&halt));
    }
    let (plan, entry, platform) = prepare(state, platform_name, request).await?;
    let row = state.engine.start(plan.clone(), entry, platform, &caller.name).await?;
    Ok((row, plan))
}

/// The start answer: 201 with the status URL; a replay answers the same,
/// marked `Idempotent-Replayed: true`.
fn started(platform_name: &str, row: &ExperimentRow, plan: &Plan, replayed: bool) -> (StatusCode, HeaderMap, Extension<AuditNote>, Json<Started>) {
    let mut headers = HeaderMap::new();
    let location = format!("/experiments/{platform_name}/status?id={}", row.id);
    headers.insert(header::LOCATION, HeaderValue::from_str(&location).expect("an ASCII path"));
    if replayed {
        headers.insert(idempotency::REPLAYED, HeaderValue::from_static("true"));
    }
    let targets: Vec<&str> = plan.targets.iter().map(|t| t.name.as_str()).collect();
    let detail = json!({ "fault_type": plan.fault_type, "targets": targets, "intensity": plan.intensity.requested, "replayed": replayed });
    let note = AuditNote { subject: Some(row.id.clone()), detail: Some(detail) };
    (StatusCode::CREATED, headers, Extension(note), Json(Started::new(row, plan)))
}

/// What a start would do: the targets and how far a fault on them can
/// reach, with every check of a start, and nothing injected (viewer).
#[utoipa::path(post, path = "/experiments/{platform}/preview", params(("platform" = String, Path)),
    request_body = StartRequest,
    responses((status = 200, body = PlanSummary), (status = 400, body = Problem), (status = 422, body = Problem), (status = 503, body = Problem)))]
pub async fn preview(
    State(state): State<AppState>,
    caller: Caller,
    Path(platform_name): Path<String>,
    JsonBody(request): JsonBody<StartRequest>,
) -> Result<Json<PlanSummary>, ApiError> {
    caller.require(Role::Viewer)?;
    let (plan, _, _) = prepare(&state, &platform_name, &request).await?;
    Ok(Json(PlanSummary::new(&plan)))
}

/// The guardrails on size: how many targets, and how far a fault on them can reach.
fn check_size(plan: &Plan, platform_name: &str) -> Result<(), ApiError> {
    let targets: Vec<&str> = plan.targets.iter().map(|t| t.name.as_str()).collect();
    if let Some(max) = plan.guardrails.max_targets.filter(|max| targets.len() > *max) {
        return Err(ApiError::unprocessable(
            "too_many_targets",
            format!("the selectors match {} targets, more than max_targets {max}; nothing was injected", targets.len()),
        )
        .with(json!({ "targets": targets, "max_targets": max })));
    }
    let Some(max) = plan.guardrails.max_blast_radius else { return Ok(()) };
    let Some(impact) = &plan.impact else {
        return Err(ApiError::unprocessable(
            "guardrail_not_supported",
            format!("the {platform_name} platform cannot compute a blast radius, so max_blast_radius cannot be checked"),
        ));
    };
    if impact.blast_radius > max {
        return Err(ApiError::unprocessable(
            "blast_radius_exceeded",
            format!(
                "the blast radius is {} (dependents: {}), more than max_blast_radius {max}; nothing was injected",
                impact.blast_radius,
                impact.dependents.join(", ")
            ),
        )
        .with(json!({ "blast_radius": impact.blast_radius, "max_blast_radius": max, "dependents": impact.dependents, "targets": targets })));
    }
    Ok(())
}

fn plugin_failure(e: CallError) -> ApiError {
    match e {
        CallError::Fault(FaultError::InvalidSettings(why)) => ApiError::unprocessable("invalid_settings", why),
        CallError::Fault(FaultError::TargetUnavailable(why)) => ApiError::unprocessable("target_unavailable", why),
        other => ApiError::new(StatusCode::BAD_GATEWAY, "plugin_failed", other.to_string()),
    }
}

/// An experiment's state, phase, intensity, targets, timeline and score (viewer).
#[utoipa::path(get, path = "/experiments/{platform}/status", params(("platform" = String, Path), ("id" = String, Query)),
    responses((status = 200, body = Status), (status = 400, body = Problem), (status = 404, body = Problem)))]
pub async fn status(
    State(state): State<AppState>,
    caller: Caller,
    Path(platform_name): Path<String>,
    IdParam(id): IdParam,
) -> Result<Json<Status>, ApiError> {
    caller.require(Role::Viewer)?;
    Ok(Json(status_of(&state, &platform_name, &id).await?))
}

/// Per-phase summaries and every observation (viewer).
#[utoipa::path(get, path = "/experiments/{platform}/metrics", params(("platform" = String, Path), ("id" = String, Query)),
    responses((status = 200, body = Metrics), (status = 400, body = Problem), (status = 404, body = Problem)))]
pub async fn metrics(
    State(state): State<AppState>,
    caller: Caller,
    Path(platform_name): Path<String>,
    IdParam(id): IdParam,
) -> Result<Json<Metrics>, ApiError> {
    caller.require(Role::Viewer)?;
    let row = experiment(&state, &platform_name, &id).await?;
    let samples = state.store.samples(&id).await?;
    Ok(Json(Metrics::new(row, samples)?))
}

/// Stops an experiment (engineer): every fault is rolled back before the
/// answer; the experiment ends with state `stopped`. Stopping an ended
/// experiment changes nothing.
#[utoipa::path(post, path = "/experiments/{platform}/stop", params(("platform" = String, Path), ("id" = String, Query)),
    responses((status = 200, body = Status), (status = 400, body = Problem), (status = 404, body = Problem)))]
pub async fn stop(
    State(state): State<AppState>,
    caller: Caller,
    Path(platform_name): Path<String>,
    IdParam(id): IdParam,
) -> Result<Json<Status>, ApiError> {
    caller.require(Role::Engineer)?;
    experiment(&state, &platform_name, &id).await?;
    state.engine.stop(&id, &caller.name).await?;
    Ok(Json(status_of(&state, &platform_name, &id).await?))
}
