//! The body of a start or a preview, read for the platform in its path.
//! Every platform takes the common fields (`StartRequest`); an Android
//! start also takes the spec's own fields (`AndroidOptions`), a frontend
//! start its mode, routes and proxy addresses (`FrontendOptions`); each is
//! refused as unknown on the other platforms.

use axum::extract::{FromRequest, FromRequestParts, RawPathParams, Request};
use serde_json::{Map, Value};

use super::StartRequest;
use crate::api::ApiError;
use crate::platforms::android::options::AndroidOptions;
use crate::platforms::frontend::options::FrontendOptions;
use crate::api::extract::{HashedJsonBody, json_error};

/// A start request and the hash of its canonical JSON (for `Idempotency-Key`).
pub struct StartBody(pub StartRequest, pub String);

impl<S: Send + Sync> FromRequest<S> for StartBody {
    type Rejection = ApiError;

    async fn from_request(req: Request, state: &S) -> Result<Self, ApiError> {
        let (mut parts, body) = req.into_parts();
        let platform = RawPathParams::from_request_parts(&mut parts, state)
            .await
            .ok()
            .and_then(|params| params.iter().find(|(k, _)| *k == "platform").map(|(_, v)| v.to_string()));
        let HashedJsonBody(value, hash) = HashedJsonBody::<Value>::from_request(Request::from_parts(parts, body), state).await?;
        let request = match platform.as_deref() {
            Some("android") => android(value)?,
            Some("frontend") => frontend(value)?,
            _ => serde_json::from_value(value).map_err(json_error)?,
        };
        Ok(StartBody(request, hash))
    }
}

/// The fields only a frontend start takes (`FrontendOptions`).
pub const FRONTEND_FIELDS: [&str; 3] = ["mode", "routes", "proxy_listen"];

fn frontend(value: Value) -> Result<StartRequest, ApiError> {
    let Value::Object(mut common) = value else {
        return serde_json::from_value(value).map_err(json_error);
    };
    let own: Map<String, Value> = FRONTEND_FIELDS.iter().filter_map(|k| common.remove_entry(*k)).collect();
    let options: FrontendOptions = serde_json::from_value(Value::Object(own)).map_err(json_error)?;
    options.check().map_err(|why| ApiError::unprocessable("invalid_field", why))?;
    let mut request: StartRequest = serde_json::from_value(Value::Object(common)).map_err(json_error)?;
    request.options = serde_json::to_value(&options).expect("options serialize");
    Ok(request)
}

/// The fields only an Android start takes (`AndroidOptions`).
pub const ANDROID_FIELDS: [&str; 7] = ["target_type", "observation_type", "apk", "android_run", "expected", "emulator", "network_profile"];

fn android(value: Value) -> Result<StartRequest, ApiError> {
    let Value::Object(mut common) = value else {
        return serde_json::from_value(value).map_err(json_error);
    };
    let own: Map<String, Value> = ANDROID_FIELDS.iter().filter_map(|k| common.remove_entry(*k)).collect();
    let options: AndroidOptions = serde_json::from_value(Value::Object(own)).map_err(json_error)?;
    options.check().map_err(|why| ApiError::unprocessable("invalid_field", why))?;
    let mut request: StartRequest = serde_json::from_value(Value::Object(common)).map_err(json_error)?;
    request.options = serde_json::to_value(&options).expect("options serialize");
    Ok(request)
}
