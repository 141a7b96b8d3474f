//! `pm` and `cmd package`: installing from a stream (`install -S <size>`),
//! listing, paths, clearing data, uninstalling, and resolving the launcher
//! activity, with PackageManagerShellCommand's output and exit codes. An
//! installed APK is read as PackageManager reads it: its binary manifest
//! gives the package and the launchable activity.

use std::sync::Arc;

use crate::app;
use crate::device::{Device, Package};
use crate::shell::Output;

pub fn run(device: &Arc<Device>, args: &[&str], stdin: &[u8], out: &mut Output) -> i32 {
    match args.first().copied() {
        Some("install") => install(device, &args[1..], stdin, out),
        Some("list") if args.get(1) == Some(&"packages") => list(device, &args[2..], out),
        Some("path") => {
            let state = device.state();
            match args.iter().skip(1).find(|a| !a.starts_with('-')).and_then(|p| state.packages.get(*p)) {
                Some(p) => {
                    out.out(format!("package:{}\n", p.path));
                    0
                }
                None => 1,
            }
        }
        Some("clear") => {
            let package = args.iter().skip(1).find(|a| !a.starts_with('-')).copied().unwrap_or_default();
            if !device.state().packages.contains_key(package) {
                out.out("Failed\n");
                return 1;
            }
            app::process_died(device, package, true);
            out.out("Success\n");
            0
        }
        Some("uninstall") => {
            let package = args.iter().skip(1).find(|a| !a.starts_with('-')).copied().unwrap_or_default();
            let system = device.state().packages.get(package).map(|p| p.system);
            match system {
                Some(false) => {
                    app::process_died(device, package, true);
                    device.state().packages.remove(package);
                    out.out("Success\n");
                    0
                }
                _ => {
                    out.out("Failure [DELETE_FAILED_INTERNAL_ERROR]\n");
                    1
                }
            }
        }
        Some("resolve-activity") => {
            let package = args.iter().skip(1).rev().find(|a| !a.starts_with('-') && !a.starts_with("android.intent.")).copied().unwrap_or_default();
            let state = device.state();
            match state.packages.get(package).filter(|p| !p.activity.is_empty()) {
                Some(p) => {
                    out.out(format!("priority=0 preferredOrder=0 match=0x108000 specificIndex=-1 isDefault=false\n{}/{}\n", p.name, p.activity));
                    0
                }
                None => {
                    out.out("No activity found\n");
                    0
                }
            }
        }
        Some(other) => {
            out.err(format!("Unknown command: {other}\n"));
            255
        }
        None => {
            out.out("Package manager (package) commands:\n  help\n  path [--user USER_ID] PACKAGE\n  install [-r] [-t] [-g] [-S BYTES] [PATH|-]\n  list packages [-3] [-s] [FILTER]\n  clear [--user USER_ID] PACKAGE\n  uninstall [-k] [--user USER_ID] PACKAGE\n  resolve-activity [--brief] INTENT\n");
            0
        }
    }
}

fn list(device: &Arc<Device>, args: &[&str], out: &mut Output) -> i32 {
    let third_party = args.contains(&"-3");
    let system_only = args.contains(&"-s");
    let filter = args.iter().find(|a| !a.starts_with('-')).copied().unwrap_or("");
    for p in device.state().packages.values() {
        if (third_party && p.system) || (system_only && !p.system) || !p.name.contains(filter) {
            continue;
        }
        out.out(format!("package:{}\n", p.name));
    }
    0
}

/// `install [-r] [-t] [-g] -S <size>`: the APK comes on standard input.
fn install(device: &Arc<Device>, args: &[&str], stdin: &[u8], out: &mut Output) -> i32 {
    let replace = args.contains(&"-r");
    let size = args.windows(2).find(|w| w[0] == "-S").and_then(|w| w[1].parse::<usize>().ok());
    let Some(size) = size else {
        out.err("Error: must either specify a package size or an APK file\n");
        return 1;
    };
    let session = 100_000_000 + (size as u64 % 899_999_999);
    let bytes = &stdin[..size.min(stdin.len())];
    if bytes.len() < size {
        out.out(format!("Failure [INSTALL_FAILED_INVALID_APK: Failed to write to session {session}: short read]\n"));
        return 1;
    }
    let info = match faultline_apk::inspect_bytes(bytes) {
        Ok(info) => info,
        Err(e) => {
            out.out(format!("Failure [INSTALL_PARSE_FAILED_NOT_APK: Failed to parse /data/app/vmdl{session}.tmp/base.apk: {e}]\n"));
            return 1;
        }
    };
    let existed = device.state().packages.get(&info.package).cloned();
    if let Some(p) = &existed {
        if !replace {
            out.out(format!("Failure [INSTALL_FAILED_ALREADY_EXISTS: Attempt to re-install {} without first uninstalling.]\n", p.name));
            return 1;
        }
        // Replacing an app stops it.
        app::process_died(device, &info.package, true);
    }
    let mut state = device.state();
    let uid = existed.map(|p| p.uid).unwrap_or_else(|| state.next_uid());
    let path = format!("/data/app/~~{session:x}==/{}-{:x}==/base.apk", info.package, size);
    state.packages.insert(
        info.package.clone(),
        Package { name: info.package.clone(), activity: info.activity.unwrap_or_default(), path, system: false, uid },
    );
    out.out("Success\n");
    0
}
