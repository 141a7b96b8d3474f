//! `faultline:plugin/proxy`: HTTP fault rules in the fault proxy.

use std::sync::Arc;

use async_trait::async_trait;

use super::{CapResult, NotConfigured};
use crate::bindings::faultline::plugin::proxy as wit;
use crate::state::StoreState;

pub use wit::{RequestMatch, Rule, RuleAction};

type WitResult<T> = wasmtime::Result<Result<T, wit::CapabilityError>>;

/// What the host offers plugins on web front ends.
#[async_trait]
pub trait Proxy: Send + Sync {
    async fn add_rule(&self, site: String, rule: Rule) -> CapResult<String>;
    async fn remove_rule(&self, rule_id: String) -> CapResult<()>;
}

#[async_trait]
impl Proxy for NotConfigured {
    async fn add_rule(&self, _: String, _: Rule) -> CapResult<String> {
        self.refuse()
    }
    async fn remove_rule(&self, _: String) -> CapResult<()> {
        self.refuse()
    }
}

pub(crate) struct ProxySlot(pub Arc<dyn Proxy>);

impl wit::Host for ProxySlot {
    async fn add_rule(&mut self, site: String, rule: Rule) -> WitResult<String> {
        Ok(self.0.add_rule(site, rule).await.map_err(Into::into))
    }
    async fn remove_rule(&mut self, rule_id: String) -> WitResult<()> {
        Ok(self.0.remove_rule(rule_id).await.map_err(Into::into))
    }
}

struct HasProxy;
impl wasmtime::component::HasData for HasProxy {
    type Data<'a> = &'a mut ProxySlot;
}

pub(crate) fn link(linker: &mut wasmtime::component::Linker<StoreState>) -> wasmtime::Result<()> {
    wit::add_to_linker::<StoreState, HasProxy>(linker, |s| &mut s.proxy)
}
