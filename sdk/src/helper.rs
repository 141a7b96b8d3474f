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

/// A helper whose effect is in place.
pub struct Started {
    /// The revert token.
    pub token: String,
    /// What the agent said it did (for example, which kernel mechanism).
    pub report: String,
    pub target: String,
}

impl Started {
    /// Logs the agent's report at info level (so it joins the experiment's
    /// timeline; needs the `log` grant) and returns the revert token.
    pub fn logged(self) -> String {
        let short = self.target.get(..12).unwrap_or(&self.target);
        crate::log::info(&format!("{short}: {}", self.report));
        self.token
    }
}

/// Starts the agent with `args` in the target's `share` namespaces and
/// waits until it reports its effect in place. A target that is gone is
/// `target-unavailable`.
pub fn start(target: &str, args: Vec<String>, share: Vec<Namespace>, cap_add: Vec<String>, ttl_seconds: u32) -> Result<Started, FaultError> {
    let spec = HelperSpec { target: target.into(), args, share, cap_add, ttl_seconds };
    match docker::run_helper(&spec) {
        Ok(helper) => Ok(Started {
            token: HelperToken { helper: helper.id, target: target.into() }.encode(),
            report: helper.report,
            target: target.into(),
        }),
        Err(CapabilityError::NotFound(why)) => Err(FaultError::TargetUnavailable(why)),
        Err(e) => Err(e.into()),
    }
}

/// Starts the agent's `net` command in the target's network namespace
/// (with NET_ADMIN) with `flags` such as `--delay-ms 100`. The agent picks
/// netem where the kernel has it, else an NFQUEUE delay line and nftables
/// drops; its report says which.
pub fn shape_network(target: &str, flags: Vec<String>, ttl_seconds: u32) -> Result<Started, FaultError> {
    let args = std::iter::once("net".to_string()).chain(flags).collect();
    start(target, args, vec![Namespace::Network], vec!["NET_ADMIN".into()], ttl_seconds)
}

/// Stops and removes the helper a token names; one that is gone is fine.
pub fn stop(token: &str) -> Result<(), FaultError> {
    let token = HelperToken::decode(token)?;
    match docker::remove_helper(&token.helper) {
        Ok(()) | Err(CapabilityError::NotFound(_)) => Ok(()),
        Err(e) => Err(e.into()),
    }
}

/// Replaces the helper a token names with the one `start` starts for the
/// same target; returns the new token. The old helper stops first, so the
/// two never act at once (two memory fills or delay lines would add up).
pub fn replace(token: &str, start: impl FnOnce(&str) -> Result<String, FaultError>) -> Result<String, FaultError> {
    let target = HelperToken::decode(token)?.target;
    stop(token)?;
    start(&target)
}
