//! The frontend platform: web applications, faulted through the fault
//! proxy or the service worker, observed through what the proxy sees and
//! the Core Web Vitals the collector reports.
//!
//! Each experiment gets a proxy listener per site (a platform resource,
//! journaled like an injection). In `proxy` mode the listener applies the
//! experiment's rules; in `service_worker` mode it passes traffic through
//! untouched, serves the worker on the app's origin, and the rules go to
//! the worker instead.
//!
//! Health, per reading: the share of requests through the listener that
//! did not fail (5xx or a cut connection), times a latency factor against
//! the baseline's median, `(baseline + 500 ms) / (median + 500 ms)` capped
//! at 1, times the mean rating of the vitals reported since the last
//! reading (good 1, needs improvement 0.5, poor 0). Every reading sends
//! one probe request through the listener, so a site without browser
//! traffic is still observed (the probe counts in the traffic).

pub mod collector;
pub mod metrics;
pub mod options;
pub mod sites;
pub mod vitals;

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::net::{IpAddr, SocketAddr};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use async_trait::async_trait;
use bytes::Bytes;
use faultline_plugin_runtime::model::{Platform as PlatformKind, Target};

use self::options::{FrontendOptions, Mode};
use super::{Observation, Platform, Resolved, ResolveError, Resource};
use crate::capabilities::proxy::{FaultProxy, Listener, ListenerSpec, Traffic};
use crate::engine::Plan;
use crate::store::{Store, now_ms};

/// The service worker script the host and the proxy serve.
pub const WORKER_SCRIPT: &str = include_str!("assets/service-worker.js");
/// The collector script, at `/collector.js`.
pub const COLLECTOR_SCRIPT: &str = include_str!("assets/collector.js");
/// The kind of resource a listener is.
pub const LISTENER: &str = "proxy_listener";
/// Budget of a reading's probe and of the reachability check at start.
const PROBE_TIMEOUT: Duration = Duration::from_secs(5);
/// Added to both medians of the latency factor, so a few milliseconds on a
/// fast app do not read as a collapse.
const LATENCY_CUSHION_MS: f64 = 500.0;

/// One running experiment as the platform sees it.
pub struct Session {
    pub experiment: String,
    pub mode: Mode,
    pub sites: Vec<String>,
    traffic: Arc<Traffic>,
    listeners: Mutex<Vec<Arc<Listener>>>,
    phase: Mutex<String>,
    /// Medians of the baseline's readings.
    baseline_p50: Mutex<Vec<f64>>,
    /// Vitals received before this were counted by an earlier reading.
    vitals_since: Mutex<i64>,
    /// What the probe asks for: the first literal route, else `/`.
    probe_path: String,
}

impl Session {
    pub fn phase(&self) -> String {
        self.phase.lock().expect("phase lock").clone()
    }

    pub fn listeners(&self) -> Vec<Arc<Listener>> {
        self.listeners.lock().expect("listeners lock").clone()
    }

    /// The latency factor of a reading's median (see the module's doc):
    /// baseline readings set the reference and count as 1.
    fn latency_factor(&self, median: Option<f64>) -> f64 {
        let Some(median) = median else { return 1.0 };
        let mut baseline = self.baseline_p50.lock().expect("baseline lock");
        if self.phase() == "baseline" {
            baseline.push(median);
            return 1.0;
        }
        if baseline.is_empty() {
            return 1.0;
        }
        let base = baseline.iter().sum::<f64>() / baseline.len() as f64;
        ((base + LATENCY_CUSHION_MS) / (median + LATENCY_CUSHION_MS)).min(1.0)
    }
}

pub struct FrontendPlatform {
    proxy: Arc<FaultProxy>,
    store: Store,
    /// Address listeners bind when the request names none (`--proxy-bind`).
    bind: IpAddr,
    sessions: Mutex<HashMap<String, Arc<Session>>>,
    http: reqwest::Client,
}

impl FrontendPlatform {
    pub fn new(proxy: Arc<FaultProxy>, store: Store, bind: IpAddr) -> Self {
        let http = reqwest::Client::builder().no_proxy().timeout(PROBE_TIMEOUT).build().expect("an HTTP client");
        FrontendPlatform { proxy, store, bind, sessions: Mutex::default(), http }
    }

    pub fn proxy(&self) -> &Arc<FaultProxy> {
        &self.proxy
    }

    pub fn store(&self) -> &Store {
        &self.store
    }

    pub fn session(&self, experiment: &str) -> Option<Arc<Session>> {
        self.sessions.lock().expect("sessions lock").get(experiment).cloned()
    }

    /// Every running experiment's session.
    pub fn sessions(&self) -> Vec<Arc<Session>> {
        self.sessions.lock().expect("sessions lock").values().cloned().collect()
    }

    fn options(plan_options: &serde_json::Value) -> Result<FrontendOptions, ResolveError> {
        if plan_options.is_null() {
            return Ok(FrontendOptions::default());
        }
        serde_json::from_value(plan_options.clone()).map_err(|e| ResolveError::Invalid(e.to_string()))
    }

