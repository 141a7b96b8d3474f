//! The host in this process: the real store, plugin runtime, engine and
//! router on a real socket, with the scripted platform and a recording log.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use faultline::api::{AppState, router};
use faultline::config::{HostConfig, ServeArgs};
use faultline::engine::RecoveryReport;
use faultline::platforms::Platforms;
use faultline_plugin_runtime::HostCapabilities;

use crate::client::Api;
use crate::paths::test_plugin;
use crate::scripted::{RecordingLog, ScriptedPlatform};

pub struct Options {
    pub call_timeout: Duration,
    pub memory_limit: usize,
    /// Levels above this make the scripted platform unhealthy.
    pub tolerated: f64,
    /// Test plugins to install (by crate suffix), with their plugin names.
    pub plugins: Vec<&'static str>,
    /// How long effects outlive an experiment's planned end, and how long
    /// past it (or past a stop) a run may go on before it is cut off.
    pub ttl_margin: Duration,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            call_timeout: Duration::from_secs(5),
            memory_limit: 32 << 20,
            tolerated: 100.0,
            plugins: vec!["steady"],
            ttl_margin: Duration::from_secs(60),
        }
    }
}

pub struct InProcessHost {
    pub api: Api,
    pub state: AppState,
    pub log: Arc<RecordingLog>,
    pub platform: Arc<ScriptedPlatform>,
    pub recovery: RecoveryReport,
    pub data_dir: PathBuf,
    server: tokio::task::JoinHandle<()>,
}

impl InProcessHost {
    /// Starts a host on `data_dir` (reusing it if it holds a previous host's store).
    pub async fn start(data_dir: &Path, options: Options) -> InProcessHost {
        Self::start_with_log(data_dir, options, Arc::new(RecordingLog::default())).await
    }

    pub async fn start_with_log(data_dir: &Path, options: Options, log: Arc<RecordingLog>) -> InProcessHost {
        let mut config = HostConfig::new(data_dir.to_path_buf(), &ServeArgs::default()).expect("default config");
        config.plugin_call_timeout = options.call_timeout;
        config.plugin_memory_limit = options.memory_limit;
        config.limits.ttl_margin = options.ttl_margin;
        let capabilities = HostCapabilities { log: log.clone(), ..HostCapabilities::default() };
        let host = faultline::start_host(&config, capabilities, Platforms::default()).await.expect("the host starts");
        let platform = Arc::new(ScriptedPlatform::new(log.clone(), options.tolerated));
        let mut state = host.state;
        // The scripted platform stands in for the backend; the frontend
        // needs nothing from the machine, so it is the real one.
        state.platforms = Platforms::default().with(platform.clone());
        if let Some(frontend) = state.frontend.clone() {
            state.platforms = state.platforms.with(frontend);
        }
        for name in options.plugins {
            if state.plugins.plugin(name).is_none() {
                state.plugins.install(name, &test_plugin(name), false).await.expect("installing a test plugin");
            }
        }
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let base = format!("http://{}", listener.local_addr().unwrap());
        let app = router(state.clone());
        let server = tokio::spawn(async move {
            axum::serve(listener, app).await.expect("serving");
        });
        let key = match host.bootstrap_key {
            Some(key) => key,
            None => faultline::auth::mint_key(&state.store, "test-admin", faultline::auth::Role::Admin, None)
                .await
                .unwrap()
                .secret,
        };
        InProcessHost { api: Api::new(base, Some(key)), state, log, platform, recovery: host.recovery, data_dir: data_dir.into(), server }
    }

    /// Starts an experiment on the backend route; returns its id.
    pub async fn start_experiment(&self, body: serde_json::Value) -> String {
        let reply = self.api.post_json("/experiments/backend/start", &body).await;
        assert_eq!(reply.status, 201, "start failed: {reply:?}");
        reply.body["id"].as_str().unwrap().to_string()
    }

    /// Shuts down as SIGTERM would: stops serving, rolls back, waits.
    pub async fn shutdown(self) {
        self.server.abort();
        self.state.engine.shutdown().await;
    }
}
