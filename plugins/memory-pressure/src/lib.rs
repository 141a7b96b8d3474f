//! `memory_pressure`: tells an app that memory is short, as the system does
//! under pressure (`am send-trim-memory`). The intensity is the pressure
//! level, 1 (moderate) to 3 (critical), mapped to the trim levels the
//! device's API level delivers: up to API 33 the ones a running app gets
//! (RUNNING_MODERATE, RUNNING_LOW, RUNNING_CRITICAL); from API 34 apps are
//! no longer told those, so BACKGROUND, MODERATE and COMPLETE. Each level
//! change sends it again. A trim signal leaves nothing to undo.

use faultline_sdk::android::{self, App};
use faultline_sdk::{Fault, FaultError, FaultInfo, IntensitySpec, Platform, Settings, Target};

struct MemoryPressure;

/// The trim level for a pressure level on an API level.
fn trim_level(pressure: f64, sdk: u32) -> &'static str {
    let index = (pressure.round() as usize).clamp(1, 3) - 1;
    match sdk >= 34 {
        true => ["BACKGROUND", "MODERATE", "COMPLETE"][index],
        false => ["RUNNING_MODERATE", "RUNNING_LOW", "RUNNING_CRITICAL"][index],
    }
}

fn send(app: &App, pressure: f64) -> Result<(), FaultError> {
    let level = trim_level(pressure, app.sdk_level()?);
    let out = android::shell(&app.serial, &format!("am send-trim-memory {} {level}", app.package))?;
    // A process that is not running cannot be told: the app is not there to fault.
    if out.stdout.contains("Unknown process") || out.stderr.contains("Unknown process") {
        return Err(FaultError::TargetUnavailable(format!("{} is not running on {}", app.package, app.serial)));
    }
    if out.exit_code != 0 || out.stdout.contains("Error") {
        return Err(FaultError::Failed(format!("am send-trim-memory: {}{}", out.stdout.trim(), out.stderr.trim())));
    }
    faultline_sdk::log::info(&format!("sent {level} to {} on {}", app.package, app.serial));
    Ok(())
}

impl Fault for MemoryPressure {
    fn describe() -> FaultInfo {
        FaultInfo {
            name: "memory_pressure".into(),
            aliases: vec![],
            description: "Tells an Android app memory is short: pressure level 1 (moderate) to 3 (critical)".into(),
            platforms: vec![Platform::Android],
            intensity: Some(IntensitySpec::per_target("level", 1.0, 3.0, 3.0, 1.0)),
            params: vec![],
            conflicts_with: vec![],
        }
    }

    fn inject(target: Target, settings: Settings) -> Result<String, FaultError> {
        let app = App::of(&target)?;
        send(&app, settings.intensity)?;
        Ok(android::token("memory_pressure", &[&app.serial, &app.package, &app.activity]))
    }

    fn adjust(token: String, settings: Settings) -> Result<String, FaultError> {
        let f = android::fields(&token, "memory_pressure", 3)?;
        send(&App { serial: f[0].into(), package: f[1].into(), activity: f[2].into() }, settings.intensity)?;
        Ok(token)
    }

    fn revert(token: String) -> Result<(), FaultError> {
        android::fields(&token, "memory_pressure", 3).map(drop)
    }
}

faultline_sdk::register_fault!(MemoryPressure);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pressure_maps_to_the_trim_levels_the_api_level_delivers() {
        assert_eq!(trim_level(1.0, 29), "RUNNING_MODERATE");
        assert_eq!(trim_level(3.0, 33), "RUNNING_CRITICAL");
        assert_eq!(trim_level(1.0, 34), "BACKGROUND");
        assert_eq!(trim_level(3.0, 35), "COMPLETE");
    }
}
