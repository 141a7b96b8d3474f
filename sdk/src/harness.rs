//! Run a plugin's compiled component against a recording host, from the
//! plugin's own tests. The component runs in the same runtime the Faultline
//! host uses (deadline, memory cap, grants); capability calls are recorded
//! and answered from a script instead of touching Docker, adb or a proxy.
//!
//! ```ignore
//! let h = Harness::build(env!("CARGO_MANIFEST_DIR"), "docker,log").await?;
//! let token = h.inject(Harness::container("web"), Harness::settings(50.0)).await?;
//! assert_eq!(h.calls()[0].operation, "docker.pause");
//! h.revert(&token).await?;
//! ```
//!
//! As on the host, each instance acts only within its scope: the targets
//! given to `inject` so far (a revert or adjust of a token for another
//! container is `denied`), never a container labelled
//! `faultline.protected=true`, and helpers only with NET_ADMIN.
//!
//! This checks a plugin's own logic; it is no substitute for running it
//! against a real platform.

use std::collections::{HashMap, VecDeque};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::{Arc, Mutex};

use async_trait::async_trait;
use faultline_plugin_runtime::capability::adb::{Adb, Device, RevertCommand, ShellOutput};
use faultline_plugin_runtime::capability::docker::{
    Container, Docker, ExecOutput, HelperOwner, HelperSpec, Machine, ResourceUsage, StartedHelper,
};
use faultline_plugin_runtime::capability::log::{Level, LogSink};
use faultline_plugin_runtime::capability::proxy::{Proxy, Rule};
use faultline_plugin_runtime::capability::CapResult;
use faultline_plugin_runtime::{Grants, HostCapabilities, LoadedPlugin, PluginEngine, RuntimeConfig, Scope};

pub use faultline_plugin_runtime::CallError;
pub use faultline_plugin_runtime::model::{CapabilityError, FaultError, FaultInfo, ParamValue, Platform, Settings, Target};

/// One capability call the plugin made.
#[derive(Debug, Clone, PartialEq)]
pub struct Call {
    /// `capability.operation`, such as `docker.pause`.
    pub operation: String,
    /// The arguments, rendered with `Debug`.
    pub args: Vec<String>,
}

/// The host side of the harness: records calls, answers them.
#[derive(Default)]
pub struct RecordingHost {
    calls: Mutex<Vec<Call>>,
    logs: Mutex<Vec<(Level, String)>>,
    failures: Mutex<HashMap<String, VecDeque<CapabilityError>>>,
    containers: Mutex<Vec<Container>>,
    counter: Mutex<u64>,
    helpers: Mutex<Vec<HelperOwner>>,
    /// Rule id and the experiment that added it.
    rules: Mutex<Vec<(String, String)>>,
}

impl RecordingHost {
    fn record(&self, operation: &str, args: Vec<String>) -> CapResult<()> {
        self.calls.lock().unwrap().push(Call { operation: operation.into(), args });
        match self.failures.lock().unwrap().get_mut(operation).and_then(VecDeque::pop_front) {
            Some(error) => Err(error),
            None => Ok(()),
        }
    }

    fn next_id(&self, prefix: &str) -> String {
        let mut n = self.counter.lock().unwrap();
        *n += 1;
        format!("{prefix}-{n}")
    }

    fn container(&self, id: &str) -> CapResult<Container> {
        let containers = self.containers.lock().unwrap();
        let found = containers.iter().find(|c| c.id == id || c.name == id).cloned();
        found.ok_or_else(|| CapabilityError::NotFound(format!("no container {id}")))
    }
}

macro_rules! args {
    ($($a:expr),*) => { vec![$(format!("{:?}", $a)),*] };
}

