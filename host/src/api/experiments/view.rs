//! The bodies of the status, metrics and start responses.

use std::collections::BTreeMap;

use serde::Serialize;
use serde_json::Value;
use utoipa::ToSchema;

use crate::engine::{Guardrails, Plan};
use crate::platforms::frontend::metrics::WebMetrics;
use crate::platforms::{Excluded, Impact, Resource};
use crate::store::{EventRow, ExperimentRow, InjectionRow, OPEN_STATES, SampleRow, StoreError, now_ms};

/// What an experiment will do: the fault, its level, its targets and how
/// far a fault on them can reach. A preview answers with this alone.
#[derive(Serialize, ToSchema)]
pub struct PlanSummary {
    pub platform: String,
    /// As requested.
    pub fault_type: String,
    /// The canonical fault name (differs when an alias was requested).
    pub fault: String,
    pub intensity: f64,
    pub unit: String,
    pub adaptive: bool,
    pub duration_seconds: f64,
    #[schema(value_type = Object)]
    pub phases: Value,
    /// Every target the selectors matched.
    pub targets: Vec<String>,
    /// What the selectors matched that is never a target (protected, the
    /// host's own container or control channel, helpers), and why.
    pub excluded: Vec<Excluded>,
    /// What the targets need, directly or transitively (backend).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub dependencies: Option<Vec<String>>,
    /// Containers that depend on a target, directly or transitively (backend).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub dependents: Option<Vec<String>>,
    /// How many containers a failure of the targets can reach (backend).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub blast_radius: Option<usize>,
    /// The longest chain of dependents (backend).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cascade_depth: Option<usize>,
    /// The limits the request set, when it set any.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub guardrails: Option<Guardrails>,
    /// What the platform put in place for the experiment (frontend: a
    /// proxy listener per site, whose `address` the app is loaded through;
    /// Android: the device lease, the installed APK, the device's proxy).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub resources: Vec<ResourceView>,
    /// Android: the package of the app under test (the first target).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub package: Option<String>,
    /// Android: the device it runs on.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub device: Option<String>,
}

/// A platform resource of an experiment.
#[derive(Serialize, ToSchema)]
pub struct ResourceView {
    /// `proxy_listener`.
    pub kind: String,
    /// The site it serves.
    pub target: String,
    /// Where it is reached, such as `http://127.0.0.1:41234`.
    pub address: String,
    /// When it ends by itself (ms since the epoch).
    pub expires_at: i64,
    /// open, released, retrying or expired (status only).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub state: Option<String>,
}

impl ResourceView {
    fn of(r: &Resource, journal: &[InjectionRow]) -> Self {
        let state = journal.iter().find(|i| i.id == r.journal_id).map(|i| match i.state.as_str() {
            "active" | "pending" => "open".to_string(),
            "reverted" => "released".to_string(),
            other => other.to_string(),
        });
        ResourceView { kind: r.kind.clone(), target: r.target.clone(), address: r.address.clone(), expires_at: r.expires_at, state }
    }
}

impl PlanSummary {
    pub fn new(plan: &Plan) -> Self {
        let impact = plan.impact.as_ref();
        let android = plan.platform == faultline_plugin_runtime::model::Platform::Android;
        PlanSummary {
            platform: plan.platform.as_str().into(),
            fault_type: plan.fault_type.clone(),
            fault: plan.fault.clone(),
            intensity: plan.intensity.requested,
            unit: plan.intensity.unit.clone(),
            adaptive: plan.adaptive,
            duration_seconds: plan.phases.total_ms() as f64 / 1000.0,
            phases: serde_json::to_value(plan.phases).unwrap_or_default(),
            targets: plan.targets.iter().map(|t| t.name.clone()).collect(),
            excluded: plan.excluded.clone(),
            dependencies: impact.map(|i| i.dependencies.clone()),
            dependents: impact.map(|i| i.dependents.clone()),
            blast_radius: impact.map(|i| i.blast_radius),
            cascade_depth: impact.map(|i| i.cascade_depth),
            guardrails: (plan.guardrails != Guardrails::default()).then(|| plan.guardrails.clone()),
            resources: plan.resources.iter().map(|r| ResourceView::of(r, &[])).collect(),
            package: android.then(|| plan.targets.first().map(|t| t.name.clone())).flatten(),
            device: android.then(|| plan.targets.first().and_then(|t| t.attributes.iter().find(|(k, _)| k == "serial")).map(|(_, v)| v.clone())).flatten(),
        }
    }
}

