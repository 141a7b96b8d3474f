//! Probes: HTTP or TCP checks the host makes against the system under
//! test at every reading, whatever the platform. A reading fails on a
//! connection error, an unexpected status, or a latency above the probe's
//! `max_latency_ms`; the success rate multiplies the platform's health.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

/// Most probes one experiment may have.
pub const MAX_PROBES: usize = 10;

#[derive(Debug, Clone, Serialize, Deserialize, ToSchema, PartialEq)]
#[serde(tag = "type", rename_all = "snake_case", deny_unknown_fields)]
pub enum Probe {
    /// `GET url`; succeeds on `expect_status` (default: any 2xx).
    Http {
        url: String,
        expect_status: Option<u16>,
        #[serde(default = "default_timeout")]
        timeout_ms: u64,
        max_latency_ms: Option<u64>,
    },
    /// A TCP connection to `address` (host:port).
    Tcp {
        address: String,
        #[serde(default = "default_timeout")]
        timeout_ms: u64,
        max_latency_ms: Option<u64>,
    },
}

fn default_timeout() -> u64 {
    2000
}

impl Probe {
    /// Why the probe is unusable, if it is.
    pub fn check(&self) -> Result<(), String> {
        let (timeout, max_latency) = match self {
            Probe::Http { url, timeout_ms, max_latency_ms, .. } => {
                let parsed = reqwest::Url::parse(url).map_err(|e| format!("`{url}` is not a URL: {e}"))?;
                if parsed.scheme() != "http" || parsed.host().is_none() {
                    return Err(format!("`{url}` must be an http:// URL with a host"));
                }
                (*timeout_ms, *max_latency_ms)
            }
            Probe::Tcp { address, timeout_ms, max_latency_ms } => {
                let port = address.rsplit_once(':').and_then(|(host, port)| (!host.is_empty()).then_some(port));
                if port.and_then(|p| p.parse::<u16>().ok()).is_none() {
                    return Err(format!("`{address}` must be host:port"));
                }
                (*timeout_ms, *max_latency_ms)
            }
        };
        if !(1..=30_000).contains(&timeout) {
            return Err("timeout_ms must be 1 to 30000".into());
        }
        if max_latency.is_some_and(|m| m == 0 || m > timeout) {
            return Err("max_latency_ms must be 1 to timeout_ms".into());
        }
        Ok(())
    }

    /// One attempt: whether it succeeded, and how long it took.
    async fn attempt(&self, http: &reqwest::Client) -> (bool, Duration) {
        let started = Instant::now();
        let (ok, max_latency) = match self {
            Probe::Http { url, expect_status, timeout_ms, max_latency_ms } => {
                let answer = http.get(url).timeout(Duration::from_millis(*timeout_ms)).send().await;
                let ok = match answer {
                    Ok(r) => expect_status.map_or(r.status().is_success(), |s| r.status().as_u16() == s),
                    Err(_) => false,
                };
                (ok, *max_latency_ms)
            }
            Probe::Tcp { address, timeout_ms, max_latency_ms } => {
                let connect = tokio::net::TcpStream::connect(address.as_str());
                let ok = matches!(tokio::time::timeout(Duration::from_millis(*timeout_ms), connect).await, Ok(Ok(_)));
                (ok, *max_latency_ms)
            }
        };
        let took = started.elapsed();
        (ok && max_latency.is_none_or(|m| took <= Duration::from_millis(m)), took)
    }
}

/// One run of every probe.
pub struct ProbeReading {
    /// Share of the probes that passed (0-1).
    pub success: f64,
    /// Each probe's outcome and latency in ms, in the request's order.
    pub checks: Vec<(bool, f64)>,
    /// What to record: success and the slowest latency.
    pub metrics: BTreeMap<String, f64>,
}

/// Runs an experiment's probes.
pub struct Prober {
    probes: Vec<Probe>,
    http: reqwest::Client,
}

impl Prober {
    pub fn new(probes: Vec<Probe>) -> Self {
        Prober { probes, http: reqwest::Client::builder().no_proxy().build().expect("an HTTP client") }
    }

    /// Runs every probe once, side by side; none without probes.
    pub async fn read(&self) -> Option<ProbeReading> {
        if self.probes.is_empty() {
            return None;
        }
        let results = futures_util::future::join_all(self.probes.iter().map(|p| p.attempt(&self.http))).await;
        let checks: Vec<(bool, f64)> = results.iter().map(|(ok, took)| (*ok, took.as_secs_f64() * 1000.0)).collect();
        let success = checks.iter().filter(|(ok, _)| *ok).count() as f64 / checks.len() as f64;
        let slowest = checks.iter().map(|(_, ms)| *ms).fold(0.0, f64::max);
        let metrics = BTreeMap::from([("probe_success".to_string(), success), ("probe_latency_ms".to_string(), slowest)]);
        Some(ProbeReading { success, checks, metrics })
    }
}