    /// One probe through the listener: whether it got a non-5xx answer,
    /// and how long that took. A site without a listener (an https one, in
    /// service-worker mode) is not probed: the host speaks no TLS.
    async fn probe(&self, session: &Session) -> Option<(bool, f64)> {
        let base = session.listeners().first().map(|l| l.url())?;
        let started = Instant::now();
        let ok = match self.http.get(format!("{base}{}", session.probe_path)).send().await {
            Ok(response) => {
                let ok = !response.status().is_server_error();
                let _ = response.bytes().await;
                ok
            }
            Err(_) => false,
        };
        Some((ok, started.elapsed().as_secs_f64() * 1000.0))
    }

    async fn save_traffic(&self, session: &Session) {
        let phases = serde_json::to_string(&session.traffic.phases()).expect("traffic serializes");
        if let Err(e) = self.store.save_web_traffic(&session.experiment, &phases, now_ms()).await {
            tracing::warn!(experiment = %session.experiment, "saving web traffic: {e}");
        }
    }
}

/// Whether something answers TCP at the entry's host and port.
async fn reachable(entry: &sites::Entry) -> bool {
    let address = format!("{}:{}", entry.host.trim_start_matches('[').trim_end_matches(']'), entry.port);
    matches!(tokio::time::timeout(PROBE_TIMEOUT, tokio::net::TcpStream::connect(address)).await, Ok(Ok(_)))
}

#[async_trait]
impl Platform for FrontendPlatform {
    fn kind(&self) -> PlatformKind {
        PlatformKind::Frontend
    }

    /// Each entry is an origin or a URL; every site must answer. In proxy
    /// mode the sites must be plain http (the proxy does not speak TLS).
    async fn resolve(&self, entries: &[String], options: &serde_json::Value) -> Result<Resolved, ResolveError> {
        let options = Self::options(options)?;
        let parsed: Vec<sites::Entry> = entries.iter().map(|e| sites::parse(e)).collect::<Result<_, _>>().map_err(ResolveError::Invalid)?;
        if options.mode == Mode::Proxy
            && let Some(tls) = parsed.iter().find(|e| e.scheme == "https")
        {
            return Err(ResolveError::Invalid(format!(
                "the fault proxy forwards to http origins; for {} use mode service_worker",
                tls.site
            )));
        }
        let known: BTreeSet<&str> = parsed.iter().map(|e| e.site.as_str()).collect();
        if let Some(stray) = options.proxy_listen.keys().find(|site| !known.contains(sites::parse(site).map(|e| e.site).unwrap_or_default().as_str())) {
            return Err(ResolveError::Invalid(format!("proxy_listen names `{stray}`, which is not a target's site")));
        }
        // A listener exposes the site on its address: only where the
        // operator lets listeners be (loopback, or `--proxy-bind`).
        if let Some((site, addr)) = options.proxy_listen.iter().find(|(_, a)| !a.ip().is_loopback() && a.ip() != self.bind) {
            return Err(ResolveError::Invalid(format!(
                "proxy_listen puts {site} on {addr}; listeners may bind loopback addresses or {} (--proxy-bind)",
                self.bind
            )));
        }
        let mut silent = vec![];
        for entry in &parsed {
            if !reachable(entry).await {
                silent.push(entry.site.clone());
            }
        }
        if !silent.is_empty() {
            silent.dedup();
            return Err(ResolveError::NoMatch(silent.into_iter().map(|s| format!("{s} (nothing answers there)")).collect()));
        }
        let mut resolved = Resolved::default();
        for entry in &parsed {
            for target in sites::targets(entry, &options.routes) {
                if !resolved.targets.iter().any(|t| t.id == target.id) {
                    resolved.targets.push(target);
                }
            }
        }
        Ok(resolved)
    }