#[async_trait]
impl Docker for RecordingHost {
    async fn engine_info(&self) -> CapResult<Machine> {
        self.record("docker.engine_info", vec![])?;
        Ok(Machine { cpus: 2, memory_bytes: 4 << 30, kernel: "6.1.0".into(), cgroup_driver: "cgroupfs".into() })
    }
    async fn find(&self, selectors: Vec<String>) -> CapResult<Vec<Container>> {
        self.record("docker.find", args!(selectors))?;
        let matches = |c: &Container, s: &String| match s.split_once('=') {
            Some((k, v)) => c.labels.iter().any(|(lk, lv)| lk == k && lv == v),
            None => c.name == *s,
        };
        let containers = self.containers.lock().unwrap();
        Ok(containers.iter().filter(|c| selectors.iter().all(|s| matches(c, s))).cloned().collect())
    }
    async fn inspect(&self, id: String) -> CapResult<Container> {
        self.record("docker.inspect", args!(id))?;
        self.container(&id)
    }
    async fn signal(&self, id: String, signal: String) -> CapResult<()> {
        self.record("docker.signal", args!(id, signal))
    }
    async fn pause(&self, id: String) -> CapResult<()> {
        self.record("docker.pause", args!(id))
    }
    async fn unpause(&self, id: String) -> CapResult<()> {
        self.record("docker.unpause", args!(id))
    }
    async fn restart(&self, id: String, timeout_seconds: u32) -> CapResult<()> {
        self.record("docker.restart", args!(id, timeout_seconds))
    }
    async fn exec(&self, id: String, command: Vec<String>, timeout_ms: u32) -> CapResult<ExecOutput> {
        self.record("docker.exec", args!(id, command, timeout_ms))?;
        Ok(ExecOutput { exit_code: 0, stdout: String::new(), stderr: String::new() })
    }
    async fn copy_in(&self, id: String, path: String, contents: Vec<u8>, mode: u32) -> CapResult<()> {
        self.record("docker.copy_in", args!(id, path, contents.len(), mode))
    }
    async fn run_helper(&self, spec: HelperSpec, experiment: &str) -> CapResult<StartedHelper> {
        self.record("docker.run_helper", args!(spec.target, spec.args, spec.ttl_seconds))?;
        let id = self.next_id("helper");
        let owner = HelperOwner { id: id.clone(), target: spec.target.clone(), experiment: Some(experiment.into()) };
        self.helpers.lock().unwrap().push(owner);
        Ok(StartedHelper { id, report: format!("recorded: {}", spec.args.join(" ")) })
    }
    async fn remove_helper(&self, helper: String) -> CapResult<()> {
        self.record("docker.remove_helper", args!(helper))
    }
    async fn stats(&self, id: String) -> CapResult<ResourceUsage> {
        self.record("docker.stats", args!(id))?;
        let limit = self.container(&id).ok().and_then(|c| c.memory_limit).unwrap_or(1 << 30);
        Ok(ResourceUsage { cpu_percent: 0.0, memory_bytes: 0, memory_limit: limit, online_cpus: 1 })
    }
    async fn protection(&self, id: &str) -> CapResult<Option<String>> {
        let protected = self.container(id).is_ok_and(|c| c.labels.iter().any(|(k, v)| k == "faultline.protected" && v == "true"));
        Ok(protected.then(|| "labelled faultline.protected=true".into()))
    }
    /// Helpers this host started; any other name is no helper.
    async fn helper_owner(&self, id: &str) -> CapResult<Option<HelperOwner>> {
        Ok(self.helpers.lock().unwrap().iter().find(|h| h.id == id).cloned())
    }
}

#[async_trait]
impl Adb for RecordingHost {
    async fn devices(&self) -> CapResult<Vec<Device>> {
        self.record("adb.devices", vec![])?;
        Ok(vec![])
    }
    async fn shell(&self, serial: String, command: String, timeout_ms: u32) -> CapResult<ShellOutput> {
        self.record("adb.shell", args!(serial, command, timeout_ms))?;
        Ok(ShellOutput { exit_code: 0, stdout: String::new(), stderr: String::new() })
    }
    async fn install(&self, serial: String, apk: String, replace: bool) -> CapResult<()> {
        self.record("adb.install", args!(serial, apk, replace))
    }
    async fn emulator_console(&self, serial: String, command: String) -> CapResult<String> {
        self.record("adb.emulator_console", args!(serial, command))?;
        Ok("OK".into())
    }
    async fn arm_watchdog(&self, serial: String, commands: Vec<RevertCommand>, ttl_seconds: u32) -> CapResult<String> {
        self.record("adb.arm_watchdog", args!(serial, commands, ttl_seconds))?;
        Ok(self.next_id("wd").replace("wd-", "wd-0"))
    }
    async fn disarm_watchdog(&self, serial: String, id: String) -> CapResult<()> {
        self.record("adb.disarm_watchdog", args!(serial, id))
    }
    /// Uploaded APKs are named after their package in the harness.
    async fn apk_package(&self, apk: &str) -> CapResult<String> {
        Ok(apk.to_string())
    }
}

