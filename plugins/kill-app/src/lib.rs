//! `kill_app`: force-stops an Android app (`am force-stop`), as the system
//! does to an app it kills: its process and activities are gone. A kill
//! cannot be undone; when the experiment expects the app to recover
//! (`expected.should_recover`, which the platform passes as the target's
//! `should_recover`), or `relaunch: true` asks, the revert starts it again
//! as the launcher would, so the app is back when the experiment ends.

use faultline_sdk::android::{self, App};
use faultline_sdk::{Fault, FaultError, FaultInfo, ParamKind, ParamSpec, Platform, Settings, Target};

struct KillApp;

impl Fault for KillApp {
    fn describe() -> FaultInfo {
        FaultInfo {
            name: "kill_app".into(),
            aliases: vec![],
            description: "Force-stops an Android app; brings it back at the revert when the experiment expects recovery".into(),
            platforms: vec![Platform::Android],
            intensity: None,
            params: vec![ParamSpec {
                name: "relaunch".into(),
                description: "Start the app again at the revert (default: what expected.should_recover says)".into(),
                kind: ParamKind::Flag,
                required: false,
            }],
            conflicts_with: vec![],
        }
    }

    fn inject(target: Target, settings: Settings) -> Result<String, FaultError> {
        let app = App::of(&target)?;
        let relaunch = settings.flag("relaunch").unwrap_or(android::attribute(&target, "should_recover") == Some("true"));
        android::run(&app.serial, &format!("am force-stop {}", app.package))?;
        faultline_sdk::log::info(&format!("force-stopped {} on {}", app.package, app.serial));
        Ok(android::token("kill_app", &[&app.serial, &app.package, &app.activity, if relaunch { "relaunch" } else { "leave" }]))
    }

    fn revert(token: String) -> Result<(), FaultError> {
        let f = android::fields(&token, "kill_app", 4)?;
        let app = App { serial: f[0].into(), package: f[1].into(), activity: f[2].into() };
        if f[3] != "relaunch" || app.is_running()? {
            return Ok(());
        }
        app.launch()
    }
}

faultline_sdk::register_fault!(KillApp);
