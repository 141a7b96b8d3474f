//! Faultline: a chaos experiment control service.
//!
//! Imports flow one way: `api` → `engine` → `plugins` (the registry over
//! the plugin runtime) → capabilities; `store` sits beside them, and
//! `platforms` plug into the engine through one trait.

pub mod api;
pub mod auth;
pub mod capabilities;
mod builtin;
pub mod config;
mod demo;
pub mod engine;
pub mod platforms;
pub mod plugins;
pub mod store;
pub mod telemetry;

use std::sync::Arc;

use faultline_plugin_runtime::capability::docker::HelperCaps;
use faultline_plugin_runtime::{HostCapabilities, PluginEngine, RuntimeConfig};

use crate::api::AppState;
use crate::auth::{Role, mint_key};
use crate::capabilities::adb::AdbHost;
use crate::capabilities::docker::DockerEngine;
use crate::platforms::android::{self, AndroidPlatform};
use crate::platforms::android::apks::{ApkStore, StoredApks};
use crate::capabilities::proxy::FaultProxy;
use crate::platforms::frontend::FrontendPlatform;
use crate::config::HostConfig;
use crate::engine::{Engine, RecoveryReport};
use crate::platforms::Platforms;
use crate::platforms::backend::BackendPlatform;
use crate::capabilities::docker::protection::Protection;
use crate::plugins::PluginRegistry;
use crate::store::{AuditRow, Store};
use crate::telemetry::Metrics;

/// A host ready to serve: everything is loaded and the journal recovered.
pub struct Host {
    pub state: AppState,
    pub recovery: RecoveryReport,
    /// The first admin key, when this start created it. Shown once.
    pub bootstrap_key: Option<String>,
}

/// Connects to what this machine offers: the Docker engine (honouring
/// `DOCKER_HOST`) for the docker capability and the backend platform. A
/// platform that cannot be reached is left out; its routes answer 503.
pub async fn connect_platforms(protect: Vec<String>) -> (HostCapabilities, Platforms, Option<Arc<DockerEngine>>) {
    let mut capabilities = HostCapabilities::default();
    let mut platforms = Platforms::default();
    let mut engine = None;
    match tokio::time::timeout(std::time::Duration::from_secs(5), DockerEngine::connect(Protection::detect(protect))).await {
        Ok(Ok(docker)) => {
            match docker.helpers().sweep_expired().await {
                Ok(0) => {}
                Ok(n) => tracing::warn!("removed {n} expired helper containers a previous run left"),
                Err(e) => tracing::warn!("could not sweep expired helpers: {e}"),
            }
            let docker = Arc::new(docker);
            capabilities.docker = docker.clone();
            platforms = platforms.with(Arc::new(BackendPlatform::new(docker.clone())));
            engine = Some(docker);
        }
        Ok(Err(e)) => tracing::warn!("no Docker engine, the backend platform is off: {e}"),
        Err(_) => tracing::warn!("the Docker engine did not answer, the backend platform is off"),
    }
    (capabilities, platforms, engine)
}

/// Opens the store, loads plugins with the given capabilities, and reverts
/// what a previous process left.
pub async fn start_host(config: &HostConfig, mut capabilities: HostCapabilities, platforms: Platforms) -> anyhow::Result<Host> {
    std::fs::create_dir_all(&config.data_dir)?;
    std::fs::create_dir_all(&config.plugins_dir)?;
    let store = Store::open_sqlite(&config.data_dir.join("faultline.db")).await?;
    // The frontend needs nothing from the machine: the fault proxy is ours.
    let proxy = Arc::new(FaultProxy::default());
    capabilities.proxy = proxy.clone();
    let frontend = Arc::new(FrontendPlatform::new(proxy.clone(), store.clone(), config.proxy_bind));
    // Android needs an adb server, which is found (or started) at first use.
    let apks = Arc::new(ApkStore::open(android::apk_dir(&config.data_dir), store.clone(), config.max_apk_bytes)?);
    let adb = Arc::new(AdbHost::new(config.adb.clone(), Arc::new(StoredApks(apks.clone()))));
    capabilities.adb = adb.clone();
    let android = Arc::new(AndroidPlatform::new(adb, apks.clone(), store.clone(), proxy, config.android.clone()));
    let platforms = platforms.with(frontend.clone()).with(android);
    let metrics = Arc::new(Metrics::default());
    capabilities.log = Arc::new(telemetry::ExperimentLog { store: store.clone(), inner: capabilities.log });
    capabilities.helper_caps = Arc::new(HelperCaps::with(&config.helper_caps));

    let runtime = PluginEngine::new(
        RuntimeConfig {
            cache_dir: Some(config.data_dir.join("cache").join("components")),
            call_timeout: config.plugin_call_timeout,
            memory_limit: config.plugin_memory_limit,
            pooling: config.pooling,
        },
        capabilities,
    )?;
    let plugins = Arc::new(PluginRegistry::new(runtime, config.plugins_dir.clone(), config.grants.clone()));
    plugins.load_builtins(builtin::BUILTINS).await?;
    // Failures are logged by the registry; a bad file must not stop the host.
    let failures = plugins.load_directory().await;
    audit_plugin_loads(&store, &plugins, &failures).await?;

    let engine = Engine::new(store.clone(), plugins.clone(), platforms.clone(), metrics.clone(), config.limits.ttl_margin);
    let recovery = engine.recover().await?;
    engine.spawn_reconciler();
    engine.spawn_pruning(config.retention);
    if let Some(halt) = engine.load_emergency_stop().await? {
        tracing::warn!(by = %halt.engaged_by, "an emergency stop is in force: no experiment starts until an admin lifts it");
    }

    let bootstrap_key = if store.count_keys().await? == 0 {
        let minted = mint_key(&store, "bootstrap-admin", Role::Admin, None).await?;
        store.record_audit(&AuditRow::by_host("host", "api_key.create", &minted.row.name, "succeeded", None)).await?;
        Some(minted.secret)
    } else {
        None
    };

    let state = AppState {
        store,
        engine,
        plugins,
        platforms,
        metrics,
        limits: config.limits.clone(),
        frontend: Some(frontend),
        report_limits: Arc::default(),
        apks: Some(apks),
    };
    Ok(Host { state, recovery, bootstrap_key })
}

