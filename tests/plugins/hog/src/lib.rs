//! Hostile test plugin: Grows memory without bound on targets named `bad...`; elsewhere it
//! behaves (log and clock only).

use faultline_sdk::{Fault, FaultError, FaultInfo, Settings, Target};
use test_plugin_kit as kit;

struct Hostile;

impl Fault for Hostile {
    fn describe() -> FaultInfo {
        kit::describe("test_hog", "Grows memory without bound on targets named bad*")
    }
    fn inject(target: Target, settings: Settings) -> Result<String, FaultError> {
        if kit::is_bad(&target) {
            let mut hoard: Vec<Vec<u8>> = Vec::new();
            loop {
                hoard.push(vec![1; 1 << 20]);
                std::hint::black_box(&hoard);
            }
        }
        kit::inject(&target, &settings)
    }
    fn adjust(token: String, settings: Settings) -> Result<String, FaultError> {
        kit::adjust(&token, &settings)
    }
    fn revert(token: String) -> Result<(), FaultError> {
        kit::revert(&token)
    }
}

faultline_sdk::register_fault!(Hostile);
