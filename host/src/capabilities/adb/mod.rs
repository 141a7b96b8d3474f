//! The adb capability: Android devices and emulators through an adb
//! server, spoken to directly over its socket protocol (`wire`). The
//! server is the one at the configured address (`--adb-server`, else
//! `ANDROID_ADB_SERVER_PORT` or 5037 on loopback); if none runs there the
//! host starts one with the `adb` binary, as the adb client would. Every
//! call has a timeout, because a wasm deadline cannot interrupt a host
//! call. The plugin runtime's adb slot checks each plugin call against its
//! instance's scope (its devices, its packages, plain commands) before it
//! reaches this module.

pub mod console;
pub mod events;
mod server;
pub mod shell;
pub mod watchdog;
mod wire;

use std::collections::HashMap;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_trait::async_trait;
use faultline_plugin_runtime::capability::CapResult;
use faultline_plugin_runtime::capability::adb::{self as cap, Device, RevertCommand, ShellOutput};
use faultline_plugin_runtime::model::CapabilityError;
use tokio::io::AsyncWriteExt;

pub use wire::WireError;

use self::console::ConsoleError;
use self::wire::Connection;

/// Budget of a call that is not a user-given wait (a device list, a reverse).
const CALL_TIMEOUT: Duration = Duration::from_secs(20);
/// A shell command with no timeout of its own.
const SHELL_TIMEOUT: Duration = Duration::from_secs(30);
/// Longest shell command a plugin may ask for.
const MAX_SHELL_TIMEOUT: Duration = Duration::from_secs(300);
/// An install streams the whole APK: give it time.
const INSTALL_TIMEOUT: Duration = Duration::from_secs(300);

/// An uploaded APK the host keeps: where, and which package it is.
#[derive(Debug, Clone)]
pub struct ApkFile {
    pub path: PathBuf,
    pub package: String,
}

/// Where the adb capability finds uploaded APKs (the Android platform's store).
#[async_trait]
pub trait ApkFiles: Send + Sync {
    async fn apk(&self, id: &str) -> Option<ApkFile>;
}

/// No uploads: every id is unknown.
pub struct NoApks;

#[async_trait]
impl ApkFiles for NoApks {
    async fn apk(&self, _: &str) -> Option<ApkFile> {
        None
    }
}

/// How the host reaches adb.
#[derive(Debug, Clone)]
pub struct AdbConfig {
    /// The adb server's address.
    pub server: SocketAddr,
    /// The `adb` binary, to start a server when none runs.
    pub adb: PathBuf,
    /// The emulator console's token (`~/.emulator_console_auth_token`).
    pub console_token: PathBuf,
    /// The program a console watchdog runs: the host's own binary.
    pub watchdog_program: PathBuf,
}

impl AdbConfig {
    /// The adb client's defaults: `ANDROID_ADB_SERVER_PORT`, else 5037.
    pub fn from_env() -> AdbConfig {
        let port = std::env::var("ANDROID_ADB_SERVER_PORT").ok().and_then(|p| p.parse().ok()).unwrap_or(5037);
        let home = std::env::var_os("HOME").map(PathBuf::from).unwrap_or_else(|| PathBuf::from("/root"));
        AdbConfig {
            server: SocketAddr::from(([127, 0, 0, 1], port)),
            adb: PathBuf::from("adb"),
            console_token: home.join(".emulator_console_auth_token"),
            watchdog_program: std::env::current_exe().unwrap_or_else(|_| PathBuf::from("faultline")),
        }
    }
}

/// The result of a shell command on a device.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Shell {
    pub exit_code: i32,
    pub stdout: String,
    pub stderr: String,
}

impl Shell {
    pub fn ok(&self) -> bool {
        self.exit_code == 0
    }
}

pub struct AdbHost {
    config: AdbConfig,
    apks: Arc<dyn ApkFiles>,
    /// Each device's features (shell_v2, cmd ...), asked once.
    features: Mutex<HashMap<String, Arc<str>>>,
}

