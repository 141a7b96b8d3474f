//! The body of a start or a preview, read for the platform in its path.
//! Every platform takes the common fields (`StartRequest`); an Android
//! start also takes the spec's own fields (`AndroidFields`), a frontend
//! start its mode, routes and proxy addresses (`FrontendOptions`); each is
//! refused as unknown on the other platforms.

use axum::extract::{FromRequest, FromRequestParts, RawPathParams, Request};
use serde::Deserialize;
use serde_json::{Map, Value};
use utoipa::ToSchema;

use super::StartRequest;
use crate::api::ApiError;
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

/// The fields only an Android start takes.
pub const ANDROID_FIELDS: [&str; 5] = ["target_type", "observation_type", "apk", "android_run", "expected"];

fn android(value: Value) -> Result<StartRequest, ApiError> {
    let Value::Object(mut common) = value else {
        return serde_json::from_value(value).map_err(json_error);
    };
    let own: Map<String, Value> = ANDROID_FIELDS.iter().filter_map(|k| common.remove_entry(*k)).collect();
    let own: AndroidFields = serde_json::from_value(Value::Object(own)).map_err(json_error)?;
    own.check()?;
    serde_json::from_value(Value::Object(common)).map_err(json_error)
}

/// What an Android start takes besides the common fields: the spec's
/// Android request. It is checked at every start; the Android platform
/// acts on it once this host serves that platform.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
#[allow(dead_code, reason = "checked at every start; read by the Android platform once this host serves it")]
pub struct AndroidFields {
    /// `android`: the experiment's targets are Android apps.
    target_type: Option<AndroidKind>,
    /// `android`: the app is observed on its device.
    observation_type: Option<AndroidKind>,
    /// The APK to run: the identifier its upload returned.
    apk: Option<String>,
    /// How the emulator runs.
    android_run: Option<AndroidRun>,
    /// What the app is expected to do; checked and reported.
    expected: Option<Expected>,
}

#[derive(Debug, Deserialize, ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum AndroidKind {
    Android,
}

/// Emulator run settings.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
#[allow(dead_code, reason = "checked at every start; read by the Android platform once this host serves it")]
pub struct AndroidRun {
    /// The emulator device (AVD) to run.
    avd_name: Option<String>,
    /// Run the emulator without a window.
    headless: Option<bool>,
    /// Clear the app's data before the experiment.
    reset_app_state: Option<bool>,
}

/// Expectations of the app under test.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
#[allow(dead_code, reason = "checked at every start; read by the Android platform once this host serves it")]
pub struct Expected {
    running: Option<bool>,
    not_crash: Option<bool>,
    not_anr: Option<bool>,
    should_recover: Option<bool>,
}

fn blank(s: &str) -> bool {
    s.trim().is_empty()
}

impl AndroidFields {
    fn check(&self) -> Result<(), ApiError> {
        let invalid = |detail: String| Err(ApiError::unprocessable("invalid_field", detail));
        if self.apk.as_deref().is_some_and(blank) {
            return invalid("apk must not be empty".into());
        }
        if self.android_run.as_ref().and_then(|r| r.avd_name.as_deref()).is_some_and(blank) {
            return invalid("android_run.avd_name must not be empty".into());
        }
        Ok(())
    }
}
