//! The host's adb capability against the real Debian `adb` server and the
//! device simulator: the server protocol, a server started when none runs,
//! shell exit codes (shell v2), timeouts, installs, `adb reverse`, the
//! emulator console, watchdogs that fire or are disarmed, and the crashes
//! and ANRs a device reports.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use faultline::capabilities::adb::{AdbConfig, AdbHost, NoApks};
use faultline_plugin_runtime::capability::adb::RevertCommand;
use faultline_plugin_runtime::model::CapabilityError;
use faultline_tests::android::{AdbServer, SimDevice, SimOptions, TEST_ACTIVITY, TEST_APP, fixture_apk};
use faultline_tests::paths::{free_port, host_binary};

fn host_for(server: &AdbServer) -> AdbHost {
    AdbHost::new(config(server.port, server.home.path().join(".emulator_console_auth_token")), Arc::new(NoApks))
}

fn config(port: u16, console_token: PathBuf) -> AdbConfig {
    AdbConfig { server: ([127, 0, 0, 1], port).into(), adb: "adb".into(), console_token, watchdog_program: host_binary() }
}

#[tokio::test]
async fn with_no_server_running_the_host_starts_one_and_speaks_its_protocol() {
    let home = tempfile::tempdir().unwrap();
    let port = free_port();
    let adb = AdbHost::new(config(port, home.path().join("token")), Arc::new(NoApks));
    let version = adb.server_version().await.expect("a server was started");
    assert!(version >= 29, "adb server protocol version {version}");
    assert!(adb.devices().await.unwrap().is_empty(), "a fresh server knows no device");
    let _ = std::process::Command::new("adb").args(["-P", &port.to_string(), "kill-server"]).env("HOME", home.path()).status();
}

#[tokio::test]
async fn shell_commands_return_their_exit_codes_and_output_and_time_out() {
    let server = AdbServer::start();
    let device = SimDevice::start(&server, SimOptions::default());
    let adb = host_for(&server);
    let listed = adb.devices().await.unwrap();
    assert!(listed.iter().any(|d| d.serial == device.serial && d.state == "device"), "{listed:?}");

    let ok = adb.shell(&device.serial, "getprop ro.build.version.sdk", Duration::from_secs(10)).await.unwrap();
    assert_eq!((ok.exit_code, ok.stdout.trim()), (0, "34"));
    let missing = adb.shell(&device.serial, "pidof no.such.app", Duration::from_secs(10)).await.unwrap();
    assert_eq!(missing.exit_code, 1, "pidof of nothing exits 1: {missing:?}");
    let unknown = adb.shell(&device.serial, "frobnicate", Duration::from_secs(10)).await.unwrap();
    assert_eq!(unknown.exit_code, 127, "{unknown:?}");
    assert!(!unknown.stderr.is_empty());

    let slow = adb.shell(&device.serial, "sleep 10", Duration::from_millis(500)).await;
    assert!(matches!(slow, Err(CapabilityError::Timeout(_))), "{slow:?}");
    let nowhere = adb.shell("127.0.0.1:1", "true", Duration::from_secs(5)).await;
    assert!(matches!(nowhere, Err(CapabilityError::NotFound(_))), "{nowhere:?}");
}

#[tokio::test]
async fn an_apk_installs_and_its_app_starts_as_the_launcher_starts_it() {
    let server = AdbServer::start();
    let device = SimDevice::start(&server, SimOptions::default());
    let adb = host_for(&server);
    adb.install_file(&device.serial, &fixture_apk("testapp"), true).await.expect("installed");
    assert_eq!(server.shell(&device.serial, &format!("pm path {TEST_APP}")).0, 0);
    let started = adb.shell(&device.serial, &format!("am start -W -n {TEST_APP}/{TEST_ACTIVITY}"), Duration::from_secs(10)).await.unwrap();
    assert!(started.stdout.contains("Status: ok"), "{started:?}");
    assert_eq!(server.shell(&device.serial, &format!("pidof {TEST_APP}")).0, 0, "running, seen through adb");
    let garbage = tempfile::NamedTempFile::new().unwrap();
    std::fs::write(garbage.path(), b"not an apk").unwrap();
    let refused = adb.install_file(&device.serial, garbage.path(), true).await;
    assert!(matches!(&refused, Err(CapabilityError::Failed(why)) if why.contains("INSTALL")), "{refused:?}");
}

