//! The emergency stop: one admin call halts every running experiment (each
//! rolled back before the answer) and refuses every start until an admin
//! lifts it. It survives a restart of the host.

use axum::extract::State;
use axum::{Extension, Json};
use serde::{Deserialize, Serialize};
use serde_json::json;
use utoipa::ToSchema;

use super::audit::AuditNote;
use super::extract::OptionalJsonBody;
use super::{ApiError, AppState};
use crate::auth::{Caller, Role};
use crate::store::EmergencyStopRow;

#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct EngageRequest {
    /// Why, for whoever finds it engaged (up to 500 characters).
    #[schema(max_length = 500)]
    reason: Option<String>,
}

/// Whether an emergency stop is in force, who engaged it, when and why.
#[derive(Debug, Serialize, ToSchema)]
pub struct EmergencyStop {
    engaged: bool,
    engaged_by: Option<String>,
    /// Milliseconds since the Unix epoch.
    engaged_at: Option<i64>,
    reason: Option<String>,
    lifted_by: Option<String>,
    lifted_at: Option<i64>,
    /// The experiments this call halted (engaging only).
    #[serde(skip_serializing_if = "Option::is_none")]
    halted: Option<Vec<String>>,
}

impl EmergencyStop {
    fn new(row: Option<EmergencyStopRow>, halted: Option<Vec<String>>) -> Self {
        match row {
            Some(r) => EmergencyStop {
                engaged: r.lifted_at.is_none(),
                engaged_by: Some(r.engaged_by),
                engaged_at: Some(r.engaged_at),
                reason: r.reason,
                lifted_by: r.lifted_by,
                lifted_at: r.lifted_at,
                halted,
            },
            None => EmergencyStop {
                engaged: false,
                engaged_by: None,
                engaged_at: None,
                reason: None,
                lifted_by: None,
                lifted_at: None,
                halted,
            },
        }
    }
}

/// The refusal of a start while an emergency stop is in force.
pub fn engaged_error(halt: &EmergencyStopRow) -> ApiError {
    ApiError::conflict(
        "emergency_stop_engaged",
        format!(
            "an emergency stop by {} is in force{}; nothing starts until an admin lifts it (DELETE /emergency-stop)",
            halt.engaged_by,
            halt.reason.as_deref().map(|r| format!(" ({r})")).unwrap_or_default()
        ),
    )
    .with(json!({ "engaged_by": halt.engaged_by, "engaged_at": halt.engaged_at, "reason": halt.reason }))
}

/// Whether an emergency stop is in force (viewer).
#[utoipa::path(get, path = "/emergency-stop", responses((status = 200, body = EmergencyStop)))]
pub async fn status(State(state): State<AppState>, caller: Caller) -> Result<Json<EmergencyStop>, ApiError> {
    caller.require(Role::Viewer)?;
    Ok(Json(EmergencyStop::new(state.engine.emergency_stop_in_force(), None)))
}

/// Engages the emergency stop (admin): every running experiment is rolled
/// back before the answer, which lists them; starts are refused with 409
/// `emergency_stop_engaged` until it is lifted. Engaging it again keeps the
/// first one in force and halts whatever runs.
#[utoipa::path(post, path = "/emergency-stop", request_body(content = Option<EngageRequest>, description = "Optional: no body at all engages it without a reason"),
    responses((status = 200, description = "In force; everything that ran is rolled back", body = EmergencyStop),
        (status = 403, description = "`forbidden`: engaging it needs the admin role"),
        (status = 422, description = "`invalid_reason`: longer than 500 characters")))]
pub async fn engage(
    State(state): State<AppState>,
    caller: Caller,
    OptionalJsonBody(body): OptionalJsonBody<EngageRequest>,
) -> Result<(Extension<AuditNote>, Json<EmergencyStop>), ApiError> {
    caller.require(Role::Admin)?;
    let reason = body.and_then(|b| b.reason);
    if reason.as_ref().is_some_and(|r| r.chars().count() > 500) {
        return Err(ApiError::unprocessable("invalid_reason", "reason must be at most 500 characters"));
    }
    let reason = reason.map(|r| r.trim().to_string()).filter(|r| !r.is_empty());
    let (halt, halted) = state.engine.emergency_stop(&caller.name, reason).await?;
    tracing::warn!(by = %caller.name, halted = halted.len(), "emergency stop engaged");
    let note = AuditNote { subject: Some(halt.id.clone()), detail: Some(json!({ "reason": halt.reason, "halted": halted })) };
    Ok((Extension(note), Json(EmergencyStop::new(Some(halt), Some(halted)))))
}

/// Lifts the emergency stop (admin): starts are accepted again. 409
/// `emergency_stop_not_engaged` when none is in force.
#[utoipa::path(delete, path = "/emergency-stop", responses((status = 200, description = "Lifted: starts are accepted again", body = EmergencyStop),
    (status = 403, description = "`forbidden`: lifting it needs the admin role"),
    (status = 409, description = "`emergency_stop_not_engaged`")))]
pub async fn lift(State(state): State<AppState>, caller: Caller) -> Result<(Extension<AuditNote>, Json<EmergencyStop>), ApiError> {
    caller.require(Role::Admin)?;
    let halt = state.engine.lift_emergency_stop(&caller.name).await?;
    tracing::warn!(by = %caller.name, "emergency stop lifted");
    let note = AuditNote { subject: Some(halt.id.clone()), detail: Some(json!({ "engaged_by": halt.engaged_by, "engaged_at": halt.engaged_at })) };
    Ok((Extension(note), Json(EmergencyStop::new(Some(halt), None))))
}

/// 409 for a lift with nothing to lift.
pub fn not_engaged() -> ApiError {
    ApiError::conflict("emergency_stop_not_engaged", "no emergency stop is in force")
}
