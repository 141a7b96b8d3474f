//! `am` and `cmd activity`: starting activities, force-stopping, killing,
//! crashing apps on purpose, and telling them to trim memory, with
//! ActivityManagerShellCommand's output and exit codes.

use std::sync::Arc;
use std::time::Instant;

use crate::app;
use crate::config::{Condition, trim_level};
use crate::device::Device;
use crate::shell::Output;

/// What a failed shell command of a system service returns (-1).
const FAILED: i32 = 255;

pub async fn run(device: &Arc<Device>, args: &[&str], out: &mut Output) -> i32 {
    match args.first().copied() {
        Some("start" | "start-activity") => start(device, &args[1..], out),
        Some("force-stop") => match operand(&args[1..]) {
            Some(package) => {
                app::process_died(device, package, true);
                0
            }
            None => usage(out),
        },
        Some("kill") => match operand(&args[1..]) {
            Some(package) => {
                // Only a process in the background may be killed this way.
                let in_front = device.state().resumed.0 == package;
                if !in_front {
                    app::process_died(device, package, false);
                }
                0
            }
            None => usage(out),
        },
        Some("crash") => match operand(&args[1..]) {
            Some(package) => {
                app::crash(device, package, "android.app.RemoteServiceException$CrashedByAdbException: shell-induced crash");
                0
            }
            None => usage(out),
        },
        Some("send-trim-memory") => trim(device, &args[1..], out),
        Some("help") | None => usage(out),
        Some(other) => {
            out.err(format!("Unknown command: {other}\n"));
            FAILED
        }
    }
}

fn usage(out: &mut Output) -> i32 {
    out.out("Activity manager (activity) commands:\n  help\n  start-activity [-D] [-N] [-W] [-P <FILE>] [--start-profiler <FILE>] <INTENT>\n  force-stop [--user <USER_ID> | all | current] <PACKAGE>\n  kill [--user <USER_ID> | all | current] <PACKAGE>\n  crash [--user <USER_ID>] <PACKAGE|PID>\n  send-trim-memory [--user <USER_ID>] <PROCESS> [HIDDEN|RUNNING_MODERATE|BACKGROUND|RUNNING_LOW|MODERATE|RUNNING_CRITICAL|COMPLETE]\n");
    0
}

/// The first argument that is not an option or an option's value.
fn operand<'a>(args: &[&'a str]) -> Option<&'a str> {
    let mut it = args.iter();
    while let Some(a) = it.next() {
        match *a {
            "--user" => {
                it.next();
            }
            a if a.starts_with('-') => {}
            a => return Some(a),
        }
    }
    None
}

/// `am start [-W] [-S] [-n pkg/cls] [-a action] [-c category] [-p pkg] [pkg]`.
fn start(device: &Arc<Device>, args: &[&str], out: &mut Output) -> i32 {
    let (mut wait, mut stop_first) = (false, false);
    let (mut component, mut action, mut categories, mut package) = (None, None, vec![], None);
    let mut it = args.iter();
    while let Some(a) = it.next() {
        match *a {
            "-W" => wait = true,
            "-S" => stop_first = true,
            "-n" => component = it.next().copied(),
            "-a" => action = it.next().copied(),
            "-c" => categories.extend(it.next().copied()),
            "-p" => package = it.next().copied(),
            "--user" | "-f" | "-d" | "-t" | "--es" | "--ei" | "--ez" => {
                it.next();
            }
            a if a.starts_with('-') => {}
            a if a.contains('/') => component = Some(a),
            a => package = Some(a),
        }
    }
    let mut intent = vec![];
    if let Some(a) = action {
        intent.push(format!("act={a}"));
    }
    if !categories.is_empty() {
        intent.push(format!("cat=[{}]", categories.join(",")));
    }
    let target = match (component, package) {
        (Some(c), _) => c.split_once('/').map(|(p, cls)| (p.to_string(), if cls.starts_with('.') { format!("{p}{cls}") } else { cls.to_string() })),
        (None, Some(p)) => device.state().packages.get(p).filter(|pkg| !pkg.activity.is_empty()).map(|pkg| (pkg.name.clone(), pkg.activity.clone())),
        (None, None) => None,
    };
    if let Some((p, cls)) = &target {
        intent.push(format!("cmp={}", app::short_component(p, cls)));
    }
    out.out(format!("Starting: Intent {{ {} }}\n", intent.join(" ")));
    let Some((package, activity)) = target else {
        out.err("Error: Activity not started, unable to resolve Intent { ");
        out.err(format!("{} flg=0x10000000 }}\n", intent.join(" ")));
        return FAILED;
    };
    // The manifest's launchable activity is the one activity the model knows of an app.
    let exists = device.state().packages.get(&package).is_some_and(|p| p.activity == activity);
    if !exists {
        out.err(format!("Error type 3\nError: Activity class {{{}}} does not exist.\n", app::short_component(&package, &activity)));
        return FAILED;
    }
    if stop_first {
        app::process_died(device, &package, true);
    }
    let began = Instant::now();
    let was_front = device.state().resumed.0 == package;
    let cold = app::launch(device, &package, &activity);
    if wait {
        let took = began.elapsed().as_millis() + if cold { 240 } else { 40 };
        let state = if cold { "COLD" } else if was_front { "HOT" } else { "WARM" };
        if was_front && !cold {
            out.out("Warning: Activity not started, intent has been delivered to currently running top-most instance.\n");
        }
        out.out(format!("Status: ok\nLaunchState: {state}\nActivity: {}\nTotalTime: {took}\nWaitTime: {}\nComplete\n", app::short_component(&package, &activity), took + 5));
    }
    0
}

/// `am send-trim-memory <process> <level>`.
fn trim(device: &Arc<Device>, args: &[&str], out: &mut Output) -> i32 {
    let rest: Vec<&str> = args.iter().copied().filter(|a| !a.starts_with("--")).collect();
    let (Some(package), Some(level_name)) = (rest.first().copied(), rest.get(1).copied()) else {
        out.err("Error: Unknown level option: \n");
        return FAILED;
    };
    let Some(level) = trim_level(level_name) else {
        out.err(format!("Error: Unknown level option: {level_name}\n"));
        return FAILED;
    };
    let pid = device.state().app_pid(package);
    let Some(pid) = pid else {
        out.err(format!(
            "Exception occurred while executing 'send-trim-memory':\njava.lang.IllegalArgumentException: Unknown process: {package}\n\tat com.android.server.am.ActivityManagerService.setProcessMemoryTrimLevel(ActivityManagerService.java:7285)\n"
        ));
        return FAILED;
    };
    // Since Android 14 apps are no longer told the RUNNING_* levels.
    let told = device.config.sdk < 34 || !level_name.starts_with("RUNNING_");
    if told {
        let tag = device.config.tag_of(package);
        let mut state = device.state();
        state.log("main", pid, 'I', &tag, &format!("onTrimMemory({level})"));
        state.trimmed.insert(package.into(), level);
    }
    if told {
        app::react(device, |c| matches!(c, Condition::Trim(at) if level >= *at), package);
    }
    0
}
