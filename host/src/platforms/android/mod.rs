//! The Android platform: apps on an emulator or a connected device,
//! reached through an adb server (the adb capability). A start resolves
//! the packages on the device it will use; before the baseline the
//! platform holds the device (a lease), launches the emulator when one is
//! configured, installs the uploaded APK, clears the app's data when asked,
//! sets the screen density, routes the device's HTTP traffic through the
//! fault proxy when a fault acts on it, and starts the app. Each of these
//! is a resource, journaled like an injection and released on every exit
//! path; those that change the device carry a watchdog on the device, so
//! they end at their time-to-live even if the host dies.

pub mod apks;
pub mod devices;
pub mod options;
pub mod profiles;
pub mod readings;
pub mod session;

use std::collections::HashMap;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_trait::async_trait;
use bytes::Bytes;
use faultline_plugin_runtime::capability::adb::RevertCommand;
use faultline_plugin_runtime::model::{CapabilityError, Platform as PlatformKind, Target};
use serde::{Deserialize, Serialize};

use self::apks::ApkStore;
use self::devices::{Leases, Placement};
use self::options::{AndroidConfig, AndroidOptions, Settings};
use self::session::Session;
use super::{Observation, Platform, Resolved, ResolveError, Resource, Verdict};
use crate::capabilities::adb::AdbHost;
use crate::capabilities::proxy::{FaultProxy, ListenerSpec, Traffic};
use crate::engine::Plan;
use crate::store::{Store, now_ms};

/// Budget of a command the platform runs while setting up or releasing.
const SETUP_TIMEOUT: Duration = Duration::from_secs(30);
/// What Android accepts as a package name: two or more segments, each a
/// letter then letters, digits and underscores.
fn valid_package(name: &str) -> bool {
    let segments: Vec<&str> = name.split('.').collect();
    segments.len() >= 2
        && segments.iter().all(|s| s.chars().next().is_some_and(|c| c.is_ascii_alphabetic()) && s.chars().all(|c| c.is_ascii_alphanumeric() || c == '_'))
}

/// What the platform put in place, as its journal row keeps it: enough to
/// release it from the row alone, after a restart too.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
enum Held {
    DeviceLease { serial: String, experiment: String },
    Emulator { serial: String },
    InstalledApk { serial: String, package: String, fresh: bool },
    DisplayDensity { serial: String, watchdog: String },
    DeviceProxy { serial: String, port: u16, watchdog: String, listener: String },
}

impl Held {
    fn kind(&self) -> &'static str {
        match self {
            Held::DeviceLease { .. } => "device_lease",
            Held::Emulator { .. } => "emulator",
            Held::InstalledApk { .. } => "installed_apk",
            Held::DisplayDensity { .. } => "display_density",
            Held::DeviceProxy { .. } => "device_proxy",
        }
    }

    fn resource(&self, target: &str, address: String, ttl_seconds: u32) -> Resource {
        Resource {
            kind: self.kind().into(),
            target: target.into(),
            address,
            handle: serde_json::to_string(self).expect("a held resource serializes"),
            expires_at: now_ms() + i64::from(ttl_seconds) * 1000,
            journal_id: String::new(),
        }
    }
}

pub struct AndroidPlatform {
    adb: Arc<AdbHost>,
    apks: Arc<ApkStore>,
    store: Store,
    proxy: Arc<FaultProxy>,
    config: AndroidConfig,
    leases: Leases,
    sessions: Mutex<HashMap<String, Arc<Session>>>,
    /// Emulators this host launched, by serial.
    emulators: Mutex<HashMap<String, tokio::process::Child>>,
}

fn options(value: &serde_json::Value) -> Result<AndroidOptions, ResolveError> {
    if value.is_null() {
        return Ok(AndroidOptions::default());
    }
    serde_json::from_value(value.clone()).map_err(|e| ResolveError::Invalid(e.to_string()))
}

fn attribute<'a>(target: &'a Target, name: &str) -> Option<&'a str> {
    target.attributes.iter().find(|(k, _)| k == name).map(|(_, v)| v.as_str())
}