#[async_trait]
impl Proxy for RecordingHost {
    async fn add_rule(&self, site: String, rule: Rule, experiment: &str) -> CapResult<String> {
        self.record("proxy.add_rule", args!(site, rule))?;
        let id = self.next_id("rule");
        self.rules.lock().unwrap().push((id.clone(), experiment.into()));
        Ok(id)
    }
    async fn remove_rule(&self, rule_id: String) -> CapResult<()> {
        self.record("proxy.remove_rule", args!(rule_id))
    }
    async fn rule_owner(&self, rule_id: &str) -> CapResult<String> {
        let rules = self.rules.lock().unwrap();
        let owner = rules.iter().find(|(id, _)| id == rule_id).map(|(_, experiment)| experiment.clone());
        owner.ok_or_else(|| CapabilityError::NotFound(format!("no rule {rule_id}")))
    }
}

impl LogSink for RecordingHost {
    fn write(&self, _plugin: &str, _experiment: Option<&str>, level: Level, message: &str) {
        self.logs.lock().unwrap().push((level, message.into()));
    }
}

/// A plugin under test.
pub struct Harness {
    host: Arc<RecordingHost>,
    plugin: LoadedPlugin,
    /// Ids of the targets injected so far: the scope of every instance.
    targets: Mutex<Vec<String>>,
}

impl Harness {
    /// Builds the plugin crate in `manifest_dir` for wasm32-wasip2 and
    /// loads it with `grants` (such as `"docker,log,clock"`).
    pub async fn build(manifest_dir: &str, grants: &str) -> Result<Harness, String> {
        let component = build_component(Path::new(manifest_dir))?;
        let bytes = std::fs::read(&component).map_err(|e| format!("{}: {e}", component.display()))?;
        Self::load(&bytes, grants).await
    }

    /// Loads a component with `grants`, as the host would.
    pub async fn load(component: &[u8], grants: &str) -> Result<Harness, String> {
        let host = Arc::new(RecordingHost::default());
        let capabilities = HostCapabilities {
            log: host.clone(),
            docker: host.clone(),
            adb: host.clone(),
            proxy: host.clone(),
            ..HostCapabilities::default()
        };
        let engine = PluginEngine::new(RuntimeConfig::default(), capabilities).map_err(|e| e.to_string())?;
        let grants = Grants::parse(grants)?;
        let plugin = engine.load("under-test", component, &grants).await.map_err(|e| e.to_string())?;
        Ok(Harness { host, plugin, targets: Mutex::default() })
    }

    pub fn info(&self) -> &FaultInfo {
        self.plugin.info()
    }

    /// Containers that `docker.find` and `docker.inspect` answer with.
    pub fn set_containers(&self, containers: Vec<Container>) {
        *self.host.containers.lock().unwrap() = containers;
    }

    /// Makes the next call of `operation` (such as `docker.pause`) fail.
    pub fn fail_next(&self, operation: &str, error: CapabilityError) {
        self.host.failures.lock().unwrap().entry(operation.into()).or_default().push_back(error);
    }

    /// Capability calls so far, in order.
    pub fn calls(&self) -> Vec<Call> {
        self.host.calls.lock().unwrap().clone()
    }

    /// Forgets the calls recorded so far.
    pub fn clear_calls(&self) {
        self.host.calls.lock().unwrap().clear();
    }

    /// Log messages so far.
    pub fn logs(&self) -> Vec<String> {
        self.host.logs.lock().unwrap().iter().map(|(_, m)| m.clone()).collect()
    }

