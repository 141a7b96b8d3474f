//! Command line and the host's configuration.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use clap::{Parser, Subcommand};

use crate::api::Limits;
use crate::plugins::GrantPolicy;

#[derive(Parser)]
#[command(name = "faultline", version, about = "Chaos experiment control service")]
pub struct Cli {
    /// Where the SQLite store, the plugins directory and caches live.
    #[arg(long, env = "FAULTLINE_DATA_DIR", default_value = "faultline-data", global = true)]
    pub data_dir: PathBuf,
    #[command(subcommand)]
    pub command: Option<Command>,
}

#[derive(Subcommand)]
pub enum Command {
    /// Serve the API (the default).
    Serve(ServeArgs),
    /// Manage API keys directly in the store.
    Keys {
        #[command(subcommand)]
        command: KeysCommand,
    },
}

#[derive(Subcommand)]
pub enum KeysCommand {
    /// Create a key and print it once.
    Create {
        #[arg(long)]
        name: String,
        /// collector, viewer, engineer or admin.
        #[arg(long, default_value = "engineer")]
        role: String,
    },
}

#[derive(Parser, Clone)]
#[command(name = "serve")]
pub struct ServeArgs {
    /// Address to listen on.
    #[arg(long, env = "FAULTLINE_LISTEN", default_value = "127.0.0.1:7878")]
    pub listen: SocketAddr,
    /// Operator plugins; defaults to <data-dir>/plugins.
    #[arg(long, env = "FAULTLINE_PLUGINS_DIR")]
    pub plugins_dir: Option<PathBuf>,
    /// Capabilities granted to a plugin, as name=cap,cap (caps: log, clock, docker, adb, proxy). Repeatable.
    #[arg(long = "grant", value_name = "NAME=CAPS")]
    pub grants: Vec<String>,
    /// Capabilities of operator plugins not named by --grant.
    #[arg(long, default_value = "log,clock")]
    pub default_grants: String,
    /// Wall-clock budget of one call into a plugin, in milliseconds.
    #[arg(long, default_value_t = 30_000)]
    pub plugin_call_timeout_ms: u64,
    /// Memory cap of one plugin instance, in MiB.
    #[arg(long, default_value_t = 64)]
    pub plugin_memory_mb: usize,
    /// Use wasmtime's pooling allocator (faster instantiation, memory reserved up front).
    #[arg(long)]
    pub pooling: bool,
    /// A Linux capability (such as SYS_PTRACE) plugins may give their
    /// helpers, beyond NET_ADMIN; repeat for several.
    #[arg(long = "helper-cap", value_name = "CAP", value_parser = parse_cap)]
    pub helper_caps: Vec<String>,
    /// Longest experiment accepted, in seconds.
    #[arg(long, default_value_t = 24 * 3600)]
    pub max_duration_seconds: u64,
    /// How long any injected effect may outlive its experiment's planned end
    /// before it ends itself (helpers exit, rules expire), in seconds.
    #[arg(long, default_value_t = 60)]
    pub ttl_margin_seconds: u64,
    /// Days to keep the samples and events of ended experiments, and audit
    /// rows; 0 keeps them forever. Experiments themselves are kept.
    #[arg(long, default_value_t = 30)]
    pub retention_days: u64,
    /// A container (name or id) no experiment may touch, whatever its
    /// selectors match; repeat for several. Containers labelled
    /// faultline.protected=true, the host's own container and its Docker
    /// connection are protected anyway.
    #[arg(long = "protect", value_name = "CONTAINER")]
    pub protect: Vec<String>,
    /// Address the fault proxy's listeners bind when a frontend start names
    /// none (`proxy_listen`); each gets a free port.
    #[arg(long, env = "FAULTLINE_PROXY_BIND", default_value = "127.0.0.1")]
    pub proxy_bind: std::net::IpAddr,
    /// Also build a small demo system (web → api → db) and run one
    /// experiment on it through the API, printing its phases and score.
    #[arg(long)]
    pub demo: bool,
    /// Log JSON lines instead of text.
    #[arg(long, env = "FAULTLINE_LOG_JSON")]
    pub log_json: bool,
}

