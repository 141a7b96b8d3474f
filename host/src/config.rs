//! Command line and the host's configuration.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use clap::{Parser, Subcommand};

use crate::api::Limits;
use crate::capabilities::adb::AdbConfig;
use crate::platforms::android::options::AndroidConfig;
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
#[allow(clippy::large_enum_variant, reason = "parsed once at start; boxing would only obscure the derive")]
pub enum Command {
    /// Serve the API (the default).
    Serve(ServeArgs),
    /// Manage API keys directly in the store.
    Keys {
        #[command(subcommand)]
        command: KeysCommand,
    },
    /// Undoes emulator console settings after a time-to-live, unless ended
    /// first: what the host starts for a fault on an emulator's console,
    /// so it ends on time even if the host dies. Not for people.
    #[command(name = "console-watchdog", hide = true)]
    ConsoleWatchdog {
        /// The watchdog's id, which the host finds it by.
        #[arg(long)]
        id: String,
        /// The emulator's console port.
        #[arg(long)]
        port: u16,
        #[arg(long)]
        after_seconds: u64,
        #[arg(long)]
        token_file: PathBuf,
        /// Console commands, sent in order.
        #[arg(last = true)]
        commands: Vec<String>,
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
    /// The adb server (host:port) Android experiments go through; one is
    /// started there if none runs. Default: 127.0.0.1 and
    /// ANDROID_ADB_SERVER_PORT, else 5037, as the adb client does.
    #[arg(long, value_name = "ADDRESS")]
    pub adb_server: Option<SocketAddr>,
    /// The `adb` binary, to start an adb server when none runs.
    #[arg(long, value_name = "PATH", default_value = "adb")]
    pub adb: PathBuf,
    /// The device Android experiments use when no emulator is launched;
    /// default the first online device no experiment holds.
    #[arg(long, env = "ANDROID_SERIAL", value_name = "SERIAL")]
    pub adb_serial: Option<String>,
    /// The Android SDK's `emulator` binary: when set, each Android
    /// experiment launches an emulator of its own (and shuts it down).
    #[arg(long, value_name = "PATH")]
    pub emulator: Option<PathBuf>,
    /// The AVD to launch (emulator.name; a request's android_run.avd_name wins).
    #[arg(long, value_name = "AVD")]
    pub emulator_name: Option<String>,
    /// The API level Android devices must run (emulator.sdk_version); checked once booted.
    #[arg(long, value_name = "LEVEL")]
    pub emulator_sdk_version: Option<u32>,
    /// The screen density set on the device for an experiment, in dpi (emulator.screen_density).
    #[arg(long, value_name = "DPI")]
    pub emulator_screen_density: Option<u32>,
    /// The device's network profile: LTE, 3G, EDGE, GPRS or Full.
    #[arg(long, default_value = "Full", value_parser = parse_profile)]
    pub network_profile: String,
    /// How long a launched emulator may take to boot, in seconds.
    #[arg(long, default_value_t = 300)]
    pub emulator_boot_timeout_seconds: u64,
    /// The emulator console's auth token file; default ~/.emulator_console_auth_token.
    #[arg(long, value_name = "PATH")]
    pub emulator_console_token: Option<PathBuf>,
    /// Largest APK an upload may carry, in MiB.
    #[arg(long, default_value_t = 256)]
    pub max_apk_mb: u64,
    /// Also build a small demo system (web → api → db) and run one
    /// experiment on it through the API, printing its phases and score.
    #[arg(long)]
    pub demo: bool,
    /// Log JSON lines instead of text.
    #[arg(long, env = "FAULTLINE_LOG_JSON")]
    pub log_json: bool,
}

fn parse_profile(s: &str) -> Result<String, String> {
    use crate::platforms::android::profiles;
    profiles::find(s).map(|p| p.name.to_string()).ok_or_else(|| format!("`{s}` is none of {}", profiles::names().join(", ")))
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
    /// How the host reaches adb.
    pub adb: AdbConfig,
    pub android: AndroidConfig,
    /// Largest APK an upload may carry.
    pub max_apk_bytes: u64,
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
            adb: {
                let mut adb = AdbConfig::from_env();
                adb.server = args.adb_server.unwrap_or(adb.server);
                adb.adb = args.adb.clone();
                adb.console_token = args.emulator_console_token.clone().unwrap_or(adb.console_token);
                adb
            },
            android: AndroidConfig {
                serial: args.adb_serial.clone(),
                emulator: args.emulator.clone(),
                emulator_name: args.emulator_name.clone(),
                sdk_version: args.emulator_sdk_version,
                screen_density: args.emulator_screen_density,
                network_profile: args.network_profile.clone(),
                boot_timeout: Duration::from_secs(args.emulator_boot_timeout_seconds),
            },
            max_apk_bytes: args.max_apk_mb << 20,
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