    /// The scope an experiment over every target injected so far would have.
    fn scope(&self) -> Scope {
        Scope::experiment("harness", self.targets.lock().unwrap().clone())
    }

    // Each call gets a fresh instance, as a restarted host would: a plugin
    // that keeps state between calls fails here first.
    pub async fn validate(&self, settings: Settings) -> Result<(), CallError> {
        self.plugin.instantiate(Scope::none()).await?.validate(&settings).await
    }
    pub async fn inject(&self, target: Target, settings: Settings) -> Result<String, CallError> {
        self.targets.lock().unwrap().push(target.id.clone());
        self.plugin.instantiate(self.scope()).await?.inject(&target, &settings).await
    }
    pub async fn adjust(&self, token: &str, settings: Settings) -> Result<String, CallError> {
        self.plugin.instantiate(self.scope()).await?.adjust(token, &settings).await
    }
    pub async fn revert(&self, token: &str) -> Result<(), CallError> {
        self.plugin.instantiate(self.scope()).await?.revert(token).await
    }

    /// A backend target for a container of this name (its id is the name too).
    pub fn container(name: &str) -> Target {
        Target { platform: Platform::Backend, id: name.into(), name: name.into(), attributes: vec![] }
    }

    /// Settings at an intensity, with no parameters.
    pub fn settings(intensity: f64) -> Settings {
        Settings { intensity, params: vec![], ttl_seconds: 60 }
    }
}

/// A container for `set_containers`.
pub fn container(name: &str, labels: &[(&str, &str)]) -> Container {
    Container {
        id: name.into(),
        name: name.into(),
        image: "test".into(),
        labels: labels.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect(),
        state: "running".into(),
        pid: Some(1),
        restart_count: 0,
        health: None,
        memory_limit: None,
        cpu_limit: None,
    }
}

/// `cargo build --release --target wasm32-wasip2` of one plugin crate, in a
/// target directory of its own so it never waits on the test's own build;
/// once per test process. Returns the component's path.
pub fn build_component(manifest_dir: &Path) -> Result<PathBuf, String> {
    static BUILT: Mutex<Vec<(PathBuf, PathBuf)>> = Mutex::new(Vec::new());
    let mut built = BUILT.lock().unwrap();
    if let Some((_, component)) = built.iter().find(|(dir, _)| dir == manifest_dir) {
        return Ok(component.clone());
    }
    let component = cargo_build(manifest_dir)?;
    built.push((manifest_dir.to_path_buf(), component.clone()));
    Ok(component)
}

fn cargo_build(manifest_dir: &Path) -> Result<PathBuf, String> {
    let exe = std::env::current_exe().map_err(|e| e.to_string())?;
    let target = exe.ancestors().nth(3).ok_or("no target directory above the test binary")?.join("plugin-harness");
    let manifest = manifest_dir.join("Cargo.toml");
    let mut cmd = Command::new(std::env::var("CARGO").unwrap_or_else(|_| "cargo".into()));
    cmd.args(["build", "--release", "--target", "wasm32-wasip2", "--manifest-path"])
        .arg(&manifest)
        .arg("--target-dir")
        .arg(&target);
    for var in ["RUSTFLAGS", "CARGO_ENCODED_RUSTFLAGS", "CARGO_BUILD_TARGET", "CARGO_TARGET_DIR"] {
        cmd.env_remove(var);
    }
    let status = cmd.status().map_err(|e| format!("running cargo: {e}"))?;
    if !status.success() {
        return Err(format!("building {} for wasm32-wasip2 failed", manifest.display()));
    }
    let text = std::fs::read_to_string(&manifest).map_err(|e| e.to_string())?;
    let name = text
        .lines()
        .find_map(|l| l.trim().strip_prefix("name").and_then(|r| r.trim().strip_prefix('=')).map(|v| v.trim().trim_matches('"').to_string()))
        .ok_or("no package name in Cargo.toml")?;
    Ok(target.join("wasm32-wasip2/release").join(format!("{}.wasm", name.replace('-', "_"))))
}
