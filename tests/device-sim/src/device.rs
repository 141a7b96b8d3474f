//! The simulated device's state: properties, installed packages, running
//! processes (apps and background shell jobs), the foreground activity,
//! battery, settings and radios, display density, the emulator's network
//! speed, the log buffers and `adb reverse` mappings. One lock guards it;
//! commands read and change it as a real device's services would.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex, Weak};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use tokio::task::AbortHandle;

use crate::config::Config;
use crate::transport::Transport;

/// The home screen, preinstalled, in the foreground when no app is.
pub const LAUNCHER: (&str, &str) = ("com.android.launcher3", "com.android.launcher3.uioverrides.QuickstepLauncher");
/// Preinstalled system packages, with their main activity.
pub const SYSTEM_PACKAGES: [(&str, &str); 3] =
    [LAUNCHER, ("com.android.settings", "com.android.settings.Settings"), ("com.android.systemui", "")];
/// The log buffers `logcat -b` knows.
pub const BUFFERS: [&str; 5] = ["main", "system", "crash", "events", "radio"];
/// Lines each buffer keeps, as a ring.
const BUFFER_LINES: usize = 5000;

#[derive(Debug, Clone)]
pub struct Package {
    pub name: String,
    /// The launchable activity, fully qualified; empty for none.
    pub activity: String,
    pub path: String,
    pub system: bool,
    pub uid: u32,
}

#[derive(Debug, Clone)]
pub enum ProcessKind {
    App(String),
    /// A shell command running in the background, and how to end it.
    Job(AbortHandle),
    /// A shell serving an adb session.
    Shell,
}

#[derive(Debug, Clone)]
pub struct Process {
    pub pid: u32,
    /// The name `ps` shows and `pgrep` matches.
    pub name: String,
    /// The whole command line `pgrep -f` matches.
    pub cmdline: String,
    pub kind: ProcessKind,
    pub user: String,
}

#[derive(Debug, Clone)]
pub struct Battery {
    pub level: u32,
    pub ac: bool,
    pub usb: bool,
    pub wireless: bool,
    pub status: u32,
    pub unplugged: bool,
}

impl Default for Battery {
    fn default() -> Self {
        // An emulator reports AC power and a full battery.
        Battery { level: 100, ac: true, usb: false, wireless: false, status: 2, unplugged: false }
    }
}

/// The emulator's network shaping: kbit/s each way (0: no limit), delay in ms.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Network {
    pub up_kbps: f64,
    pub down_kbps: f64,
    pub min_delay_ms: u32,
    pub max_delay_ms: u32,
}

#[derive(Debug, Clone)]
pub struct LogLine {
    pub buffer: &'static str,
    pub at_ms: i64,
    pub pid: u32,
    pub tid: u32,
    pub priority: char,
    pub tag: String,
    pub message: String,
}

pub struct State {
    pub props: BTreeMap<String, String>,
    pub packages: BTreeMap<String, Package>,
    pub processes: BTreeMap<u32, Process>,
    next_pid: u32,
    next_uid: u32,
    /// The resumed activity: (package, activity).
    pub resumed: (String, String),
    pub battery: Battery,
    /// (namespace, key) → value, as `settings` keeps them.
    pub settings: BTreeMap<(String, String), String>,
    pub wifi: bool,
    pub data: bool,
    pub density_override: Option<u32>,
    pub network: Network,
    pub logs: Vec<LogLine>,
    /// device port → host port, as `adb reverse` set them.
    pub reverses: BTreeMap<u16, String>,
    pub last_anr: Option<String>,
    /// The trim level each app was last told.
    pub trimmed: BTreeMap<String, u32>,
    /// HTTP failures in a row, per app.
    pub http_failures: BTreeMap<String, u32>,
}

pub struct Device {
    pub config: Config,
    state: Mutex<State>,
    booted_at: Instant,
    /// The adb servers connected now; a reverse tunnel goes through one.
    transports: Mutex<Vec<Weak<Transport>>>,
}

pub fn now_ms() -> i64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map(|d| d.as_millis() as i64).unwrap_or(0)
}