/// Maps a failure to reach a device onto the contract's errors.
fn capability_error(e: WireError) -> CapabilityError {
    match e {
        WireError::Refused(why) if why.contains("not found") || why.contains("offline") || why.contains("no devices") => CapabilityError::NotFound(why),
        WireError::Refused(why) => CapabilityError::Failed(why),
        WireError::NoServer(_) | WireError::Io(_) => CapabilityError::Unavailable(e.to_string()),
        WireError::Protocol(_) => CapabilityError::Failed(e.to_string()),
    }
}

fn console_error(e: ConsoleError) -> CapabilityError {
    match e {
        ConsoleError::NotAnEmulator(_) => CapabilityError::Unavailable(e.to_string()),
        ConsoleError::Unreachable(_) => CapabilityError::NotFound(e.to_string()),
        ConsoleError::Timeout(_) => CapabilityError::Timeout(e.to_string()),
        ConsoleError::Refused(_) | ConsoleError::Io(_) => CapabilityError::Failed(e.to_string()),
    }
}

async fn timed<T>(what: &str, limit: Duration, call: impl Future<Output = CapResult<T>>) -> CapResult<T> {
    match tokio::time::timeout(limit, call).await {
        Ok(result) => result,
        Err(_) => Err(CapabilityError::Timeout(format!("{what} took longer than {limit:?}"))),
    }
}

impl AdbHost {
    pub fn new(config: AdbConfig, apks: Arc<dyn ApkFiles>) -> AdbHost {
        AdbHost { config, apks, features: Mutex::default() }
    }

    pub fn config(&self) -> &AdbConfig {
        &self.config
    }

    /// A connection for `attempt`, starting a server first if none runs.
    async fn with_server<T, F: Future<Output = Result<T, WireError>>>(&self, attempt: impl Fn() -> F) -> CapResult<T> {
        match attempt().await {
            Err(WireError::NoServer(_)) => {
                server::start(&self.config.adb, self.config.server).await.map_err(CapabilityError::Unavailable)?;
                attempt().await.map_err(capability_error)
            }
            other => other.map_err(capability_error),
        }
    }

    /// The adb server's protocol version.
    pub async fn server_version(&self) -> CapResult<u32> {
        let server = self.config.server;
        let hex = timed("asking the adb server's version", CALL_TIMEOUT, self.with_server(|| Connection::host_query(server, "host:version"))).await?;
        u32::from_str_radix(hex.trim(), 16).map_err(|_| CapabilityError::Failed(format!("the adb server's version `{hex}` is not hex")))
    }

    /// Every device the server knows, in any state.
    pub async fn devices(&self) -> CapResult<Vec<Device>> {
        let server = self.config.server;
        let list = timed("listing devices", CALL_TIMEOUT, self.with_server(|| Connection::host_query(server, "host:devices-l"))).await?;
        Ok(parse_devices(&list))
    }

    /// A device's features, as its banner advertised them.
    async fn features(&self, serial: &str) -> CapResult<Arc<str>> {
        if let Some(known) = self.features.lock().expect("features lock").get(serial) {
            return Ok(known.clone());
        }
        let (server, service) = (self.config.server, format!("host-serial:{serial}:features"));
        let features: Arc<str> = timed("asking a device's features", CALL_TIMEOUT, self.with_server(|| Connection::host_query(server, &service))).await?.into();
        self.features.lock().expect("features lock").insert(serial.to_string(), features.clone());
        Ok(features)
    }

    async fn has_feature(&self, serial: &str, feature: &str) -> CapResult<bool> {
        Ok(self.features(serial).await?.split(',').any(|f| f == feature))
    }

