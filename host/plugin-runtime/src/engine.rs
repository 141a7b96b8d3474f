//! The wasmtime engine shared by every plugin: configuration, the epoch
//! ticker, compilation with an on-disk cache, and loading.

use std::hash::{DefaultHasher, Hash, Hasher};
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use sha2::{Digest, Sha256};
use wasmtime::component::{Component, Linker};
use wasmtime::{Config, Engine, InstanceAllocationStrategy, PoolingAllocationConfig};

use crate::bindings::{self, FaultDriverPre};
use crate::capability::{self, Capability, Grants, HostCapabilities};
use crate::error::LoadError;
use crate::plugin::LoadedPlugin;
use crate::state::StoreState;
use crate::{CONTRACT_PACKAGE, CONTRACT_VERSION};

/// How often the epoch advances: the granularity of every deadline.
pub(crate) const EPOCH_TICK: Duration = Duration::from_millis(10);

/// Bytes of each pooled memory and table reset with memset instead of being
/// returned to the kernel: cheaper for the little a fault call touches.
const KEEP_RESIDENT: usize = 256 << 10;

/// WASI packages every Rust guest imports through std. They give nothing
/// ambient: the context has no preopened directory, no environment, no
/// sockets allowed, and stdio goes nowhere.
const ALLOWED_WASI: [&str; 5] = ["io", "cli", "clocks", "random", "filesystem"];

#[derive(Debug, Clone)]
pub struct RuntimeConfig {
    /// Where compiled components are kept; none compiles every load afresh.
    pub cache_dir: Option<PathBuf>,
    /// Wall-clock budget of one call into a plugin, host calls included.
    pub call_timeout: Duration,
    /// Most linear memory one plugin instance may have, in bytes.
    pub memory_limit: usize,
    /// Use wasmtime's pooling allocator: faster instantiation, memory reserved up front.
    pub pooling: bool,
}

impl Default for RuntimeConfig {
    fn default() -> Self {
        RuntimeConfig {
            cache_dir: None,
            call_timeout: Duration::from_secs(30),
            memory_limit: 64 << 20,
            pooling: false,
        }
    }
}

/// Cheap to clone: every clone shares one engine and one ticker.
#[derive(Clone)]
pub struct PluginEngine {
    pub(crate) inner: Arc<Inner>,
}

pub(crate) struct Inner {
    pub engine: Engine,
    pub config: RuntimeConfig,
    pub caps: HostCapabilities,
    compat: String,
    stop_ticker: Arc<AtomicBool>,
}

impl Drop for Inner {
    fn drop(&mut self) {
        self.stop_ticker.store(true, Ordering::Relaxed);
    }
}

impl PluginEngine {
    pub fn new(config: RuntimeConfig, caps: HostCapabilities) -> anyhow::Result<Self> {
        let mut wasm = Config::new();
        wasm.epoch_interruption(true);
        if config.pooling {
            let mut pool = PoolingAllocationConfig::default();
            pool.total_component_instances(256)
                .total_core_instances(1024)
                .total_memories(512)
                .total_tables(512)
                .max_memory_size(config.memory_limit)
                .linear_memory_keep_resident(KEEP_RESIDENT)
                .table_keep_resident(KEEP_RESIDENT);
            wasm.allocation_strategy(InstanceAllocationStrategy::Pooling(pool));
        }
        let engine = Engine::new(&wasm)?;

        let mut hasher = DefaultHasher::new();
        engine.precompile_compatibility_hash().hash(&mut hasher);
        let compat = format!("{:016x}", hasher.finish());

        // A plain thread, not a task: a busy async runtime must not stall deadlines.
        let stop_ticker = Arc::new(AtomicBool::new(false));
        let (ticking, stop) = (engine.clone(), stop_ticker.clone());
        std::thread::Builder::new().name("plugin-epoch".into()).spawn(move || {
            while !stop.load(Ordering::Relaxed) {
                std::thread::sleep(EPOCH_TICK);
                ticking.increment_epoch();
            }
        })?;

        if let Some(dir) = &config.cache_dir {
            std::fs::create_dir_all(dir)?;
        }
        Ok(PluginEngine { inner: Arc::new(Inner { engine, config, caps, compat, stop_ticker }) })
    }

