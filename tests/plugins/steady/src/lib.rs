//! A well-behaved fault that uses only the log and clock capabilities.

use faultline_sdk::{Fault, FaultError, FaultInfo, Settings, Target};
use test_plugin_kit as kit;

struct Steady;

impl Fault for Steady {
    fn describe() -> FaultInfo {
        kit::describe("test_steady", "Logs each injection; acts on nothing (log and clock only)")
    }
    fn validate(settings: Settings) -> Result<(), FaultError> {
        kit::validate(&settings)
    }
    fn inject(target: Target, settings: Settings) -> Result<String, FaultError> {
        kit::inject(&target, &settings)
    }
    fn adjust(token: String, settings: Settings) -> Result<String, FaultError> {
        kit::adjust(&token, &settings)
    }
    fn revert(token: String) -> Result<(), FaultError> {
        kit::revert(&token)
    }
}

faultline_sdk::register_fault!(Steady);
