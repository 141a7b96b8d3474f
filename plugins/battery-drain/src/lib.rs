//! `battery_drain`: the device reports its battery at the intensity's
//! level, unplugged (`dumpsys battery unplug`, `dumpsys battery set level
//! N`), as a draining battery would; apps see the low-battery broadcasts.
//! Lower is harsher, so a ramp drains it step by step from near full. A
//! watchdog on the device resets the battery (`dumpsys battery reset`) at
//! the time-to-live if nothing reverts it first.

use faultline_sdk::adb::RevertCommand;
use faultline_sdk::android::{self, App};
use faultline_sdk::{Fault, FaultError, FaultInfo, IntensitySpec, Platform, Settings, Target};

struct BatteryDrain;

const RESET: &str = "dumpsys battery reset";

fn set_level(serial: &str, level: f64) -> Result<(), FaultError> {
    android::run(serial, &format!("dumpsys battery set level {}", level.round() as u32)).map(drop)
}

impl Fault for BatteryDrain {
    fn describe() -> FaultInfo {
        FaultInfo {
            name: "battery_drain".into(),
            aliases: vec![],
            description: "Makes an Android device report its battery at a level (percent), unplugged".into(),
            platforms: vec![Platform::Android],
            intensity: Some(IntensitySpec::descending("percent", 1.0, 100.0, 15.0, 10.0)),
            params: vec![],
            conflicts_with: vec![],
        }
    }

    fn inject(target: Target, settings: Settings) -> Result<String, FaultError> {
        let app = App::of(&target)?;
        let watchdog = android::arm_watchdog(&app.serial, &[RevertCommand::Shell(RESET.into())], settings.ttl_seconds)?;
        let applied = android::run(&app.serial, "dumpsys battery unplug").and_then(|_| set_level(&app.serial, settings.intensity));
        if let Err(e) = applied {
            let _ = android::run(&app.serial, RESET);
            let _ = android::disarm_watchdog(&app.serial, &watchdog);
            return Err(e);
        }
        Ok(android::token("battery_drain", &[&app.serial, &watchdog]))
    }

    fn adjust(token: String, settings: Settings) -> Result<String, FaultError> {
        let f = android::fields(&token, "battery_drain", 2)?;
        set_level(f[0], settings.intensity)?;
        Ok(token)
    }

    fn revert(token: String) -> Result<(), FaultError> {
        let f = android::fields(&token, "battery_drain", 2)?;
        android::disarm_watchdog(f[0], f[1])?;
        android::run(f[0], RESET).map(drop)
    }
}

faultline_sdk::register_fault!(BatteryDrain);