    pub fn config(&self) -> &RuntimeConfig {
        &self.inner.config
    }

    /// Loads a component under a plugin name: checks its imports against the
    /// grants, compiles it (or takes it from the cache), pre-instantiates it,
    /// and asks it to describe itself.
    pub async fn load(&self, name: &str, bytes: &[u8], grants: &Grants) -> Result<LoadedPlugin, LoadError> {
        let digest = hex::encode(Sha256::digest(bytes));
        let component = self.compile(bytes, &digest)?;
        self.check_imports(&component, grants)?;
        let linker = self.linker(grants).map_err(|e| LoadError::Invalid(format!("{e:#}")))?;
        let pre = linker.instantiate_pre(&component).map_err(|e| LoadError::Invalid(format!("{e:#}")))?;
        let pre = FaultDriverPre::new(pre).map_err(|e| LoadError::Invalid(format!("{e:#}")))?;
        LoadedPlugin::new(self.clone(), name, digest, grants.clone(), pre).await
    }

    fn compile(&self, bytes: &[u8], digest: &str) -> Result<Component, LoadError> {
        let engine = &self.inner.engine;
        let Some(dir) = &self.inner.config.cache_dir else {
            return Component::new(engine, bytes).map_err(|e| LoadError::Invalid(format!("{e:#}")));
        };
        let path = dir.join(format!("{digest}-{}.cwasm", self.inner.compat));
        if path.exists() {
            // SAFETY: files in the cache directory are written only by this
            // function, named by the source's digest and the engine's
            // compatibility hash.
            match unsafe { Component::deserialize_file(engine, &path) } {
                Ok(component) => return Ok(component),
                Err(e) => tracing::warn!(path = %path.display(), "discarding unusable cached component: {e:#}"),
            }
        }
        let compiled = engine.precompile_component(bytes).map_err(|e| LoadError::Invalid(format!("{e:#}")))?;
        let partial = path.with_extension(format!("partial-{}", std::process::id()));
        std::fs::write(&partial, &compiled)
            .and_then(|()| std::fs::rename(&partial, &path))
            .map_err(|e| LoadError::Cache(format!("{}: {e}", path.display())))?;
        // SAFETY: `compiled` was produced by this engine a moment ago.
        unsafe { Component::deserialize(engine, &compiled) }.map_err(|e| LoadError::Invalid(format!("{e:#}")))
    }

    /// Refuses a component that imports a capability it was not granted, or
    /// anything this host does not know, naming the import.
    fn check_imports(&self, component: &Component, grants: &Grants) -> Result<(), LoadError> {
        let refuse = |import: &str| LoadError::NotGranted { import: import.to_string(), granted: grants.to_string() };
        for (import, _) in component.component_type().imports(&self.inner.engine) {
            let (package, rest) = import.split_once('/').unwrap_or((import, ""));
            let (interface, version) = rest.split_once('@').unwrap_or((rest, ""));
            if package == CONTRACT_PACKAGE {
                if version != CONTRACT_VERSION {
                    return Err(LoadError::Invalid(format!(
                        "plugin imports `{import}`, but this host speaks {CONTRACT_PACKAGE}@{CONTRACT_VERSION}"
                    )));
                }
                match Capability::parse(interface) {
                    Some(cap) if !grants.allows(cap) => return Err(refuse(import)),
                    Some(_) => {}
                    None if interface == "types" => {}
                    None => return Err(refuse(import)),
                }
            } else if let Some(wasi) = package.strip_prefix("wasi:") {
                if !ALLOWED_WASI.contains(&wasi) {
                    return Err(refuse(import));
                }
            } else {
                return Err(refuse(import));
            }
        }
        Ok(())
    }

    /// Links WASI and exactly the granted capabilities.
    fn linker(&self, grants: &Grants) -> wasmtime::Result<Linker<StoreState>> {
        let mut linker = Linker::new(&self.inner.engine);
        wasmtime_wasi::p2::add_to_linker_async(&mut linker)?;
        bindings::types::add_to_linker::<StoreState, wasmtime::component::HasSelf<StoreState>>(&mut linker, |s| s)?;
        for cap in grants.iter() {
            capability::link(cap, &mut linker)?;
        }
        Ok(linker)
    }
}
