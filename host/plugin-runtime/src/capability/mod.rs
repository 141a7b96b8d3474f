//! Host capabilities, one module each (the Spin "factor" pattern): a trait
//! the host implements, the slot a store keeps for it with its scope check,
//! and the function that links its interface. A plugin can only import what
//! was linked for it, so a grant is structural; the slot then keeps each
//! call within the instance's [`Scope`]. Adding a capability is a module
//! and one entry in each list below.

pub mod adb;
pub mod clock;
pub mod docker;
pub mod log;
pub mod proxy;

use std::collections::BTreeSet;
use std::fmt;
use std::sync::Arc;

use serde::{Deserialize, Serialize};

use crate::model::CapabilityError;
use crate::scope::Scope;
use crate::state::StoreState;

/// Result of a capability call.
pub type CapResult<T> = Result<T, CapabilityError>;

/// A capability a plugin can be granted: one WIT interface each.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Capability {
    Log,
    Clock,
    Docker,
    Adb,
    Proxy,
}

impl Capability {
    pub const ALL: [Capability; 5] = [
        Capability::Log,
        Capability::Clock,
        Capability::Docker,
        Capability::Adb,
        Capability::Proxy,
    ];

    /// The interface name in the contract package.
    pub fn interface(self) -> &'static str {
        match self {
            Capability::Log => "log",
            Capability::Clock => "clock",
            Capability::Docker => "docker",
            Capability::Adb => "adb",
            Capability::Proxy => "proxy",
        }
    }

    pub fn parse(s: &str) -> Option<Capability> {
        Capability::ALL.into_iter().find(|c| c.interface() == s)
    }
}

/// The capabilities an operator granted one plugin.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Grants(BTreeSet<Capability>);

impl Grants {
    pub fn new(caps: impl IntoIterator<Item = Capability>) -> Self {
        Grants(caps.into_iter().collect())
    }

    /// Parses a comma-separated list such as `docker,log,clock`.
    pub fn parse(list: &str) -> Result<Self, String> {
        list.split(',')
            .map(str::trim)
            .filter(|s| !s.is_empty())
            .map(|s| Capability::parse(s).ok_or_else(|| format!("unknown capability `{s}`")))
            .collect::<Result<BTreeSet<_>, _>>()
            .map(Grants)
    }

    pub fn allows(&self, cap: Capability) -> bool {
        self.0.contains(&cap)
    }

    pub fn iter(&self) -> impl Iterator<Item = Capability> + '_ {
        self.0.iter().copied()
    }
}

impl fmt::Display for Grants {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.0.is_empty() {
            return f.write_str("none");
        }
        let names: Vec<_> = self.0.iter().map(|c| c.interface()).collect();
        f.write_str(&names.join(", "))
    }
}

/// The host's implementations of every capability, and the operator's
/// policy for them. A capability that this host cannot offer (no Docker
/// engine, no adb server) answers `unavailable`.
#[derive(Clone)]
pub struct HostCapabilities {
    pub log: Arc<dyn log::LogSink>,
    pub docker: Arc<dyn docker::Docker>,
    /// Linux capabilities a plugin may give its helpers.
    pub helper_caps: Arc<docker::HelperCaps>,
    pub adb: Arc<dyn adb::Adb>,
    pub proxy: Arc<dyn proxy::Proxy>,
}

impl Default for HostCapabilities {
    fn default() -> Self {
        HostCapabilities {
            log: Arc::new(log::TracingLog),
            docker: Arc::new(NotConfigured("docker")),
            helper_caps: Arc::default(),
            adb: Arc::new(NotConfigured("adb")),
            proxy: Arc::new(NotConfigured("proxy")),
        }
    }
}

/// Every capability's state in one instance, each bound to its scope.
pub(crate) struct Slots {
    pub log: log::LogSlot,
    pub clock: clock::ClockSlot,
    pub docker: docker::DockerSlot,
    pub adb: adb::AdbSlot,
    pub proxy: proxy::ProxySlot,
}

impl Slots {
    pub(crate) fn new(caps: &HostCapabilities, plugin: &Arc<str>, scope: &Scope) -> Slots {
        Slots {
            log: log::LogSlot::new(caps, plugin, scope),
            clock: clock::ClockSlot::new(),
            docker: docker::DockerSlot::new(caps, scope),
            adb: adb::AdbSlot::new(caps, scope),
            proxy: proxy::ProxySlot::new(caps, scope),
        }
    }
}

/// Links one granted capability's interface.
pub(crate) fn link(cap: Capability, linker: &mut wasmtime::component::Linker<StoreState>) -> wasmtime::Result<()> {
    match cap {
        Capability::Log => log::link(linker),
        Capability::Clock => clock::link(linker),
        Capability::Docker => docker::link(linker),
        Capability::Adb => adb::link(linker),
        Capability::Proxy => proxy::link(linker),
    }
}

/// Stands in for a platform that this host has not configured.
pub struct NotConfigured(pub &'static str);

impl NotConfigured {
    fn refuse<T>(&self) -> CapResult<T> {
        Err(CapabilityError::Unavailable(format!(
            "the {} capability is not configured on this host",
            self.0
        )))
    }
}