/// A capability error while setting up, as the start's refusal.
fn setup_error(what: &str, e: CapabilityError) -> ResolveError {
    match e {
        CapabilityError::Unavailable(why) | CapabilityError::Timeout(why) => ResolveError::Unavailable(format!("{what}: {why}")),
        other => ResolveError::Refused("device_setup_failed", format!("{what}: {other}")),
    }
}

impl AndroidPlatform {
    pub fn new(adb: Arc<AdbHost>, apks: Arc<ApkStore>, store: Store, proxy: Arc<FaultProxy>, config: AndroidConfig) -> Self {
        AndroidPlatform { adb, apks, store, proxy, config, leases: Leases::default(), sessions: Mutex::default(), emulators: Mutex::default() }
    }

    pub fn apks(&self) -> &Arc<ApkStore> {
        &self.apks
    }

    pub fn adb(&self) -> &Arc<AdbHost> {
        &self.adb
    }

    fn session(&self, experiment: &str) -> Option<Arc<Session>> {
        self.sessions.lock().expect("sessions lock").get(experiment).cloned()
    }

    async fn shell(&self, serial: &str, command: &str) -> Result<crate::capabilities::adb::Shell, CapabilityError> {
        self.adb.shell(serial, command, SETUP_TIMEOUT).await
    }

    /// The launchable activity of an installed package, as the launcher resolves it.
    async fn launcher_activity(&self, serial: &str, package: &str) -> Option<String> {
        let query = format!("cmd package resolve-activity --brief -a android.intent.action.MAIN -c android.intent.category.LAUNCHER {package}");
        let out = self.shell(serial, &query).await.ok()?;
        let component = out.stdout.lines().rev().map(str::trim).find(|l| l.contains('/'))?;
        let (pkg, class) = component.split_once('/')?;
        Some(if let Some(relative) = class.strip_prefix('.') { format!("{pkg}.{relative}") } else { class.to_string() })
    }

    async fn installed(&self, serial: &str, package: &str) -> Result<bool, CapabilityError> {
        Ok(self.shell(serial, &format!("pm path {package}")).await?.stdout.contains("package:"))
    }

    /// Starts an app as the launcher does, and waits for it to be up.
    async fn start_app(&self, target: &Target) -> Result<(), String> {
        let (serial, package) = (attribute(target, "serial").unwrap_or_default(), target.name.as_str());
        let command = match attribute(target, "activity").filter(|a| !a.is_empty()) {
            Some(activity) => format!("am start -W -n {package}/{activity} -a android.intent.action.MAIN -c android.intent.category.LAUNCHER"),
            None => format!("monkey -p {package} -c android.intent.category.LAUNCHER 1"),
        };
        let out = self.shell(serial, &command).await.map_err(|e| e.to_string())?;
        if !out.ok() || out.stdout.contains("Error") || out.stderr.contains("Error") {
            return Err(format!("`{command}` failed: {} {}", out.stdout.trim(), out.stderr.trim()));
        }
        Ok(())
    }

