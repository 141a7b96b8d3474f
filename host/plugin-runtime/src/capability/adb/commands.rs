//! What a plugin may run on a device. A shell command is free text, so the
//! adb slot reads it before it reaches the device: one command, no shell
//! syntax (no `;`, pipes, redirections, substitutions), a program from a
//! short list of Android's own tools, and every package it names one of
//! the experiment's. Device-wide settings (battery, radios, `settings`)
//! are the device's, and the device is in scope; another app, a reboot or
//! a root shell never is.

/// Programs a plugin may run, and what each may touch.
const PROGRAMS: [&str; 14] =
    ["am", "pm", "cmd", "dumpsys", "settings", "svc", "input", "logcat", "getprop", "pidof", "monkey", "wm", "ps", "date"];

/// `am` and `cmd activity` subcommands whose first operand is a package.
const AM_ON_PACKAGE: [&str; 5] = ["force-stop", "kill", "crash", "send-trim-memory", "set-inactive"];
/// `am` subcommands that start something: only a component or package of the experiment's.
const AM_STARTS: [&str; 7] = ["start", "start-activity", "startservice", "start-service", "start-foreground-service", "broadcast", "stopservice"];
/// `pm` and `cmd package` subcommands whose first operand is a package.
const PM_ON_PACKAGE: [&str; 12] =
    ["clear", "path", "dump", "grant", "revoke", "disable", "disable-user", "enable", "hide", "unhide", "uninstall", "set-inactive"];
/// `cmd` services a plugin may use besides package and activity.
const CMD_SERVICES: [&str; 5] = ["connectivity", "window", "battery", "wifi", "netpolicy"];
/// Console commands that would end or replace the emulator itself.
const CONSOLE_DENIED: [&str; 3] = ["kill", "avd", "quit"];

/// Splits a command line as a shell would, refusing anything that is not
/// a plain command with quoted or unquoted words.
pub fn words(command: &str) -> Result<Vec<String>, String> {
    let mut words = vec![];
    let mut word = String::new();
    let mut in_word = false;
    let mut chars = command.chars();
    while let Some(c) = chars.next() {
        match c {
            '\'' => {
                in_word = true;
                loop {
                    match chars.next() {
                        Some('\'') => break,
                        Some(c) => word.push(c),
                        None => return Err("an unterminated quote".into()),
                    }
                }
            }
            '"' => {
                in_word = true;
                loop {
                    match chars.next() {
                        Some('"') => break,
                        Some('$' | '`') => return Err("substitutions ($, `) are not allowed".into()),
                        Some('\\') => word.push(chars.next().ok_or("a trailing backslash")?),
                        Some(c) => word.push(c),
                        None => return Err("an unterminated quote".into()),
                    }
                }
            }
            '\\' => {
                in_word = true;
                word.push(chars.next().ok_or("a trailing backslash")?);
            }
            ' ' | '\t' => {
                if in_word {
                    words.push(std::mem::take(&mut word));
                    in_word = false;
                }
            }
            ';' | '&' | '|' | '<' | '>' | '(' | ')' | '$' | '`' | '\n' | '\r' | '#' | '{' | '}' => {
                return Err(format!("shell syntax (`{c}`) is not allowed: one command per call"));
            }
            c => {
                in_word = true;
                word.push(c);
            }
        }
    }
    if in_word {
        words.push(word);
    }
    if words.is_empty() {
        return Err("the command is empty".into());
    }
    Ok(words)
}

/// Whether a plugin scoped to `packages` may run `command` on a device of its targets.
pub fn check_shell(command: &str, packages: &[&str]) -> Result<(), String> {
    let words = words(command)?;
    let program = words[0].as_str();
    if !PROGRAMS.contains(&program) {
        return Err(format!("`{program}` is not a command plugins may run (allowed: {})", PROGRAMS.join(", ")));
    }
    let args: Vec<&str> = words[1..].iter().map(String::as_str).collect();
    let scoped = |pkg: &str| -> Result<(), String> {
        match packages.contains(&pkg) {
            true => Ok(()),
            false => Err(format!("package `{pkg}` is none of this experiment's targets")),
        }
    };
    match program {
        "am" => check_am(&args, &scoped),
        "pm" => check_pm(&args, &scoped),
        "cmd" => match args.first().copied() {
            Some("package") => check_pm(&args[1..], &scoped),
            Some("activity") => check_am(&args[1..], &scoped),
            Some(service) if CMD_SERVICES.contains(&service) => Ok(()),
            Some(service) => Err(format!("`cmd {service}` is not a service plugins may use (allowed: package, activity, {})", CMD_SERVICES.join(", "))),
            None => Err("`cmd` needs a service".into()),
        },
        "monkey" => {
            let named = option_values(&args, "-p");
            if named.is_empty() {
                return Err("`monkey` must name the experiment's package with -p".into());
            }
            named.into_iter().try_for_each(scoped)
        }
        "svc" if args.iter().any(|a| ["reboot", "shutdown"].contains(a)) => Err("a reboot or shutdown is not a fault plugins may cause".into()),
        "logcat" if args.iter().any(|a| ["-c", "--clear"].contains(a)) => Err("clearing the device's logs would hide what the experiment observes".into()),
        _ => Ok(()),
    }
}

