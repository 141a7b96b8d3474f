//! The programs the device's shell runs, each in its own module where it
//! is more than a few lines: `am`, `pm` and `cmd package`, `dumpsys`,
//! `settings`, `logcat`; the rest (toybox basics, `getprop`, `pidof`,
//! `svc`, `input`, `monkey`, `wm`) here. Output formats and exit codes are
//! a real device's.

mod am;
mod dumpsys;
mod logcat;
mod pm;
mod settings;

use std::sync::Arc;
use std::time::Duration;

use regex::Regex;

use crate::app;
use crate::device::{Device, ProcessKind, now_ms};
use crate::shell::{Context, Output};

/// Runs one command; its exit code.
pub async fn run(device: &Arc<Device>, ctx: &mut Context, words: &[String], stdin: &[u8], out: &mut Output) -> i32 {
    let Some(program) = words.first() else { return 0 };
    let args: Vec<&str> = words[1..].iter().map(String::as_str).collect();
    let program = program.rsplit('/').next().unwrap_or(program);
    match program {
        "true" | ":" => 0,
        "false" => 1,
        "exit" => {
            ctx.exited = true;
            args.first().and_then(|a| a.parse().ok()).unwrap_or(ctx.status)
        }
        "echo" => {
            let (newline, args) = match args.first() {
                Some(&"-n") => (false, &args[1..]),
                _ => (true, &args[..]),
            };
            out.out(args.join(" "));
            if newline {
                out.out("\n");
            }
            0
        }
        "sleep" => {
            let seconds: f64 = args.first().and_then(|a| a.parse().ok()).unwrap_or(0.0);
            tokio::time::sleep(Duration::from_secs_f64(seconds.max(0.0))).await;
            0
        }
        // `adb logcat` sends `export ANDROID_LOG_TAGS=…; exec logcat …`; the environment is not modelled.
        "export" | "unset" => 0,
        "exec" | "nohup" if !args.is_empty() => {
            let words: Vec<String> = args.iter().map(|a| a.to_string()).collect();
            Box::pin(run(device, ctx, &words, stdin, out)).await
        }
        "sh" => {
            if args.first() == Some(&"-c") && args.len() >= 2 {
                let mut inner = Context { args: args[2..].iter().map(|a| a.to_string()).collect(), ..Context::default() };
                if inner.args.is_empty() {
                    inner.args.push("sh".into());
                }
                Box::pin(crate::shell::run(device, args[1], &mut inner, stdin, out)).await
            } else {
                out.err("/system/bin/sh: only sh -c is modelled\n");
                2
            }
        }
        "id" => {
            out.out("uid=2000(shell) gid=2000(shell) groups=2000(shell),1004(input),1007(log),1011(adb),1015(sdcard_rw),3003(inet) context=u:r:shell:s0\n");
            0
        }
        "date" => {
            match args.first() {
                Some(&"+%s") => out.out(format!("{}\n", now_ms() / 1000)),
                _ => out.out(format!("{}\n", now_ms() / 1000)),
            }
            0
        }
        "getprop" => getprop(device, &args, out),
        "pidof" => pidof(device, &args, out),
        "ps" => ps(device, out),
        "kill" => kill(device, &args, out),
        "pkill" | "pgrep" => pgrep(device, program == "pkill", &args, out),
        "grep" => grep(&args, stdin, out),
        "cat" if args.first() == Some(&"/proc/uptime") => {
            out.out(format!("{:.2} {:.2}\n", now_ms() as f64 / 1000.0 % 100_000.0, 0.0));
            0
        }
        "am" => am::run(device, &args, out).await,
        "pm" => pm::run(device, &args, stdin, out),
        "cmd" => cmd(device, &args, stdin, out).await,
        "dumpsys" => dumpsys::run(device, &args, out),
        "settings" => settings::run(device, &args, out),
        "logcat" => logcat::run(device, &args, out),
        "svc" => svc(device, &args, out),
        "input" => input(device, &args, out),
        "monkey" => monkey(device, &args, out),
        "wm" => window(device, &args, out),
        _ => {
            out.err(format!("/system/bin/sh: {program}: inaccessible or not found\n"));
            127
        }
    }
}

