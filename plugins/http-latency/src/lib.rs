//! `http_latency`: holds each matching request of a web app for the
//! intensity, in milliseconds, before it goes on to the app (in the fault
//! proxy) or to the network (in the service worker). `jitter_ms` adds up
//! to that much either way; `percent` limits it to a share of requests.

use faultline_sdk::proxy::RuleAction;
use faultline_sdk::{Fault, FaultError, FaultInfo, IntensitySpec, ParamKind, ParamSpec, Platform, Settings, Target, web};

const MAX_MS: f64 = 60_000.0;

struct HttpLatency;

fn action(settings: &Settings) -> (RuleAction, f64) {
    let jitter = settings.number("jitter_ms").unwrap_or(0.0);
    let share = settings.number("percent").unwrap_or(100.0) / 100.0;
    (RuleAction::Delay((settings.intensity.round() as u32, jitter.round() as u32)), share)
}

impl Fault for HttpLatency {
    fn describe() -> FaultInfo {
        FaultInfo {
            name: "http_latency".into(),
            aliases: vec![],
            description: "Delays a web app's matching requests (milliseconds, optional jitter and share of requests)".into(),
            platforms: vec![Platform::Frontend, Platform::Android],
            intensity: Some(IntensitySpec::per_target("ms", 1.0, MAX_MS, 500.0, 100.0)),
            params: vec![
                ParamSpec {
                    name: "jitter_ms".into(),
                    description: "Uniform jitter, milliseconds: each request waits the delay ± up to this much (default 0)".into(),
                    kind: ParamKind::Number,
                    required: false,
                },
                ParamSpec {
                    name: "percent".into(),
                    description: "Share of matching requests delayed, 1-100 (default 100)".into(),
                    kind: ParamKind::Number,
                    required: false,
                },
            ],
            conflicts_with: vec![],
        }
    }

    fn validate(settings: Settings) -> Result<(), FaultError> {
        if let Some(j) = settings.number("jitter_ms").filter(|j| !(0.0..=MAX_MS).contains(j)) {
            return Err(FaultError::InvalidSettings(format!("jitter_ms must be between 0 and {MAX_MS}, not {j}")));
        }
        match settings.number("percent") {
            Some(p) if !(1.0..=100.0).contains(&p) => Err(FaultError::InvalidSettings(format!("percent must be between 1 and 100, not {p}"))),
            _ => Ok(()),
        }
    }

    fn inject(target: Target, settings: Settings) -> Result<String, FaultError> {
        let (action, share) = action(&settings);
        web::add(&target, action, share, settings.ttl_seconds)
    }

    fn adjust(token: String, settings: Settings) -> Result<String, FaultError> {
        let (action, share) = action(&settings);
        web::replace(&token, action, share, settings.ttl_seconds)
    }

    fn revert(token: String) -> Result<(), FaultError> {
        web::remove(&token)
    }
}

faultline_sdk::register_fault!(HttpLatency);