/// A capability name as Docker takes it: letters and underscores.
fn parse_cap(s: &str) -> Result<String, String> {
    match !s.is_empty() && s.chars().all(|c| c.is_ascii_alphabetic() || c == '_') {
        true => Ok(s.to_string()),
        false => Err(format!("`{s}` is not a Linux capability name such as SYS_PTRACE")),
    }
}

impl Default for ServeArgs {
    fn default() -> Self {
        ServeArgs::parse_from(["serve"])
    }
}

/// Everything the host needs to start.
#[derive(Debug, Clone)]
pub struct HostConfig {
    pub data_dir: PathBuf,
    pub plugins_dir: PathBuf,
    pub listen: SocketAddr,
    pub grants: GrantPolicy,
    pub plugin_call_timeout: Duration,
    pub plugin_memory_limit: usize,
    pub pooling: bool,
    /// Linux capabilities plugins may give helpers beyond the default (`--helper-cap`).
    pub helper_caps: Vec<String>,
    pub limits: Limits,
    pub demo: bool,
    /// Containers protected by the operator (`--protect`).
    pub protect: Vec<String>,
    /// How long samples, events and audit rows are kept; `None`: forever.
    pub retention: Option<Duration>,
    /// Where proxy listeners bind by default (`--proxy-bind`).
    pub proxy_bind: std::net::IpAddr,
}

impl HostConfig {
    pub fn new(data_dir: PathBuf, args: &ServeArgs) -> anyhow::Result<Self> {
        let grants = GrantPolicy::parse(&args.grants, &args.default_grants).map_err(anyhow::Error::msg)?;
        Ok(HostConfig {
            plugins_dir: args.plugins_dir.clone().unwrap_or_else(|| data_dir.join("plugins")),
            data_dir,
            listen: args.listen,
            grants,
            plugin_call_timeout: Duration::from_millis(args.plugin_call_timeout_ms),
            plugin_memory_limit: args.plugin_memory_mb << 20,
            pooling: args.pooling,
            helper_caps: args.helper_caps.clone(),
            demo: args.demo,
            protect: args.protect.clone(),
            proxy_bind: args.proxy_bind,
            retention: (args.retention_days > 0).then(|| Duration::from_secs(args.retention_days * 86_400)),
            limits: Limits {
                max_duration: Duration::from_secs(args.max_duration_seconds),
                ttl_margin: Duration::from_secs(args.ttl_margin_seconds),
                ..Limits::default()
            },
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn retention_defaults_to_thirty_days_zero_keeps_everything_and_a_bad_value_is_refused() {
        let config = |args: &[&str]| HostConfig::new("data".into(), &ServeArgs::try_parse_from(args).unwrap()).unwrap();
        assert_eq!(config(&["serve"]).retention, Some(Duration::from_secs(30 * 86_400)));
        assert_eq!(config(&["serve", "--retention-days", "0"]).retention, None);
        assert!(ServeArgs::try_parse_from(["serve", "--retention-days", "-1"]).is_err());
    }

    #[test]
    fn helper_capabilities_are_repeatable_and_must_be_capability_names() {
        let args = ServeArgs::try_parse_from(["serve", "--helper-cap", "SYS_PTRACE", "--helper-cap", "cap_net_raw"]).unwrap();
        assert_eq!(args.helper_caps, ["SYS_PTRACE", "cap_net_raw"]);
        assert!(ServeArgs::default().helper_caps.is_empty(), "the default allowlist is the runtime's");
        assert!(ServeArgs::try_parse_from(["serve", "--helper-cap", "NET_ADMIN,SYS_ADMIN"]).is_err());
    }
}