/// Answer to a start: the experiment as it begins, and its plan.
#[derive(Serialize, ToSchema)]
pub struct Started {
    pub id: String,
    /// "running".
    pub state: String,
    /// "baseline".
    pub phase: String,
    pub created_at: i64,
    #[serde(flatten)]
    pub plan: PlanSummary,
}

impl Started {
    pub fn new(row: &ExperimentRow, plan: &Plan) -> Self {
        Started {
            id: row.id.clone(),
            state: row.state.clone(),
            phase: row.phase.clone(),
            created_at: row.created_at,
            plan: PlanSummary::new(plan),
        }
    }
}

#[derive(Serialize, ToSchema)]
pub struct IntensityView {
    /// Level in effect on the targets now (or last, once ended): set once
    /// a level has taken, so it trails a ramp step until the step is done;
    /// null before injecting.
    pub current: Option<f64>,
    pub requested: f64,
    pub unit: String,
    pub adaptive: bool,
    /// Adaptive mode: the highest level at which health stayed within tolerance.
    pub max_tolerated: Option<f64>,
}

#[derive(Serialize, ToSchema)]
pub struct Timing {
    pub created_at: i64,
    pub phase_started_at: i64,
    pub ended_at: Option<i64>,
    pub elapsed_ms: i64,
    pub duration_ms: u64,
    #[schema(value_type = Object)]
    pub phases: Value,
}

/// A target and what was done to it.
#[derive(Serialize, ToSchema)]
pub struct TargetStatus {
    pub id: String,
    pub name: String,
    /// none, pending, active, retrying (a revert failed; the reconciler
    /// retries it), reverted, expired (never reverted, past its
    /// time-to-live), failed or unknown.
    pub injection: String,
    pub intensity: Option<f64>,
    pub error: Option<String>,
}

#[derive(Serialize, ToSchema)]
pub struct Event {
    pub at: i64,
    pub kind: String,
    pub detail: String,
}

#[derive(Serialize, ToSchema)]
pub struct Status {
    pub id: String,
    pub platform: String,
    /// running, completed, stopped, aborted or failed.
    pub state: String,
    /// baseline, injecting, recovering or completed.
    pub phase: String,
    pub fault_type: String,
    pub fault: String,
    pub plugin: String,
    pub intensity: IntensityView,
    pub timing: Timing,
    pub targets: Vec<TargetStatus>,
    /// Injections not reverted yet: in effect while the experiment runs,
    /// and after it only when a revert failed (the reconciler retries
    /// those until they are reverted or their time-to-live ends them).
    pub open_injections: Vec<OpenInjection>,
    /// What the platform put in place (frontend: proxy listeners), and
    /// whether each is still open.
    pub resources: Vec<ResourceView>,
    /// The timed scenarios and where each stands.
    pub scenarios: Vec<ScenarioStatus>,
    /// Android: what the device reports of the app (running, foreground,
    /// crashes, ANRs, battery, airplane mode) and the expectations as they
    /// stand; the final verdict is in `result.expectations` once ended.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(value_type = Option<Object>)]
    pub android: Option<Value>,
    /// The resilience score, once ended (not for failed experiments).
    pub score: Option<f64>,
    /// Components of the score and other results.
    #[schema(value_type = Option<Object>)]
    pub result: Option<Value>,
    pub error: Option<String>,
    pub stop_reason: Option<String>,
    pub created_by: String,
    /// Dependencies, blast radius and cascade depth, where the platform knows them.
    #[schema(value_type = Option<Object>)]
    pub impact: Option<Impact>,
    /// What the selectors matched that is never a target, and why.
    pub excluded: Vec<Excluded>,
    /// The limits the request set: sizes checked at start, abort conditions watched.
    pub guardrails: Guardrails,
    /// The timeline: at most 500 events, the first 100 and the latest.
    pub events: Vec<Event>,
    /// Events between those, left out of this answer.
    pub events_omitted: usize,
}

/// A timed scenario and where it stands.
#[derive(Serialize, ToSchema)]
pub struct ScenarioStatus {
    /// Its position in the request's `scenarios`.
    pub index: usize,
    /// As requested.
    #[serde(rename = "type")]
    pub kind: String,
    /// The canonical fault name.
    pub fault: String,
    pub at: f64,
    pub duration_seconds: f64,
    pub intensity: f64,
    /// scheduled, active, ended, failed (it took on no target: they were
    /// gone, or the driver failed; `error` says which), retrying (a revert
    /// failed; the reconciler retries it) or not_run (the experiment ended first).
    pub state: String,
    /// When it fired and when its last target was reverted (ms since the epoch).
    pub fired_at: Option<i64>,
    pub ended_at: Option<i64>,
    pub error: Option<String>,
}

