//! The proxy capability: the fault proxy. Plugins put rules on a site
//! (`faultline:plugin/proxy`); the frontend platform opens a listener per
//! site for each experiment, which applies that experiment's rules (proxy
//! mode) or serves them to the service worker (service-worker mode).

mod listener;
pub mod rules;
mod throttle;
pub mod traffic;

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_trait::async_trait;
use faultline_plugin_runtime::capability::CapResult;
use faultline_plugin_runtime::capability::proxy::{Proxy, Rule};
use faultline_plugin_runtime::model::CapabilityError;
use hyper_util::client::legacy::Client;
use hyper_util::rt::TokioExecutor;

pub use listener::{Listener, ListenerSpec, OWN_PREFIX, WORKER_PATH};
pub use rules::{FeedAction, FeedRule, RuleBook, RuleError};
pub use traffic::{Percentiles, Traffic, TrafficSummary};

use listener::Shared;

/// How often a service worker asks for its rules again.
pub const FEED_POLL_MS: u64 = 1000;
/// How long an idle connection to an origin is kept for reuse.
const POOL_IDLE: Duration = Duration::from_secs(30);

/// The fault proxy: the rule book and every open listener.
pub struct FaultProxy {
    shared: Arc<Shared>,
    listeners: Mutex<HashMap<String, Arc<Listener>>>,
}

impl Default for FaultProxy {
    fn default() -> Self {
        let mut connector = hyper_util::client::legacy::connect::HttpConnector::new();
        connector.set_nodelay(true);
        connector.set_connect_timeout(Some(Duration::from_secs(10)));
        let client = Client::builder(TokioExecutor::new()).pool_idle_timeout(POOL_IDLE).build(connector);
        FaultProxy { shared: Arc::new(Shared { rules: RuleBook::default(), client }), listeners: Mutex::default() }
    }
}

impl FaultProxy {
    pub fn rules(&self) -> &RuleBook {
        &self.shared.rules
    }

    /// Opens a listener in front of a site.
    pub async fn open(&self, spec: ListenerSpec) -> std::io::Result<Arc<Listener>> {
        let id = format!("listener-{}", uuid::Uuid::now_v7());
        let listener = Listener::open(id.clone(), spec, self.shared.clone()).await?;
        let mut listeners = self.listeners.lock().expect("listeners lock");
        listeners.retain(|_, l| !l.is_closed());
        listeners.insert(id, listener.clone());
        Ok(listener)
    }

    /// Closes a listener; closing one that is gone does nothing.
    pub async fn close(&self, id: &str) -> bool {
        let found = self.listeners.lock().expect("listeners lock").remove(id);
        match found {
            Some(listener) => {
                listener.close().await;
                true
            }
            None => false,
        }
    }

    pub fn listener(&self, id: &str) -> Option<Arc<Listener>> {
        self.listeners.lock().expect("listeners lock").get(id).filter(|l| !l.is_closed()).cloned()
    }

    /// The open listener whose own origin is `origin` (a page loaded through it).
    pub fn listener_at(&self, origin: &str) -> Option<Arc<Listener>> {
        let listeners = self.listeners.lock().expect("listeners lock");
        listeners.values().find(|l| !l.is_closed() && l.url() == origin.trim_end_matches('/')).cloned()
    }

    /// How many listeners are open (for tests and the metrics).
    pub fn open_listeners(&self) -> usize {
        self.listeners.lock().expect("listeners lock").values().filter(|l| !l.is_closed()).count()
    }
}

#[async_trait]
impl Proxy for FaultProxy {
    async fn add_rule(&self, site: String, rule: Rule, experiment: &str) -> CapResult<String> {
        self.shared.rules.add(&site, rule, experiment).map_err(|e| CapabilityError::Failed(e.to_string()))
    }

    async fn remove_rule(&self, rule_id: String) -> CapResult<()> {
        self.shared.rules.remove(&rule_id);
        Ok(())
    }

    async fn rule_owner(&self, rule_id: &str) -> CapResult<String> {
        self.shared.rules.owner(rule_id).ok_or_else(|| CapabilityError::NotFound(format!("rule `{rule_id}`")))
    }
}