impl Device {
    pub fn new(config: Config) -> Arc<Device> {
        let mut props = BTreeMap::new();
        let release = release_of(config.sdk);
        for (k, v) in [
            ("ro.build.version.sdk", config.sdk.to_string()),
            ("ro.build.version.release", release.to_string()),
            ("ro.product.model", config.model.clone()),
            ("ro.product.manufacturer", "Google".to_string()),
            ("ro.product.name", config.product.clone()),
            ("ro.product.device", config.product.clone()),
            ("ro.product.cpu.abi", "x86_64".to_string()),
            ("ro.serialno", config.serial.clone()),
            ("ro.sf.lcd_density", config.density.to_string()),
            ("ro.build.type", "userdebug".to_string()),
        ] {
            props.insert(k.to_string(), v);
        }
        if config.emulator {
            props.insert("ro.kernel.qemu".into(), "1".into());
            props.insert("ro.boot.qemu".into(), "1".into());
        }
        let mut settings = BTreeMap::new();
        settings.insert(("global".to_string(), "airplane_mode_on".to_string()), "0".to_string());
        settings.insert(("global".to_string(), "adb_enabled".to_string()), "1".to_string());
        settings.insert(("system".to_string(), "screen_brightness".to_string()), "102".to_string());
        let mut state = State {
            props,
            packages: BTreeMap::new(),
            processes: BTreeMap::new(),
            next_pid: 1000,
            next_uid: 10_100,
            resumed: (LAUNCHER.0.to_string(), LAUNCHER.1.to_string()),
            battery: Battery::default(),
            settings,
            wifi: true,
            data: true,
            density_override: None,
            network: config.network,
            logs: vec![],
            reverses: BTreeMap::new(),
            last_anr: None,
            trimmed: BTreeMap::new(),
            http_failures: BTreeMap::new(),
        };
        for (name, activity) in SYSTEM_PACKAGES {
            state.packages.insert(
                name.into(),
                Package { name: name.into(), activity: activity.into(), path: format!("/system/priv-app/{name}/{name}.apk"), system: true, uid: 1000 },
            );
        }
        for name in ["system_server", "zygote64", "surfaceflinger", LAUNCHER.0] {
            state.spawn(name, name, ProcessKind::Shell, "system");
        }
        Arc::new(Device { config, state: Mutex::new(state), booted_at: Instant::now(), transports: Mutex::default() })
    }

    pub fn state(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    pub fn booted(&self) -> bool {
        self.booted_at.elapsed() >= Duration::from_millis(self.config.boot_ms)
    }

    pub fn add_transport(&self, transport: &Arc<Transport>) {
        let mut transports = self.transports.lock().unwrap();
        transports.retain(|t| t.strong_count() > 0);
        transports.push(Arc::downgrade(transport));
    }

    /// A live transport, for a stream the device opens.
    pub fn transport(&self) -> Option<Arc<Transport>> {
        self.transports.lock().unwrap().iter().rev().find_map(Weak::upgrade)
    }
}

/// The Android release of an API level.
fn release_of(sdk: u32) -> &'static str {
    match sdk {
        35.. => "15",
        34 => "14",
        33 => "13",
        32 | 31 => "12",
        30 => "11",
        29 => "10",
        28 => "9",
        26 | 27 => "8.0.0",
        _ => "7.0",
    }
}

impl State {
    /// A new process; its pid.
    pub fn spawn(&mut self, name: &str, cmdline: &str, kind: ProcessKind, user: &str) -> u32 {
        self.next_pid += 1 + self.next_pid % 7;
        let pid = self.next_pid;
        self.processes.insert(pid, Process { pid, name: name.into(), cmdline: cmdline.into(), kind, user: user.into() });
        pid
    }

    pub fn next_uid(&mut self) -> u32 {
        self.next_uid += 1;
        self.next_uid
    }

    /// The pid of an app's process, if it runs.
    pub fn app_pid(&self, package: &str) -> Option<u32> {
        self.processes.values().find(|p| matches!(&p.kind, ProcessKind::App(a) if a == package)).map(|p| p.pid)
    }

    /// A line in a log buffer, on the device's clock.
    pub fn log(&mut self, buffer: &'static str, pid: u32, priority: char, tag: &str, message: &str) {
        self.logs.push(LogLine { buffer, at_ms: now_ms(), pid, tid: pid, priority, tag: tag.into(), message: message.into() });
        let in_buffer = self.logs.iter().filter(|l| l.buffer == buffer).count();
        if in_buffer > BUFFER_LINES
            && let Some(first) = self.logs.iter().position(|l| l.buffer == buffer)
        {
            self.logs.remove(first);
        }
    }

    pub fn setting(&self, namespace: &str, key: &str) -> Option<&String> {
        self.settings.get(&(namespace.to_string(), key.to_string()))
    }

    pub fn airplane_mode(&self) -> bool {
        self.setting("global", "airplane_mode_on").is_some_and(|v| v == "1")
    }

    pub fn system_server_pid(&self) -> u32 {
        self.processes.values().find(|p| p.name == "system_server").map_or(1, |p| p.pid)
    }
}