    /// A listener per site, before the baseline.
    async fn acquire(&self, experiment: &str, plan: &Plan) -> Result<Vec<Resource>, ResolveError> {
        let options = Self::options(&plan.options)?;
        let mut sites: Vec<String> = vec![];
        for target in &plan.targets {
            if let Some((_, site)) = target.attributes.iter().find(|(k, _)| k == sites::SITE)
                && !sites.contains(site)
            {
                sites.push(site.clone());
            }
        }
        let listen: BTreeMap<String, SocketAddr> =
            options.proxy_listen.iter().filter_map(|(site, addr)| sites::parse(site).ok().map(|e| (e.site, *addr))).collect();
        let traffic = Arc::new(Traffic::default());
        // The experiment's rules end with its listeners, whatever a plugin asks.
        self.proxy.rules().set_deadline(experiment, now_ms() + i64::from(plan.ttl_seconds) * 1000);
        let mut listeners = vec![];
        for site in sites.iter().filter(|s| s.starts_with("http://")) {
            let spec = ListenerSpec {
                site: site.clone(),
                forward: false,
                loopback_alias: None,
                experiment: experiment.into(),
                bind: listen.get(site).copied().unwrap_or(SocketAddr::new(self.bind, 0)),
                apply_rules: options.mode == Mode::Proxy,
                ttl: Duration::from_secs(u64::from(plan.ttl_seconds)),
                worker_script: Bytes::from_static(WORKER_SCRIPT.as_bytes()),
                traffic: traffic.clone(),
            };
            match self.proxy.open(spec.clone()).await {
                Ok(listener) => listeners.push(listener),
                Err(e) => {
                    for opened in &listeners {
                        self.proxy.close(&opened.id).await;
                    }
                    self.proxy.rules().drop_owner(experiment);
                    return Err(ResolveError::Conflict(format!("the fault proxy cannot listen on {} for {site}: {e}", spec.bind)));
                }
            }
        }
        let probe_path = plan
            .targets
            .iter()
            .filter_map(|t| t.attributes.iter().find(|(k, _)| k == sites::PATH).map(|(_, p)| p.clone()))
            .find(|p| !p.contains('*'))
            .unwrap_or_else(|| "/".into());
        let resources = listeners
            .iter()
            .map(|l| Resource {
                kind: LISTENER.into(),
                target: l.spec.site.clone(),
                address: l.url(),
                handle: l.id.clone(),
                expires_at: l.expires_at,
                journal_id: String::new(),
            })
            .collect();
        let session = Session {
            experiment: experiment.into(),
            mode: options.mode,
            sites,
            traffic,
            listeners: Mutex::new(listeners),
            phase: Mutex::new("baseline".into()),
            baseline_p50: Mutex::default(),
            vitals_since: Mutex::new(now_ms()),
            probe_path,
        };
        self.sessions.lock().expect("sessions lock").insert(experiment.into(), Arc::new(session));
        Ok(resources)
    }

    async fn release(&self, resource: &Resource) -> Result<(), String> {
        if resource.kind != LISTENER {
            return Err(format!("the frontend platform has no resource of kind `{}`", resource.kind));
        }
        self.proxy.close(&resource.handle).await;
        for session in self.sessions() {
            session.listeners.lock().expect("listeners lock").retain(|l| l.id != resource.handle);
        }
        Ok(())
    }

    async fn phase(&self, experiment: &str, phase: &str) {
        if let Some(session) = self.session(experiment) {
            session.traffic.set_phase(phase);
            *session.phase.lock().expect("phase lock") = phase.into();
        }
    }

    async fn observe(&self, experiment: &str, _targets: &[Target]) -> Observation {
        let Some(session) = self.session(experiment) else {
            return Observation { health: 0.0, metrics: BTreeMap::from([("observed".to_string(), 0.0)]), ..Default::default() };
        };
        let probe = self.probe(&session).await;
        let window = session.traffic.take_window();
        let now = now_ms();
        let since = std::mem::replace(&mut *session.vitals_since.lock().expect("vitals lock"), now);
        let vitals = self.store.vitals(experiment, since).await.unwrap_or_default();

        let availability = match (window.requests, probe) {
            (0, Some((ok, _))) => f64::from(u8::from(ok)),
            (0, None) => 1.0,
            _ => 1.0 - window.error_rate,
        };
        let latency = session.latency_factor(window.latency_ms.p50.or(probe.map(|(_, ms)| ms)));
        let rated: Vec<f64> = vitals.iter().map(|v| vitals::rating_score(&v.rating)).collect();
        let vitals_factor = if rated.is_empty() { 1.0 } else { rated.iter().sum::<f64>() / rated.len() as f64 };

        let mut metrics = BTreeMap::from([
            ("requests".to_string(), window.requests as f64),
            ("errors".to_string(), window.errors as f64),
            ("error_rate".to_string(), window.error_rate),
            ("vitals".to_string(), vitals.len() as f64),
        ]);
        if let Some((ok, ms)) = probe {
            metrics.insert("probe_ok".into(), f64::from(u8::from(ok)));
            metrics.insert("probe_ms".into(), ms);
        }
        for (name, value) in [("latency_p50_ms", window.latency_ms.p50), ("latency_p95_ms", window.latency_ms.p95), ("latency_p99_ms", window.latency_ms.p99)] {
            if let Some(v) = value {
                metrics.insert(name.into(), v);
            }
        }
        if !rated.is_empty() {
            metrics.insert("vitals_score".into(), vitals_factor);
        }
        for name in vitals::NAMES {
            let values: Vec<f64> = vitals.iter().filter(|v| v.name == name).map(|v| v.value).collect();
            if !values.is_empty() {
                metrics.insert(name.to_ascii_lowercase(), values.iter().sum::<f64>() / values.len() as f64);
            }
        }
        self.save_traffic(&session).await;
        Observation { health: availability * latency * vitals_factor, metrics, ..Default::default() }
    }

    /// The experiment is over: its rules go whatever its plugin did, its
    /// listeners are closed if a release missed one, and its traffic is saved.
    async fn unwatch(&self, experiment: &str, _targets: &[Target]) {
        let Some(session) = self.sessions.lock().expect("sessions lock").remove(experiment) else { return };
        let dropped = self.proxy.rules().drop_owner(experiment);
        if dropped > 0 {
            tracing::warn!(experiment, "dropped {dropped} proxy rules its plugin left");
        }
        for listener in session.listeners() {
            self.proxy.close(&listener.id).await;
        }
        self.save_traffic(&session).await;
    }
}
