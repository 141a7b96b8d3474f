//! The fault plugins this host has loaded: built-ins, then the operator's
//! plugins directory, then uploads. The directory is the source of truth for
//! operator plugins: an upload is written there, so it survives a restart.
//! A build that is replaced or unloaded is retired, not dropped: faults it
//! made may still need it to be reverted. Its file moves to
//! `<plugins>/.retired/<digest>.wasm` (out of the loading path) until the
//! engine releases it.

mod grants;

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::{Arc, RwLock};

use faultline_plugin_runtime::{LoadError, LoadedPlugin, PluginEngine};
use serde::Serialize;
use utoipa::ToSchema;

pub use grants::GrantPolicy;

use crate::store::now_ms;

/// Where a plugin came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum Source {
    /// Compiled into the host binary.
    Builtin,
    /// Found in the plugins directory.
    Directory,
    /// Uploaded through the API (and written to the plugins directory).
    Upload,
}

pub struct PluginEntry {
    pub plugin: LoadedPlugin,
    pub source: Source,
    pub loaded_at: i64,
}

#[derive(Debug, thiserror::Error)]
pub enum RegistryError {
    #[error(transparent)]
    Load(#[from] LoadError),
    #[error("plugin name `{0}` must be 1-64 characters of a-z, 0-9, - and _")]
    BadName(String),
    #[error("a plugin named `{0}` is already loaded")]
    Exists(String),
    #[error("no plugin named `{0}` is loaded")]
    NotFound(String),
    #[error("`{0}` is built into the host and cannot be replaced or unloaded")]
    Builtin(String),
    #[error("fault type `{fault}` is already provided by plugin `{owner}`")]
    FaultTaken { fault: String, owner: String },
    #[error("plugins directory: {0}")]
    Io(#[from] std::io::Error),
}

#[derive(Default)]
struct Loaded {
    /// By plugin name.
    plugins: BTreeMap<String, Arc<PluginEntry>>,
    /// Fault names and aliases to plugin names.
    faults: BTreeMap<String, String>,
    /// Replaced or unloaded builds, by digest, kept for their faults' reverts.
    retired: BTreeMap<String, Arc<PluginEntry>>,
}

/// Where retired builds' components are kept, inside the plugins directory.
const RETIRED_DIR: &str = ".retired";

pub struct PluginRegistry {
    engine: PluginEngine,
    dir: PathBuf,
    grants: GrantPolicy,
    loaded: RwLock<Loaded>,
}

/// A built-in plugin: its name, its component, and the grants it needs.
pub struct Builtin {
    pub name: &'static str,
    pub component: &'static [u8],
    pub grants: &'static str,
}

impl PluginRegistry {
    pub fn new(engine: PluginEngine, dir: PathBuf, grants: GrantPolicy) -> Self {
        PluginRegistry { engine, dir, grants, loaded: RwLock::default() }
    }

    pub fn engine(&self) -> &PluginEngine {
        &self.engine
    }

    /// Loads the built-ins; a built-in that fails to load is a broken build.
    pub async fn load_builtins(&self, builtins: &[Builtin]) -> anyhow::Result<()> {
        for b in builtins {
            let grants = faultline_plugin_runtime::Grants::parse(b.grants).map_err(anyhow::Error::msg)?;
            let plugin = self.engine.load(b.name, b.component, &grants).await?;
            self.register(plugin, Source::Builtin)?;
        }
        Ok(())
    }

    /// Loads every `NAME.wasm` in the plugins directory. A plugin that fails
    /// is reported and skipped: one bad file must not stop the host.
    pub async fn load_directory(&self) -> Vec<(String, RegistryError)> {
        let mut failures = vec![];
        let entries = match std::fs::read_dir(&self.dir) {
            Ok(entries) => entries,
            Err(e) => return vec![(self.dir.display().to_string(), e.into())],
        };
        let mut paths: Vec<PathBuf> = entries.filter_map(|e| e.ok().map(|e| e.path())).collect();
        paths.sort();
        for path in paths.into_iter().filter(|p| p.extension().is_some_and(|e| e == "wasm")) {
            let name = path.file_stem().unwrap_or_default().to_string_lossy().to_string();
            let outcome = async {
                check_name(&name)?;
                let bytes = std::fs::read(&path)?;
                let plugin = self.engine.load(&name, &bytes, &self.grants.for_plugin(&name)).await?;
                self.register(plugin, Source::Directory)
            };
            match outcome.await {
                Ok(entry) => tracing::info!(plugin = %name, fault = %entry.plugin.info().name, "loaded plugin from directory"),
                Err(e) => {
                    tracing::warn!(plugin = %name, "plugin not loaded: {e}");
                    failures.push((name, e));
                }
            }
        }
        failures
    }

    /// Loads an uploaded component, writes it to the plugins directory and
    /// makes it available at once. With `replace`, an operator plugin of the
    /// same name is swapped out; experiments running on it keep the old code.
    pub async fn install(&self, name: &str, bytes: &[u8], replace: bool) -> Result<Arc<PluginEntry>, RegistryError> {
        check_name(name)?;
        match self.plugin(name) {
            Some(old) if old.source == Source::Builtin => return Err(RegistryError::Builtin(name.into())),
            Some(_) if !replace => return Err(RegistryError::Exists(name.into())),
            _ => {}
        }
        let plugin = self.engine.load(name, bytes, &self.grants.for_plugin(name)).await?;
        self.check_faults_free(&plugin)?;
        // Written aside first: the old build is retired only once the new
        // one's file is safely down.
        let path = self.dir.join(format!("{name}.wasm"));
        let partial = path.with_extension("wasm.partial");
        std::fs::write(&partial, bytes)?;
        self.retire(name)?;
        std::fs::rename(&partial, &path)?;
        self.register(plugin, Source::Upload)
    }

    /// Unloads an operator plugin; its build is retired with its file (see
    /// the module's header), not deleted.
    pub fn unload(&self, name: &str) -> Result<(), RegistryError> {
        let entry = self.plugin(name).ok_or_else(|| RegistryError::NotFound(name.into()))?;
        if entry.source == Source::Builtin {
            return Err(RegistryError::Builtin(name.into()));
        }
        self.retire(name)?;
        let mut loaded = self.loaded.write().expect("plugin registry lock");
        loaded.plugins.remove(name);
        loaded.faults.retain(|_, owner| owner != name);
        Ok(())
    }

    /// Keeps the current build of an operator plugin aside, with its file,
    /// before it is replaced or unloaded.
    fn retire(&self, name: &str) -> Result<(), RegistryError> {
        let Some(old) = self.plugin(name).filter(|p| p.source != Source::Builtin) else { return Ok(()) };
        let digest = old.plugin.digest().to_string();
        std::fs::create_dir_all(self.dir.join(RETIRED_DIR))?;
        match std::fs::rename(self.dir.join(format!("{name}.wasm")), self.retired_path(&digest)) {
            Err(e) if e.kind() != std::io::ErrorKind::NotFound => return Err(e.into()),
            _ => {}
        }
        self.loaded.write().expect("plugin registry lock").retired.insert(digest, old);
        Ok(())
    }

    fn retired_path(&self, digest: &str) -> PathBuf {
        self.dir.join(RETIRED_DIR).join(format!("{digest}.wasm"))
    }

    /// The build of plugin `name` with this digest: the loaded one, a
    /// retired one (loaded again from its kept file after a restart), or,
    /// when that build is gone, whatever `name` is now.
    pub async fn build(&self, name: &str, digest: Option<&str>) -> Option<Arc<PluginEntry>> {
        let current = self.plugin(name);
        let Some(digest) = digest else { return current };
        if let Some(entry) = current.as_ref().filter(|c| c.plugin.digest() == digest) {
            return Some(entry.clone());
        }
        if let Some(entry) = self.loaded.read().expect("plugin registry lock").retired.get(digest) {
            return Some(entry.clone());
        }
        if let Ok(bytes) = std::fs::read(self.retired_path(digest)) {
            match self.engine.load(name, &bytes, &self.grants.for_plugin(name)).await {
                Ok(plugin) => {
                    let entry = Arc::new(PluginEntry { plugin, source: Source::Directory, loaded_at: now_ms() });
                    self.loaded.write().expect("plugin registry lock").retired.insert(digest.into(), entry.clone());
                    return Some(entry);
                }
                Err(e) => tracing::warn!(plugin = name, digest, "a retired build did not load: {e}"),
            }
        }
        current
    }

    /// Digests of the retired builds, in memory or kept on disk by an earlier process.
    pub fn retired(&self) -> Vec<String> {
        let mut digests: Vec<String> = self.loaded.read().expect("plugin registry lock").retired.keys().cloned().collect();
        let kept = std::fs::read_dir(self.dir.join(RETIRED_DIR)).into_iter().flatten().flatten();
        digests.extend(kept.filter_map(|f| f.path().file_stem().map(|s| s.to_string_lossy().into_owned())));
        digests.sort();
        digests.dedup();
        digests
    }

    /// Drops a retired build that no fault needs any more, and its file.
    pub fn release(&self, digest: &str) {
        self.loaded.write().expect("plugin registry lock").retired.remove(digest);
        let _ = std::fs::remove_file(self.retired_path(digest));
    }

    /// The plugin that provides a fault type, by name or alias.
    pub fn fault(&self, fault_type: &str) -> Option<Arc<PluginEntry>> {
        let loaded = self.loaded.read().expect("plugin registry lock");
        let owner = loaded.faults.get(fault_type)?;
        loaded.plugins.get(owner).cloned()
    }

    pub fn plugin(&self, name: &str) -> Option<Arc<PluginEntry>> {
        self.loaded.read().expect("plugin registry lock").plugins.get(name).cloned()
    }

    pub fn list(&self) -> Vec<Arc<PluginEntry>> {
        self.loaded.read().expect("plugin registry lock").plugins.values().cloned().collect()
    }

    /// Every fault type name and alias, sorted.
    pub fn fault_names(&self) -> Vec<String> {
        self.loaded.read().expect("plugin registry lock").faults.keys().cloned().collect()
    }

    fn check_faults_free(&self, plugin: &LoadedPlugin) -> Result<(), RegistryError> {
        let loaded = self.loaded.read().expect("plugin registry lock");
        let info = plugin.info();
        for fault in std::iter::once(&info.name).chain(&info.aliases) {
            if let Some(owner) = loaded.faults.get(fault).filter(|owner| *owner != plugin.name()) {
                return Err(RegistryError::FaultTaken { fault: fault.clone(), owner: owner.clone() });
            }
        }
        Ok(())
    }

    fn register(&self, plugin: LoadedPlugin, source: Source) -> Result<Arc<PluginEntry>, RegistryError> {
        self.check_faults_free(&plugin)?;
        let mut loaded = self.loaded.write().expect("plugin registry lock");
        let name = plugin.name().to_string();
        loaded.faults.retain(|_, owner| *owner != name);
        let info = plugin.info();
        for fault in std::iter::once(&info.name).chain(&info.aliases) {
            loaded.faults.insert(fault.clone(), name.clone());
        }
        let entry = Arc::new(PluginEntry { plugin, source, loaded_at: now_ms() });
        loaded.plugins.insert(name, entry.clone());
        Ok(entry)
    }
}

fn check_name(name: &str) -> Result<(), RegistryError> {
    let ok = !name.is_empty()
        && name.len() <= 64
        && name.chars().all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-' || c == '_');
    if ok { Ok(()) } else { Err(RegistryError::BadName(name.into())) }
}
