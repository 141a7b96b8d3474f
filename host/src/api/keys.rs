use axum::{Extension, Json};
use axum::extract::{Path, State};
use axum::http::StatusCode;
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use super::audit::AuditNote;
use super::extract::JsonBody;
use super::{ApiError, AppState, Problem};
use crate::auth::{Caller, Role, mint_key};
use crate::store::KeyRow;

#[derive(Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct CreateKey {
    /// Who or what uses the key, 1-64 characters.
    name: String,
    /// viewer, engineer or admin.
    role: String,
}

/// A key as listed: never the key itself.
#[derive(Serialize, ToSchema)]
pub struct KeyInfo {
    id: String,
    name: String,
    role: String,
    /// The key's first characters, to tell keys apart.
    key_prefix: String,
    created_by: Option<String>,
    created_at: i64,
    revoked_at: Option<i64>,
}

/// A new key: `key` is shown this once.
#[derive(Serialize, ToSchema)]
pub struct CreatedKey {
    #[serde(flatten)]
    info: KeyInfo,
    key: String,
}

impl From<KeyRow> for KeyInfo {
    fn from(r: KeyRow) -> Self {
        KeyInfo {
            id: r.id,
            name: r.name,
            role: r.role,
            key_prefix: r.key_prefix,
            created_by: r.created_by,
            created_at: r.created_at,
            revoked_at: r.revoked_at,
        }
    }
}

/// Creates an API key (admin).
#[utoipa::path(post, path = "/api-keys", request_body = CreateKey,
    responses((status = 201, body = CreatedKey), (status = 401, body = Problem), (status = 403, body = Problem), (status = 422, body = Problem)))]
pub async fn create_key(
    State(state): State<AppState>,
    caller: Caller,
    JsonBody(body): JsonBody<CreateKey>,
) -> Result<(StatusCode, Extension<AuditNote>, Json<CreatedKey>), ApiError> {
    caller.require(Role::Admin)?;
    let name = body.name.trim();
    if name.is_empty() || name.chars().count() > 64 {
        return Err(ApiError::unprocessable("invalid_name", "name must be 1-64 characters"));
    }
    let role = Role::parse(&body.role).ok_or_else(|| {
        ApiError::unprocessable("invalid_role", format!("role `{}` is not one of viewer, engineer, admin", body.role))
    })?;
    let minted = mint_key(&state.store, name, role, Some(&caller.name)).await?;
    tracing::info!(key = %minted.row.id, name, role = role.as_str(), by = %caller.name, "API key created");
    let note = AuditNote { subject: Some(minted.row.name.clone()), detail: Some(serde_json::json!({ "id": minted.row.id, "role": role.as_str() })) };
    Ok((StatusCode::CREATED, Extension(note), Json(CreatedKey { info: minted.row.into(), key: minted.secret })))
}

/// Lists API keys, without the keys themselves (admin).
#[utoipa::path(get, path = "/api-keys", responses((status = 200, body = [KeyInfo]), (status = 403, body = Problem)))]
pub async fn list_keys(State(state): State<AppState>, caller: Caller) -> Result<Json<Vec<KeyInfo>>, ApiError> {
    caller.require(Role::Admin)?;
    Ok(Json(state.store.list_keys().await?.into_iter().map(KeyInfo::from).collect()))
}

/// Revokes an API key (admin). The last admin key cannot be revoked.
#[utoipa::path(delete, path = "/api-keys/{id}", params(("id" = String, Path)),
    responses((status = 204), (status = 404, body = Problem), (status = 409, body = Problem)))]
pub async fn revoke_key(State(state): State<AppState>, caller: Caller, Path(id): Path<String>) -> Result<StatusCode, ApiError> {
    caller.require(Role::Admin)?;
    let key = state.store.key_by_id(&id).await?.filter(|k| k.revoked_at.is_none());
    let key = key.ok_or_else(|| ApiError::not_found("key_not_found", format!("no live key with id `{id}`")))?;
    if key.role == "admin" && state.store.count_other_admins(&id).await? == 0 {
        return Err(ApiError::conflict("last_admin_key", "this is the last admin key; create another admin key first"));
    }
    state.store.revoke_key(&id).await?;
    tracing::info!(key = %id, by = %caller.name, "API key revoked");
    Ok(StatusCode::NO_CONTENT)
}