/// `cmd <service> …`: the services' own shell commands.
async fn cmd(device: &Arc<Device>, args: &[&str], stdin: &[u8], out: &mut Output) -> i32 {
    match args.first().copied() {
        Some("package") => pm::run(device, &args[1..], stdin, out),
        Some("activity") => am::run(device, &args[1..], out).await,
        Some("connectivity") => connectivity(device, &args[1..], out),
        Some("window") => window(device, &args[1..], out),
        Some("battery") => dumpsys::battery(device, &args[1..], out),
        Some(service) => {
            out.err(format!("Can't find service: {service}\n"));
            20
        }
        None => {
            out.err("cmd: no service specified; use -l to list all services\n");
            20
        }
    }
}

/// `cmd connectivity airplane-mode [enable|disable]`.
fn connectivity(device: &Arc<Device>, args: &[&str], out: &mut Output) -> i32 {
    match args {
        ["airplane-mode"] => {
            out.out(if device.state().airplane_mode() { "enabled\n" } else { "disabled\n" });
            0
        }
        ["airplane-mode", "enable"] => {
            app::set_airplane_mode(device, true);
            0
        }
        ["airplane-mode", "disable"] => {
            app::set_airplane_mode(device, false);
            0
        }
        ["airplane-mode", other] => {
            out.err(format!("Error: Invalid argument: {other}\n"));
            255
        }
        _ => {
            out.out("Connectivity service (connectivity) commands:\n  help\n  airplane-mode [enable|disable]\n");
            0
        }
    }
}

fn getprop(device: &Arc<Device>, args: &[&str], out: &mut Output) -> i32 {
    let state = device.state();
    match args.first() {
        Some(&"sys.boot_completed") => out.out(if device.booted() { "1\n" } else { "\n" }),
        Some(name) => out.out(format!("{}\n", state.props.get(*name).map(String::as_str).or(args.get(1).copied()).unwrap_or(""))),
        None => {
            for (k, v) in &state.props {
                out.out(format!("[{k}]: [{v}]\n"));
            }
            out.out(format!("[sys.boot_completed]: [{}]\n", if device.booted() { "1" } else { "" }));
        }
    }
    0
}

fn pidof(device: &Arc<Device>, args: &[&str], out: &mut Output) -> i32 {
    let state = device.state();
    let pids: Vec<String> = state.processes.values().filter(|p| args.contains(&p.name.as_str())).map(|p| p.pid.to_string()).collect();
    if pids.is_empty() {
        return 1;
    }
    out.out(format!("{}\n", pids.join(" ")));
    0
}

/// toybox `ps -A` columns.
fn ps(device: &Arc<Device>, out: &mut Output) -> i32 {
    out.out("USER           PID  PPID     VSZ    RSS WCHAN            ADDR S NAME                       \n");
    for p in device.state().processes.values() {
        out.out(format!("{:<10} {:>7} {:>5} {:>7} {:>6} {:<16} {:>4} S {}\n", p.user, p.pid, 1, 10_000, 2_000, "0", "0", p.name));
    }
    0
}

/// Ends a process: an app dies, a job stops.
fn end_process(device: &Arc<Device>, pid: u32) -> bool {
    let process = device.state().processes.get(&pid).cloned();
    match process.map(|p| p.kind) {
        Some(ProcessKind::App(package)) => {
            app::process_died(device, &package, false);
            true
        }
        Some(ProcessKind::Job(handle)) => {
            handle.abort();
            device.state().processes.remove(&pid);
            true
        }
        Some(ProcessKind::Shell) => {
            device.state().processes.remove(&pid);
            true
        }
        None => false,
    }
}

fn kill(device: &Arc<Device>, args: &[&str], out: &mut Output) -> i32 {
    let mut status = 0;
    for arg in args.iter().filter(|a| !a.starts_with('-')) {
        match arg.parse::<u32>().ok().filter(|pid| end_process(device, *pid)) {
            Some(_) => {}
            None => {
                out.err(format!("kill: {arg}: No such process\n"));
                status = 1;
            }
        }
    }
    status
}

/// toybox pgrep/pkill: a regular expression on the name, or with -f the
/// whole command line; never the pgrep/pkill process itself.
fn pgrep(device: &Arc<Device>, kill: bool, args: &[&str], out: &mut Output) -> i32 {
    let full = args.contains(&"-f");
    let Some(pattern) = args.iter().rev().find(|a| !a.starts_with('-')) else {
        out.err("pgrep: Need 1 argument\n");
        return 2;
    };
    let Ok(regex) = Regex::new(pattern) else {
        out.err(format!("pgrep: bad regex '{pattern}'\n"));
        return 2;
    };
    let matched: Vec<u32> = device
        .state()
        .processes
        .values()
        .filter(|p| regex.is_match(if full { &p.cmdline } else { &p.name }))
        .map(|p| p.pid)
        .collect();
    for pid in &matched {
        if kill {
            end_process(device, *pid);
        } else {
            out.out(format!("{pid}\n"));
        }
    }
    if matched.is_empty() { 1 } else { 0 }
}

