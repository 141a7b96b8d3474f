use std::sync::Arc;

use axum::Json;
use axum::extract::State;
use axum::http::header::CONTENT_TYPE;
use axum::response::IntoResponse;

use super::{ApiError, AppState};
use crate::auth::{Caller, Role};

/// Prometheus metrics in the text format (viewer).
#[utoipa::path(get, path = "/metrics", responses((status = 200, content_type = "text/plain", body = String)))]
pub async fn prometheus(State(state): State<AppState>, caller: Caller) -> Result<impl IntoResponse, ApiError> {
    caller.require(Role::Viewer)?;
    state.metrics.set_experiment_counts(&state.store.count_experiments_by_state().await?);
    state.metrics.set_emergency_stop(state.engine.emergency_stop_in_force().is_some());
    Ok(([(CONTENT_TYPE, "text/plain; version=0.0.4; charset=utf-8")], state.metrics.encode()))
}

/// The OpenAPI document of every route (viewer).
pub async fn openapi(caller: Caller, doc: Arc<serde_json::Value>) -> Result<impl IntoResponse, ApiError> {
    caller.require(Role::Viewer)?;
    Ok(Json(doc.as_ref().clone()))
}
