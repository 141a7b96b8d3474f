//! The browser side's routes: the collector script, the service worker,
//! and `/collector/*`, which a web page calls with a public key. Keys of
//! the `collector` role can call these and nothing else. Every route here
//! answers CORS requests from any origin: the pages are on other origins.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use axum::extract::{ConnectInfo, Query, Request, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::{Extension, Json};
use serde::{Deserialize, Serialize};
use serde_json::json;
use utoipa::{IntoParams, ToSchema};

use super::extract::{body_bytes, json_error};
use super::{ApiError, AppState};
use crate::auth::{Caller, KEY_HEADER, Role, authenticate};
use crate::platforms::frontend::collector::{Context, Feed, Refused, Report};
use crate::platforms::frontend::{COLLECTOR_SCRIPT, FrontendPlatform, WORKER_SCRIPT};

/// Whether a path is one web pages call from other origins.
fn browser_side(path: &str) -> bool {
    path == "/collector.js" || path == "/faultline-sw.js" || path.starts_with("/collector/")
}

/// CORS for the browser side only: any origin may call it (the key, not
/// the origin, is what authorizes), without credentials. A preflight is
/// answered here, before routing (the routes take GET and POST only).
pub async fn cors(request: Request, next: axum::middleware::Next) -> Response {
    if !browser_side(request.uri().path()) {
        return next.run(request).await;
    }
    let preflight = request.method() == axum::http::Method::OPTIONS;
    let mut response = if preflight { StatusCode::NO_CONTENT.into_response() } else { next.run(request).await };
    let headers = response.headers_mut();
    headers.insert(header::ACCESS_CONTROL_ALLOW_ORIGIN, HeaderValue::from_static("*"));
    if preflight {
        headers.insert(header::ACCESS_CONTROL_ALLOW_METHODS, HeaderValue::from_static("GET, POST"));
        headers.insert(header::ACCESS_CONTROL_ALLOW_HEADERS, HeaderValue::from_static("content-type, x-api-key"));
        headers.insert(header::ACCESS_CONTROL_MAX_AGE, HeaderValue::from_static("600"));
    }
    response
}

/// Largest report: twenty metrics fit in a tenth of it.
pub const MAX_REPORT_BYTES: usize = 16 << 10;

fn frontend(state: &AppState) -> Result<&Arc<FrontendPlatform>, ApiError> {
    state.frontend.as_ref().ok_or_else(|| ApiError::unavailable("platform_unavailable", "the frontend platform is not served by this host"))
}

/// Longest URL a query parameter may carry.
const MAX_URL: usize = 2048;

fn long_query(name: &str, value: &str) -> Result<(), ApiError> {
    match value.chars().count() > MAX_URL {
        true => Err(ApiError::bad_request("invalid_query", format!("{name} is longer than {MAX_URL} characters"))),
        false => Ok(()),
    }
}

fn script(body: String, cache: &'static str) -> Response {
    let mut response = body.into_response();
    let headers = response.headers_mut();
    headers.insert(header::CONTENT_TYPE, HeaderValue::from_static("text/javascript; charset=utf-8"));
    headers.insert(header::CACHE_CONTROL, HeaderValue::from_static(cache));
    response
}

/// The collector: load it in a page, then call
/// `Faultline.init({apiKey, endpoint})` with a collector key.
#[utoipa::path(get, path = "/collector.js", security(()),
    responses((status = 200, description = "The collector script (JavaScript)", content_type = "text/javascript")))]
pub async fn collector_script() -> Response {
    script(COLLECTOR_SCRIPT.into(), "public, max-age=300")
}

#[derive(Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
pub struct WorkerQuery {
    /// A collector key, with which the worker fetches its rules.
    #[param(max_length = 128, pattern = "^[A-Za-z0-9_]*$")]
    key: Option<String>,
}

/// The service worker, for an app to import in a one-line worker of its
/// own origin: `importScripts("<host>/faultline-sw.js?key=<collector key>")`.
#[utoipa::path(get, path = "/faultline-sw.js", security(()), params(WorkerQuery),
    responses((status = 200, description = "The service worker script (JavaScript)", content_type = "text/javascript"),
        (status = 400, description = "`invalid_query`: the key is not a key's characters")))]
