//! `cpu_stress`: keeps a share of each container's CPU busy. Intensity is
//! the percentage of the CPU the container may use: its CPU limit when it
//! has one, else every CPU of the engine's machine. The burn runs in a
//! helper placed under the container's own cgroup, so the container's
//! limits bind it and its stats show it.

use faultline_sdk::docker::{self, Namespace};
use faultline_sdk::helper::{self, HelperToken};
use faultline_sdk::{Fault, FaultError, FaultInfo, IntensitySpec, Platform, Settings, Target};

struct CpuStress;

/// CPUs the container may use.
fn cpus_of(container: &str) -> Result<f64, FaultError> {
    match docker::inspect(container)?.cpu_limit {
        Some(limit) => Ok(limit),
        None => Ok(f64::from(docker::engine_info()?.cpus)),
    }
}

fn burn(container: &str, settings: &Settings) -> Result<String, FaultError> {
    let args = ["cpu", "--percent", &settings.intensity.to_string(), "--cpus", &cpus_of(container)?.to_string()];
    Ok(helper::start(container, args.map(String::from).to_vec(), vec![Namespace::Cgroup], vec![], settings.ttl_seconds)?.logged())
}

impl Fault for CpuStress {
    fn describe() -> FaultInfo {
        FaultInfo {
            name: "cpu_stress".into(),
            aliases: vec![],
            description: "Consumes a percentage of each container's CPU".into(),
            platforms: vec![Platform::Backend],
            intensity: Some(IntensitySpec::per_target("percent", 1.0, 100.0, 50.0, 10.0)),
            params: vec![],
            conflicts_with: vec![],
        }
    }

    fn inject(target: Target, settings: Settings) -> Result<String, FaultError> {
        burn(&target.id, &settings)
    }

    /// A new burn at the new level replaces the old one.
    fn adjust(token: String, settings: Settings) -> Result<String, FaultError> {
        let target = HelperToken::decode(&token)?.target;
        let replacement = burn(&target, &settings)?;
        helper::stop(&token)?;
        Ok(replacement)
    }

    fn revert(token: String) -> Result<(), FaultError> {
        helper::stop(&token)
    }
}

faultline_sdk::register_fault!(CpuStress);