    /// Everything `acquire` does, recording each resource as it is put in
    /// place, so a failure half way releases what was done.
    async fn set_up(&self, experiment: &str, plan: &Plan, done: &mut Vec<Resource>) -> Result<Arc<Session>, ResolveError> {
        let settings = Settings::new(&options(&plan.options)?, &self.config).map_err(ResolveError::Invalid)?;
        let first = plan.targets.first().ok_or_else(|| ResolveError::Invalid("no package to run".into()))?;
        let serial = attribute(first, "serial").unwrap_or_default().to_string();
        let ttl = plan.ttl_seconds;
        let watchdog_ttl = ttl;

        if let Err(holder) = self.leases.take(&serial, experiment) {
            return Err(ResolveError::Conflict(format!("device {serial} is held by experiment {holder}")));
        }
        done.push(Held::DeviceLease { serial: serial.clone(), experiment: experiment.into() }.resource(&serial, serial.clone(), ttl));

        if attribute(first, "launch") == Some("true") {
            self.launch(&serial, &settings, first, ttl, done).await?;
        } else {
            devices::wait_for_boot(&self.adb, &serial, self.config.boot_timeout, || None)
                .await
                .map_err(|why| ResolveError::Refused("device_not_ready", why))?;
        }
        if let Some(wanted) = settings.sdk_version {
            let sdk = self.shell(&serial, "getprop ro.build.version.sdk").await.map_err(|e| setup_error("reading the API level", e))?;
            if sdk.stdout.trim() != wanted.to_string() {
                return Err(ResolveError::Refused("sdk_mismatch", format!("device {serial} runs API level {}, not {wanted}", sdk.stdout.trim())));
            }
        }
        if let Some(apk) = &settings.apk {
            let row = self.apks.get(apk).await.map_err(|e| ResolveError::Unavailable(e.to_string()))?.ok_or_else(|| unknown_apk(apk))?;
            let fresh = !self.installed(&serial, &row.package).await.map_err(|e| setup_error("reading the installed packages", e))?;
            self.adb.install_file(&serial, std::path::Path::new(&row.path), true).await.map_err(|e| setup_error(&format!("installing {apk}"), e))?;
            done.push(Held::InstalledApk { serial: serial.clone(), package: row.package.clone(), fresh }.resource(&row.package, serial.clone(), ttl));
        }
        for target in &plan.targets {
            if !self.installed(&serial, &target.name).await.map_err(|e| setup_error("reading the installed packages", e))? {
                return Err(ResolveError::NoMatch(vec![format!("{} (not installed on {serial}; upload its APK and name it in `apk`)", target.name)]));
            }
            if settings.reset_app_state {
                let cleared = self.shell(&serial, &format!("pm clear {}", target.name)).await.map_err(|e| setup_error("clearing the app's data", e))?;
                if !cleared.stdout.contains("Success") {
                    return Err(ResolveError::Refused("device_setup_failed", format!("`pm clear {}`: {}", target.name, cleared.stdout.trim())));
                }
            }
        }
        if let Some(density) = settings.screen_density {
            let watchdog = self.adb.arm_watchdog(&serial, &[RevertCommand::Shell("cmd window density reset".into())], watchdog_ttl).await.map_err(|e| setup_error("arming a watchdog", e))?;
            done.push(Held::DisplayDensity { serial: serial.clone(), watchdog }.resource(&serial, format!("{density} dpi"), ttl));
            self.shell(&serial, &format!("cmd window density {density}")).await.map_err(|e| setup_error("setting the screen density", e))?;
        }
        let traffic = match plan.capabilities.iter().any(|c| c == "proxy") {
            true => Some(self.intercept(experiment, &serial, first, ttl, done).await?),
            false => None,
        };
        for target in &plan.targets {
            self.start_app(target).await.map_err(|why| ResolveError::Refused("app_did_not_start", why))?;
        }
        let since_s = readings::device_time(&self.adb, &serial).await.map_err(|why| ResolveError::Refused("device_setup_failed", why))?;
        let anr_before = readings::last_anr(&self.adb, &serial).await;
        let packages = plan.targets.iter().map(|t| t.name.clone()).collect();
        Ok(Arc::new(Session::new(experiment, &serial, packages, settings.expected, since_s, anr_before, traffic)))
    }

    /// Launches the experiment's emulator and waits for it to boot.
    async fn launch(&self, serial: &str, settings: &Settings, target: &Target, ttl: u32, done: &mut Vec<Resource>) -> Result<(), ResolveError> {
        let program = self.config.emulator.clone().ok_or_else(|| ResolveError::Invalid("no emulator is configured".into()))?;
        let avd = attribute(target, "avd").unwrap_or_default().to_string();
        let port = devices_port(serial)?;
        let child = devices::launch(&program, &avd, port, settings, self.adb.config().server.port())
            .map_err(|e| ResolveError::Unavailable(format!("launching {} failed: {e}", program.display())))?;
        self.emulators.lock().expect("emulators lock").insert(serial.into(), child);
        done.push(Held::Emulator { serial: serial.into() }.resource(serial, format!("{} -avd {avd} -port {port}", program.display()), ttl));
        let exited = || {
            let mut emulators = self.emulators.lock().expect("emulators lock");
            let status = emulators.get_mut(serial).and_then(|c| c.try_wait().ok().flatten())?;
            Some(format!("the emulator exited ({status}) before it booted"))
        };
        match devices::wait_for_boot(&self.adb, serial, self.config.boot_timeout, exited).await {
            Ok(()) => Ok(()),
            Err(why) => {
                let said = self.emulator_stderr(serial).await;
                Err(ResolveError::Refused("emulator_failed", format!("{why}{said}")))
            }
        }
    }

