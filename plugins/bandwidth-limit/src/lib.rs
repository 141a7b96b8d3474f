//! `bandwidth_limit`: caps the bandwidth each container sends at
//! `rate_kbit` kilobits per second (a token bucket, tbf, on its interfaces;
//! netem's rate where the kernel has netem). It takes no intensity: a lower
//! rate is the harsher fault, the opposite of what ramps and the adaptive
//! controller assume, so the rate is a parameter and holds for the whole
//! injection. Where the kernel has netem, the rate and a delay would both
//! need the interface's root qdisc: it declares a conflict with
//! `network_delay`.

use faultline_sdk::helper;
use faultline_sdk::{Fault, FaultError, FaultInfo, ParamKind, ParamSpec, Platform, Settings, Target};

const MIN_KBIT: f64 = 8.0;
const MAX_KBIT: f64 = 100_000_000.0;

struct BandwidthLimit;

impl Fault for BandwidthLimit {
    fn describe() -> FaultInfo {
        FaultInfo {
            name: "bandwidth_limit".into(),
            aliases: vec![],
            description: "Caps the bandwidth each container sends, in kilobits per second".into(),
            platforms: vec![Platform::Backend],
            intensity: None,
            params: vec![ParamSpec {
                name: "rate_kbit".into(),
                description: format!("Outbound rate, kilobits per second ({MIN_KBIT}-{MAX_KBIT})"),
                kind: ParamKind::Number,
                required: true,
            }],
            conflicts_with: vec!["network_delay".into()],
        }
    }

    fn validate(settings: Settings) -> Result<(), FaultError> {
        match settings.number("rate_kbit") {
            Some(r) if (MIN_KBIT..=MAX_KBIT).contains(&r) => Ok(()),
            other => Err(FaultError::InvalidSettings(format!("rate_kbit must be between {MIN_KBIT} and {MAX_KBIT}, not {other:?}"))),
        }
    }

    fn inject(target: Target, settings: Settings) -> Result<String, FaultError> {
        let rate = settings.number("rate_kbit").unwrap_or(MIN_KBIT).round();
        Ok(helper::shape_network(&target.id, vec!["--rate-kbit".into(), rate.to_string()], settings.ttl_seconds)?.logged())
    }

    fn revert(token: String) -> Result<(), FaultError> {
        helper::stop(&token)
    }
}

faultline_sdk::register_fault!(BandwidthLimit);
