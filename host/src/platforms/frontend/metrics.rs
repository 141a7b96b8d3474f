//! The frontend's part of an experiment's metrics: per phase, the traffic
//! the proxy saw and the p75 of each vital with its rating.

use std::collections::BTreeMap;

use serde::Serialize;
use utoipa::ToSchema;

use super::vitals::{VitalSummary, summarize};
use crate::capabilities::proxy::TrafficSummary;
use crate::store::{Store, StoreError};

#[derive(Debug, Serialize, ToSchema)]
pub struct WebMetrics {
    /// baseline, injecting and recovering.
    pub phases: BTreeMap<String, WebPhase>,
}

#[derive(Debug, Default, Serialize, ToSchema)]
pub struct WebPhase {
    /// Requests through the proxy listeners (the host's own probe, one per
    /// reading, included), errors and latency percentiles.
    pub traffic: TrafficSummary,
    /// LCP, CLS and INP: the p75 over page loads and its rating.
    pub vitals: BTreeMap<String, VitalSummary>,
}

pub async fn web_metrics(store: &Store, experiment: &str) -> Result<WebMetrics, StoreError> {
    let traffic: BTreeMap<String, TrafficSummary> = match store.web_traffic(experiment).await? {
        Some(json) => serde_json::from_str(&json).map_err(|e| StoreError::Corrupt(format!("web traffic of {experiment}: {e}")))?,
        None => BTreeMap::new(),
    };
    let mut by_phase: BTreeMap<String, Vec<(String, f64)>> = BTreeMap::new();
    for v in store.vitals(experiment, 0).await? {
        by_phase.entry(v.phase).or_default().push((v.name, v.value));
    }
    let phases = ["baseline", "injecting", "recovering"]
        .into_iter()
        .map(|phase| {
            let web = WebPhase {
                traffic: traffic.get(phase).cloned().unwrap_or_default(),
                vitals: by_phase.get(phase).map(|v| summarize(v)).unwrap_or_default(),
            };
            (phase.to_string(), web)
        })
        .collect();
    Ok(WebMetrics { phases })
}
