//! The audit trail: every start, stop, emergency stop, key and plugin
//! change made through the API is recorded with the caller's key name, the
//! time and the outcome, refusals included; an admin lists them at
//! `GET /audit`.
//!
//! Recording is one middleware over the router, driven by the `AUDITED`
//! table, so no handler can forget it. Handlers add what only they know
//! (the experiment a start created) as an `AuditNote` on their response.
//! Requests without a valid key are not recorded (they changed nothing and
//! anyone could fill the trail with them); the logs keep them.

use axum::Json;
use axum::extract::{FromRequestParts, MatchedPath, Query, RawPathParams, Request, State};
use axum::http::Method;
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use serde::{Deserialize, Serialize};
use serde_json::Value;
use utoipa::{IntoParams, ToSchema};

use super::error::ProblemNote;
use super::extract::IdParam;
use super::{ApiError, AppState};
use crate::auth::{Caller, Role};
use crate::store::{AuditQuery, AuditRow, now_ms};

/// The audited routes and the action each records.
const AUDITED: &[(Method, &str, &str)] = &[
    (Method::POST, "/experiments/{platform}/start", "experiment.start"),
    (Method::POST, "/experiments/{platform}/stop", "experiment.stop"),
    (Method::POST, "/emergency-stop", "emergency_stop.engage"),
    (Method::DELETE, "/emergency-stop", "emergency_stop.lift"),
    (Method::POST, "/api-keys", "api_key.create"),
    (Method::DELETE, "/api-keys/{id}", "api_key.revoke"),
    (Method::POST, "/plugins/{name}", "plugin.load"),
    (Method::PUT, "/plugins/{name}", "plugin.replace"),
    (Method::DELETE, "/plugins/{name}", "plugin.unload"),
    (Method::POST, "/upload/apk", "apk.upload"),
    (Method::POST, "/android/upload", "apk.upload"),
    (Method::DELETE, "/apks/{id}", "apk.delete"),
];

/// What a handler adds to its audit record.
#[derive(Debug, Clone, Default)]
pub struct AuditNote {
    pub subject: Option<String>,
    pub detail: Option<Value>,
}

/// Middleware: records the outcome of every call of an audited route.
pub async fn record(State(state): State<AppState>, request: Request, next: Next) -> Response {
    let matched = request.extensions().get::<MatchedPath>().map(|m| m.as_str().to_string());
    let action = AUDITED.iter().find(|(m, p, _)| m == request.method() && Some(*p) == matched.as_deref()).map(|(_, _, a)| *a);
    let Some(action) = action else { return next.run(request).await };

    let (mut parts, body) = request.into_parts();
    let caller = match Caller::from_request_parts(&mut parts, &state).await {
        Ok(caller) => caller,
        Err(refusal) => return refusal.into_response(),
    };
    // The subject as the request names it: the path's {id} or {name}, or ?id=.
    let named = RawPathParams::from_request_parts(&mut parts, &state).await.ok().and_then(|params| {
        params.iter().find(|(k, _)| *k == "id" || *k == "name").map(|(_, v)| v.to_string())
    });
    let queried = IdParam::from_request_parts(&mut parts, &state).await.ok().map(|IdParam(id)| id);
    parts.extensions.insert(caller.clone());

    let response = next.run(Request::from_parts(parts, body)).await;

    let status = response.status();
    let note = response.extensions().get::<AuditNote>().cloned().unwrap_or_default();
    let problem = response.extensions().get::<ProblemNote>();
    let outcome = match status.as_u16() {
        200..=399 => "succeeded",
        400..=499 => "refused",
        _ => "failed",
    };
    let detail = match (note.detail, problem) {
        (Some(d), _) => Some(d),
        (None, Some(p)) => Some(serde_json::json!({ "detail": p.detail })),
        (None, None) => None,
    };
    let row = AuditRow {
        id: uuid::Uuid::now_v7().to_string(),
        at_ms: now_ms(),
        key_id: Some(caller.key_id.clone()),
        actor: caller.name.clone(),
        role: Some(caller.role.as_str().into()),
        action: action.into(),
        subject: note.subject.or(named).or(queried),
        outcome: outcome.into(),
        status: Some(status.as_u16().into()),
        code: problem.map(|p| p.code.to_string()),
        detail: detail.map(|d| d.to_string()),
    };
    if let Err(e) = state.store.record_audit(&row).await {
        tracing::error!(action, actor = %caller.name, "could not record an audit event: {e}");
    }
    response
}

/// Filters and paging of `GET /audit`. Anything else in the query, or a
/// value outside these, is 400 `invalid_query`.
#[derive(Debug, Deserialize, IntoParams)]
#[serde(deny_unknown_fields)]
#[into_params(parameter_in = Query)]
pub struct AuditParams {
    /// Only this action.
    #[param(nullable = false, value_type = Option<AuditAction>, inline)]
    action: Option<String>,
    /// Only what this key (by name), `host` or `cli` did.
    #[param(nullable = false)]
    actor: Option<String>,
    /// Only this outcome.
    #[param(nullable = false, value_type = Option<Outcome>, inline)]
    outcome: Option<String>,
    /// Events older than this event id: the next page.
    #[param(nullable = false, pattern = "^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$")]
    before: Option<String>,
    /// At most this many (default 100).
    #[param(nullable = false, minimum = 1, maximum = 1000)]
    limit: Option<i64>,
}