    /// What a launched emulator that exited said, for the refusal.
    async fn emulator_stderr(&self, serial: &str) -> String {
        use tokio::io::AsyncReadExt;
        let stderr = self.emulators.lock().expect("emulators lock").get_mut(serial).and_then(|c| c.stderr.take());
        let Some(mut stderr) = stderr else { return String::new() };
        let mut said = String::new();
        let _ = tokio::time::timeout(Duration::from_secs(1), stderr.read_to_string(&mut said)).await;
        match said.trim() {
            "" => String::new(),
            said => format!(": {}", said.lines().take(5).collect::<Vec<_>>().join(" / ")),
        }
    }

    /// Routes the device's HTTP traffic through a forward-proxy listener of
    /// the fault proxy: the listener on the host's loopback, `adb reverse`
    /// of its port, the device's global HTTP proxy pointed at it, and a
    /// watchdog that clears the setting at its time-to-live.
    async fn intercept(&self, experiment: &str, serial: &str, target: &Target, ttl: u32, done: &mut Vec<Resource>) -> Result<Arc<Traffic>, ResolveError> {
        let traffic = Arc::new(Traffic::default());
        self.proxy.rules().set_deadline(experiment, now_ms() + i64::from(ttl) * 1000);
        let spec = ListenerSpec {
            site: target.id.clone(),
            forward: true,
            // The emulator's name for the host machine's loopback.
            loopback_alias: serial.starts_with("emulator-").then(|| "10.0.2.2".to_string()),
            experiment: experiment.into(),
            bind: SocketAddr::from(([127, 0, 0, 1], 0)),
            apply_rules: true,
            ttl: Duration::from_secs(u64::from(ttl)),
            worker_script: Bytes::new(),
            traffic: traffic.clone(),
        };
        let listener = self.proxy.open(spec).await.map_err(|e| ResolveError::Conflict(format!("the fault proxy cannot listen for {serial}: {e}")))?;
        let port = listener.address.port();
        let clear = RevertCommand::Shell("settings put global http_proxy :0".into());
        let watchdog = match self.adb.arm_watchdog(serial, &[clear], ttl).await {
            Ok(watchdog) => watchdog,
            Err(e) => {
                self.proxy.close(&listener.id).await;
                return Err(setup_error("arming a watchdog", e));
            }
        };
        let held = Held::DeviceProxy { serial: serial.into(), port, watchdog, listener: listener.id.clone() };
        done.push(held.resource(&target.id, listener.url(), ttl));
        self.adb.reverse(serial, port).await.map_err(|e| setup_error("adb reverse", e))?;
        let set = self.shell(serial, &format!("settings put global http_proxy 127.0.0.1:{port}")).await.map_err(|e| setup_error("setting the device's HTTP proxy", e))?;
        if !set.ok() {
            return Err(ResolveError::Refused("device_setup_failed", format!("setting the device's HTTP proxy: {}", set.stderr.trim())));
        }
        Ok(traffic)
    }

    /// Shuts down an emulator this host launched (or, after a restart, one
    /// it can only reach through the console).
    async fn shut_down_emulator(&self, serial: &str) {
        let _ = self.adb.console(serial, "kill").await;
        let child = self.emulators.lock().expect("emulators lock").remove(serial);
        if let Some(mut child) = child
            && tokio::time::timeout(Duration::from_secs(10), child.wait()).await.is_err()
        {
            let _ = child.kill().await;
        }
    }
}

fn unknown_apk(apk: &str) -> ResolveError {
    ResolveError::Refused("unknown_apk", format!("no uploaded APK `{apk}` (upload it with POST /upload/apk; GET /apks lists them)"))
}

