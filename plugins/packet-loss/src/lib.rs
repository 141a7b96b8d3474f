//! `packet_loss`: drops a percentage of the packets each container
//! receives, at random, silently (as a lossy link would: the sender gets no
//! error). Loopback traffic inside the container is left alone. Resolution
//! 0.01 %.

use faultline_sdk::helper;
use faultline_sdk::{Fault, FaultError, FaultInfo, IntensitySpec, Platform, Settings, Target};

struct PacketLoss;

fn lose(target: &str, settings: &Settings) -> Result<String, FaultError> {
    let flags = vec!["--loss-percent".to_string(), settings.intensity.to_string()];
    Ok(helper::shape_network(target, flags, settings.ttl_seconds)?.logged())
}

impl Fault for PacketLoss {
    fn describe() -> FaultInfo {
        FaultInfo {
            name: "packet_loss".into(),
            aliases: vec![],
            description: "Drops a percentage of the packets each container receives".into(),
            platforms: vec![Platform::Backend],
            intensity: Some(IntensitySpec::per_target("percent", 0.01, 100.0, 10.0, 10.0)),
            params: vec![],
            conflicts_with: vec![],
        }
    }

    fn inject(target: Target, settings: Settings) -> Result<String, FaultError> {
        lose(&target.id, &settings)
    }

    fn adjust(token: String, settings: Settings) -> Result<String, FaultError> {
        helper::replace(&token, |target| lose(target, &settings))
    }

    fn revert(token: String) -> Result<(), FaultError> {
        helper::stop(&token)
    }
}

faultline_sdk::register_fault!(PacketLoss);
