//! A loaded plugin and the instances the engine calls.

use std::sync::Arc;
use std::time::{Duration, Instant};

use wasmtime::{Store, UpdateDeadline};
use wasmtime::component::ResourceTable;
use wasmtime_wasi::WasiCtx;

use crate::bindings::{FaultDriver, FaultDriverPre, types as wit};
use crate::capability::{Grants, Slots};
use crate::engine::PluginEngine;
use crate::error::{CallError, LoadError};
use crate::model::{FaultError, FaultInfo, Settings, Target};
use crate::scope::Scope;
use crate::state::{DeadlineReached, Limits, StoreState};

/// Host resources one instance may hold (WASI streams and the like).
const MAX_TABLE_ENTRIES: usize = 1024;
/// Beyond the deadline, how long a hung host call may go on before the
/// call is abandoned.
const HOST_CALL_GRACE: Duration = Duration::from_secs(1);

/// A compiled, checked, pre-instantiated plugin and what it says it is.
pub struct LoadedPlugin {
    engine: PluginEngine,
    name: Arc<str>,
    digest: String,
    grants: Grants,
    info: FaultInfo,
    pre: FaultDriverPre<StoreState>,
}

impl LoadedPlugin {
    pub(crate) async fn new(
        engine: PluginEngine,
        name: &str,
        digest: String,
        grants: Grants,
        pre: FaultDriverPre<StoreState>,
    ) -> Result<Self, LoadError> {
        let mut plugin = LoadedPlugin {
            engine,
            name: name.into(),
            digest,
            grants,
            info: FaultInfo {
                name: String::new(),
                aliases: vec![],
                description: String::new(),
                platforms: vec![],
                intensity: None,
                params: vec![],
                conflicts_with: vec![],
            },
            pre,
        };
        let mut instance = plugin.instantiate(Scope::none()).await.map_err(|e| LoadError::Describe(e.to_string()))?;
        plugin.info = instance.describe().await.map_err(|e| LoadError::Describe(e.to_string()))?;
        check_info(&plugin.info).map_err(LoadError::Describe)?;
        Ok(plugin)
    }

    /// The plugin's name: its file stem or upload name, which grants are keyed by.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// SHA-256 of the component's bytes, hex.
    pub fn digest(&self) -> &str {
        &self.digest
    }

    pub fn grants(&self) -> &Grants {
        &self.grants
    }

    pub fn info(&self) -> &FaultInfo {
        &self.info
    }

    /// A fresh instance: its own store, limits and deadline. Its capability
    /// calls act only within `scope`, which also attributes its logs.
    pub async fn instantiate(&self, scope: Scope) -> Result<FaultInstance, CallError> {
        let engine = &self.engine.inner;
        let caps = &engine.caps;
        let mut table = ResourceTable::new();
        table.set_max_capacity(MAX_TABLE_ENTRIES);
        let state = StoreState {
            // No preopens, no environment, no arguments, no sockets: nothing ambient.
            wasi: WasiCtx::builder().build(),
            table,
            limits: Limits { memory_bytes: engine.config.memory_limit, memory_cap_hit: false },
            caps: Slots::new(caps, &self.name, &scope),
        };
        let mut store = Store::new(&engine.engine, state);
        store.limiter(|s| &mut s.limits);
        // Yield to the async runtime every tick, so a busy guest never holds a
        // worker thread; trap once the call's wall-clock deadline has passed.
        store.epoch_deadline_callback(|ctx| {
            if Instant::now() >= ctx.data().deadline() {
                return Err(DeadlineReached.into());
            }
            Ok(UpdateDeadline::Yield(1))
        });
        let timeout = engine.config.call_timeout;
        let mut instance = FaultInstance { store, bindings: None, poisoned: false, timeout };
        instance.arm();
        let outcome = tokio::time::timeout(timeout + HOST_CALL_GRACE, self.pre.instantiate_async(&mut instance.store)).await;
        instance.bindings = Some(instance.settle("instantiate", outcome)?);
        Ok(instance)
    }
}

