//! `network_throttle`: cuts an emulator's bandwidth by the intensity, in
//! percent of its network profile's (the target's `up_kbps` and
//! `down_kbps`), through the emulator console (`network speed UP:DOWN`).
//! The revert puts the profile back (`network speed <profile>`); so does a
//! console watchdog at the time-to-live. Only emulators have a console:
//! on a device, `bandwidth_throttle` slows the app's HTTP traffic instead.

use faultline_sdk::adb::{self, RevertCommand};
use faultline_sdk::android::{self, App};
use faultline_sdk::{Fault, FaultError, FaultInfo, IntensitySpec, Platform, Settings, Target};

struct NetworkThrottle;

/// What is left of a rate after a reduction, at least 1 kbit/s.
fn reduced(kbps: f64, percent: f64) -> u64 {
    ((kbps * (1.0 - percent / 100.0)).round() as u64).max(1)
}

fn console(serial: &str, command: &str) -> Result<(), FaultError> {
    adb::emulator_console(serial, command).map(drop).map_err(|e| match e {
        faultline_sdk::CapabilityError::NotFound(why) => FaultError::TargetUnavailable(why),
        other => FaultError::Capability(other),
    })
}

fn speed(up: &str, down: &str, percent: f64) -> Result<String, FaultError> {
    let rate = |v: &str| v.parse::<f64>().map_err(|_| FaultError::Failed(format!("the profile's rate `{v}` is not a number")));
    Ok(format!("network speed {}:{}", reduced(rate(up)?, percent), reduced(rate(down)?, percent)))
}

impl Fault for NetworkThrottle {
    fn describe() -> FaultInfo {
        FaultInfo {
            name: "network_throttle".into(),
            aliases: vec![],
            description: "Cuts an Android emulator's bandwidth by a percentage of its network profile's".into(),
            platforms: vec![Platform::Android],
            intensity: Some(IntensitySpec::per_target("percent", 1.0, 99.0, 50.0, 10.0)),
            params: vec![],
            conflicts_with: vec![],
        }
    }

    fn inject(target: Target, settings: Settings) -> Result<String, FaultError> {
        let app = App::of(&target)?;
        if android::attribute(&target, "emulator") != Some("true") {
            return Err(FaultError::Failed(format!(
                "network_throttle acts on an emulator's console, and {} is not an emulator; bandwidth_throttle slows an app's HTTP traffic on any device",
                app.serial
            )));
        }
        let get = |name: &str| android::attribute(&target, name).unwrap_or_default().to_string();
        let (profile, up, down) = (get("network_profile"), get("up_kbps"), get("down_kbps"));
        let back = format!("network speed {profile}");
        let command = speed(&up, &down, settings.intensity)?;
        let watchdog = android::arm_watchdog(&app.serial, &[RevertCommand::Console(back.clone())], settings.ttl_seconds)?;
        if let Err(e) = console(&app.serial, &command) {
            let _ = android::disarm_watchdog(&app.serial, &watchdog);
            return Err(e);
        }
        faultline_sdk::log::info(&format!("{command} on {} (profile {profile})", app.serial));
        Ok(android::token("network_throttle", &[&app.serial, &profile, &up, &down, &watchdog]))
    }

    fn adjust(token: String, settings: Settings) -> Result<String, FaultError> {
        let f = android::fields(&token, "network_throttle", 5)?;
        console(f[0], &speed(f[2], f[3], settings.intensity)?)?;
        Ok(token)
    }

    fn revert(token: String) -> Result<(), FaultError> {
        let f = android::fields(&token, "network_throttle", 5)?;
        android::disarm_watchdog(f[0], f[4])?;
        console(f[0], &format!("network speed {}", f[1]))
    }
}

faultline_sdk::register_fault!(NetworkThrottle);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_reduction_leaves_its_share_of_the_profile_and_never_nothing() {
        assert_eq!(speed("58000", "173000", 50.0).unwrap(), "network speed 29000:86500");
        assert_eq!(speed("28.8", "57.6", 99.0).unwrap(), "network speed 1:1");
    }
}
