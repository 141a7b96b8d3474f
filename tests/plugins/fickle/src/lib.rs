//! A fault whose targets misbehave the way real ones do mid-run, chosen by
//! the target's name; any other target behaves as with test_steady:
//! - `vanish*`: gone after the first ramp level (10): adjusting it fails
//!   with target-unavailable, and so does injecting it again.
//! - `panic*`: the plugin panics (a wasm trap) when asked to adjust it.
//! - `sticky*`: its reverts fail until 6 s after it was injected (the
//!   token carries the wall-clock time of the injection).

use faultline_sdk::{Fault, FaultError, FaultInfo, Settings, Target, clock, log};
use test_plugin_kit as kit;

const STICKY_MS: u64 = 6000;
const FIRST_LEVEL: f64 = 10.0;

struct Fickle;

fn target_of(token: &str) -> &str {
    token.split('@').next().unwrap_or_default()
}

impl Fault for Fickle {
    fn describe() -> FaultInfo {
        kit::describe("test_fickle", "Logs each injection; vanish*, panic* and sticky* targets misbehave")
    }
    fn inject(target: Target, settings: Settings) -> Result<String, FaultError> {
        if target.name.starts_with("vanish") && settings.intensity > FIRST_LEVEL {
            return Err(FaultError::TargetUnavailable(format!("{} is gone", target.name)));
        }
        // The nonce is wall-clock time, so a revert knows the injection's age.
        let token = format!("{}@{}#{}", target.id, settings.intensity, clock::now_ms());
        log::info(&format!("inject {token}"));
        Ok(token)
    }
    fn adjust(token: String, settings: Settings) -> Result<String, FaultError> {
        let target = target_of(&token);
        if target.starts_with("vanish") && settings.intensity > FIRST_LEVEL {
            return Err(FaultError::TargetUnavailable(format!("{target} is gone")));
        }
        if target.starts_with("panic") {
            panic!("test_fickle panics adjusting {target}");
        }
        let new = format!("{target}@{}#{}", settings.intensity, clock::now_ms());
        log::info(&format!("adjust {token} -> {new}"));
        Ok(new)
    }
    fn revert(token: String) -> Result<(), FaultError> {
        let injected_at: u64 = token.rsplit('#').next().and_then(|n| n.parse().ok()).unwrap_or(0);
        if target_of(&token).starts_with("sticky") && clock::now_ms() < injected_at + STICKY_MS {
            return Err(FaultError::Failed("the target refuses the revert for now".into()));
        }
        kit::revert(&token)
    }
}

faultline_sdk::register_fault!(Fickle);
