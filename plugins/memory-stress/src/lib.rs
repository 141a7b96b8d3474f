//! `memory_stress`: fills a percentage of each container's memory: its
//! memory limit when it has one, else the engine machine's memory. The
//! memory is written page by page in a helper placed under the container's
//! own cgroup, so it counts against the container's limit: near 100 % the
//! kernel's out-of-memory killer acts inside the container, as it would
//! for a real leak.

use faultline_sdk::docker::{self, Namespace};
use faultline_sdk::helper;
use faultline_sdk::{Fault, FaultError, FaultInfo, IntensitySpec, Platform, Settings, Target};

struct MemoryStress;

/// Memory the container may use, bytes.
fn memory_of(container: &str) -> Result<u64, FaultError> {
    match docker::inspect(container)?.memory_limit {
        Some(limit) => Ok(limit),
        None => Ok(docker::engine_info()?.memory_bytes),
    }
}

fn fill(container: &str, settings: &Settings) -> Result<String, FaultError> {
    let bytes = (memory_of(container)? as f64 * settings.intensity / 100.0) as u64;
    let args = ["memory", "--bytes", &bytes.to_string()];
    Ok(helper::start(container, args.map(String::from).to_vec(), vec![Namespace::Cgroup], vec![], settings.ttl_seconds)?.logged())
}

impl Fault for MemoryStress {
    fn describe() -> FaultInfo {
        FaultInfo {
            name: "memory_stress".into(),
            aliases: vec![],
            description: "Allocates a percentage of each container's available memory".into(),
            platforms: vec![Platform::Backend],
            intensity: Some(IntensitySpec::per_target("percent", 1.0, 100.0, 50.0, 10.0)),
            params: vec![],
            conflicts_with: vec![],
        }
    }

    fn inject(target: Target, settings: Settings) -> Result<String, FaultError> {
        fill(&target.id, &settings)
    }

    /// The old allocation is released before the new one is made, so the
    /// two never add up past the limit.
    fn adjust(token: String, settings: Settings) -> Result<String, FaultError> {
        helper::replace(&token, |target| fill(target, &settings))
    }

    fn revert(token: String) -> Result<(), FaultError> {
        helper::stop(&token)
    }
}

faultline_sdk::register_fault!(MemoryStress);
