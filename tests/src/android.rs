//! Android test support: a private adb server (the real Debian `adb`),
//! the device simulator (`tests/device-sim`) started as a TCP device or as
//! an emulator registered with that server, and checks made through
//! `adb shell` as a user would make them, never through the simulator's
//! own state.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

use crate::paths::{device_sim_binary, free_port, workspace_root};

/// The committed test APKs (`tests/android/apks/`).
pub fn fixture_apk(name: &str) -> PathBuf {
    workspace_root().join("tests/android/apks").join(format!("{name}.apk"))
}

/// The test app's package and launchable activity.
pub const TEST_APP: &str = "dev.faultline.testapp";
pub const TEST_ACTIVITY: &str = "dev.faultline.testapp.MainActivity";

/// A private adb server on a free port, with its own HOME (keys, the
/// emulator console token) and TMPDIR; killed when dropped.
pub struct AdbServer {
    pub port: u16,
    pub home: tempfile::TempDir,
}

impl AdbServer {
    pub fn start() -> AdbServer {
        let server = AdbServer { port: free_port(), home: tempfile::tempdir().unwrap() };
        let out = server.adb(&["start-server"]);
        assert!(out.status.success(), "adb start-server: {}", String::from_utf8_lossy(&out.stderr));
        server
    }

    /// An `adb` command against this server.
    pub fn command(&self) -> Command {
        let mut command = Command::new("adb");
        command.args(["-P", &self.port.to_string()]).env("HOME", self.home.path()).env("TMPDIR", self.home.path()).env_remove("ANDROID_SERIAL");
        command
    }

    pub fn adb(&self, args: &[&str]) -> Output {
        self.command().args(args).output().expect("running adb")
    }

    /// `adb -s SERIAL shell COMMAND`: its exit code (shell v2) and stdout.
    pub fn shell(&self, serial: &str, command: &str) -> (i32, String) {
        let out = self.adb(&["-s", serial, "shell", command]);
        (out.status.code().unwrap_or(-1), String::from_utf8_lossy(&out.stdout).trim().to_string())
    }

    /// `adb -s SERIAL emu COMMAND` (the client speaks to the console itself).
    pub fn emu(&self, serial: &str, command: &str) -> String {
        let mut args = vec!["-s", serial, "emu"];
        args.extend(command.split_whitespace());
        String::from_utf8_lossy(&self.adb(&args).stdout).to_string()
    }

    /// Serials the server lists as online.
    pub fn online(&self) -> Vec<String> {
        let out = String::from_utf8_lossy(&self.adb(&["devices"]).stdout).to_string();
        out.lines().skip(1).filter_map(|l| l.split_once('\t')).filter(|(_, state)| *state == "device").map(|(s, _)| s.to_string()).collect()
    }

    /// Waits until `check` holds, polling; fails with what it last saw.
    pub fn wait_for(&self, what: &str, within: Duration, mut check: impl FnMut() -> Option<String>) {
        let deadline = Instant::now() + within;
        loop {
            match check() {
                None => return,
                Some(seen) if Instant::now() >= deadline => panic!("{what} did not happen within {within:?}; last: {seen}"),
                Some(_) => std::thread::sleep(Duration::from_millis(100)),
            }
        }
    }

    /// The host's flags for this server.
    pub fn host_args(&self) -> Vec<String> {
        vec!["--adb-server".into(), format!("127.0.0.1:{}", self.port)]
    }
}

impl Drop for AdbServer {
    fn drop(&mut self) {
        let _ = self.adb(&["kill-server"]);
    }
}

/// The device simulator, as a process of its own; killed when dropped.
pub struct SimDevice {
    child: Child,
    pub serial: String,
    /// The console port, for an emulator.
    pub console: Option<u16>,
}

/// How a simulated device is started.
#[derive(Clone, Default)]
pub struct SimOptions {
    /// Register as an emulator (serial `emulator-<console>`) rather than a TCP device.
    pub emulator: bool,
    pub sdk: Option<u32>,
    /// Extra simulator flags (app behaviours, app HTTP traffic).
    pub args: Vec<String>,
}

impl SimDevice {
    /// Starts a device and waits until the server lists it online.
    pub fn start(server: &AdbServer, options: SimOptions) -> SimDevice {
        // An emulator's adb port is its console port + 1.
        let (console, adb_port) = if options.emulator { free_pair() } else { (0, free_port()) };
        let mut command = Command::new(device_sim_binary());
        command.env("HOME", server.home.path()).stdin(Stdio::null()).stdout(Stdio::null()).stderr(Stdio::inherit());
        command.args(["--adb-port", &adb_port.to_string()]);
        if let Some(sdk) = options.sdk {
            command.args(["--sdk", &sdk.to_string()]);
        }
        let (serial, console) = if options.emulator {
            command.args(["--console-port", &console.to_string(), "--adb-server-port", &server.port.to_string()]);
            (format!("emulator-{console}"), Some(console))
        } else {
            (format!("127.0.0.1:{adb_port}"), None)
        };
        command.args(&options.args);
        let child = command.spawn().expect("starting the device simulator");
        let device = SimDevice { child, serial, console };
        if !options.emulator {
            wait_listening(adb_port);
            let out = server.adb(&["connect", &device.serial]);
            assert!(out.status.success(), "adb connect: {}", String::from_utf8_lossy(&out.stdout));
        }
        server.wait_for(&format!("{} online", device.serial), Duration::from_secs(20), || {
            let online = server.online();
            (!online.contains(&device.serial)).then(|| format!("{online:?}"))
        });
        device
    }

    /// Kills the simulator outright, as a device pulled off the bus.
    pub fn kill(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Drop for SimDevice {
    fn drop(&mut self) {
        self.kill();
    }
}

/// Two free ports in a row, the first even (as emulator console ports are).
fn free_pair() -> (u16, u16) {
    loop {
        let port = free_port() & !1;
        if std::net::TcpListener::bind(("127.0.0.1", port)).is_ok() && std::net::TcpListener::bind(("127.0.0.1", port + 1)).is_ok() {
            return (port, port + 1);
        }
    }
}

fn wait_listening(port: u16) {
    let deadline = Instant::now() + Duration::from_secs(20);
    while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
        assert!(Instant::now() < deadline, "the simulator never listened on {port}");
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// An AVD definition the emulator stand-in (like the real emulator) finds
/// under `$ANDROID_AVD_HOME`.
pub fn create_avd(avd_home: &Path, name: &str, sdk: u32, density: u32) {
    let dir = avd_home.join(format!("{name}.avd"));
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(avd_home.join(format!("{name}.ini")), format!("avd.ini.encoding=UTF-8\npath={}\ntarget=android-{sdk}\n", dir.display())).unwrap();
    std::fs::write(
        dir.join("config.ini"),
        format!("image.sysdir.1=system-images/android-{sdk}/google_apis/x86_64/\nhw.lcd.density={density}\nhw.device.name=pixel_6\n"),
    )
    .unwrap();
}
