//! `faultline:plugin/proxy`: HTTP fault rules in the fault proxy, within
//! scope: rules go only on the sites of the experiment's targets (a
//! frontend target's id is its route, `<site>/<path pattern>`, or the site
//! itself), and only the experiment that added a rule may remove it.

use std::sync::Arc;

use async_trait::async_trait;

use super::{CapResult, HostCapabilities, NotConfigured};
use crate::bindings::faultline::plugin::proxy as wit;
use crate::model::CapabilityError;
use crate::scope::Scope;
use crate::state::StoreState;

pub use wit::{RequestMatch, Rule, RuleAction};

type WitResult<T> = wasmtime::Result<Result<T, wit::CapabilityError>>;

/// What the host offers plugins on web front ends. The slot below has
/// checked the scope before any of these is called.
#[async_trait]
pub trait Proxy: Send + Sync {
    /// Adds a rule, recorded as the experiment's.
    async fn add_rule(&self, site: String, rule: Rule, experiment: &str) -> CapResult<String>;
    async fn remove_rule(&self, rule_id: String) -> CapResult<()>;
    /// The experiment that added a rule (kept by the proxy, so a fresh
    /// instance after a restart can be checked); not-found when it is gone.
    async fn rule_owner(&self, rule_id: &str) -> CapResult<String>;
}

#[async_trait]
impl Proxy for NotConfigured {
    async fn add_rule(&self, _: String, _: Rule, _: &str) -> CapResult<String> {
        self.refuse()
    }
    async fn remove_rule(&self, _: String) -> CapResult<()> {
        self.refuse()
    }
    async fn rule_owner(&self, _: &str) -> CapResult<String> {
        self.refuse()
    }
}

/// One instance's proxy: the host's implementation behind its scope.
pub(crate) struct ProxySlot {
    host: Arc<dyn Proxy>,
    scope: Scope,
}

impl ProxySlot {
    pub(crate) fn new(caps: &HostCapabilities, scope: &Scope) -> Self {
        ProxySlot { host: caps.proxy.clone(), scope: scope.clone() }
    }

    fn site(&self, site: &str) -> CapResult<()> {
        let route_on = |t: &String| t == site || t.strip_prefix(site).is_some_and(|path| path.starts_with('/'));
        match self.scope.targets().iter().any(route_on) {
            true => Ok(()),
            false => Err(CapabilityError::Denied(format!("site `{site}` has none of this experiment's targets"))),
        }
    }

    /// Whether this experiment added the rule; `false` when it is gone
    /// (removed already, as the contract says).
    async fn own_rule(&self, rule_id: &str) -> CapResult<bool> {
        match self.host.rule_owner(rule_id).await {
            Ok(owner) if Some(owner.as_str()) == self.scope.experiment_id() => Ok(true),
            Ok(_) => Err(CapabilityError::Denied(format!("rule `{rule_id}` was not added by this experiment"))),
            Err(CapabilityError::NotFound(_)) => Ok(false),
            Err(e) => Err(e),
        }
    }
}

fn wit<T>(r: CapResult<T>) -> WitResult<T> {
    Ok(r.map_err(Into::into))
}

impl wit::Host for ProxySlot {
    async fn add_rule(&mut self, site: String, rule: Rule) -> WitResult<String> {
        let experiment = self.scope.experiment_id().unwrap_or_default();
        wit(async { self.site(&site)?; self.host.add_rule(site, rule, experiment).await }.await)
    }
    async fn remove_rule(&mut self, rule_id: String) -> WitResult<()> {
        wit(async {
            match self.own_rule(&rule_id).await? {
                true => self.host.remove_rule(rule_id).await,
                false => Ok(()),
            }
        }
        .await)
    }
}

struct HasProxy;
impl wasmtime::component::HasData for HasProxy {
    type Data<'a> = &'a mut ProxySlot;
}

pub(crate) fn link(linker: &mut wasmtime::component::Linker<StoreState>) -> wasmtime::Result<()> {
    wit::add_to_linker::<StoreState, HasProxy>(linker, |s| &mut s.caps.proxy)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rules_go_only_on_the_sites_of_the_targets() {
        let scope = Scope::experiment("exp-1", ["http://shop:8080/api/*".to_string()]);
        let slot = ProxySlot::new(&HostCapabilities::default(), &scope);
        assert!(slot.site("http://shop:8080").is_ok());
        assert!(matches!(slot.site("http://bank:8080"), Err(CapabilityError::Denied(_))));
        assert!(matches!(slot.site("http://shop:80"), Err(CapabilityError::Denied(_))), "a prefix of the site is another site");
    }
}