    /// Runs a command in the device's shell, with its exit code (shell
    /// protocol v2, which every device since Android 7.0 offers).
    pub async fn shell(&self, serial: &str, command: &str, timeout: Duration) -> CapResult<Shell> {
        let timeout = timeout.min(MAX_SHELL_TIMEOUT);
        let run = async {
            if !self.has_feature(serial, "shell_v2").await? {
                self.features.lock().expect("features lock").remove(serial);
                return Err(CapabilityError::Unavailable(format!("device `{serial}` does not offer the shell protocol v2 (Android 7.0 or later)")));
            }
            let (server, service) = (self.config.server, format!("shell,v2,raw:{command}"));
            let mut connection = self.with_server(|| Connection::device_service(server, serial, &service)).await?;
            shell::close_stdin(connection.stream()).await.map_err(|e| capability_error(e.into()))?;
            let out = shell::read_output(connection.stream()).await.map_err(|e| capability_error(e.into()))?;
            let exit_code = out.exit_code.ok_or_else(|| CapabilityError::NotFound(format!("device `{serial}` went away during `{command}`")))?;
            Ok(Shell {
                exit_code: i32::from(exit_code),
                stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
                stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
            })
        };
        timed(&format!("`{command}` on {serial}"), timeout, run).await
    }

    /// Installs an APK file (`cmd package install -S`, streamed as `adb install` does).
    pub async fn install_file(&self, serial: &str, path: &Path, replace: bool) -> CapResult<()> {
        let run = async {
            if !self.has_feature(serial, "cmd").await? {
                return Err(CapabilityError::Unavailable(format!("device `{serial}` does not offer `cmd` (Android 7.0 or later)")));
            }
            let bytes = tokio::fs::read(path).await.map_err(|e| CapabilityError::NotFound(format!("{}: {e}", path.display())))?;
            let flags = if replace { "-r " } else { "" };
            let (server, service) = (self.config.server, format!("exec:cmd package install {flags}-S {}", bytes.len()));
            let mut connection = self.with_server(|| Connection::device_service(server, serial, &service)).await?;
            connection.stream().write_all(&bytes).await.map_err(|e| capability_error(e.into()))?;
            let answer = connection.read_to_end(64 << 10).await.map_err(capability_error)?;
            let answer = String::from_utf8_lossy(&answer);
            match answer.lines().any(|l| l.trim() == "Success") {
                true => Ok(()),
                false => Err(CapabilityError::Failed(format!("installing on {serial}: {}", answer.trim()))),
            }
        };
        timed(&format!("installing {} on {serial}", path.display()), INSTALL_TIMEOUT, run).await
    }

    /// Lets the device reach the host's `port` at its own `127.0.0.1:port`
    /// (`adb reverse`); it lasts until removed, the device disconnects or
    /// the adb server stops.
    pub async fn reverse(&self, serial: &str, port: u16) -> CapResult<()> {
        self.reverse_service(serial, &format!("reverse:forward:tcp:{port};tcp:{port}")).await
    }

    pub async fn remove_reverse(&self, serial: &str, port: u16) -> CapResult<()> {
        match self.reverse_service(serial, &format!("reverse:killforward:tcp:{port}")).await {
            // Gone already (the device restarted, the server was restarted).
            Err(CapabilityError::Failed(why) | CapabilityError::NotFound(why)) if why.contains("listener") => Ok(()),
            other => other,
        }
    }

    async fn reverse_service(&self, serial: &str, service: &str) -> CapResult<()> {
        let server = self.config.server;
        let run = async {
            let mut connection = self.with_server(|| Connection::device_service(server, serial, service)).await?;
            // The device's reverse service answers a status of its own.
            connection.status().await.map_err(capability_error)
        };
        timed(service, CALL_TIMEOUT, run).await
    }

    /// One emulator console command; only `emulator-NNNN` devices have a console.
    pub async fn console(&self, serial: &str, command: &str) -> CapResult<String> {
        let port = console::port_of(serial).map_err(console_error)?;
        console::send(port, &self.config.console_token, command, CALL_TIMEOUT).await.map_err(console_error)
    }