impl ScenarioStatus {
    fn of(index: usize, s: &crate::engine::ScenarioPlan, rows: &[&InjectionRow], running: bool) -> Self {
        let any = |state: &str| rows.iter().any(|r| r.state == state);
        let state = if rows.is_empty() {
            if running { "scheduled" } else { "not_run" }
        } else if any("retrying") {
            "retrying"
        } else if any("pending") || any("active") {
            "active"
        } else if any("reverted") || any("expired") {
            "ended"
        } else {
            // Nothing took: every target was gone, or the driver failed (`error` says which).
            "failed"
        };
        ScenarioStatus {
            index,
            kind: s.fault_type.clone(),
            fault: s.fault.clone(),
            at: s.at_ms as f64 / 1000.0,
            duration_seconds: s.duration_ms as f64 / 1000.0,
            intensity: s.intensity,
            state: state.into(),
            fired_at: rows.iter().map(|r| r.injected_at).min(),
            ended_at: if state == "ended" { rows.iter().filter_map(|r| r.reverted_at).max() } else { None },
            error: rows.iter().rev().find_map(|r| r.error.clone()),
        }
    }
}

/// A journal row still open.
#[derive(Serialize, ToSchema)]
pub struct OpenInjection {
    /// The scenario that made it (its index); none for the primary fault.
    pub scenario: Option<i64>,
    pub target: String,
    /// pending, active or retrying.
    pub state: String,
    pub intensity: f64,
    /// Why the last revert failed.
    pub error: Option<String>,
    /// Failed reverts so far.
    pub attempts: i64,
    /// When the reconciler tries again (ms since the epoch).
    pub next_attempt_at: Option<i64>,
    /// When the fault's own time-to-live ends it (ms since the epoch).
    pub expires_at: Option<i64>,
}

/// Most events a status answer lists: the first ones (how it began) and
/// the latest; what lies between is counted in `events_omitted`.
pub const MAX_EVENTS: usize = 500;
const FIRST_EVENTS: usize = 100;

fn bounded(events: Vec<EventRow>) -> impl Iterator<Item = EventRow> {
    let skip = events.len().saturating_sub(MAX_EVENTS);
    events.into_iter().enumerate().filter(move |(i, _)| *i < FIRST_EVENTS || *i >= FIRST_EVENTS + skip).map(|(_, e)| e)
}

pub fn plan_of(row: &ExperimentRow) -> Result<Plan, StoreError> {
    serde_json::from_str(&row.plan).map_err(|e| StoreError::Corrupt(format!("plan of {}: {e}", row.id)))
}

impl Status {
    pub fn new(row: ExperimentRow, injections: Vec<InjectionRow>, events: Vec<EventRow>) -> Result<Self, StoreError> {
        let plan = plan_of(&row)?;
        let resources = plan.resources.iter().map(|r| ResourceView::of(r, &injections)).collect();
        // Resources have journal rows too; the rest are the faults'.
        let injections: Vec<InjectionRow> = injections.into_iter().filter(|i| !i.plugin.starts_with(crate::engine::PLATFORM_ROW)).collect();
        let running = row.state == "running";
        let scenarios = plan
            .scenarios
            .iter()
            .enumerate()
            .map(|(index, s)| {
                let rows: Vec<&InjectionRow> = injections.iter().filter(|i| i.scenario == Some(index as i64)).collect();
                ScenarioStatus::of(index, s, &rows, running)
            })
            .collect();
        // The latest journal row of the primary fault on each target says what it did there.
        let targets = plan
            .targets
            .iter()
            .map(|t| {
                let last = injections.iter().rev().find(|i| i.target_id == t.id && i.scenario.is_none());
                TargetStatus {
                    id: t.id.clone(),
                    name: t.name.clone(),
                    injection: last.map_or("none".into(), |i| i.state.clone()),
                    intensity: last.map(|i| i.intensity),
                    error: last.and_then(|i| i.error.clone()),
                }
            })
            .collect();
        let open_injections = injections
            .iter()
            .filter(|i| OPEN_STATES.contains(&i.state.as_str()))
            .map(|i| OpenInjection {
                scenario: i.scenario,
                target: i.target_name.clone(),
                state: i.state.clone(),
                intensity: i.intensity,
                error: i.error.clone(),
                attempts: i.attempts,
                next_attempt_at: i.next_attempt_at,
                expires_at: i.expires_at,
            })
            .collect();
        Ok(Status {
            open_injections,
            resources,
            scenarios,
            android: None,
            platform: row.platform.clone(),
            state: row.state.clone(),
            phase: row.phase.clone(),
            fault_type: row.fault_type.clone(),
            fault: plan.fault.clone(),
            plugin: row.plugin.clone(),
            intensity: IntensityView {
                current: row.intensity,
                requested: plan.intensity.requested,
                unit: plan.intensity.unit.clone(),
                adaptive: plan.adaptive,
                max_tolerated: row.max_tolerated,
            },
            timing: Timing {
                created_at: row.created_at,
                phase_started_at: row.phase_started_at,
                ended_at: row.ended_at,
                elapsed_ms: row.ended_at.unwrap_or_else(now_ms) - row.created_at,
                duration_ms: plan.phases.total_ms(),
                phases: serde_json::to_value(plan.phases).unwrap_or_default(),
            },
            targets,
            score: row.score,
            result: row.result.as_deref().and_then(|r| serde_json::from_str(r).ok()),
            error: row.error.clone(),
            stop_reason: row.stop_reason.clone(),
            created_by: row.created_by.clone(),
            impact: plan.impact.clone(),
            excluded: plan.excluded.clone(),
            guardrails: plan.guardrails.clone(),
            events_omitted: events.len().saturating_sub(MAX_EVENTS),
            events: bounded(events).map(|e| Event { at: e.at_ms, kind: e.kind, detail: e.detail }).collect(),
            id: row.id,
        })
    }
}