pub async fn worker_script(headers: HeaderMap, query: Result<Query<WorkerQuery>, axum::extract::rejection::QueryRejection>) -> Result<Response, ApiError> {
    let Query(query) = query.map_err(|e| ApiError::bad_request("invalid_query", e.body_text()))?;
    let key = query.key.unwrap_or_default();
    if key.len() > 128 || !key.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_') {
        return Err(ApiError::bad_request("invalid_query", "key must be an API key's letters, digits and underscores"));
    }
    // The worker runs on the app's origin: it needs this host's full address.
    let host = headers.get(header::HOST).and_then(|h| h.to_str().ok()).unwrap_or("127.0.0.1");
    let scheme = headers.get("x-forwarded-proto").and_then(|h| h.to_str().ok()).filter(|p| *p == "https").unwrap_or("http");
    let config = json!({ "rules": format!("{scheme}://{host}/collector/rules"), "key": key });
    Ok(script(format!("self.FAULTLINE_CONFIG = {config};\n{WORKER_SCRIPT}"), "no-cache"))
}

#[derive(Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
pub struct ContextQuery {
    /// The page's URL.
    #[param(max_length = 2048)]
    page: String,
}

/// The running experiment a page is part of, and its phase: the
/// collector tags what it measures with them (any key, collector role included).
#[utoipa::path(get, path = "/collector/context", params(ContextQuery),
    responses((status = 200, description = "The page's experiment; all null when it is in none", body = Context),
        (status = 400, description = "`invalid_query`"),
        (status = 503, description = "`platform_unavailable`: the frontend is not served by this host")))]
pub async fn context(
    State(state): State<AppState>,
    caller: Caller,
    query: Result<Query<ContextQuery>, axum::extract::rejection::QueryRejection>,
) -> Result<Json<Context>, ApiError> {
    caller.require(Role::Collector)?;
    let Query(query) = query.map_err(|e| ApiError::bad_request("invalid_query", e.body_text()))?;
    long_query("page", &query.page)?;
    Ok(Json(frontend(&state)?.context(&query.page)))
}

#[derive(Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
pub struct RulesQuery {
    /// The site (origin) the service worker runs on.
    #[param(max_length = 2048)]
    site: String,
}

/// The fault rules service workers on a site apply: those of the
/// experiments running on it in `service_worker` mode. Each ends by itself
/// at its `expires_at`, in the worker too.
#[utoipa::path(get, path = "/collector/rules", params(RulesQuery),
    responses((status = 200, description = "The rules in force", body = Feed),
        (status = 400, description = "`invalid_query`"),
        (status = 503, description = "`platform_unavailable`: the frontend is not served by this host")))]
pub async fn rules(
    State(state): State<AppState>,
    caller: Caller,
    query: Result<Query<RulesQuery>, axum::extract::rejection::QueryRejection>,
) -> Result<Json<Feed>, ApiError> {
    caller.require(Role::Collector)?;
    let Query(query) = query.map_err(|e| ApiError::bad_request("invalid_query", e.body_text()))?;
    long_query("site", &query.site)?;
    let mut response = Json(frontend(&state)?.feed(&query.site));
    response.0.rules.truncate(crate::capabilities::proxy::rules::MAX_RULES_PER_SITE);
    Ok(response)
}

/// The answer to a report.
#[derive(Serialize, ToSchema)]
pub struct Accepted {
    /// How many vitals were recorded.
    pub accepted: usize,
}

/// Records a page load's Web Vitals. The key goes in the body's `apiKey`
/// (a `sendBeacon` cannot send headers) or the x-api-key header; any role
/// may report. Limited, before the key is even checked, to 10 reports a
/// second per client address (bursts of 30), then to 200 a second per key;
/// an experiment keeps at most 100 000 vitals.
#[utoipa::path(post, path = "/collector/vitals", security(()), request_body(content = Report, content_type = "text/plain"),
    responses((status = 202, description = "Recorded", body = Accepted),
        (status = 400, description = "`malformed_json`"),
        (status = 401, description = "`missing_api_key`, `malformed_api_key`, `unknown_api_key`"),
        (status = 404, description = "`experiment_not_found`"),
        (status = 409, description = "`experiment_ended`: it ended more than ten minutes ago; `vitals_limit_reached`"),
        (status = 413, description = "`payload_too_large`: more than 16 KiB"),
        (status = 422, description = "`invalid_report`, `unknown_field`, `missing_field`, `invalid_field`, `no_experiment`, \
            `page_not_in_experiment`"),
        (status = 429, description = "`rate_limited`: too many reports; Retry-After says when to try again"),
        (status = 503, description = "`platform_unavailable`")))]