/// Records in the audit trail what this start loaded, and what it could not.
async fn audit_plugin_loads(store: &Store, plugins: &PluginRegistry, failures: &[(String, plugins::RegistryError)]) -> anyhow::Result<()> {
    for entry in plugins.list() {
        let detail = serde_json::json!({ "source": entry.source, "fault": entry.plugin.info().name, "digest": entry.plugin.digest() });
        let row = AuditRow::by_host("host", "plugin.load", entry.plugin.name(), "succeeded", Some(detail.to_string()));
        store.record_audit(&row).await?;
    }
    for (name, error) in failures {
        let detail = serde_json::json!({ "source": "directory", "detail": error.to_string() });
        store.record_audit(&AuditRow::by_host("host", "plugin.load", name, "failed", Some(detail.to_string()))).await?;
    }
    Ok(())
}

/// Serves until SIGINT or SIGTERM, then rolls back every running experiment.
pub async fn serve(config: &HostConfig) -> anyhow::Result<()> {
    let (capabilities, platforms, docker) = connect_platforms(config.protect.clone()).await;
    let host = start_host(config, capabilities, platforms).await?;
    if let Some(key) = &host.bootstrap_key {
        println!("Created the first admin key (shown once; store it now):\n{key}");
    }
    let listener = tokio::net::TcpListener::bind(config.listen).await?;
    let address = listener.local_addr()?;
    tracing::info!(%address, data_dir = %config.data_dir.display(), "serving");
    println!("Faultline listening on http://{address}");
    let (engine, store) = (host.state.engine.clone(), host.state.store.clone());
    // Peer addresses key the collector's rate limits.
    let app = api::router(host.state).into_make_service_with_connect_info::<std::net::SocketAddr>();
    let server = tokio::spawn(axum::serve(listener, app).with_graceful_shutdown(shutdown_signal()).into_future());
    let demo_client = docker.as_ref().filter(|_| config.demo).map(|d| d.client().clone());
    if config.demo {
        match &demo_client {
            Some(client) => {
                // A key for the demo alone, revoked when it is done.
                let key = mint_key(&store, "demo", Role::Engineer, Some("demo")).await?;
                store.record_audit(&AuditRow::by_host("host", "api_key.create", "demo", "succeeded", None)).await?;
                let (client, base) = (client.clone(), format!("http://{address}"));
                tokio::spawn(async move {
                    if let Err(e) = demo::run(client, base, key.secret).await {
                        println!("demo: failed: {e:#}");
                    }
                    if store.revoke_key(&key.row.id).await.is_ok() {
                        let _ = store.record_audit(&AuditRow::by_host("host", "api_key.revoke", "demo", "succeeded", None)).await;
                    }
                });
            }
            None => println!("demo: needs a Docker engine, and none answered"),
        }
    }
    server.await??;
    tracing::info!("shutting down: rolling back running experiments");
    engine.shutdown().await;
    if let Some(client) = demo_client {
        demo::remove(&client).await;
    }
    Ok(())
}

async fn shutdown_signal() {
    use tokio::signal::unix::{SignalKind, signal};
    let mut term = signal(SignalKind::terminate()).expect("installing a SIGTERM handler");
    tokio::select! {
        _ = tokio::signal::ctrl_c() => {}
        _ = term.recv() => {}
    }
}
