use axum::{Extension, Json};
use axum::extract::State;
use axum::http::StatusCode;
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use super::audit::AuditNote;
use super::extract::{JsonBody, PathParam};
use super::{ApiError, AppState};
use crate::auth::{Caller, Role, mint_key};
use crate::store::KeyRow;

#[derive(Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct CreateKey {
    /// Who or what uses the key: 1-64 characters, not all whitespace
    /// (kept without the whitespace around it).
    // The pattern is `openapi::NOT_BLANK` (an attribute takes only a literal).
    #[schema(min_length = 1, max_length = 64, pattern = "[^\\t-\\r \\u0085\\u00A0\\u1680\\u2000-\\u200A\\u2028\\u2029\\u202F\\u205F\\u3000]")]
    name: String,
    #[schema(value_type = Role)]
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
    responses((status = 201, description = "The key, shown this once", body = CreatedKey),
        (status = 403, description = "`forbidden`: keys are managed by admins"),
        (status = 422, description = "`invalid_name`, `invalid_role`")))]
pub async fn create_key(
    State(state): State<AppState>,
    caller: Caller,
    JsonBody(body): JsonBody<CreateKey>,
) -> Result<(StatusCode, Extension<AuditNote>, Json<CreatedKey>), ApiError> {
    caller.require(Role::Admin)?;
    let name = body.name.trim();
    if name.is_empty() || body.name.chars().count() > 64 {
        return Err(ApiError::unprocessable("invalid_name", "name must be 1-64 characters"));
    }
    let role = Role::parse(&body.role).ok_or_else(|| {
        ApiError::unprocessable("invalid_role", format!("role `{}` is not one of collector, viewer, engineer, admin", body.role))
    })?;
    let minted = mint_key(&state.store, name, role, Some(&caller.name)).await?;
    tracing::info!(key = %minted.row.id, name, role = role.as_str(), by = %caller.name, "API key created");
    let note = AuditNote { subject: Some(minted.row.name.clone()), detail: Some(serde_json::json!({ "id": minted.row.id, "role": role.as_str() })) };
    Ok((StatusCode::CREATED, Extension(note), Json(CreatedKey { info: minted.row.into(), key: minted.secret })))
}

/// Lists API keys, without the keys themselves (admin).
#[utoipa::path(get, path = "/api-keys", responses((status = 200, description = "Every key, revoked ones included", body = [KeyInfo]),
    (status = 403, description = "`forbidden`: keys are managed by admins")))]
pub async fn list_keys(State(state): State<AppState>, caller: Caller) -> Result<Json<Vec<KeyInfo>>, ApiError> {
    caller.require(Role::Admin)?;
    Ok(Json(state.store.list_keys().await?.into_iter().map(KeyInfo::from).collect()))
}

/// Revokes an API key (admin). The last admin key cannot be revoked.
#[utoipa::path(delete, path = "/api-keys/{id}", params(("id" = String, Path, pattern = "^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$", description = "The key's id, as listed")),
    responses((status = 204, description = "Revoked: the key is refused from now on"),
        (status = 403, description = "`forbidden`: keys are managed by admins"),
        (status = 404, description = "`key_not_found`: no live key has that id"),
        (status = 409, description = "`last_admin_key`: create another admin key first")))]
pub async fn revoke_key(State(state): State<AppState>, caller: Caller, PathParam(id): PathParam<String>) -> Result<StatusCode, ApiError> {
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