/// Sanity of what a driver says about itself; the host relies on it.
fn check_info(info: &FaultInfo) -> Result<(), String> {
    let valid_name = |n: &str| !n.is_empty() && n.len() <= 64 && n.chars().all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_');
    if !valid_name(&info.name) {
        return Err(format!("fault name `{}` must be 1-64 characters of a-z, 0-9 and _", info.name));
    }
    if let Some(alias) = info.aliases.iter().find(|a| !valid_name(a)) {
        return Err(format!("alias `{alias}` must be 1-64 characters of a-z, 0-9 and _"));
    }
    if info.platforms.is_empty() {
        return Err("a fault must name at least one platform".into());
    }
    if let Some(i) = &info.intensity {
        let finite = [i.min, i.max, i.default, i.step].iter().all(|v| v.is_finite());
        if !finite || i.min > i.max || i.default < i.min || i.default > i.max || i.step <= 0.0 {
            return Err(format!("intensity range is inconsistent: {i:?}"));
        }
    }
    Ok(())
}

/// One live instance of a plugin. After a trap or a deadline it is
/// poisoned: the engine starts a fresh one to revert what this one did.
pub struct FaultInstance {
    store: Store<StoreState>,
    bindings: Option<FaultDriver>,
    poisoned: bool,
    timeout: Duration,
}

impl FaultInstance {
    /// Starts a call's clock: the epoch callback and sleeps read this deadline.
    fn arm(&mut self) {
        self.store.data_mut().caps.clock.deadline = Instant::now() + self.timeout;
        self.store.set_epoch_deadline(1);
    }

    /// Turns what a call produced into the caller's answer, poisoning the
    /// instance on any failure of the guest itself.
    fn settle<T>(
        &mut self,
        call: &'static str,
        outcome: Result<wasmtime::Result<T>, tokio::time::error::Elapsed>,
    ) -> Result<T, CallError> {
        let error = match outcome {
            Ok(Ok(value)) => return Ok(value),
            Ok(Err(e)) => e,
            Err(_) => {
                self.poisoned = true;
                return Err(CallError::Deadline { call, ms: self.timeout.as_millis() });
            }
        };
        self.poisoned = true;
        let limits = &self.store.data().limits;
        if limits.memory_cap_hit {
            return Err(CallError::Memory { call, bytes: limits.memory_bytes });
        }
        if error.downcast_ref::<DeadlineReached>().is_some() {
            return Err(CallError::Deadline { call, ms: self.timeout.as_millis() });
        }
        Err(CallError::Trap { call, detail: format!("{error:#}") })
    }

    async fn run<T>(
        &mut self,
        call: &'static str,
        f: impl AsyncFnOnce(&FaultDriver, &mut Store<StoreState>) -> wasmtime::Result<T>,
    ) -> Result<T, CallError> {
        if self.poisoned {
            return Err(CallError::Poisoned);
        }
        self.arm();
        let Some(bindings) = &self.bindings else { return Err(CallError::Poisoned) };
        let outcome = tokio::time::timeout(self.timeout + HOST_CALL_GRACE, f(bindings, &mut self.store)).await;
        self.settle(call, outcome)
    }

    pub async fn describe(&mut self) -> Result<FaultInfo, CallError> {
        let info = self.run("describe", async |b, s| b.faultline_plugin_fault().call_describe(s).await).await?;
        Ok(info.into())
    }

    pub async fn validate(&mut self, settings: &Settings) -> Result<(), CallError> {
        let settings = wit::Settings::from(settings);
        let r = self.run("validate", async |b, s| b.faultline_plugin_fault().call_validate(s, &settings).await).await?;
        r.map_err(|e| CallError::Fault(FaultError::from(e)))
    }

    pub async fn inject(&mut self, target: &Target, settings: &Settings) -> Result<String, CallError> {
        let (target, settings) = (wit::Target::from(target), wit::Settings::from(settings));
        let r = self.run("inject", async |b, s| b.faultline_plugin_fault().call_inject(s, &target, &settings).await).await?;
        r.map_err(|e| CallError::Fault(FaultError::from(e)))
    }

    pub async fn adjust(&mut self, token: &str, settings: &Settings) -> Result<String, CallError> {
        let (token, settings) = (token.to_string(), wit::Settings::from(settings));
        let r = self.run("adjust", async |b, s| b.faultline_plugin_fault().call_adjust(s, &token, &settings).await).await?;
        r.map_err(|e| CallError::Fault(FaultError::from(e)))
    }

    pub async fn revert(&mut self, token: &str) -> Result<(), CallError> {
        let token = token.to_string();
        let r = self.run("revert", async |b, s| b.faultline_plugin_fault().call_revert(s, &token).await).await?;
        r.map_err(|e| CallError::Fault(FaultError::from(e)))
    }

    /// False once a trap or deadline has made this instance unusable.
    pub fn is_usable(&self) -> bool {
        !self.poisoned
    }
}
