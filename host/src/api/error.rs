//! Every error the API returns: `application/problem+json` (RFC 9457) with a
//! stable machine-readable `code`.

use axum::Json;
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde::Serialize;
use serde_json::Value;
use utoipa::ToSchema;

use crate::store::StoreError;

#[derive(Debug)]
pub struct ApiError {
    pub status: StatusCode,
    pub code: &'static str,
    pub detail: String,
    /// Extra members of the problem object, such as the valid choices.
    pub extra: Option<Value>,
    /// Seconds for a `Retry-After` header (429).
    pub retry_after: Option<u64>,
}

/// The problem document (RFC 9457), served as `application/problem+json`.
/// `code` is stable; `detail` is for people. Some problems carry more
/// members, such as the valid range of a value (`min`, `max`, `unit`) or
/// the experiment a target is busy with.
#[derive(Serialize, ToSchema)]
pub struct Problem {
    /// A URN naming the problem type: `urn:faultline:problem:<code>`.
    #[serde(rename = "type")]
    pub kind: String,
    /// The HTTP status's reason phrase.
    pub title: String,
    /// The HTTP status, repeated.
    #[schema(minimum = 400, maximum = 599)]
    pub status: u16,
    pub detail: String,
    /// Stable machine-readable code, such as `unknown_fault_type`.
    pub code: String,
    #[serde(flatten, skip_serializing_if = "Option::is_none")]
    #[schema(ignore)]
    pub extra: Option<Value>,
}

impl ApiError {
    pub fn new(status: StatusCode, code: &'static str, detail: impl Into<String>) -> Self {
        ApiError { status, code, detail: detail.into(), extra: None, retry_after: None }
    }

    /// Says when to try again.
    pub fn retry_after(mut self, seconds: u64) -> Self {
        self.retry_after = Some(seconds);
        self
    }

    /// Adds members to the problem object (they must form a JSON object).
    pub fn with(mut self, extra: Value) -> Self {
        self.extra = Some(extra);
        self
    }

    pub fn bad_request(code: &'static str, detail: impl Into<String>) -> Self {
        Self::new(StatusCode::BAD_REQUEST, code, detail)
    }
    pub fn unauthorized(code: &'static str, detail: String) -> Self {
        Self::new(StatusCode::UNAUTHORIZED, code, detail)
    }
    pub fn forbidden(detail: String) -> Self {
        Self::new(StatusCode::FORBIDDEN, "forbidden", detail)
    }
    pub fn not_found(code: &'static str, detail: impl Into<String>) -> Self {
        Self::new(StatusCode::NOT_FOUND, code, detail)
    }
    pub fn conflict(code: &'static str, detail: impl Into<String>) -> Self {
        Self::new(StatusCode::CONFLICT, code, detail)
    }
    pub fn unprocessable(code: &'static str, detail: impl Into<String>) -> Self {
        Self::new(StatusCode::UNPROCESSABLE_ENTITY, code, detail)
    }
    pub fn unavailable(code: &'static str, detail: impl Into<String>) -> Self {
        Self::new(StatusCode::SERVICE_UNAVAILABLE, code, detail)
    }
    pub fn internal(detail: impl Into<String>) -> Self {
        Self::new(StatusCode::INTERNAL_SERVER_ERROR, "internal_error", detail)
    }
}

impl From<StoreError> for ApiError {
    fn from(e: StoreError) -> Self {
        tracing::error!("store: {e}");
        ApiError::internal("the store failed; the request was not carried out")
    }
}

/// The code and text of a problem, kept on its response for the audit trail.
#[derive(Debug, Clone)]
pub struct ProblemNote {
    pub code: &'static str,
    pub detail: String,
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let note = ProblemNote { code: self.code, detail: self.detail.clone() };
        let problem = Problem {
            kind: format!("urn:faultline:problem:{}", self.code),
            title: self.status.canonical_reason().unwrap_or("Error").to_string(),
            status: self.status.as_u16(),
            detail: self.detail,
            code: self.code.to_string(),
            extra: self.extra,
        };
        let mut response = (self.status, Json(problem)).into_response();
        response.headers_mut().insert(header::CONTENT_TYPE, HeaderValue::from_static("application/problem+json"));
        if let Some(seconds) = self.retry_after {
            response.headers_mut().insert(header::RETRY_AFTER, HeaderValue::from(seconds));
        }
        response.extensions_mut().insert(note);
        response
    }
}