pub async fn vitals(State(state): State<AppState>, peer: Option<Extension<ConnectInfo<SocketAddr>>>, request: Request) -> Result<Response, ApiError> {
    let client = peer.map(|Extension(ConnectInfo(addr))| addr.ip().to_string()).unwrap_or_default();
    state.report_limits.per_client.take(&client).map_err(|wait| rate_limited(wait, "this address"))?;
    let header_key = request.headers().get(KEY_HEADER).and_then(|v| v.to_str().ok()).map(String::from);
    let sender = request.headers().get(header::ORIGIN).and_then(|v| v.to_str().ok()).map(String::from);
    let bytes = body_bytes(request, MAX_REPORT_BYTES).await?;
    let report: Report = serde_json::from_slice(&bytes).map_err(json_error)?;
    let Some(secret) = report.api_key.clone().or(header_key) else {
        return Err(ApiError::unauthorized("missing_api_key", format!("send the collector key as apiKey in the body or in {KEY_HEADER}")));
    };
    let caller = authenticate(&state.store, &secret).await?;
    state.report_limits.per_key.take(&caller.key_id).map_err(|wait| rate_limited(wait, "this page's key"))?;
    let platform = frontend(&state)?;
    if let Some(experiment) = &report.experiment
        && !state.report_limits.within_cap(experiment, report.metrics.len())
    {
        return Err(ApiError::conflict("vitals_limit_reached", format!("experiment `{experiment}` holds the {MAX_VITALS} vitals it keeps")));
    }
    match platform.ingest(&report, sender.as_deref()).await {
        Ok(accepted) => {
            state.report_limits.count(report.experiment.as_deref().unwrap_or_default(), accepted);
            Ok((StatusCode::ACCEPTED, Json(Accepted { accepted })).into_response())
        }
        Err(Refused(code, detail)) => Err(match code {
            "experiment_not_found" => ApiError::not_found(code, detail),
            "experiment_ended" => ApiError::conflict(code, detail),
            "store_unavailable" => ApiError::unavailable(code, detail),
            _ => ApiError::unprocessable(code, detail),
        }),
    }
}

fn rate_limited(wait: Duration, whom: &str) -> ApiError {
    ApiError::new(StatusCode::TOO_MANY_REQUESTS, "rate_limited", format!("too many reports from {whom}"))
        .retry_after(wait.as_secs().max(1))
}

/// Most vitals one experiment keeps (a public key must not fill the store).
pub const MAX_VITALS: usize = 100_000;

/// The limits on reports: per client address, per key, and per experiment.
pub struct ReportLimits {
    per_client: RateLimiter,
    per_key: RateLimiter,
    /// Vitals accepted per experiment by this process.
    accepted: Mutex<HashMap<String, usize>>,
}

impl Default for ReportLimits {
    fn default() -> Self {
        ReportLimits { per_client: RateLimiter::new(10.0, 30.0), per_key: RateLimiter::new(200.0, 400.0), accepted: Mutex::default() }
    }
}

impl ReportLimits {
    fn within_cap(&self, experiment: &str, more: usize) -> bool {
        self.accepted.lock().expect("accepted lock").get(experiment).copied().unwrap_or(0) + more <= MAX_VITALS
    }

    fn count(&self, experiment: &str, accepted: usize) {
        *self.accepted.lock().expect("accepted lock").entry(experiment.into()).or_default() += accepted;
    }
}

/// Token buckets keyed by a string: `rate` a second, up to `burst` at once.
pub struct RateLimiter {
    rate: f64,
    burst: f64,
    buckets: Mutex<HashMap<String, (f64, Instant)>>,
}

/// Buckets kept before idle ones are dropped.
const MAX_BUCKETS: usize = 10_000;

impl RateLimiter {
    pub fn new(rate: f64, burst: f64) -> Self {
        RateLimiter { rate, burst, buckets: Mutex::default() }
    }

    /// Takes a token, or says how long until one is free.
    pub fn take(&self, key: &str) -> Result<(), Duration> {
        let now = Instant::now();
        let mut buckets = self.buckets.lock().expect("rate limiter lock");
        if buckets.len() >= MAX_BUCKETS {
            // A full bucket is the same as none: idle ones can go.
            let full_after = Duration::from_secs_f64(self.burst / self.rate);
            buckets.retain(|_, (_, at)| now.duration_since(*at) < full_after);
        }
        let (tokens, at) = buckets.entry(key.to_string()).or_insert((self.burst, now));
        *tokens = (*tokens + now.duration_since(*at).as_secs_f64() * self.rate).min(self.burst);
        *at = now;
        if *tokens >= 1.0 {
            *tokens -= 1.0;
            Ok(())
        } else {
            Err(Duration::from_secs_f64((1.0 - *tokens) / self.rate))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_bucket_allows_its_burst_then_its_rate() {
        let limiter = RateLimiter::new(10.0, 3.0);
        for _ in 0..3 {
            assert!(limiter.take("a").is_ok());
        }
        let wait = limiter.take("a").expect_err("the burst is spent");
        assert!(wait <= Duration::from_millis(100));
        assert!(limiter.take("b").is_ok(), "buckets are per key");
    }
}
