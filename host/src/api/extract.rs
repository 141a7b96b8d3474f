//! Extractors whose every rejection is a problem+json with a stable code.

use std::time::{Duration, Instant};

use axum::body::{Body, Bytes};
use http_body_util::BodyExt;
use axum::extract::{FromRequest, FromRequestParts, Path, Request};
use axum::http::header::CONTENT_TYPE;
use axum::http::request::Parts;
use axum::http::StatusCode;
use serde::de::DeserializeOwned;

use super::ApiError;

/// Largest JSON body accepted.
pub const MAX_JSON_BYTES: usize = 64 << 10;

/// A JSON body: 415 without a JSON content type, 413 when too large, 400
/// when it is not JSON, 422 when it is JSON of the wrong shape.
pub struct JsonBody<T>(pub T);

impl<S: Send + Sync, T: DeserializeOwned> FromRequest<S> for JsonBody<T> {
    type Rejection = ApiError;

    async fn from_request(req: Request, _: &S) -> Result<Self, ApiError> {
        let content_type = req.headers().get(CONTENT_TYPE).and_then(|v| v.to_str().ok()).unwrap_or_default();
        let essence = content_type.split(';').next().unwrap_or_default().trim().to_ascii_lowercase();
        if essence != "application/json" && !essence.ends_with("+json") {
            return Err(ApiError::new(
                StatusCode::UNSUPPORTED_MEDIA_TYPE,
                "unsupported_media_type",
                "send the body as application/json",
            ));
        }
        let bytes = body_bytes(req, MAX_JSON_BYTES).await?;
        serde_json::from_slice(&bytes).map(JsonBody).map_err(json_error)
    }
}

/// A JSON body that may be left out: no body at all is `None`; anything
/// else is read as `JsonBody` would.
pub struct OptionalJsonBody<T>(pub Option<T>);

impl<S: Send + Sync, T: DeserializeOwned> FromRequest<S> for OptionalJsonBody<T> {
    type Rejection = ApiError;

    async fn from_request(req: Request, state: &S) -> Result<Self, ApiError> {
        if req.headers().contains_key(CONTENT_TYPE) {
            return JsonBody::from_request(req, state).await.map(|JsonBody(body)| OptionalJsonBody(Some(body)));
        }
        if !body_bytes(req, MAX_JSON_BYTES).await?.is_empty() {
            return Err(ApiError::new(StatusCode::UNSUPPORTED_MEDIA_TYPE, "unsupported_media_type", "send the body as application/json"));
        }
        Ok(OptionalJsonBody(None))
    }
}

/// A JSON body and the SHA-256 of its canonical form (object keys sorted,
/// no whitespace): a retry of a request and a different request look
/// different only where their JSON differs.
pub struct HashedJsonBody<T>(pub T, pub String);

impl<S: Send + Sync, T: DeserializeOwned> FromRequest<S> for HashedJsonBody<T> {
    type Rejection = ApiError;

    async fn from_request(req: Request, state: &S) -> Result<Self, ApiError> {
        use sha2::Digest;
        let JsonBody(mut value) = JsonBody::<serde_json::Value>::from_request(req, state).await?;
        value.sort_all_objects();
        let hash = hex::encode(sha2::Sha256::digest(value.to_string()));
        serde_json::from_value(value).map(|body| HashedJsonBody(body, hash)).map_err(json_error)
    }
}

/// Past the limit, how much more of a body is read and dropped, and for how
/// long, before answering 413: a client still sending when the connection
/// closes never sees the answer.
const DRAIN_BYTES: usize = 64 << 20;
const DRAIN_TIME: Duration = Duration::from_secs(2);