fn check_am(args: &[&str], scoped: &dyn Fn(&str) -> Result<(), String>) -> Result<(), String> {
    let Some(sub) = args.first().copied() else { return Err("`am` needs a subcommand".into()) };
    if AM_ON_PACKAGE.contains(&sub) {
        let package = first_operand(&args[1..]).ok_or_else(|| format!("`am {sub}` needs a package"))?;
        return scoped(package);
    }
    if AM_STARTS.contains(&sub) {
        let components = option_values(args, "-n");
        let packages = option_values(args, "-p");
        if components.is_empty() && packages.is_empty() {
            return Err(format!("`am {sub}` must name the experiment's component (-n) or package (-p)"));
        }
        for component in components {
            scoped(component.split('/').next().unwrap_or_default())?;
        }
        return packages.into_iter().try_for_each(scoped);
    }
    Err(format!("`am {sub}` is not allowed to plugins (allowed: {}, {})", AM_ON_PACKAGE.join(", "), AM_STARTS.join(", ")))
}

fn check_pm(args: &[&str], scoped: &dyn Fn(&str) -> Result<(), String>) -> Result<(), String> {
    let Some(sub) = args.first().copied() else { return Err("`pm` needs a subcommand".into()) };
    if sub == "list" {
        return Ok(());
    }
    if PM_ON_PACKAGE.contains(&sub) {
        let package = first_operand(&args[1..]).ok_or_else(|| format!("`pm {sub}` needs a package"))?;
        return scoped(package);
    }
    Err(format!("`pm {sub}` is not allowed to plugins (allowed: list, {}); install through the install call", PM_ON_PACKAGE.join(", ")))
}

/// The first argument that is not an option (nor an option's value, for
/// the options Android's tools take with one: `--user N`).
fn first_operand<'a>(args: &[&'a str]) -> Option<&'a str> {
    let mut args = args.iter();
    while let Some(arg) = args.next() {
        match *arg {
            "--user" | "-u" => {
                args.next();
            }
            a if a.starts_with('-') => {}
            a => return Some(a),
        }
    }
    None
}

/// Every value given to `option` (`-n x -n y`).
fn option_values<'a>(args: &[&'a str], option: &str) -> Vec<&'a str> {
    args.windows(2).filter(|w| w[0] == option).map(|w| w[1]).collect()
}

/// Whether a plugin may send `command` to an emulator's console.
pub fn check_console(command: &str) -> Result<(), String> {
    let first = command.split_whitespace().next().ok_or("the console command is empty")?;
    if command.contains(['\r', '\n']) {
        return Err("one console command per call".into());
    }
    match CONSOLE_DENIED.contains(&first.to_ascii_lowercase().as_str()) {
        true => Err(format!("the console command `{first}` would end or replace the emulator")),
        false => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const APP: &[&str] = &["dev.faultline.testapp"];

    #[test]
    fn commands_on_the_experiments_app_and_device_pass() {
        for ok in [
            "am force-stop dev.faultline.testapp",
            "am start -W -n dev.faultline.testapp/.MainActivity",
            "am start -W -n 'dev.faultline.testapp/dev.faultline.testapp.MainActivity' -a android.intent.action.MAIN",
            "am send-trim-memory dev.faultline.testapp COMPLETE",
            "am kill --user 0 dev.faultline.testapp",
            "monkey -p dev.faultline.testapp -c android.intent.category.LAUNCHER 1",
            "pm clear dev.faultline.testapp",
            "cmd package path dev.faultline.testapp",
            "cmd connectivity airplane-mode enable",
            "dumpsys battery set level 15",
            "settings put global http_proxy 127.0.0.1:8080",
            "input keyevent KEYCODE_HOME",
            "pidof dev.faultline.testapp",
            "logcat -d -b crash",
            "getprop ro.build.version.sdk",
        ] {
            assert_eq!(check_shell(ok, APP), Ok(()), "{ok}");
        }
    }

    #[test]
    fn other_apps_shell_syntax_and_foreign_programs_are_refused() {
        for denied in [
            "am force-stop com.android.settings",
            "am start -a android.intent.action.VIEW -d http://example.com",
            "am start -n com.other/.Main",
            "am kill-all",
            "pm uninstall com.android.systemui",
            "pm install /sdcard/evil.apk",
            "cmd package clear com.other.app",
            "monkey -c android.intent.category.LAUNCHER 1",
            "am force-stop dev.faultline.testapp; reboot",
            "am force-stop dev.faultline.testapp && rm -rf /sdcard",
            "pidof $(id)",
            "echo `reboot`",
            "dumpsys battery > /sdcard/x",
            "sh -c reboot",
            "su 0 id",
            "reboot",
            "svc power reboot",
            "logcat -c",
            "cmd statusbar expand-notifications",
            "'am force-stop dev.faultline.testapp",
            "",
        ] {
            assert!(check_shell(denied, APP).is_err(), "{denied} passed");
        }
    }

    #[test]
    fn quoting_is_read_as_a_shell_reads_it() {
        assert_eq!(words(r#"am start -n "a.b/.C" 'x y' z\ w"#).unwrap(), ["am", "start", "-n", "a.b/.C", "x y", "z w"]);
        assert_eq!(words("a ''").unwrap(), ["a", ""]);
        assert!(words("echo \"$HOME\"").is_err());
    }

    #[test]
    fn console_commands_that_end_the_emulator_are_refused() {
        assert!(check_console("network speed 100:200").is_ok());
        assert!(check_console("power capacity 10").is_ok());
        for denied in ["kill", "avd stop", "network speed lte\r\nkill", ""] {
            assert!(check_console(denied).is_err(), "{denied:?}");
        }
    }
}
