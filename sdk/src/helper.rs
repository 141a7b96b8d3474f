//! Faults carried out by the host's agent next to a target (CPU burn,
//! memory, network shaping). The token names the helper and its target, so
//! reverting and adjusting need nothing else.

use crate::docker::{self, HelperSpec, Namespace};
use crate::{CapabilityError, FaultError};

/// What a helper-backed fault's revert token holds.
#[derive(Debug, Clone, PartialEq)]
pub struct HelperToken {
    pub helper: String,
    pub target: String,
}

impl HelperToken {
    pub fn encode(&self) -> String {
        format!("helper:{}@{}", self.helper, self.target)
    }

    pub fn decode(token: &str) -> Result<HelperToken, FaultError> {
        let (helper, target) = token
            .strip_prefix("helper:")
            .and_then(|t| t.split_once('@'))
            .ok_or_else(|| FaultError::Failed(format!("`{token}` is not a helper token")))?;
        Ok(HelperToken { helper: helper.into(), target: target.into() })
    }
}

/// Starts the agent with `args` in the target's `share` namespaces; returns
/// the revert token. A target that is gone is `target-unavailable`.
pub fn start(target: &str, args: Vec<String>, share: Vec<Namespace>, cap_add: Vec<String>, ttl_seconds: u32) -> Result<String, FaultError> {
    let spec = HelperSpec { target: target.into(), args, share, cap_add, ttl_seconds };
    match docker::run_helper(&spec) {
        Ok(helper) => Ok(HelperToken { helper, target: target.into() }.encode()),
        Err(CapabilityError::NotFound(why)) => Err(FaultError::TargetUnavailable(why)),
        Err(e) => Err(e.into()),
    }
}

/// Stops and removes the helper a token names; one that is gone is fine.
pub fn stop(token: &str) -> Result<(), FaultError> {
    let token = HelperToken::decode(token)?;
    match docker::remove_helper(&token.helper) {
        Ok(()) | Err(CapabilityError::NotFound(_)) => Ok(()),
        Err(e) => Err(e.into()),
    }
}