/// Reads a body up to `limit` bytes; 413 beyond it.
pub async fn body_bytes(req: Request, limit: usize) -> Result<Bytes, ApiError> {
    let mut body = req.into_body();
    let mut bytes = Vec::new();
    while let Some(frame) = body.frame().await {
        let frame = frame.map_err(|e| ApiError::bad_request("unreadable_body", format!("reading the body failed: {e}")))?;
        if let Ok(data) = frame.into_data() {
            if bytes.len() + data.len() > limit {
                drain(body, DRAIN_BYTES).await;
                return Err(ApiError::new(
                    StatusCode::PAYLOAD_TOO_LARGE,
                    "payload_too_large",
                    format!("the body is larger than {limit} bytes"),
                ));
            }
            bytes.extend_from_slice(&data);
        }
    }
    Ok(bytes.into())
}

/// Reads and drops up to `cap` more bytes of a body, for at most DRAIN_TIME.
pub async fn drain(mut body: Body, cap: usize) {
    let until = Instant::now() + DRAIN_TIME;
    let mut read = 0;
    while read < cap {
        let left = until.saturating_duration_since(Instant::now());
        match tokio::time::timeout(left, body.frame()).await {
            Ok(Some(Ok(frame))) => read += frame.data_ref().map_or(0, |d| d.len()),
            _ => return,
        }
    }
}

pub(in crate::api) fn json_error(e: serde_json::Error) -> ApiError {
    use serde_json::error::Category;
    let detail = e.to_string();
    match e.classify() {
        Category::Syntax | Category::Eof | Category::Io => ApiError::bad_request("malformed_json", format!("the body is not valid JSON: {detail}")),
        Category::Data if detail.contains("unknown field") => ApiError::unprocessable("unknown_field", detail),
        Category::Data if detail.contains("missing field") => ApiError::unprocessable("missing_field", detail),
        Category::Data => ApiError::unprocessable("invalid_field", detail),
    }
}

/// Path parameters; a path that does not decode is a problem too (400
/// `invalid_path`), like every other refusal.
pub struct PathParam<T>(pub T);

impl<S: Send + Sync, T: DeserializeOwned + Send> FromRequestParts<S> for PathParam<T> {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Self, ApiError> {
        match Path::<T>::from_request_parts(parts, state).await {
            Ok(Path(value)) => Ok(PathParam(value)),
            Err(e) => Err(ApiError::bad_request("invalid_path", e.body_text())),
        }
    }
}

/// The `id` query parameter of the status, metrics and stop routes.
pub struct IdParam(pub String);

impl utoipa::IntoParams for IdParam {
    fn into_params(_: impl Fn() -> Option<utoipa::openapi::path::ParameterIn>) -> Vec<utoipa::openapi::path::Parameter> {
        use utoipa::openapi::path::{ParameterBuilder, ParameterIn};
        use utoipa::openapi::schema::{ObjectBuilder, SchemaFormat, Type};
        use utoipa::openapi::Required;
        let schema = ObjectBuilder::new().schema_type(Type::String).format(Some(SchemaFormat::Custom("uuid".into())));
        let id = ParameterBuilder::new()
            .name("id")
            .parameter_in(ParameterIn::Query)
            .required(Required::True)
            .description(Some("The experiment's id, as its start answered. Missing or empty: 400 `missing_id`; no such experiment: 404"))
            .schema(Some(schema))
            .build();
        vec![id]
    }
}

impl<S: Send + Sync> FromRequestParts<S> for IdParam {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, _: &S) -> Result<Self, ApiError> {
        let query = parts.uri.query().unwrap_or_default();
        let id = query
            .split('&')
            .filter_map(|pair| pair.split_once('='))
            .find(|(k, _)| *k == "id")
            .map(|(_, v)| v.to_string())
            .filter(|v| !v.is_empty());
        let id = id.ok_or_else(|| ApiError::bad_request("missing_id", "give the experiment as ?id=<experiment id>"))?;
        uuid::Uuid::parse_str(&id)
            .map(|u| IdParam(u.to_string()))
            .map_err(|_| ApiError::not_found("experiment_not_found", format!("no experiment with id `{id}`")))
    }
}