/// Summary of a series: mean, extremes and percentiles (nearest rank).
#[derive(Serialize, ToSchema, Default)]
pub struct Stat {
    pub mean: f64,
    pub min: f64,
    pub max: f64,
    pub p50: f64,
    pub p95: f64,
}

impl Stat {
    fn of(values: &[f64]) -> Option<Stat> {
        if values.is_empty() {
            return None;
        }
        let mut sorted = values.to_vec();
        sorted.sort_by(f64::total_cmp);
        let rank = |p: f64| sorted[((p * sorted.len() as f64).ceil() as usize).clamp(1, sorted.len()) - 1];
        Some(Stat {
            mean: sorted.iter().sum::<f64>() / sorted.len() as f64,
            min: sorted[0],
            max: sorted[sorted.len() - 1],
            p50: rank(0.5),
            p95: rank(0.95),
        })
    }
}

#[derive(Serialize, ToSchema)]
pub struct PhaseSummary {
    pub samples: usize,
    pub health: Option<Stat>,
    /// Each measurement the platform reported, summarized.
    pub metrics: BTreeMap<String, Stat>,
}

#[derive(Serialize, ToSchema)]
pub struct Sample {
    pub at: i64,
    pub phase: String,
    /// The level in effect when the sample was taken (injecting only).
    pub intensity: Option<f64>,
    /// Whether it was taken with the requested intensity in effect.
    pub at_requested: bool,
    pub health: f64,
    #[schema(value_type = Object)]
    pub metrics: Value,
}

#[derive(Serialize, ToSchema)]
pub struct Metrics {
    pub id: String,
    pub state: String,
    pub phase: String,
    /// Summaries for baseline, injecting and recovering.
    pub phases: BTreeMap<String, PhaseSummary>,
    /// The intensity the request asked for (the ceiling in adaptive mode).
    pub requested_intensity: f64,
    /// The injecting samples taken with the requested intensity in effect:
    /// the system under the fault as asked (a ramp reaches it by the middle
    /// of injecting by default).
    pub at_requested: PhaseSummary,
    /// How many observations are stored; the summaries cover them all.
    pub samples_total: usize,
    /// How many consecutive observations of one phase each point of
    /// `series` averages: 1 while an experiment has at most
    /// `MAX_SERIES_POINTS` (500) of them, more beyond, so the answer stays bounded.
    pub series_bucket: usize,
    /// The observations in order, downsampled past 500 (see `series_bucket`).
    pub series: Vec<Sample>,
    pub score: Option<f64>,
    #[schema(value_type = Option<Object>)]
    pub result: Option<Value>,
    /// Frontend: per phase, the traffic through the proxy and the p75 of
    /// each Web Vital with its rating.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub web: Option<WebMetrics>,
    /// Android: the device's last report of the app, with its crashes,
    /// ANRs and the expectations.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(value_type = Option<Object>)]
    pub android: Option<Value>,
}

/// Most points a metrics answer's series holds.
pub const MAX_SERIES_POINTS: usize = 500;

