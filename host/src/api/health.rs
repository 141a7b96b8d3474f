use axum::Json;
use serde::Serialize;
use utoipa::ToSchema;

use super::{ApiError, AppState};

#[derive(Serialize, ToSchema)]
pub struct Health {
    /// "ok" when the host and its store answer.
    status: &'static str,
    version: &'static str,
}

/// Liveness and readiness; needs no API key.
#[utoipa::path(get, path = "/health", security(()), responses((status = 200, body = Health)))]
pub async fn health(state: axum::extract::State<AppState>) -> Result<Json<Health>, ApiError> {
    state.store.ping().await?;
    Ok(Json(Health { status: "ok", version: env!("CARGO_PKG_VERSION") }))
}

