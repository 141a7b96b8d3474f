//! Faults on Android apps through the adb capability. An Android target
//! names its device and app in its attributes (`serial`, `package`,
//! `activity`, `emulator`, `network_profile`, `up_kbps`, `down_kbps`,
//! `should_recover`); its id is `<serial>/<package>`. Commands are the
//! ones a real device accepts, one per call; effects that outlive a call
//! carry a watchdog on the device (`arm_watchdog`), so they end at their
//! time-to-live even if the host dies.

use crate::adb::{self, RevertCommand, ShellOutput};
use crate::{CapabilityError, FaultError, Target};

/// The app a target names.
#[derive(Debug, Clone, PartialEq)]
pub struct App {
    pub serial: String,
    pub package: String,
    /// The launchable activity, fully qualified; empty when unknown.
    pub activity: String,
}

/// An attribute of a target.
pub fn attribute<'a>(target: &'a Target, name: &str) -> Option<&'a str> {
    target.attributes.iter().find(|(k, _)| k == name).map(|(_, v)| v.as_str())
}

/// A device that went away, or an app that is not there, makes the target
/// unavailable; anything else fails the call.
fn unavailable_if_gone(e: CapabilityError) -> FaultError {
    match e {
        CapabilityError::NotFound(why) => FaultError::TargetUnavailable(why),
        other => FaultError::Capability(other),
    }
}

/// Runs a command in a device's shell (its exit code is in the output).
pub fn shell(serial: &str, command: &str) -> Result<ShellOutput, FaultError> {
    adb::shell(serial, command, 30_000).map_err(unavailable_if_gone)
}

/// Runs a command that must succeed.
pub fn run(serial: &str, command: &str) -> Result<String, FaultError> {
    let out = shell(serial, command)?;
    match out.exit_code {
        0 => Ok(out.stdout),
        code => Err(FaultError::Failed(format!("`{command}` exited {code}: {}{}", out.stdout.trim(), out.stderr.trim()))),
    }
}

/// Arms a watchdog on the device that runs `commands` after `ttl_seconds`
/// unless disarmed; returns its id.
pub fn arm_watchdog(serial: &str, commands: &[RevertCommand], ttl_seconds: u32) -> Result<String, FaultError> {
    adb::arm_watchdog(serial, commands, ttl_seconds).map_err(unavailable_if_gone)
}

/// Disarms a watchdog; one that fired or is gone is disarmed.
pub fn disarm_watchdog(serial: &str, id: &str) -> Result<(), FaultError> {
    if id.is_empty() {
        return Ok(());
    }
    adb::disarm_watchdog(serial, id).map_err(unavailable_if_gone)
}

/// A revert token of fields that hold no newline: `kind` then the fields.
pub fn token(kind: &str, fields: &[&str]) -> String {
    std::iter::once(kind).chain(fields.iter().copied()).collect::<Vec<_>>().join("\n")
}

/// The `n` fields of a token of `kind`.
pub fn fields<'a>(token: &'a str, kind: &str, n: usize) -> Result<Vec<&'a str>, FaultError> {
    let mut lines = token.split('\n');
    let found: Vec<&str> = match lines.next() {
        Some(k) if k == kind => lines.collect(),
        _ => vec![],
    };
    match found.len() == n {
        true => Ok(found),
        false => Err(FaultError::Failed(format!("`{token}` is not a {kind} token"))),
    }
}

impl App {
    pub fn of(target: &Target) -> Result<App, FaultError> {
        let get = |name: &str| attribute(target, name).map(str::to_string);
        match (get("serial"), get("package")) {
            (Some(serial), Some(package)) => Ok(App { serial, package, activity: get("activity").unwrap_or_default() }),
            _ => Err(FaultError::TargetUnavailable(format!("`{}` is not an Android app", target.id))),
        }
    }

    /// Starts the app as the launcher does and waits until it is up (or
    /// brings it to the front when it runs).
    pub fn launch(&self) -> Result<(), FaultError> {
        let command = match self.activity.is_empty() {
            false => format!("am start -W -n {}/{} -a android.intent.action.MAIN -c android.intent.category.LAUNCHER", self.package, self.activity),
            true => format!("monkey -p {} -c android.intent.category.LAUNCHER 1", self.package),
        };
        let out = run(&self.serial, &command)?;
        match out.contains("Error") {
            true => Err(FaultError::Failed(format!("`{command}`: {}", out.trim()))),
            false => Ok(()),
        }
    }

    /// Whether the app's activity is the resumed one (`dumpsys activity activities`).
    pub fn in_foreground(&self) -> Result<bool, FaultError> {
        let dump = run(&self.serial, "dumpsys activity activities")?;
        let resumed = dump.lines().map(str::trim).find_map(|l| {
            ["mResumedActivity:", "topResumedActivity=", "ResumedActivity:"].iter().find_map(|key| l.strip_prefix(key))
        });
        Ok(resumed.is_some_and(|record| record.split_whitespace().any(|w| w.split('/').next() == Some(&self.package))))
    }

    /// Whether the app's process runs (`pidof`).
    pub fn is_running(&self) -> Result<bool, FaultError> {
        Ok(shell(&self.serial, &format!("pidof {}", self.package))?.exit_code == 0)
    }

    /// The device's API level.
    pub fn sdk_level(&self) -> Result<u32, FaultError> {
        let level = run(&self.serial, "getprop ro.build.version.sdk")?;
        level.trim().parse().map_err(|_| FaultError::Failed(format!("the API level reads `{}`", level.trim())))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tokens_round_trip_and_refuse_another_kind() {
        let t = token("battery", &["emulator-5554", "wd-01"]);
        assert_eq!(fields(&t, "battery", 2).unwrap(), ["emulator-5554", "wd-01"]);
        assert!(fields(&t, "airplane", 2).is_err());
        assert!(fields(&t, "battery", 3).is_err());
    }
}
