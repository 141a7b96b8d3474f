//! The simulator's command line, and what the emulator stand-in hands it.

use std::path::PathBuf;

use clap::Parser;

use crate::device::Network;

/// How the modelled apps react to faults: `crash` or `anr` when a condition
/// becomes true while the app runs.
#[derive(Debug, Clone, PartialEq)]
pub struct Behaviour {
    pub package: String,
    pub anr: bool,
    pub when: Condition,
}

/// What a behaviour waits for.
#[derive(Debug, Clone, PartialEq)]
pub enum Condition {
    /// Airplane mode turns on.
    AirplaneMode,
    /// A trim level at or above this one (its numeric value) is sent.
    Trim(u32),
    /// The battery is set at or below this level.
    BatteryBelow(u32),
    /// This many HTTP requests in a row fail.
    HttpFailures(u32),
}

/// The numeric trim levels of `ComponentCallbacks2`, by `am send-trim-memory` name.
pub const TRIM_LEVELS: [(&str, u32); 7] = [
    ("RUNNING_MODERATE", 5),
    ("RUNNING_LOW", 10),
    ("RUNNING_CRITICAL", 15),
    ("HIDDEN", 20),
    ("BACKGROUND", 40),
    ("MODERATE", 60),
    ("COMPLETE", 80),
];

pub fn trim_level(name: &str) -> Option<u32> {
    TRIM_LEVELS.iter().find(|(n, _)| *n == name).map(|(_, v)| *v)
}

fn condition(text: &str) -> Result<Condition, String> {
    let (kind, value) = text.split_once(':').unwrap_or((text, ""));
    let number = || value.parse::<u32>().map_err(|_| format!("`{text}`: `{value}` is not a number"));
    match kind {
        "airplane_mode" => Ok(Condition::AirplaneMode),
        "trim" => trim_level(value).or_else(|| value.parse().ok()).map(Condition::Trim).ok_or_else(|| format!("`{value}` is not a trim level")),
        "battery_below" => Ok(Condition::BatteryBelow(number()?)),
        "http_failures" => Ok(Condition::HttpFailures(number()?)),
        _ => Err(format!("`{text}`: conditions are airplane_mode, trim:<LEVEL>, battery_below:<N>, http_failures:<N>")),
    }
}

fn pair(text: &str) -> Result<(String, String), String> {
    text.split_once('=').map(|(a, b)| (a.to_string(), b.to_string())).ok_or_else(|| format!("`{text}` is not <package>=<value>"))
}

#[derive(Parser, Debug, Clone)]
#[command(name = "faultline-device-sim", about = "A simulated Android device that the real adb talks to")]
pub struct Args {
    /// The port adb servers connect to (the device's adbd).
    #[arg(long)]
    pub adb_port: u16,
    /// Run as an emulator: the console on this port, and registered with
    /// the adb server as emulator-<port> (the adb port must be this + 1 for
    /// a real emulator; any port works for the registration).
    #[arg(long)]
    pub console_port: Option<u16>,
    /// The adb server to register with (emulator mode); default
    /// ANDROID_ADB_SERVER_PORT, else 5037.
    #[arg(long, env = "ANDROID_ADB_SERVER_PORT")]
    pub adb_server_port: Option<u16>,
    /// The API level.
    #[arg(long, default_value_t = 34)]
    pub sdk: u32,
    /// The model name (ro.product.model).
    #[arg(long, default_value = "sdk_gphone64_x86_64")]
    pub model: String,
    /// The screen density in dpi.
    #[arg(long, default_value_t = 420)]
    pub density: u32,
    /// Milliseconds from start until sys.boot_completed is 1.
    #[arg(long, default_value_t = 0)]
    pub boot_ms: u64,
    /// The emulator network profile (speed and delay), by the emulator's name.
    #[arg(long, default_value = "full")]
    pub network: String,
    /// An app crashes when the condition becomes true while it runs:
    /// <package>=airplane_mode | trim:<LEVEL> | battery_below:<N> | http_failures:<N>. Repeatable.
    #[arg(long = "app-crash-on", value_parser = pair)]
    pub crash_on: Vec<(String, String)>,
    /// An app stops responding (an ANR) when the condition becomes true. Repeatable.
    #[arg(long = "app-anr-on", value_parser = pair)]
    pub anr_on: Vec<(String, String)>,
    /// An app GETs this URL (as the device sees it) while it runs: <package>=<url>. Repeatable.
    #[arg(long = "app-http", value_parser = pair)]
    pub http: Vec<(String, String)>,
    /// How often a running app makes its request.
    #[arg(long, default_value_t = 500)]
    pub app_http_interval_ms: u64,
    /// The log tag an app writes under: <package>=<tag> (default: FaultlineTestApp
    /// for dev.faultline.testapp, else the package's last segment).
    #[arg(long = "app-tag", value_parser = pair)]
    pub tags: Vec<(String, String)>,
    /// Where the emulator console's auth token is (default ~/.emulator_console_auth_token).
    #[arg(long)]
    pub console_token: Option<PathBuf>,
}

