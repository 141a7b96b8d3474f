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
use super::{ApiError, AppState, Problem};
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

/// Filters and paging of `GET /audit`.
#[derive(Debug, Deserialize, IntoParams)]
#[serde(deny_unknown_fields)]
pub struct AuditParams {
    /// Only this action, such as `experiment.start`.
    action: Option<String>,
    /// Only what this key (by name), `host` or `cli` did.
    actor: Option<String>,
    /// Only `succeeded`, `refused` or `failed`.
    outcome: Option<String>,
    /// Events older than this event id: the next page.
    before: Option<String>,
    /// At most this many (1-1000, default 100).
    limit: Option<i64>,
}

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
    /// plugin.replace, plugin.unload.
    action: String,
    /// The experiment id, key or plugin name acted on.
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
    responses((status = 200, body = [AuditEvent]), (status = 400, body = Problem), (status = 403, body = Problem)))]
pub async fn list(State(state): State<AppState>, caller: Caller, params: Result<Query<AuditParams>, axum::extract::rejection::QueryRejection>) -> Result<Json<Vec<AuditEvent>>, ApiError> {
    caller.require(Role::Admin)?;
    let Query(p) = params.map_err(|e| ApiError::bad_request("invalid_query", e.body_text()))?;
    let limit = p.limit.unwrap_or(100);
    if !(1..=1000).contains(&limit) {
        return Err(ApiError::bad_request("invalid_query", "limit must be 1 to 1000"));
    }
    let query = AuditQuery { action: p.action, actor: p.actor, outcome: p.outcome, before: p.before, limit };
    Ok(Json(state.store.audit_events(&query).await?.into_iter().map(AuditEvent::from).collect()))
}