    pub async fn arm_watchdog(&self, serial: &str, commands: &[RevertCommand], ttl_seconds: u32) -> CapResult<String> {
        let id = format!("wd-{}", uuid::Uuid::new_v4().simple());
        let (shell, console): (Vec<String>, Vec<String>) = commands.iter().fold((vec![], vec![]), |(mut s, mut c), command| {
            match command {
                RevertCommand::Shell(x) => s.push(x.clone()),
                RevertCommand::Console(x) => c.push(x.clone()),
            }
            (s, c)
        });
        if !shell.is_empty() {
            let armed = self.shell(serial, &watchdog::arm_on_device(&id, &shell, ttl_seconds), SHELL_TIMEOUT).await?;
            if !armed.ok() {
                return Err(CapabilityError::Failed(format!("arming a watchdog on {serial}: {}", armed.stderr.trim())));
            }
        }
        if !console.is_empty() {
            let port = console::port_of(serial).map_err(console_error)?;
            let config = &self.config;
            watchdog::arm_console(&config.watchdog_program, &id, port, &config.console_token, &console, ttl_seconds)
                .map_err(|e| CapabilityError::Failed(format!("starting a console watchdog: {e}")))?;
        }
        Ok(id)
    }

    pub async fn disarm_watchdog(&self, serial: &str, id: &str) -> CapResult<()> {
        watchdog::disarm_console(id);
        // pkill answers 1 when nothing matched: that watchdog has fired or is gone.
        let disarmed = self.shell(serial, &watchdog::disarm_on_device(id), SHELL_TIMEOUT).await?;
        match disarmed.exit_code {
            0 | 1 => Ok(()),
            code => Err(CapabilityError::Failed(format!("disarming watchdog {id} on {serial} exited {code}: {}", disarmed.stderr.trim()))),
        }
    }
}

/// `host:devices-l` lines: serial, state, then `key:value` words.
fn parse_devices(list: &str) -> Vec<Device> {
    list.lines()
        .filter_map(|line| {
            let mut words = line.split_whitespace();
            let serial = words.next()?.to_string();
            let state = words.next()?.to_string();
            let model = words.find_map(|w| w.strip_prefix("model:")).unwrap_or_default().to_string();
            Some(Device { serial, state, model })
        })
        .collect()
}

#[async_trait]
impl cap::Adb for AdbHost {
    async fn devices(&self) -> CapResult<Vec<Device>> {
        AdbHost::devices(self).await
    }
    async fn shell(&self, serial: String, command: String, timeout_ms: u32) -> CapResult<ShellOutput> {
        let timeout = if timeout_ms == 0 { SHELL_TIMEOUT } else { Duration::from_millis(u64::from(timeout_ms)) };
        let out = AdbHost::shell(self, &serial, &command, timeout).await?;
        Ok(ShellOutput { exit_code: out.exit_code, stdout: out.stdout, stderr: out.stderr })
    }
    async fn install(&self, serial: String, apk: String, replace: bool) -> CapResult<()> {
        let file = self.apks.apk(&apk).await.ok_or_else(|| CapabilityError::NotFound(format!("no uploaded APK `{apk}`")))?;
        self.install_file(&serial, &file.path, replace).await
    }
    async fn emulator_console(&self, serial: String, command: String) -> CapResult<String> {
        self.console(&serial, &command).await
    }
    async fn arm_watchdog(&self, serial: String, commands: Vec<RevertCommand>, ttl_seconds: u32) -> CapResult<String> {
        AdbHost::arm_watchdog(self, &serial, &commands, ttl_seconds).await
    }
    async fn disarm_watchdog(&self, serial: String, id: String) -> CapResult<()> {
        AdbHost::disarm_watchdog(self, &serial, &id).await
    }
    async fn apk_package(&self, apk: &str) -> CapResult<String> {
        self.apks.apk(apk).await.map(|f| f.package).ok_or_else(|| CapabilityError::NotFound(format!("no uploaded APK `{apk}`")))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_device_list_gives_serial_state_and_model() {
        let list = "emulator-5554          device product:sdk_gphone64 model:sdk_gphone64_x86_64 device:emu64xa transport_id:1\n\
                    127.0.0.1:40001        offline transport_id:2\n";
        let devices = parse_devices(list);
        assert_eq!(devices.len(), 2);
        assert_eq!((devices[0].serial.as_str(), devices[0].state.as_str(), devices[0].model.as_str()), ("emulator-5554", "device", "sdk_gphone64_x86_64"));
        assert_eq!((devices[1].state.as_str(), devices[1].model.as_str()), ("offline", ""));
    }
}
