//! `foreground_app`: brings an Android app to the foreground as the
//! launcher does (`am start -W`, which starts it if it is not running), the
//! way a user switching back to it would. The revert sends it back where it
//! was: home (`input keyevent KEYCODE_HOME`) if it was not in the
//! foreground before, nothing otherwise.

use faultline_sdk::android::{self, App};
use faultline_sdk::{Fault, FaultError, FaultInfo, Platform, Settings, Target};

struct ForegroundApp;

impl Fault for ForegroundApp {
    fn describe() -> FaultInfo {
        FaultInfo {
            name: "foreground_app".into(),
            aliases: vec![],
            description: "Brings an Android app to the foreground; sends it back home at the revert if it was not there".into(),
            platforms: vec![Platform::Android],
            intensity: None,
            params: vec![],
            conflicts_with: vec![],
        }
    }

    fn inject(target: Target, _settings: Settings) -> Result<String, FaultError> {
        let app = App::of(&target)?;
        let was_in_front = app.in_foreground()?;
        app.launch()?;
        faultline_sdk::log::info(&format!("brought {} to the foreground on {}", app.package, app.serial));
        Ok(android::token("foreground_app", &[&app.serial, &app.package, if was_in_front { "front" } else { "back" }]))
    }

    fn revert(token: String) -> Result<(), FaultError> {
        let f = android::fields(&token, "foreground_app", 3)?;
        if f[2] == "back" {
            android::run(f[0], "input keyevent KEYCODE_HOME")?;
        }
        Ok(())
    }
}

faultline_sdk::register_fault!(ForegroundApp);
