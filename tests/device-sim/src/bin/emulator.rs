//! `emulator`: a stand-in for the Android SDK's emulator on the launch
//! path. It takes the real emulator's command line, finds the AVD as the
//! real one does (`$ANDROID_AVD_HOME/<name>.ini`, else
//! `$HOME/.android/avd/<name>.ini`, whose `path=` holds `config.ini`), fails
//! as it does for an unknown AVD, and otherwise runs the device simulator
//! in emulator mode: console on `-port` (default 5554), adb on the next
//! port, registered with the adb server at ANDROID_ADB_SERVER_PORT or
//! 5037, the API level and density from config.ini, the network profile
//! from -netspeed, booting in about 1.5 s. Test-only simulator flags (app
//! behaviours, app traffic) come in FAULTLINE_SIM_ARGS.

use std::collections::BTreeMap;
use std::path::PathBuf;

use clap::Parser;
use faultline_device_sim::config::{Args, Config};

/// Flags of the real emulator that take a value.
const WITH_VALUE: [&str; 22] = [
    "-avd", "-port", "-netspeed", "-netdelay", "-gpu", "-prop", "-memory", "-cores", "-camera-back", "-camera-front", "-skin", "-dns-server",
    "-http-proxy", "-sysdir", "-datadir", "-kernel", "-ramdisk", "-data", "-partition-size", "-timezone", "-feature", "-accel",
];
/// Flags of the real emulator that take none.
const WITHOUT: [&str; 12] =
    ["-no-window", "-no-audio", "-no-boot-anim", "-no-snapshot", "-no-snapshot-save", "-no-snapshot-load", "-wipe-data", "-read-only", "-verbose", "-no-accel", "-writable-system", "-no-cache"];

fn fail(message: &str) -> ! {
    eprintln!("{message}");
    std::process::exit(1);
}

/// Where AVDs are looked for, in the real emulator's order.
fn avd_dirs() -> Vec<PathBuf> {
    let mut dirs = vec![];
    if let Some(home) = std::env::var_os("ANDROID_AVD_HOME") {
        dirs.push(PathBuf::from(home));
    }
    if let Some(sdk_home) = std::env::var_os("ANDROID_SDK_HOME") {
        dirs.push(PathBuf::from(sdk_home).join("avd"));
    }
    if let Some(home) = std::env::var_os("HOME") {
        dirs.push(PathBuf::from(home).join(".android").join("avd"));
    }
    dirs
}

fn ini(path: &PathBuf) -> Option<BTreeMap<String, String>> {
    let text = std::fs::read_to_string(path).ok()?;
    Some(text.lines().filter_map(|l| l.split_once('=')).map(|(k, v)| (k.trim().to_string(), v.trim().to_string())).collect())
}

fn main() {
    let argv: Vec<String> = std::env::args().skip(1).collect();
    let mut flags: BTreeMap<String, String> = BTreeMap::new();
    let mut it = argv.iter();
    while let Some(arg) = it.next() {
        if let Some(name) = arg.strip_prefix('@') {
            flags.insert("-avd".into(), name.into());
        } else if arg == "-list-avds" {
            for dir in avd_dirs() {
                for entry in std::fs::read_dir(dir).into_iter().flatten().flatten() {
                    if let Some(name) = entry.file_name().to_string_lossy().strip_suffix(".ini") {
                        println!("{name}");
                    }
                }
            }
            return;
        } else if arg == "-qemu" {
            break;
        } else if WITH_VALUE.contains(&arg.as_str()) {
            let value = it.next().unwrap_or_else(|| fail(&format!("emulator: ERROR: missing argument after '{arg}'")));
            flags.insert(arg.clone(), value.clone());
        } else if !WITHOUT.contains(&arg.as_str()) {
            fail(&format!("emulator: ERROR: invalid command-line parameter: {arg}."));
        }
    }
    let Some(avd) = flags.get("-avd").cloned() else {
        fail("ERROR | No AVD specified. Use '@foo' or '-avd foo' to launch a virtual device named 'foo'");
    };
    let Some(definition) = avd_dirs().into_iter().map(|d| d.join(format!("{avd}.ini"))).find(|p| p.is_file()) else {
        fail(&format!(
            "PANIC: Unknown AVD name [{avd}], use -list-avds to see valid list.\nHOME is defined but there is no file {avd}.ini in $HOME/.android/avd\n(Note: Directories are searched in the order $ANDROID_AVD_HOME, $ANDROID_SDK_HOME/avd and $HOME/.android/avd)"
        ));
    };
    let avd_path = ini(&definition).and_then(|i| i.get("path").cloned()).map(PathBuf::from).unwrap_or_default();
    let config = ini(&avd_path.join("config.ini")).unwrap_or_else(|| fail(&format!("PANIC: Missing emulator engine program for '{avd}': no config.ini in {}", avd_path.display())));
    let sdk = config.get("image.sysdir.1").and_then(|s| s.split("android-").nth(1)).and_then(|s| s.split('/').next()).and_then(|s| s.parse::<u32>().ok()).unwrap_or(34);
    let density = config.get("hw.lcd.density").cloned().unwrap_or_else(|| "420".into());
    let port: u16 = flags.get("-port").and_then(|p| p.parse().ok()).unwrap_or(5554);
    if !port.is_multiple_of(2) {
        fail(&format!("emulator: ERROR: the console port number must be even, not {port}."));
    }
    let mut args = vec![
        "emulator".to_string(),
        "--adb-port".into(),
        (port + 1).to_string(),
        "--console-port".into(),
        port.to_string(),
        "--sdk".into(),
        sdk.to_string(),
        "--density".into(),
        density,
        "--network".into(),
        flags.get("-netspeed").cloned().unwrap_or_else(|| "full".into()),
    ];
    let extra: Vec<String> = std::env::var("FAULTLINE_SIM_ARGS").unwrap_or_default().split_whitespace().map(String::from).collect();
    if !extra.iter().any(|a| a == "--boot-ms") {
        args.extend(["--boot-ms".into(), "1500".into()]);
    }
    args.extend(extra);
    let config = Config::from_args(Args::try_parse_from(&args).unwrap_or_else(|e| fail(&e.to_string()))).unwrap_or_else(|e| fail(&e));
    let runtime = tokio::runtime::Runtime::new().expect("a runtime");
    if let Err(e) = runtime.block_on(faultline_device_sim::run(config, avd)) {
        fail(&format!("emulator: ERROR: {e}"));
    }
}