fn grep(args: &[&str], stdin: &[u8], out: &mut Output) -> i32 {
    let Some(pattern) = args.iter().find(|a| !a.starts_with('-')) else { return 2 };
    let Ok(regex) = Regex::new(pattern) else { return 2 };
    let text = String::from_utf8_lossy(stdin);
    let mut found = false;
    for line in text.lines().filter(|l| regex.is_match(l)) {
        out.out(format!("{line}\n"));
        found = true;
    }
    if found { 0 } else { 1 }
}

/// `svc wifi|data enable|disable`.
fn svc(device: &Arc<Device>, args: &[&str], out: &mut Output) -> i32 {
    match args {
        ["wifi", on @ ("enable" | "disable")] => device.state().wifi = *on == "enable",
        ["data", on @ ("enable" | "disable")] => device.state().data = *on == "enable",
        ["power", "reboot" | "shutdown", ..] => {
            out.err("svc power: reboots are not modelled\n");
            return 1;
        }
        _ => out.out("Available commands:\n    help\n    power\n    data\n    wifi\n    usb\n    nfc\n    bluetooth\n"),
    }
    0
}

/// `input keyevent KEYCODE_HOME` (3): the launcher comes to the front.
fn input(device: &Arc<Device>, args: &[&str], out: &mut Output) -> i32 {
    match args {
        ["keyevent", "KEYCODE_HOME" | "3"] => {
            app::go_home(device);
            0
        }
        ["keyevent", _] | ["tap", ..] | ["swipe", ..] | ["text", ..] => 0,
        _ => {
            out.err("Usage: input [<source>] [-d DISPLAY_ID] <command> [<arg>...]\n");
            1
        }
    }
}

/// `monkey -p <package> -c android.intent.category.LAUNCHER 1`.
fn monkey(device: &Arc<Device>, args: &[&str], out: &mut Output) -> i32 {
    let package = args.windows(2).find(|w| w[0] == "-p").map(|w| w[1]);
    let Some(package) = package else {
        out.err("** No activities found to run, monkey aborted.\n");
        return 252;
    };
    let activity = device.state().packages.get(package).map(|p| p.activity.clone()).filter(|a| !a.is_empty());
    match activity {
        Some(activity) => {
            app::launch(device, package, &activity);
            out.out("  bash arg: -p\n  bash arg: ");
            out.out(format!("{package}\n  bash arg: -c\n  bash arg: android.intent.category.LAUNCHER\n  bash arg: 1\nargs: [-p, {package}, -c, android.intent.category.LAUNCHER, 1]\n"));
            out.out(" arg: \"-p\"\n arg: \"");
            out.out(format!("{package}\"\n arg: \"-c\"\n arg: \"android.intent.category.LAUNCHER\"\n arg: \"1\"\ndata=\"{package}\"\ndata=\"android.intent.category.LAUNCHER\"\nEvents injected: 1\n## Network stats: elapsed time=12ms (0ms mobile, 0ms wifi, 12ms not connected)\n"));
            0
        }
        None => {
            out.out("  bash arg: -p\n");
            out.err("** No activities found to run, monkey aborted.\n");
            252
        }
    }
}

/// `wm density [N|reset]` and `cmd window density …`.
fn window(device: &Arc<Device>, args: &[&str], out: &mut Output) -> i32 {
    let physical = device.config.density;
    match args {
        ["density"] => {
            out.out(format!("Physical density: {physical}\n"));
            if let Some(d) = device.state().density_override {
                out.out(format!("Override density: {d}\n"));
            }
            0
        }
        ["density", "reset"] => {
            device.state().density_override = None;
            0
        }
        ["density", value] => match value.parse::<u32>() {
            Ok(d) if d > 0 => {
                device.state().density_override = Some(d);
                0
            }
            _ => {
                out.err(format!("Error: wrong density: {value}\n"));
                255
            }
        },
        _ => {
            out.err("Window manager (window) commands:\n  density [reset|DENSITY]\n");
            255
        }
    }
}