fn devices_port(serial: &str) -> Result<u16, ResolveError> {
    crate::capabilities::adb::console::port_of(serial).map_err(|e| ResolveError::Invalid(e.to_string()))
}

/// A device-side release that could not reach the device is retried by
/// the reconciler until its time-to-live (the device's watchdog has it).
fn release_error(what: &str, e: CapabilityError) -> String {
    format!("{what}: {e}")
}

#[async_trait]
impl Platform for AndroidPlatform {
    fn kind(&self) -> PlatformKind {
        PlatformKind::Android
    }

    /// The packages, on the device the experiment will use. With an APK,
    /// its package must be one of them; without, each must be installed.
    async fn resolve(&self, selectors: &[String], plan_options: &serde_json::Value) -> Result<Resolved, ResolveError> {
        let options = options(plan_options)?;
        let settings = Settings::new(&options, &self.config).map_err(ResolveError::Invalid)?;
        if let Some(bad) = selectors.iter().find(|p| !valid_package(p)) {
            return Err(ResolveError::Invalid(format!("`{bad}` is not an Android package name (such as com.example.shop)")));
        }
        let apk = match &settings.apk {
            Some(id) => Some(self.apks.get(id).await.map_err(|e| ResolveError::Unavailable(e.to_string()))?.ok_or_else(|| unknown_apk(id))?),
            None => None,
        };
        if let Some(apk) = &apk
            && !selectors.contains(&apk.package)
        {
            return Err(ResolveError::Refused(
                "package_mismatch",
                format!("APK {} is the package {}, which the targets ({}) do not name", apk.id, apk.package, selectors.join(", ")),
            ));
        }
        let wanted = self.config.serial.clone();
        let placement = devices::place(&self.adb, &settings, self.config.emulator.as_deref(), wanted.as_deref(), &self.leases).await?;
        let serial = placement.serial();
        let mut resolved = Resolved::default();
        for package in selectors {
            let activity = match (&apk, &placement) {
                (Some(apk), _) if apk.package == *package => apk.activity.clone(),
                (_, Placement::Connected { .. }) => {
                    if !self.installed(&serial, package).await.map_err(|e| setup_error("reading the installed packages", e))? {
                        return Err(ResolveError::NoMatch(vec![format!("{package} (not installed on {serial}; upload its APK and name it in `apk`)")]));
                    }
                    self.launcher_activity(&serial, package).await.unwrap_or_default()
                }
                // Checked once the emulator has booted.
                (_, Placement::Launch { .. }) => String::new(),
            };
            let id = format!("{serial}/{package}");
            let mut attributes = vec![
                ("serial".to_string(), serial.clone()),
                ("package".to_string(), package.clone()),
                ("activity".to_string(), activity),
                ("emulator".to_string(), serial.starts_with("emulator-").to_string()),
                ("network_profile".to_string(), settings.profile.emulator.to_string()),
                ("up_kbps".to_string(), settings.profile.up_kbps.to_string()),
                ("down_kbps".to_string(), settings.profile.down_kbps.to_string()),
                ("should_recover".to_string(), settings.expected.should_recover.unwrap_or(false).to_string()),
                // Fault rules for the app's HTTP traffic are filed under the target.
                ("site".to_string(), id.clone()),
            ];
            if let Placement::Launch { avd, .. } = &placement {
                attributes.push(("launch".into(), "true".into()));
                attributes.push(("avd".into(), avd.clone()));
            }
            resolved.targets.push(Target { platform: PlatformKind::Android, id, name: package.clone(), attributes });
        }
        Ok(resolved)
    }

    async fn acquire(&self, experiment: &str, plan: &Plan) -> Result<Vec<Resource>, ResolveError> {
        let mut done = vec![];
        match self.set_up(experiment, plan, &mut done).await {
            Ok(session) => {
                self.sessions.lock().expect("sessions lock").insert(experiment.into(), session);
                Ok(done)
            }
            Err(e) => {
                // Undone in reverse: the app's proxy before the lease.
                for resource in done.iter().rev() {
                    if let Err(why) = self.release(resource).await {
                        tracing::error!(experiment, "undoing {} after a failed start: {why}; it ends at its time-to-live", resource.kind);
                    }
                }
                Err(e)
            }
        }
    }

