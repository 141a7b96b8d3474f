//! `Idempotency-Key` on start requests: a client that retries a start (a
//! timeout, a dropped connection) gets the experiment its first request
//! created, and nothing is injected twice. Keys belong to the API key that
//! sent them and are remembered for a day; the same key with another body
//! is refused.

use axum::http::{HeaderMap, HeaderName, StatusCode};
use serde_json::json;

use crate::api::ApiError;

pub const HEADER: &str = "idempotency-key";
/// Set on an answer that repeats an earlier one.
pub const REPLAYED: HeaderName = HeaderName::from_static("idempotent-replayed");
/// How long a key is remembered: 24 hours.
pub const TTL_MS: i64 = 24 * 3600 * 1000;
const MAX_LENGTH: usize = 255;

/// The request's key, if it sent one: 1 to 255 visible ASCII characters.
pub fn key(headers: &HeaderMap) -> Result<Option<String>, ApiError> {
    let Some(value) = headers.get(HEADER) else { return Ok(None) };
    match value.to_str() {
        Ok(k) if (1..=MAX_LENGTH).contains(&k.len()) && k.bytes().all(|b| b.is_ascii_graphic()) => Ok(Some(k.to_string())),
        _ => Err(ApiError::bad_request(
            "invalid_idempotency_key",
            format!("Idempotency-Key must be 1 to {MAX_LENGTH} visible ASCII characters"),
        )),
    }
}

pub fn reused(key: &str) -> ApiError {
    ApiError::unprocessable(
        "idempotency_key_reused",
        format!("Idempotency-Key `{key}` was used with a different request; a retry must send the same body"),
    )
    .with(json!({ "idempotency_key": key }))
}

pub fn in_flight(key: &str) -> ApiError {
    ApiError::new(
        StatusCode::CONFLICT,
        "idempotency_key_in_use",
        format!("a start with Idempotency-Key `{key}` is still being processed; retry in a moment"),
    )
    .with(json!({ "idempotency_key": key }))
}
