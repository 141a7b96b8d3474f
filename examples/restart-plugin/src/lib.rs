//! `container_restart`: restarts a share of the matched containers.
//!
//! A restart ends by itself, so there is nothing to undo: the revert token
//! only names the container, and reverting checks that it came back.

use faultline_sdk::docker;
use faultline_sdk::{
    CapabilityError, Fault, FaultError, FaultInfo, IntensitySpec, ParamKind, ParamSpec, Platform, Settings, Target,
};

/// Seconds Docker waits for a graceful stop before it kills.
const DEFAULT_STOP_TIMEOUT: i64 = 10;

struct ContainerRestart;

impl Fault for ContainerRestart {
    fn describe() -> FaultInfo {
        FaultInfo {
            name: "container_restart".into(),
            aliases: vec![],
            description: "Restarts a share of the matched containers".into(),
            platforms: vec![Platform::Backend],
            intensity: Some(IntensitySpec::share_of_targets(100.0, 25.0)),
            params: vec![ParamSpec {
                name: "stop_timeout_seconds".into(),
                description: "Seconds to wait for a graceful stop before killing (0-300, default 10)".into(),
                kind: ParamKind::Integer,
                required: false,
            }],
            conflicts_with: vec![],
        }
    }

    fn validate(settings: Settings) -> Result<(), FaultError> {
        match settings.integer("stop_timeout_seconds") {
            Some(t) if !(0..=300).contains(&t) => {
                Err(FaultError::InvalidSettings(format!("stop_timeout_seconds must be 0-300, not {t}")))
            }
            _ => Ok(()),
        }
    }

    fn inject(target: Target, settings: Settings) -> Result<String, FaultError> {
        let timeout = settings.integer("stop_timeout_seconds").unwrap_or(DEFAULT_STOP_TIMEOUT);
        match docker::restart(&target.id, timeout as u32) {
            Ok(()) => {}
            Err(CapabilityError::NotFound(why)) => return Err(FaultError::TargetUnavailable(why)),
            Err(e) => return Err(e.into()),
        }
        faultline_sdk::log::info(&format!("restarted {}", target.name));
        Ok(target.id)
    }

    fn revert(token: String) -> Result<(), FaultError> {
        match docker::inspect(&token) {
            Ok(c) if c.state != "running" => {
                faultline_sdk::log::warn(&format!("{} is {} after its restart", c.name, c.state));
                Ok(())
            }
            Ok(_) | Err(CapabilityError::NotFound(_)) => Ok(()),
            Err(e) => Err(e.into()),
        }
    }
}

faultline_sdk::register_fault!(ContainerRestart);