    async fn release(&self, resource: &Resource) -> Result<(), String> {
        let held: Held = serde_json::from_str(&resource.handle).map_err(|e| format!("the journaled {} is unreadable: {e}", resource.kind))?;
        match held {
            Held::DeviceLease { serial, experiment } => {
                self.leases.release(&serial, &experiment);
                Ok(())
            }
            Held::Emulator { serial } => {
                self.shut_down_emulator(&serial).await;
                Ok(())
            }
            Held::InstalledApk { serial, package, fresh } => {
                if !fresh {
                    return Ok(());
                }
                let out = self.shell(&serial, &format!("pm uninstall {package}")).await.map_err(|e| release_error("uninstalling", e))?;
                // Gone already is fine: what was installed for the experiment is not there.
                match out.stdout.contains("Success") || !self.installed(&serial, &package).await.unwrap_or(true) {
                    true => Ok(()),
                    false => Err(format!("`pm uninstall {package}` on {serial}: {} {}", out.stdout.trim(), out.stderr.trim())),
                }
            }
            Held::DisplayDensity { serial, watchdog } => {
                self.adb.disarm_watchdog(&serial, &watchdog).await.map_err(|e| release_error("disarming the watchdog", e))?;
                self.shell(&serial, "cmd window density reset").await.map_err(|e| release_error("resetting the density", e))?;
                Ok(())
            }
            Held::DeviceProxy { serial, port, watchdog, listener } => {
                self.proxy.close(&listener).await;
                let cleared = async {
                    self.adb.disarm_watchdog(&serial, &watchdog).await?;
                    self.shell(&serial, "settings put global http_proxy :0").await?;
                    self.adb.remove_reverse(&serial, port).await
                };
                cleared.await.map_err(|e| release_error("clearing the device's HTTP proxy", e))
            }
        }
    }

    async fn phase(&self, experiment: &str, phase: &str) {
        if let Some(session) = self.session(experiment) {
            session.set_phase(phase);
        }
    }

    async fn observe(&self, experiment: &str, _targets: &[Target]) -> Observation {
        let Some(session) = self.session(experiment) else {
            return Observation { health: 0.0, ..Default::default() };
        };
        let reading = readings::read(&self.adb, &session.serial, &session.packages, session.since_s, &session.anr_before).await;
        let observation = session.record(reading);
        let report = session.report().to_string();
        if let Err(e) = self.store.save_android_report(experiment, &report, now_ms()).await {
            tracing::warn!(experiment, "saving the device's report: {e}");
        }
        observation
    }

    async fn verdict(&self, experiment: &str) -> Option<Verdict> {
        self.session(experiment)?.verdict()
    }

    async fn unwatch(&self, experiment: &str, _targets: &[Target]) {
        let Some(session) = self.sessions.lock().expect("sessions lock").remove(experiment) else { return };
        let dropped = self.proxy.rules().drop_owner(experiment);
        if dropped > 0 {
            tracing::warn!(experiment, "dropped {dropped} proxy rules its plugin left");
        }
        let _ = self.store.save_android_report(experiment, &session.report().to_string(), now_ms()).await;
    }
}

/// Whether an experiment's plan options name an uploaded APK.
pub fn uses_apk(plan_options: &serde_json::Value, apk: &str) -> bool {
    options(plan_options).is_ok_and(|o| o.apk.as_deref() == Some(apk))
}

/// Where uploads are kept under the data directory.
pub fn apk_dir(data_dir: &std::path::Path) -> PathBuf {
    data_dir.join("apks")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn package_names_follow_androids_rules() {
        for ok in ["com.example.shop", "dev.faultline.testapp", "a.b", "Com.X_1.y2"] {
            assert!(valid_package(ok), "{ok}");
        }
        for bad in ["shop", "com..shop", "1com.shop", "com.sh-op", "com.shop/.Main", "", "com. shop"] {
            assert!(!valid_package(bad), "{bad}");
        }
    }
}
