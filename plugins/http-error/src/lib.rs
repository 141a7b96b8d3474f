//! `http_error`: answers the intensity's percentage of a web app's
//! matching requests with an error status (`status`, 503 by default)
//! instead of passing them on; the app never sees them.

use faultline_sdk::proxy::RuleAction;
use faultline_sdk::{Fault, FaultError, FaultInfo, IntensitySpec, ParamKind, ParamSpec, Platform, Settings, Target, web};

const DEFAULT_STATUS: i64 = 503;

struct HttpError;

fn status(settings: &Settings) -> i64 {
    settings.integer("status").unwrap_or(DEFAULT_STATUS)
}

fn action(settings: &Settings) -> (RuleAction, f64) {
    (RuleAction::Abort(status(settings) as u16), settings.intensity / 100.0)
}

impl Fault for HttpError {
    fn describe() -> FaultInfo {
        FaultInfo {
            name: "http_error".into(),
            aliases: vec![],
            description: "Answers a percentage of a web app's matching requests with an error status (503 by default)".into(),
            platforms: vec![Platform::Frontend, Platform::Android],
            intensity: Some(IntensitySpec::per_target("percent", 1.0, 100.0, 50.0, 10.0)),
            params: vec![ParamSpec {
                name: "status".into(),
                description: format!("HTTP status answered, 400-599 (default {DEFAULT_STATUS})"),
                kind: ParamKind::Integer,
                required: false,
            }],
            conflicts_with: vec![],
        }
    }

    fn validate(settings: Settings) -> Result<(), FaultError> {
        match status(&settings) {
            400..=599 => Ok(()),
            other => Err(FaultError::InvalidSettings(format!("status must be an error status, 400-599, not {other}"))),
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

faultline_sdk::register_fault!(HttpError);