#[tokio::test]
async fn a_device_side_watchdog_fires_at_its_time_to_live_unless_disarmed() {
    let server = AdbServer::start();
    let device = SimDevice::start(&server, SimOptions::default());
    let adb = host_for(&server);
    let serial = device.serial.clone();
    adb.shell(&serial, "dumpsys battery set level 5", Duration::from_secs(5)).await.unwrap();
    adb.arm_watchdog(&serial, &[RevertCommand::Shell("dumpsys battery reset".into())], 2).await.unwrap();
    let level = || server.shell(&serial, "dumpsys battery").1;
    assert!(level().contains("level: 5"));
    server.wait_for("the watchdog's reset", Duration::from_secs(15), || (!level().contains("level: 100")).then(level));

    adb.shell(&serial, "dumpsys battery set level 7", Duration::from_secs(5)).await.unwrap();
    let disarmed = adb.arm_watchdog(&serial, &[RevertCommand::Shell("dumpsys battery reset".into())], 2).await.unwrap();
    adb.disarm_watchdog(&serial, &disarmed).await.unwrap();
    assert_eq!(server.shell(&serial, "pgrep -f '[f]aultline-watchdog'").0, 1, "no watchdog process is left");
    tokio::time::sleep(Duration::from_secs(3)).await;
    assert!(level().contains("level: 7"), "a disarmed watchdog never fires: {}", level());
    // Disarming one that fired or is gone is fine.
    adb.disarm_watchdog(&serial, &disarmed).await.unwrap();
}

#[tokio::test]
async fn the_emulator_console_answers_and_its_watchdog_outlives_the_caller() {
    let server = AdbServer::start();
    let device = SimDevice::start(&server, SimOptions { emulator: true, ..SimOptions::default() });
    let adb = host_for(&server);
    let serial = device.serial.clone();
    adb.console(&serial, "network speed 100:200").await.expect("the console took it");
    let status = server.emu(&serial, "network status");
    assert!(status.contains("upload speed:     100000 bits/s") && status.contains("download speed:   200000 bits/s"), "seen through `adb emu`: {status}");
    let refused = adb.console(&serial, "network speed fast").await;
    assert!(matches!(refused, Err(CapabilityError::Failed(_))), "{refused:?}");
    assert!(matches!(adb.console("127.0.0.1:5555", "help").await, Err(CapabilityError::Unavailable(_))), "only emulators have a console");

    // A console watchdog is a process of its own: it puts the profile back on time.
    adb.arm_watchdog(&serial, &[RevertCommand::Console("network speed full".into())], 2).await.unwrap();
    assert!(server.emu(&serial, "network status").contains("200000 bits/s"), "still throttled right after arming");
    server.wait_for("the console watchdog", Duration::from_secs(15), || {
        let status = server.emu(&serial, "network status");
        (!status.contains("download speed:   0 bits/s")).then_some(status)
    });
}

#[tokio::test]
async fn adb_reverse_lets_the_device_reach_a_host_port() {
    let server = AdbServer::start();
    let device = SimDevice::start(&server, SimOptions::default());
    let adb = host_for(&server);
    let port = free_port();
    adb.reverse(&device.serial, port).await.expect("reversed");
    let listed = String::from_utf8_lossy(&server.adb(&["-s", &device.serial, "reverse", "--list"]).stdout).to_string();
    assert!(listed.contains(&format!("tcp:{port}")), "{listed}");
    adb.remove_reverse(&device.serial, port).await.unwrap();
    let listed = String::from_utf8_lossy(&server.adb(&["-s", &device.serial, "reverse", "--list"]).stdout).to_string();
    assert!(!listed.contains(&format!("tcp:{port}")), "{listed}");
    adb.remove_reverse(&device.serial, port).await.expect("removing a removed one is fine");
}
