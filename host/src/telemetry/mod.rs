//! Structured logs (tracing) and Prometheus metrics.

mod metrics;
mod plugin_log;

pub use metrics::Metrics;
pub use plugin_log::ExperimentLog;

/// Logs as JSON lines when `json` is set (for collectors), else readable text.
/// `RUST_LOG` filters, as usual.
pub fn init_logs(json: bool) {
    use tracing_subscriber::EnvFilter;
    let filter = EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new("info,sqlx=warn"));
    let builder = tracing_subscriber::fmt().with_env_filter(filter).with_writer(std::io::stderr);
    let _ = if json { builder.json().flatten_event(true).try_init() } else { builder.try_init() };
}
