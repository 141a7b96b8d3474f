//! `/experiments/{platform}/start|preview|status|metrics|stop`: the same
//! routes for every platform. The OpenAPI document lists them per platform
//! (`doc`).

mod body;
pub(super) mod doc;
mod idempotency;
mod request;
mod view;


use axum::{Extension, Json};
use axum::extract::State;
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use faultline_plugin_runtime::CallError;
use faultline_plugin_runtime::model::{FaultError, Platform};
use serde_json::json;

pub use request::{Scenario, StartRequest};
pub use view::{Metrics, PlanSummary, Started, Status, plan_of};

use super::audit::AuditNote;
use super::extract::{IdParam, PathParam};
use super::{ApiError, AppState};
use body::StartBody;
use crate::auth::{Caller, Role};
use crate::engine::{EngineError, Plan, PlanError, Planned};
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
            EngineError::Platform(e) => PlanError::Resolve(e).into(),
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
    let android = row.platform == "android";
    let (injections, events) = (state.store.injections(id).await?, state.store.events(id).await?);
    let mut status = Status::new(row, injections, events)?;
    if android {
        status.android = android_report(state, id).await?;
    }
    Ok(status)
}

/// An Android experiment's device report, as last saved.
async fn android_report(state: &AppState, id: &str) -> Result<Option<serde_json::Value>, ApiError> {
    Ok(state.store.android_report(id).await?.and_then(|r| serde_json::from_str(&r).ok()))
}

/// Everything a start checks and computes before injecting (the engine's
/// planner), from this platform's request.
async fn prepare(state: &AppState, platform_name: &str, request: &StartRequest) -> Result<Planned, ApiError> {
    let kind = platform(platform_name)?;
    let limits = &state.limits;
    let lookup = |fault_type: &str| state.plugins.fault(fault_type).map(|e| (e.plugin.info().clone(), e.plugin.name().to_string()));
    state.engine.plan(&state.platforms, kind, &request.fault_type, |info, plugin| request.plan(kind, info, plugin, limits, &lookup)).await
}

impl From<PlanError> for ApiError {
    fn from(e: PlanError) -> Self {
        let detail = e.to_string();
        match e {
            PlanError::UnknownFault { known, .. } => ApiError::unprocessable("unknown_fault_type", detail).with(json!({ "known": known })),
            PlanError::PlatformUnavailable(_) => ApiError::unavailable("platform_unavailable", detail),
            PlanError::Resolve(ResolveError::NoMatch(selectors)) => {
                ApiError::unprocessable("no_matching_target", detail).with(json!({ "selectors": selectors }))
            }
            PlanError::Resolve(ResolveError::OnlyProtected(selectors, excluded)) => {
                ApiError::unprocessable("only_protected_targets", detail).with(json!({ "selectors": selectors, "excluded": excluded }))
            }
            PlanError::Resolve(ResolveError::Invalid(_)) => ApiError::unprocessable("invalid_target", detail),
            PlanError::Resolve(ResolveError::Unavailable(_)) => ApiError::unavailable("platform_unavailable", detail),
            PlanError::Resolve(ResolveError::Conflict(_)) => ApiError::new(StatusCode::CONFLICT, "resource_unavailable", detail),
            PlanError::Resolve(ResolveError::Refused(code, _)) => ApiError::unprocessable(code, detail),
            PlanError::TooManyTargets { targets, max } => {
                ApiError::unprocessable("too_many_targets", detail).with(json!({ "targets": targets, "max_targets": max }))
            }
            PlanError::BlastRadiusUnknown(_) => ApiError::unprocessable("guardrail_not_supported", detail),
            PlanError::BlastRadiusExceeded { blast_radius, max, dependents, targets } => ApiError::unprocessable("blast_radius_exceeded", detail)
                .with(json!({ "blast_radius": blast_radius, "max_blast_radius": max, "dependents": dependents, "targets": targets })),
            PlanError::Driver(CallError::Fault(FaultError::InvalidSettings(why))) => ApiError::unprocessable("invalid_settings", why),
            PlanError::Driver(CallError::Fault(FaultError::TargetUnavailable(why))) => ApiError::unprocessable("target_unavailable", why),
            PlanError::Driver(other) => ApiError::new(StatusCode::BAD_GATEWAY, "plugin_failed", other.to_string()),
        }
    }
}

