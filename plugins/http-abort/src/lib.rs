//! `http_abort`: cuts the connection of the intensity's percentage of a
//! web app's matching requests, without an answer: the browser sees a
//! network error (HTTP/2: the stream is reset).

use faultline_sdk::proxy::RuleAction;
use faultline_sdk::{Fault, FaultError, FaultInfo, IntensitySpec, Platform, Settings, Target, web};

struct HttpAbort;

impl Fault for HttpAbort {
    fn describe() -> FaultInfo {
        FaultInfo {
            name: "http_abort".into(),
            aliases: vec![],
            description: "Cuts the connection of a percentage of a web app's matching requests, without an answer".into(),
            platforms: vec![Platform::Frontend, Platform::Android],
            intensity: Some(IntensitySpec::per_target("percent", 1.0, 100.0, 50.0, 10.0)),
            params: vec![],
            conflicts_with: vec![],
        }
    }

    fn inject(target: Target, settings: Settings) -> Result<String, FaultError> {
        web::add(&target, RuleAction::Reset, settings.intensity / 100.0, settings.ttl_seconds)
    }

    fn adjust(token: String, settings: Settings) -> Result<String, FaultError> {
        web::replace(&token, RuleAction::Reset, settings.intensity / 100.0, settings.ttl_seconds)
    }

    fn revert(token: String) -> Result<(), FaultError> {
        web::remove(&token)
    }
}

faultline_sdk::register_fault!(HttpAbort);