impl Metrics {
    pub fn new(row: ExperimentRow, samples: Vec<SampleRow>) -> Result<Self, StoreError> {
        let requested = plan_of(&row)?.intensity.requested;
        let series: Vec<Sample> = samples
            .into_iter()
            .map(|s| Sample {
                at: s.at_ms,
                phase: s.phase,
                at_requested: s.intensity.is_some_and(|i| (i - requested).abs() <= 1e-9 * requested.abs().max(1.0)),
                intensity: s.intensity,
                health: s.health,
                metrics: serde_json::from_str(&s.metrics).unwrap_or_default(),
            })
            .collect();
        let mut phases = BTreeMap::new();
        for phase in ["baseline", "injecting", "recovering"] {
            let in_phase: Vec<&Sample> = series.iter().filter(|s| s.phase == phase).collect();
            phases.insert(phase.to_string(), PhaseSummary::of(&in_phase));
        }
        let at_requested: Vec<&Sample> = series.iter().filter(|s| s.phase == "injecting" && s.at_requested).collect();
        let at_requested = PhaseSummary::of(&at_requested);
        let (samples_total, series_bucket) = (series.len(), series.len().div_ceil(MAX_SERIES_POINTS).max(1));
        Ok(Metrics {
            id: row.id,
            state: row.state,
            phase: row.phase,
            phases,
            requested_intensity: requested,
            at_requested,
            samples_total,
            series_bucket,
            series: downsample(series, series_bucket),
            score: row.score,
            result: row.result.as_deref().and_then(|r| serde_json::from_str(r).ok()),
            web: None,
            android: None,
        })
    }
}

/// Averages runs of `bucket` consecutive samples of one phase into one
/// point (its first time, its last intensity), so phases never mix.
fn downsample(series: Vec<Sample>, bucket: usize) -> Vec<Sample> {
    if bucket <= 1 {
        return series;
    }
    let mut points = vec![];
    for run in series.chunk_by(|a, b| a.phase == b.phase) {
        for chunk in run.chunks(bucket) {
            let n = chunk.len() as f64;
            // Each measurement averaged over the samples that have it.
            let mut sums: BTreeMap<String, (f64, f64)> = BTreeMap::new();
            for sample in chunk {
                for (name, value) in sample.metrics.as_object().into_iter().flatten() {
                    if let Some(v) = value.as_f64() {
                        let (sum, count) = sums.entry(name.clone()).or_default();
                        (*sum, *count) = (*sum + v, *count + 1.0);
                    }
                }
            }
            let last = &chunk[chunk.len() - 1];
            points.push(Sample {
                at: chunk[0].at,
                phase: last.phase.clone(),
                intensity: last.intensity,
                at_requested: chunk.iter().all(|s| s.at_requested),
                health: chunk.iter().map(|s| s.health).sum::<f64>() / n,
                metrics: serde_json::to_value(sums.into_iter().map(|(k, (sum, count))| (k, sum / count)).collect::<BTreeMap<_, _>>())
                    .unwrap_or_default(),
            });
        }
    }
    points
}

impl PhaseSummary {
    fn of(samples: &[&Sample]) -> Self {
        let health: Vec<f64> = samples.iter().map(|s| s.health).collect();
        let mut by_metric: BTreeMap<String, Vec<f64>> = BTreeMap::new();
        for sample in samples {
            for (name, value) in sample.metrics.as_object().into_iter().flatten() {
                if let Some(v) = value.as_f64() {
                    by_metric.entry(name.clone()).or_default().push(v);
                }
            }
        }
        let metrics = by_metric.into_iter().filter_map(|(k, v)| Stat::of(&v).map(|s| (k, s))).collect();
        PhaseSummary { samples: samples.len(), health: Stat::of(&health), metrics }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample(at: i64, phase: &str, health: f64) -> Sample {
        Sample { at, phase: phase.into(), intensity: None, at_requested: false, health, metrics: serde_json::json!({"cpu": health * 10.0}) }
    }

    #[test]
    fn downsampling_averages_runs_within_a_phase_and_never_mixes_phases() {
        let series = vec![sample(0, "baseline", 1.0), sample(1, "baseline", 0.0), sample(2, "baseline", 0.5), sample(3, "injecting", 0.2)];
        let points = downsample(series, 2);
        let got: Vec<(i64, &str, f64)> = points.iter().map(|p| (p.at, p.phase.as_str(), p.health)).collect();
        assert_eq!(got, [(0, "baseline", 0.5), (2, "baseline", 0.5), (3, "injecting", 0.2)]);
        assert_eq!(points[0].metrics["cpu"], 5.0);
    }
}
