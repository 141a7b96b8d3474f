//! `airplane_mode`: turns the device's airplane mode on (`cmd connectivity
//! airplane-mode enable`): every radio goes off and apps lose the network.
//! The revert turns it off again, unless it was on before the fault, and a
//! watchdog on the device does the same at the time-to-live if nothing
//! reverts it first.

use faultline_sdk::adb::RevertCommand;
use faultline_sdk::android::{self, App};
use faultline_sdk::{Fault, FaultError, FaultInfo, Platform, Settings, Target};

struct AirplaneMode;

const ENABLE: &str = "cmd connectivity airplane-mode enable";
const DISABLE: &str = "cmd connectivity airplane-mode disable";

impl Fault for AirplaneMode {
    fn describe() -> FaultInfo {
        FaultInfo {
            name: "airplane_mode".into(),
            aliases: vec![],
            description: "Turns an Android device's airplane mode on until the revert".into(),
            platforms: vec![Platform::Android],
            intensity: None,
            params: vec![],
            conflicts_with: vec![],
        }
    }

    fn inject(target: Target, settings: Settings) -> Result<String, FaultError> {
        let app = App::of(&target)?;
        // Already on (by the user, or by this fault on another app of the device): leave it be.
        if android::run(&app.serial, "cmd connectivity airplane-mode")?.trim() == "enabled" {
            return Ok(android::token("airplane_mode", &[&app.serial, ""]));
        }
        let watchdog = android::arm_watchdog(&app.serial, &[RevertCommand::Shell(DISABLE.into())], settings.ttl_seconds)?;
        if let Err(e) = android::run(&app.serial, ENABLE) {
            let _ = android::disarm_watchdog(&app.serial, &watchdog);
            return Err(e);
        }
        faultline_sdk::log::info(&format!("airplane mode on for {}", app.serial));
        Ok(android::token("airplane_mode", &[&app.serial, &watchdog]))
    }

    fn revert(token: String) -> Result<(), FaultError> {
        let f = android::fields(&token, "airplane_mode", 2)?;
        if f[1].is_empty() {
            return Ok(());
        }
        android::disarm_watchdog(f[0], f[1])?;
        android::run(f[0], DISABLE).map(drop)
    }
}

faultline_sdk::register_fault!(AirplaneMode);