/// Everything the device runs with.
#[derive(Debug, Clone)]
pub struct Config {
    pub adb_port: u16,
    pub console_port: Option<u16>,
    pub adb_server_port: u16,
    pub emulator: bool,
    pub serial: String,
    pub sdk: u32,
    pub model: String,
    pub product: String,
    pub density: u32,
    pub boot_ms: u64,
    pub network: Network,
    pub network_name: String,
    pub behaviours: Vec<Behaviour>,
    pub http: Vec<(String, String)>,
    pub http_interval_ms: u64,
    pub tags: Vec<(String, String)>,
    pub console_token: PathBuf,
}

/// An emulator network profile, by its console name: (up, down kbit/s, min, max delay ms).
/// `full` and `none` mean no limit and no delay (0).
pub fn profile(name: &str) -> Option<(f64, f64, u32, u32)> {
    Some(match name {
        "gsm" => (14.4, 14.4, 150, 550),
        "hscsd" => (14.4, 57.6, 80, 400),
        "gprs" => (28.8, 57.6, 35, 200),
        "edge" => (473.6, 473.6, 80, 400),
        "umts" => (384.0, 384.0, 35, 200),
        "hsdpa" => (5760.0, 13_980.0, 0, 0),
        "lte" => (58_000.0, 173_000.0, 0, 0),
        "evdo" => (75_000.0, 280_000.0, 0, 0),
        "full" | "none" => (0.0, 0.0, 0, 0),
        _ => return None,
    })
}

impl Config {
    pub fn from_args(args: Args) -> Result<Config, String> {
        let (up, down, min, max) = profile(&args.network).ok_or_else(|| format!("unknown network profile `{}`", args.network))?;
        let mut behaviours = vec![];
        for (list, anr) in [(&args.crash_on, false), (&args.anr_on, true)] {
            for (package, when) in list {
                behaviours.push(Behaviour { package: package.clone(), anr, when: condition(when)? });
            }
        }
        let serial = match args.console_port {
            // adb names an emulator after its console port, the one below its adb port.
            Some(port) if port.checked_add(1) == Some(args.adb_port) => format!("emulator-{port}"),
            Some(port) => return Err(format!("an emulator's adb port is its console port + 1: not {port} and {}", args.adb_port)),
            None => format!("127.0.0.1:{}", args.adb_port),
        };
        let home = std::env::var_os("HOME").map(PathBuf::from).unwrap_or_else(|| PathBuf::from("/root"));
        Ok(Config {
            adb_port: args.adb_port,
            console_port: args.console_port,
            adb_server_port: args.adb_server_port.unwrap_or(5037),
            emulator: args.console_port.is_some(),
            serial,
            sdk: args.sdk,
            model: args.model,
            product: "sdk_gphone64_x86_64".into(),
            density: args.density,
            boot_ms: args.boot_ms,
            network: Network { up_kbps: up, down_kbps: down, min_delay_ms: min, max_delay_ms: max },
            network_name: args.network,
            behaviours,
            http: args.http,
            http_interval_ms: args.app_http_interval_ms.max(50),
            tags: args.tags,
            console_token: args.console_token.unwrap_or_else(|| home.join(".emulator_console_auth_token")),
        })
    }

    /// The tag an app logs under.
    pub fn tag_of(&self, package: &str) -> String {
        if let Some((_, tag)) = self.tags.iter().find(|(p, _)| p == package) {
            return tag.clone();
        }
        match package {
            "dev.faultline.testapp" => "FaultlineTestApp".into(),
            p => p.rsplit('.').next().unwrap_or(p).to_string(),
        }
    }
}
