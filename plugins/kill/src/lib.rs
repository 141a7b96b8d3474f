//! `kill`: sends a signal (SIGKILL by default) to the main process of a share
//! of the matched containers: intensity is the percentage of containers,
//! rounded up, at least one (50 % of 3 is 2).
//!
//! The signal comes from outside the container, as a crash would, so the
//! container's restart policy applies. A kill cannot be undone; what the
//! experiment measures is how the system recovers by itself. With
//! `restart_after: true` the revert also restarts a killed container that
//! has not come back, so nothing is left down when the experiment ends.

use faultline_sdk::docker;
use faultline_sdk::{CapabilityError, Fault, FaultError, FaultInfo, IntensitySpec, ParamKind, ParamSpec, Platform, Settings, Target};

const SIGNALS: [&str; 6] = ["SIGKILL", "SIGTERM", "SIGINT", "SIGQUIT", "SIGHUP", "SIGUSR1"];

struct Kill;

/// The token: the container, and whether to restart it on revert.
fn token(id: &str, restart_after: bool) -> String {
    format!("{id}:{}", if restart_after { "restart" } else { "leave" })
}

impl Fault for Kill {
    fn describe() -> FaultInfo {
        FaultInfo {
            name: "kill".into(),
            aliases: vec![],
            description: "Kills the main process of a share of the matched containers".into(),
            platforms: vec![Platform::Backend],
            intensity: Some(IntensitySpec::share_of_targets(100.0, 25.0)),
            params: vec![
                ParamSpec {
                    name: "signal".into(),
                    description: format!("Signal to send: one of {} (default SIGKILL)", SIGNALS.join(", ")),
                    kind: ParamKind::Text,
                    required: false,
                },
                ParamSpec {
                    name: "restart_after".into(),
                    description: "Restart, at rollback, a killed container that has not come back (default false)".into(),
                    kind: ParamKind::Flag,
                    required: false,
                },
            ],
            conflicts_with: vec![],
        }
    }

    fn validate(settings: Settings) -> Result<(), FaultError> {
        match settings.text("signal") {
            Some(s) if !SIGNALS.contains(&s) => Err(FaultError::InvalidSettings(format!("signal must be one of {}", SIGNALS.join(", ")))),
            _ => Ok(()),
        }
    }

    fn inject(target: Target, settings: Settings) -> Result<String, FaultError> {
        let signal = settings.text("signal").unwrap_or("SIGKILL");
        match docker::signal(&target.id, signal) {
            Ok(()) => {}
            Err(CapabilityError::NotFound(why)) => return Err(FaultError::TargetUnavailable(why)),
            Err(e) => return Err(e.into()),
        }
        faultline_sdk::log::info(&format!("sent {signal} to {}", target.name));
        Ok(token(&target.id, settings.flag("restart_after").unwrap_or(false)))
    }

    fn revert(token: String) -> Result<(), FaultError> {
        let Some((id, "restart")) = token.rsplit_once(':') else { return Ok(()) };
        match docker::inspect(id) {
            Ok(c) if c.state != "running" => Ok(docker::restart(id, 10)?),
            Ok(_) | Err(CapabilityError::NotFound(_)) => Ok(()),
            Err(e) => Err(e.into()),
        }
    }
}

faultline_sdk::register_fault!(Kill);