/// Starts an experiment (engineer). Everything is checked before anything
/// is injected; the experiment begins in its baseline phase. Backend answers
/// include the dependency information. With an `Idempotency-Key`, a retry
/// answers with the first request's experiment; a target already under the
/// same kind of fault is a 409.
#[utoipa::path(post, path = "/experiments/{platform}/start", params(("platform" = String, Path, description = "backend, frontend or android"),
        ("Idempotency-Key" = Option<String>, Header, min_length = 1, max_length = 255, pattern = "^[!-~]+$",
            description = "1 to 255 visible ASCII characters. A retry with the same key and body answers with the first request's experiment")),
    request_body = StartRequest,
    responses((status = 201, description = "The experiment has begun, in its baseline phase", body = Started),
        (status = 400, description = "`invalid_idempotency_key`"),
        (status = 403, description = "`forbidden`: starting needs the engineer role"),
        (status = 409, description = "`target_busy`: a target is under the same kind of fault; `idempotency_key_in_use`: \
            the first request with this key is still starting; `emergency_stop_engaged`; `resource_unavailable`: the platform \
            cannot put in place what the experiment needs (frontend: the proxy cannot listen where `proxy_listen` asks)"),
        (status = 422, description = START_REFUSALS),
        (status = 502, description = "`plugin_failed`: the fault's driver failed while checking the request"),
        (status = 503, description = "`platform_unavailable`: the platform is not served by this host (for the backend: no Docker engine); \
            `shutting_down`")))]
pub async fn start(
    State(state): State<AppState>,
    caller: Caller,
    PathParam(platform_name): PathParam<String>,
    headers: HeaderMap,
    StartBody(request, body_hash): StartBody,
) -> Result<(StatusCode, HeaderMap, Extension<AuditNote>, Json<Started>), ApiError> {
    caller.require(Role::Engineer)?;
    // A client that hangs up mid-start must not cut the start in half (a
    // claimed target with no run, an idempotency key never settled): it
    // runs to its end in a task of its own, and a retry finds its outcome.
    let detached = start_detached(state, caller, platform_name, headers, request, body_hash);
    tokio::spawn(detached).await.map_err(|_| ApiError::internal("the start failed inside the host"))?
}

async fn start_detached(
    state: AppState,
    caller: Caller,
    platform_name: String,
    headers: HeaderMap,
    request: StartRequest,
    body_hash: String,
) -> Result<(StatusCode, HeaderMap, Extension<AuditNote>, Json<Started>), ApiError> {
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
    let planned = prepare(state, platform_name, request).await?;
    let row = state.engine.start(planned, &caller.name).await?;
    // As stored: with what the platform put in place at the start.
    let plan = view::plan_of(&row)?;
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
#[utoipa::path(post, path = "/experiments/{platform}/preview", params(("platform" = String, Path, description = "backend, frontend or android")),
    request_body = StartRequest,
    responses((status = 200, description = "What the start would do", body = PlanSummary),
        (status = 422, description = START_REFUSALS),
        (status = 502, description = "`plugin_failed`: the fault's driver failed while checking the request"),
        (status = 503, description = "`platform_unavailable`: the platform is not served by this host (for the backend: no Docker engine)")))]
pub async fn preview(
    State(state): State<AppState>,
    caller: Caller,
    PathParam(platform_name): PathParam<String>,
    StartBody(request, _): StartBody,
) -> Result<Json<PlanSummary>, ApiError> {
    caller.require(Role::Viewer)?;
    let planned = prepare(&state, &platform_name, &request).await?;
    Ok(Json(PlanSummary::new(&planned.plan)))
}

