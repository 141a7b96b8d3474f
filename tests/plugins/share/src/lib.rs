//! A fault whose intensity is the share of targets affected, acting only
//! through log and clock.

use faultline_sdk::{Fault, FaultError, FaultInfo, IntensitySpec, Settings, Target};
use test_plugin_kit as kit;

struct Share;

impl Fault for Share {
    fn describe() -> FaultInfo {
        kit::describe_with("test_share", "Logs injections into a share of the targets (log and clock only)", IntensitySpec::share_of_targets(100.0, 25.0))
    }
    fn inject(target: Target, settings: Settings) -> Result<String, FaultError> {
        kit::inject(&target, &settings)
    }
    fn revert(token: String) -> Result<(), FaultError> {
        kit::revert(&token)
    }
}

faultline_sdk::register_fault!(Share);
