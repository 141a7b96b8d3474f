//! API keys and roles. Keys are random, shown once, stored as SHA-256: a
//! fast hash is enough because a key carries 238 bits of randomness, unlike
//! a password.

use axum::extract::FromRequestParts;
use axum::http::request::Parts;
use rand::RngExt;
use rand::distr::Alphanumeric;
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};
use utoipa::ToSchema;

use crate::api::{ApiError, AppState};
use crate::store::{KeyRow, Store, StoreError, now_ms};

/// The header that carries the key.
pub const KEY_HEADER: &str = "x-api-key";
const KEY_PREFIX: &str = "flk_";
const KEY_RANDOM_CHARS: usize = 40;

/// What a key may do. Each role includes the ones before it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum Role {
    /// Only reports Web Vitals and reads a page's experiment and rules
    /// (`/collector/*`): the key a web page carries, which anyone can read.
    Collector,
    /// Reads experiments, metrics and fault types.
    Viewer,
    /// Runs experiments and uploads APKs.
    Engineer,
    /// Manages keys and plugins.
    Admin,
}

impl Role {
    pub fn as_str(self) -> &'static str {
        match self {
            Role::Collector => "collector",
            Role::Viewer => "viewer",
            Role::Engineer => "engineer",
            Role::Admin => "admin",
        }
    }

    pub fn parse(s: &str) -> Option<Role> {
        [Role::Collector, Role::Viewer, Role::Engineer, Role::Admin].into_iter().find(|r| r.as_str() == s)
    }
}

/// A freshly minted key: `secret` is shown once and never stored.
pub struct MintedKey {
    pub row: KeyRow,
    pub secret: String,
}

pub fn hash_key(secret: &str) -> String {
    hex::encode(Sha256::digest(secret.as_bytes()))
}

/// Whether a presented key has the shape of one this host mints.
fn well_formed(secret: &str) -> bool {
    secret.len() == KEY_PREFIX.len() + KEY_RANDOM_CHARS
        && secret.starts_with(KEY_PREFIX)
        && secret[KEY_PREFIX.len()..].chars().all(|c| c.is_ascii_alphanumeric())
}

/// Creates and stores a key.
pub async fn mint_key(store: &Store, name: &str, role: Role, created_by: Option<&str>) -> Result<MintedKey, StoreError> {
    let random: String = rand::rng().sample_iter(&Alphanumeric).take(KEY_RANDOM_CHARS).map(char::from).collect();
    let secret = format!("{KEY_PREFIX}{random}");
    let row = KeyRow {
        id: uuid::Uuid::new_v4().to_string(),
        name: name.to_string(),
        role: role.as_str().to_string(),
        key_prefix: secret[..KEY_PREFIX.len() + 4].to_string(),
        created_by: created_by.map(str::to_string),
        created_at: now_ms(),
        revoked_at: None,
    };
    store.insert_key(&row, &hash_key(&secret)).await?;
    Ok(MintedKey { row, secret })
}

/// The authenticated caller of a request.
#[derive(Debug, Clone)]
pub struct Caller {
    pub key_id: String,
    pub name: String,
    pub role: Role,
}

impl Caller {
    /// Refuses with 403 unless the caller's role includes `needed`.
    pub fn require(&self, needed: Role) -> Result<(), ApiError> {
        if self.role >= needed {
            Ok(())
        } else {
            Err(ApiError::forbidden(format!(
                "this action needs the {} role; the key `{}` has {}",
                needed.as_str(),
                self.name,
                self.role.as_str()
            )))
        }
    }
}

impl FromRequestParts<AppState> for Caller {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &AppState) -> Result<Self, Self::Rejection> {
        // Already authenticated by a middleware (the audit trail's).
        if let Some(caller) = parts.extensions.get::<Caller>() {
            return Ok(caller.clone());
        }
        let Some(value) = parts.headers.get(KEY_HEADER) else {
            return Err(ApiError::unauthorized("missing_api_key", format!("send an API key in the {KEY_HEADER} header")));
        };
        authenticate(&state.store, value.to_str().unwrap_or_default()).await
    }
}

/// The caller a presented key stands for.
pub async fn authenticate(store: &Store, secret: &str) -> Result<Caller, ApiError> {
        let secret = secret.trim();
        if !well_formed(secret) {
            return Err(ApiError::unauthorized(
                "malformed_api_key",
                format!("API keys are {KEY_PREFIX} followed by {KEY_RANDOM_CHARS} letters and digits"),
            ));
        }
        let row = store.key_by_hash(&hash_key(secret)).await?;
        let Some(row) = row else {
            return Err(ApiError::unauthorized("unknown_api_key", "this API key is unknown or revoked".into()));
        };
        let role = Role::parse(&row.role).ok_or_else(|| StoreError::Corrupt(format!("key {} has role {}", row.id, row.role)))?;
        Ok(Caller { key_id: row.id, name: row.name, role })
}