/// An experiment's state, phase, intensity, targets, timeline and score (viewer).
#[utoipa::path(get, path = "/experiments/{platform}/status", params(("platform" = String, Path, description = "backend, frontend or android"), IdParam),
    responses((status = 200, body = Status), (status = 400, description = "`missing_id`"),
        (status = 404, description = "`experiment_not_found`: no experiment of this platform has that id")))]
pub async fn status(
    State(state): State<AppState>,
    caller: Caller,
    PathParam(platform_name): PathParam<String>,
    IdParam(id): IdParam,
) -> Result<Json<Status>, ApiError> {
    caller.require(Role::Viewer)?;
    Ok(Json(status_of(&state, &platform_name, &id).await?))
}

/// Per-phase summaries and every observation (viewer).
#[utoipa::path(get, path = "/experiments/{platform}/metrics", params(("platform" = String, Path, description = "backend, frontend or android"), IdParam),
    responses((status = 200, body = Metrics), (status = 400, description = "`missing_id`"),
        (status = 404, description = "`experiment_not_found`: no experiment of this platform has that id")))]
pub async fn metrics(
    State(state): State<AppState>,
    caller: Caller,
    PathParam(platform_name): PathParam<String>,
    IdParam(id): IdParam,
) -> Result<Json<Metrics>, ApiError> {
    caller.require(Role::Viewer)?;
    let row = experiment(&state, &platform_name, &id).await?;
    let samples = state.store.samples(&id).await?;
    let platform = row.platform.clone();
    let mut metrics = Metrics::new(row, samples)?;
    match platform.as_str() {
        "frontend" => metrics.web = Some(crate::platforms::frontend::metrics::web_metrics(&state.store, &id).await?),
        "android" => metrics.android = android_report(&state, &id).await?,
        _ => {}
    }
    Ok(Json(metrics))
}

/// Stops an experiment (engineer): every fault is rolled back before the
/// answer; the experiment ends with state `stopped`. Stopping an ended
/// experiment changes nothing.
#[utoipa::path(post, path = "/experiments/{platform}/stop", params(("platform" = String, Path, description = "backend, frontend or android"), IdParam),
    responses((status = 200, description = "Everything is rolled back; the experiment as it ended", body = Status),
        (status = 400, description = "`missing_id`"),
        (status = 403, description = "`forbidden`: stopping needs the engineer role"),
        (status = 404, description = "`experiment_not_found`: no experiment of this platform has that id")))]
pub async fn stop(
    State(state): State<AppState>,
    caller: Caller,
    PathParam(platform_name): PathParam<String>,
    IdParam(id): IdParam,
) -> Result<Json<Status>, ApiError> {
    caller.require(Role::Engineer)?;
    experiment(&state, &platform_name, &id).await?;
    state.engine.stop(&id, &caller.name).await?;
    Ok(Json(status_of(&state, &platform_name, &id).await?))
}

/// The refusals of a start's checks, as documented.
const START_REFUSALS: &str = "The request is refused before anything is injected: `unknown_fault_type`, `fault_not_on_platform`, \
    `missing_targets`, `no_matching_target`, `invalid_target`, `only_protected_targets`, `missing_duration`, \
    `conflicting_durations`, `duration_out_of_range`, `invalid_phases`, `phases_mismatch`, `intensity_out_of_range`, \
    `intensity_not_supported`, `adaptive_not_supported`, `tolerance_out_of_range`, `unknown_param`, `invalid_param`, \
    `missing_param`, `invalid_settings`, `target_unavailable`, `invalid_probe`, `invalid_guardrail`, `too_many_targets`, \
    `blast_radius_exceeded`, `guardrail_not_supported`, `invalid_scenario` (a scenario overlapping another, ending after the \
    experiment, or running the primary fault's own kind while it is injected), `idempotency_key_reused` (starts only)";