/// An audited action.
#[derive(ToSchema)]
#[serde(rename_all = "snake_case")]
#[allow(dead_code, reason = "documents the values of `action`")]
pub enum AuditAction {
    #[schema(rename = "experiment.start")]
    ExperimentStart,
    #[schema(rename = "experiment.stop")]
    ExperimentStop,
    #[schema(rename = "emergency_stop.engage")]
    EmergencyStopEngage,
    #[schema(rename = "emergency_stop.lift")]
    EmergencyStopLift,
    #[schema(rename = "api_key.create")]
    ApiKeyCreate,
    #[schema(rename = "api_key.revoke")]
    ApiKeyRevoke,
    #[schema(rename = "plugin.load")]
    PluginLoad,
    #[schema(rename = "plugin.replace")]
    PluginReplace,
    #[schema(rename = "plugin.unload")]
    PluginUnload,
    #[schema(rename = "apk.upload")]
    ApkUpload,
    #[schema(rename = "apk.delete")]
    ApkDelete,
}

/// How an audited call ended: `refused` for a 4xx, `failed` for a 5xx.
#[derive(ToSchema)]
#[serde(rename_all = "snake_case")]
#[allow(dead_code, reason = "documents the values of `outcome`")]
pub enum Outcome {
    Succeeded,
    Refused,
    Failed,
}

/// Every action the trail records: the audited routes' and the host's own.
const ACTIONS: [&str; 11] = [
    "experiment.start",
    "experiment.stop",
    "emergency_stop.engage",
    "emergency_stop.lift",
    "api_key.create",
    "api_key.revoke",
    "plugin.load",
    "plugin.replace",
    "plugin.unload",
    "apk.upload",
    "apk.delete",
];
const OUTCOMES: [&str; 3] = ["succeeded", "refused", "failed"];

/// One audited action.
#[derive(Debug, Serialize, ToSchema)]
pub struct AuditEvent {
    /// Sorts by time (UUIDv7).
    id: String,
    /// Milliseconds since the Unix epoch.
    at: i64,
    /// The key's name, or `host` / `cli` for what the host did itself.
    actor: String,
    key_id: Option<String>,
    role: Option<String>,
    /// experiment.start, experiment.stop, emergency_stop.engage,
    /// emergency_stop.lift, api_key.create, api_key.revoke, plugin.load,
    /// plugin.replace, plugin.unload, apk.upload, apk.delete.
    action: String,
    /// The experiment id, key, plugin name or APK id acted on.
    subject: Option<String>,
    /// succeeded, refused or failed.
    outcome: String,
    /// The HTTP status answered.
    status: Option<i64>,
    /// The problem code of a refusal or failure.
    code: Option<String>,
    #[schema(value_type = Option<Object>)]
    detail: Option<Value>,
}

impl From<AuditRow> for AuditEvent {
    fn from(r: AuditRow) -> Self {
        AuditEvent {
            id: r.id,
            at: r.at_ms,
            actor: r.actor,
            key_id: r.key_id,
            role: r.role,
            action: r.action,
            subject: r.subject,
            outcome: r.outcome,
            status: r.status,
            code: r.code,
            detail: r.detail.and_then(|d| serde_json::from_str(&d).ok()),
        }
    }
}

/// The audit trail, newest first (admin).
#[utoipa::path(get, path = "/audit", params(AuditParams),
    responses((status = 200, description = "The events, newest first", body = [AuditEvent]),
        (status = 400, description = "`invalid_query`: an unknown parameter, or a value outside its range"),
        (status = 403, description = "`forbidden`: the audit trail is for admins")))]
pub async fn list(State(state): State<AppState>, caller: Caller, params: Result<Query<AuditParams>, axum::extract::rejection::QueryRejection>) -> Result<Json<Vec<AuditEvent>>, ApiError> {
    caller.require(Role::Admin)?;
    let Query(p) = params.map_err(|e| ApiError::bad_request("invalid_query", e.body_text()))?;
    let invalid = |detail: String| Err(ApiError::bad_request("invalid_query", detail));
    let limit = p.limit.unwrap_or(100);
    if !(1..=1000).contains(&limit) {
        return invalid("limit must be 1 to 1000".into());
    }
    if let Some(action) = p.action.as_deref().filter(|a| !ACTIONS.contains(a)) {
        return invalid(format!("action `{action}` is not one of {}", ACTIONS.join(", ")));
    }
    if let Some(outcome) = p.outcome.as_deref().filter(|o| !OUTCOMES.contains(o)) {
        return invalid(format!("outcome `{outcome}` is not one of {}", OUTCOMES.join(", ")));
    }
    // Event ids are UUIDs in their hyphenated form (36 characters).
    let before = match p.before {
        Some(b) => match uuid::Uuid::parse_str(&b) {
            Ok(id) if b.len() == 36 => Some(id.to_string()),
            _ => return invalid(format!("before `{b}` is not an event id")),
        },
        None => None,
    };
    let query = AuditQuery { action: p.action, actor: p.actor, outcome: p.outcome, before, limit };
    Ok(Json(state.store.audit_events(&query).await?.into_iter().map(AuditEvent::from).collect()))
}
