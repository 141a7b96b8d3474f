//! `network_delay` (alias `latency`): adds a delay, in milliseconds, to
//! every round trip of each container's network traffic, with optional
//! uniform jitter (`jitter_ms`: each packet gets delay ± jitter, never less
//! than zero; packets may reorder, as with netem). Loopback traffic inside
//! the container is left alone.
//!
//! `latency` is accepted as an alias because that is what users (and other
//! chaos tools) call this fault; both names run this one driver, and the
//! experiment records the name the user gave.

use faultline_sdk::helper;
use faultline_sdk::{Fault, FaultError, FaultInfo, IntensitySpec, ParamKind, ParamSpec, Platform, Settings, Target};

const MAX_MS: f64 = 60_000.0;

struct NetworkDelay;

fn delay(target: &str, settings: &Settings) -> Result<String, FaultError> {
    let mut flags = vec!["--delay-ms".to_string(), settings.intensity.to_string()];
    if let Some(jitter) = settings.number("jitter_ms") {
        flags.extend(["--jitter-ms".to_string(), jitter.to_string()]);
    }
    Ok(helper::shape_network(target, flags, settings.ttl_seconds)?.logged())
}

impl Fault for NetworkDelay {
    fn describe() -> FaultInfo {
        FaultInfo {
            name: "network_delay".into(),
            aliases: vec!["latency".into()],
            description: "Adds a delay (milliseconds, optional jitter) to each container's network round trips".into(),
            platforms: vec![Platform::Backend],
            intensity: Some(IntensitySpec::per_target("ms", 1.0, 10_000.0, 100.0, 50.0)),
            params: vec![ParamSpec {
                name: "jitter_ms".into(),
                description: "Uniform jitter, milliseconds: each packet is delayed by the delay ± up to this much (default 0)".into(),
                kind: ParamKind::Number,
                required: false,
            }],
            conflicts_with: vec![],
        }
    }

    fn validate(settings: Settings) -> Result<(), FaultError> {
        match settings.number("jitter_ms") {
            Some(j) if !(0.0..=MAX_MS).contains(&j) => {
                Err(FaultError::InvalidSettings(format!("jitter_ms must be between 0 and {MAX_MS}, not {j}")))
            }
            _ => Ok(()),
        }
    }

    fn inject(target: Target, settings: Settings) -> Result<String, FaultError> {
        delay(&target.id, &settings)
    }

    fn adjust(token: String, settings: Settings) -> Result<String, FaultError> {
        helper::replace(&token, |target| delay(target, &settings))
    }

    fn revert(token: String) -> Result<(), FaultError> {
        helper::stop(&token)
    }
}

faultline_sdk::register_fault!(NetworkDelay);
