//! `bandwidth_throttle`: releases the response bodies of a web app's
//! matching requests at `rate_kbit` kilobits per second, as
//! `bandwidth_limit` does for a container. Like it, it takes no intensity:
//! a lower rate is the harsher fault, the opposite of what ramps and the
//! adaptive controller assume, so the rate is a parameter held throughout.

use faultline_sdk::proxy::RuleAction;
use faultline_sdk::{Fault, FaultError, FaultInfo, ParamKind, ParamSpec, Platform, Settings, Target, web};

/// One kilobyte a second, the proxy's finest step.
const MIN_KBIT: f64 = 8.0;
const MAX_KBIT: f64 = 100_000_000.0;

struct BandwidthThrottle;

impl Fault for BandwidthThrottle {
    fn describe() -> FaultInfo {
        FaultInfo {
            name: "bandwidth_throttle".into(),
            aliases: vec![],
            description: "Slows the responses of a web app's matching requests to a rate, in kilobits per second".into(),
            platforms: vec![Platform::Frontend, Platform::Android],
            intensity: None,
            params: vec![ParamSpec {
                name: "rate_kbit".into(),
                description: format!("Response rate, kilobits per second ({MIN_KBIT}-{MAX_KBIT})"),
                kind: ParamKind::Number,
                required: true,
            }],
            conflicts_with: vec![],
        }
    }

    fn validate(settings: Settings) -> Result<(), FaultError> {
        match settings.number("rate_kbit") {
            Some(r) if (MIN_KBIT..=MAX_KBIT).contains(&r) => Ok(()),
            other => Err(FaultError::InvalidSettings(format!("rate_kbit must be between {MIN_KBIT} and {MAX_KBIT}, not {other:?}"))),
        }
    }

    fn inject(target: Target, settings: Settings) -> Result<String, FaultError> {
        let kbit = settings.number("rate_kbit").unwrap_or(MIN_KBIT);
        let kilobytes = (kbit / 8.0).round().max(1.0) as u32;
        web::add(&target, RuleAction::Throttle(kilobytes), 1.0, settings.ttl_seconds)
    }

    fn revert(token: String) -> Result<(), FaultError> {
        web::remove(&token)
    }
}

faultline_sdk::register_fault!(BandwidthThrottle);
