//! The REST API: one module per resource, one handler per route, errors as
//! problem+json. The OpenAPI document is collected from the handlers and
//! finished in `openapi`.

mod apks;
mod audit;
pub mod collector;
mod emergency;
mod error;
mod experiments;
mod extract;
mod faults;
mod health;
mod keys;
mod openapi;
mod plugins;
mod telemetry;

use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use axum::extract::DefaultBodyLimit;
use axum::http::StatusCode;
use axum::response::IntoResponse;
use tower_http::catch_panic::CatchPanicLayer;
use tower_http::trace::TraceLayer;
use utoipa::OpenApi;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

pub use error::{ApiError, Problem};

use crate::engine::Engine;
use crate::platforms::Platforms;
use crate::platforms::frontend::FrontendPlatform;
use crate::plugins::PluginRegistry;
use crate::store::Store;
use crate::telemetry::Metrics;

/// Largest request body: a plugin component. JSON bodies have their own, smaller limit.
pub const MAX_BODY_BYTES: usize = 16 << 20;

#[derive(Clone)]
pub struct AppState {
    pub store: Store,
    pub engine: Engine,
    pub plugins: Arc<PluginRegistry>,
    pub platforms: Platforms,
    pub metrics: Arc<Metrics>,
    pub limits: Limits,
    /// The frontend platform's browser side (collector, service worker).
    pub frontend: Option<Arc<FrontendPlatform>>,
    pub report_limits: Arc<collector::ReportLimits>,
    /// Uploaded APKs (the Android platform's).
    pub apks: Option<Arc<crate::platforms::android::apks::ApkStore>>,
}

/// Bounds on what a request may ask for.
#[derive(Debug, Clone)]
pub struct Limits {
    pub min_duration: Duration,
    pub max_duration: Duration,
    /// How long every effect may outlive its experiment's planned end
    /// before it ends itself: the worst case of any failure.
    pub ttl_margin: Duration,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            min_duration: Duration::from_secs(1),
            max_duration: Duration::from_secs(24 * 3600),
            ttl_margin: Duration::from_secs(60),
        }
    }
}

#[derive(OpenApi)]
#[openapi(
    info(title = "Faultline", description = "Chaos experiment control service"),
    components(schemas(Problem, crate::platforms::android::options::AndroidOptions, crate::platforms::android::options::AndroidKind,
        crate::platforms::android::options::AndroidRun, crate::platforms::android::options::EmulatorSettings,
        crate::platforms::android::options::Expected, experiments::Scenario, crate::platforms::frontend::options::FrontendOptions)),
    modifiers(&ApiKeyScheme),
    security(("api_key" = []))
)]
struct ApiDoc;

struct ApiKeyScheme;

impl utoipa::Modify for ApiKeyScheme {
    fn modify(&self, openapi: &mut utoipa::openapi::OpenApi) {
        use utoipa::openapi::security::{ApiKey, ApiKeyValue, SecurityScheme};
        let components = openapi.components.get_or_insert_with(Default::default);
        components.add_security_scheme("api_key", SecurityScheme::ApiKey(ApiKey::Header(ApiKeyValue::new(crate::auth::KEY_HEADER))));
    }
}

/// The routes web pages call from their own origins (see `collector::cors`).
fn browser_side() -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .routes(routes!(collector::collector_script))
        .routes(routes!(collector::worker_script))
        .routes(routes!(collector::context))
        .routes(routes!(collector::rules))
        .routes(routes!(collector::vitals))
}

/// APK uploads stream to disk under their own limit, not the JSON one.
fn uploads() -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .routes(routes!(apks::upload_apk))
        .routes(routes!(apks::android_upload))
        .layer(DefaultBodyLimit::disable())
}

/// Every route, with the OpenAPI document built from the same handlers.
pub fn router(state: AppState) -> Router {
    let (router, openapi) = OpenApiRouter::with_openapi(ApiDoc::openapi())
        .routes(routes!(health::health))
        .routes(routes!(keys::create_key, keys::list_keys))
        .routes(routes!(keys::revoke_key))
        .routes(routes!(faults::list_fault_types))
        .routes(routes!(plugins::list_plugins))
        .routes(routes!(plugins::get_plugin, plugins::create_plugin, plugins::replace_plugin, plugins::delete_plugin))
        .routes(routes!(experiments::start))
        .routes(routes!(experiments::preview))
        .routes(routes!(experiments::status))
        .routes(routes!(experiments::metrics))
        .routes(routes!(experiments::stop))
        .routes(routes!(telemetry::prometheus))
        .routes(routes!(emergency::status, emergency::engage, emergency::lift))
        .routes(routes!(audit::list))
        .routes(routes!(apks::list_apks))
        .routes(routes!(apks::get_apk, apks::delete_apk))
        .merge(uploads())
        .merge(browser_side())
        .split_for_parts();
    let openapi = Arc::new(openapi::finish(openapi, &state.limits));
    router
        // A route layer: it runs after routing, so it knows the matched route.
        .route_layer(axum::middleware::from_fn_with_state(state.clone(), audit::record))
        .route("/openapi.json", axum::routing::get(move |caller: crate::auth::Caller| telemetry::openapi(caller, openapi.clone())))
        .fallback(|| async { ApiError::not_found("no_such_route", "no route matches this path") })
        .method_not_allowed_fallback(|| async {
            ApiError::new(StatusCode::METHOD_NOT_ALLOWED, "method_not_allowed", "this route does not accept that method")
        })
        .layer(DefaultBodyLimit::max(MAX_BODY_BYTES))
        .layer(axum::middleware::from_fn(collector::cors))
        .layer(TraceLayer::new_for_http())
        .layer(CatchPanicLayer::custom(|_| ApiError::internal("the request failed inside the host").into_response()))
        .with_state(state)
}
