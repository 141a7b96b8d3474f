//! The start request and its validation into a plan. Everything here runs
//! before anything is injected, so a bad request changes nothing.

use std::collections::BTreeMap;
use std::time::Duration;

use faultline_plugin_runtime::model::{FaultInfo, IntensityScope, ParamKind, ParamValue, Platform};
use serde::Deserialize;
use serde_json::{Value, json};
use utoipa::ToSchema;

use crate::api::{ApiError, Limits};
use crate::engine::{DEFAULT_SPLIT, Guardrails, Intensity, PhaseLengths, Plan, ScenarioPlan};
use crate::platforms::probes::{MAX_PROBES, Probe};

/// Default tolerance: health may fall 10 % below baseline and still count as fine.
const DEFAULT_TOLERANCE: f64 = 0.1;

#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct StartRequest {
    /// A fault type or alias, as listed by GET /fault-types.
    pub fault_type: String,
    /// Container names or key=value label selectors (backend), app packages
    /// (android), route patterns (frontend).
    #[serde(default)]
    pub targets: Vec<String>,
    /// Total duration in seconds (backend spelling).
    pub duration: Option<u64>,
    /// Total duration in seconds (android spelling); either may be used.
    pub duration_seconds: Option<u64>,
    /// Let intensity follow the system's health, up to `intensity`.
    #[serde(default)]
    pub adaptive: bool,
    /// Climb to `intensity` in the fault's steps (the default); false holds it throughout.
    pub ramp: Option<bool>,
    /// Seconds from the start of injecting until the ramp reaches
    /// `intensity` (0 to the injecting phase's length); by default half
    /// of the injecting phase. The level is then held to its end.
    #[schema(minimum = 0)]
    pub ramp_seconds: Option<f64>,
    /// In the fault's unit; defaults to the fault's default. The ceiling in adaptive mode.
    pub intensity: Option<f64>,
    /// Parameters besides intensity, as the fault type declares them.
    #[serde(default)]
    #[schema(value_type = Object)]
    pub params: BTreeMap<String, Value>,
    /// Phase lengths in seconds; by default 20 % / 60 % / 20 % of the duration.
    pub phases: Option<PhasesRequest>,
    /// How far health may fall below baseline (0-1) and count as tolerated. Default 0.1.
    pub tolerance: Option<f64>,
    /// HTTP or TCP checks made at every reading: their success rate counts in health.
    #[serde(default)]
    pub probes: Vec<Probe>,
    /// Timed faults besides the primary one, each fired `at` seconds after
    /// the start for `duration_seconds` on every target, with its own
    /// driver instance, journal rows and rollback.
    #[serde(default)]
    pub scenarios: Vec<Scenario>,
    /// Limits on the experiment: `max_blast_radius` and `max_targets` refuse
    /// the start (422) when exceeded; `abort_when` conditions on the probes
    /// or health end it `aborted`, rolled back, when one trips.
    #[serde(default)]
    pub guardrails: Guardrails,
    /// The platform's own fields, read from the body by `body` (the
    /// frontend's mode and routes); not a field of its own.
    #[serde(skip)]
    #[schema(ignore)]
    pub options: Value,
}

/// A timed fault.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct Scenario {
    /// A fault type or alias, such as `kill_app` or `foreground_app`.
    #[serde(rename = "type")]
    pub kind: String,
    /// Seconds from the experiment's start at which it fires.
    pub at: u64,
    /// How long it lasts, in seconds (at least 1); it must end by the
    /// experiment's end.
    #[schema(minimum = 1)]
    pub duration_seconds: u64,
    /// In the fault's unit; the fault's default when omitted.
    pub intensity: Option<f64>,
    /// The fault's own parameters.
    #[serde(default)]
    #[schema(value_type = Object)]
    pub params: BTreeMap<String, Value>,
}

/// Finds a fault type's driver: its description and plugin name.
pub type FaultLookup<'a> = &'a dyn Fn(&str) -> Option<(FaultInfo, String)>;

#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct PhasesRequest {
    pub baseline_seconds: f64,
    pub injecting_seconds: f64,
    pub recovering_seconds: f64,
}

fn invalid(code: &'static str, detail: impl Into<String>) -> ApiError {
    ApiError::unprocessable(code, detail)
}

impl StartRequest {
    /// Checks everything that does not need the platform, and builds the plan
    /// (targets still unresolved).
    pub fn plan(&self, platform: Platform, fault: &FaultInfo, plugin: &str, limits: &Limits, lookup: FaultLookup) -> Result<Plan, ApiError> {
        on_platform(fault, platform, "")?;
        if self.targets.is_empty() || self.targets.iter().any(|t| t.trim().is_empty()) {
            return Err(invalid("missing_targets", "give at least one target, and no empty one"));
        }
        let phases = self.phases(limits)?;
        let mut intensity = self.intensity(fault)?;
        intensity.ramp_ms = self.ramp_ms(&phases)?;
        let tolerance = self.tolerance.unwrap_or(DEFAULT_TOLERANCE);
        if !(0.0..=1.0).contains(&tolerance) {
            return Err(invalid("tolerance_out_of_range", "tolerance must be between 0 and 1"));
        }
        if self.probes.len() > MAX_PROBES {
            return Err(invalid("invalid_probe", format!("at most {MAX_PROBES} probes")));
        }
        if let Some((i, why)) = self.probes.iter().enumerate().find_map(|(i, p)| p.check().err().map(|e| (i, e))) {
            return Err(invalid("invalid_probe", format!("probe {i}: {why}")));
        }
        let watched_ms = phases.baseline_ms + phases.injecting_ms;
        self.guardrails.check(self.probes.len(), watched_ms).map_err(|why| invalid("invalid_guardrail", why))?;
        if self.adaptive && !intensity.graded {
            return Err(invalid("adaptive_not_supported", format!("fault type `{}` has no intensity to adapt", fault.name)));
        }
        let scenarios = self.scenarios(platform, fault, &phases, lookup)?;
        Ok(Plan {
            platform,
            fault_type: self.fault_type.clone(),
            fault: fault.name.clone(),
            plugin: plugin.into(),
            selectors: self.targets.iter().map(|t| t.trim().to_string()).collect(),
            targets: vec![],
            excluded: vec![],
            intensity,
            adaptive: self.adaptive,
            sample_interval_ms: Plan::default_sample_interval(&phases),
            ttl_seconds: u32::try_from((phases.total_ms() / 1000).saturating_add(limits.ttl_margin.as_secs())).unwrap_or(u32::MAX),
            phases,
            params: params(&self.params, fault)?,
            tolerance,
            impact: None,
            probes: self.probes.clone(),
            guardrails: self.guardrails.clone(),
            options: self.options.clone(),
            resources: vec![],
            scenarios,
            capabilities: vec![],
        })
    }

    /// One scenario, checked against the experiment and the scenarios before it.
    #[allow(clippy::too_many_arguments)]
    fn scenario(
        &self,
        s: &Scenario,
        platform: Platform,
        primary: &FaultInfo,
        total_ms: u64,
        injecting: (u64, u64),
        before: &[ScenarioPlan],
        lookup: FaultLookup,
    ) -> Result<ScenarioPlan, ApiError> {
        let Some((info, plugin)) = lookup(s.kind.trim()) else {
            return Err(invalid("unknown_fault_type", format!("no fault type or alias `{}`", s.kind)));
        };
        on_platform(&info, platform, "")?;
        if s.duration_seconds == 0 {
            return Err(invalid("invalid_scenario", "duration_seconds must be at least 1"));
        }
        let (at_ms, duration_ms) = (s.at.saturating_mul(1000), s.duration_seconds.saturating_mul(1000));
        if at_ms.saturating_add(duration_ms) > total_ms {
            let until = s.at.saturating_add(s.duration_seconds);
            return Err(invalid("invalid_scenario", format!("it would run until {until} s, past the experiment's end at {} s", total_ms as f64 / 1000.0)));
        }
        let scenario = ScenarioPlan {
            fault_type: s.kind.trim().to_string(),
            fault: info.name.clone(),
            plugin,
            at_ms,
            duration_ms,
            intensity: scenario_intensity(&info, s.intensity)?,
            unit: info.intensity.as_ref().map(|i| i.unit.clone()).unwrap_or_default(),
            share_of_targets: info.intensity.as_ref().is_some_and(|i| i.scope == IntensityScope::ShareOfTargets),
            params: params(&s.params, &info)?,
        };
        if let Some(j) = before.iter().position(|other| other.overlaps(scenario.at_ms, scenario.end_ms())) {
            return Err(invalid("invalid_scenario", format!("it overlaps scenarios[{j}]; scenarios run one at a time")).with(json!({ "overlaps": j })));
        }
        let same_kind = info.name == primary.name || primary.conflicts_with.contains(&info.name) || info.conflicts_with.contains(&primary.name);
        if same_kind && scenario.overlaps(injecting.0, injecting.1) {
            return Err(invalid("invalid_scenario", format!("it runs {} while the primary fault {} is injected on the same targets", info.name, primary.name)));
        }
        Ok(scenario)
    }

    /// Each scenario's driver, level and time, checked: a known fault on
    /// this platform, within the experiment, overlapping no other scenario
    /// and not the primary fault's own kind while that is injected.
    fn scenarios(&self, platform: Platform, primary: &FaultInfo, phases: &PhaseLengths, lookup: FaultLookup) -> Result<Vec<ScenarioPlan>, ApiError> {
        let total_ms = phases.total_ms();
        let injecting = (phases.baseline_ms, phases.baseline_ms + phases.injecting_ms);
        let mut planned: Vec<ScenarioPlan> = vec![];
        for (i, s) in self.scenarios.iter().enumerate() {
            let scenario = self.scenario(s, platform, primary, total_ms, injecting, &planned, lookup).map_err(|e| about_scenario(e, i))?;
            planned.push(scenario);
        }
        Ok(planned)
    }

    fn phases(&self, limits: &Limits) -> Result<PhaseLengths, ApiError> {
        let duration = match (self.duration, self.duration_seconds) {
            (Some(a), Some(b)) if a != b => {
                return Err(invalid("conflicting_durations", "duration and duration_seconds differ; give one"));
            }
            (a, b) => a.or(b),
        };
        let (min, max) = (limits.min_duration.as_secs_f64(), limits.max_duration.as_secs_f64());
        let out_of_range = || {
            invalid("duration_out_of_range", format!("duration must be between {min} and {max} seconds"))
                .with(json!({ "min": min, "max": max }))
        };
        let phases = match (&self.phases, duration) {
            (None, None) => return Err(invalid("missing_duration", "give duration (seconds) or phases")),
            (None, Some(total)) => {
                if (total as f64) < min || total as f64 > max {
                    return Err(out_of_range());
                }
                PhaseLengths::split(Duration::from_secs(total), DEFAULT_SPLIT)
            }
            (Some(p), total) => {
                let parts = [p.baseline_seconds, p.injecting_seconds, p.recovering_seconds];
                if parts.iter().any(|s| !s.is_finite() || *s < 0.0) || p.injecting_seconds <= 0.0 {
                    return Err(invalid("invalid_phases", "phase lengths must be seconds ≥ 0, and injecting > 0"));
                }
                let sum: f64 = parts.iter().sum();
                if total.is_some_and(|t| (t as f64 - sum).abs() > 0.001) {
                    return Err(invalid("phases_mismatch", format!("the phases add up to {sum} s, not the duration")));
                }
                if sum < min || sum > max {
                    return Err(out_of_range());
                }
                let ms = |s: f64| (s * 1000.0).round() as u64;
                PhaseLengths {
                    baseline_ms: ms(p.baseline_seconds),
                    injecting_ms: ms(p.injecting_seconds),
                    recovering_ms: ms(p.recovering_seconds),
                }
            }
        };
        Ok(phases)
    }

    fn intensity(&self, fault: &FaultInfo) -> Result<Intensity, ApiError> {
        let Some(spec) = &fault.intensity else {
            if self.intensity.is_some_and(|i| i != 0.0) {
                return Err(invalid("intensity_not_supported", format!("fault type `{}` takes no intensity", fault.name)));
            }
            return Ok(Intensity {
                requested: 0.0,
                min: 0.0,
                max: 0.0,
                step: 0.0,
                unit: String::new(),
                scope: IntensityScope::PerTarget,
                graded: false,
                ramp: false,
                ramp_ms: None,
                descending: false,
            });
        };
        let requested = self.intensity.unwrap_or(spec.default);
        if !requested.is_finite() || requested < spec.min || requested > spec.max {
            return Err(invalid(
                "intensity_out_of_range",
                format!("intensity for `{}` must be between {} and {} {}", fault.name, spec.min, spec.max, spec.unit),
            )
            .with(json!({ "min": spec.min, "max": spec.max, "unit": spec.unit })));
        }
        let ramp = self.ramp.unwrap_or(true);
        Ok(Intensity {
            requested,
            min: spec.min,
            max: spec.max,
            step: spec.step,
            unit: spec.unit.clone(),
            scope: spec.scope,
            graded: true,
            ramp,
            ramp_ms: None,
            descending: spec.descending,
        })
    }

    /// `ramp_seconds` in milliseconds, within the injecting phase.
    fn ramp_ms(&self, phases: &PhaseLengths) -> Result<Option<u64>, ApiError> {
        let Some(seconds) = self.ramp_seconds else { return Ok(None) };
        let injecting = phases.injecting_ms as f64 / 1000.0;
        if !seconds.is_finite() || seconds < 0.0 || seconds > injecting {
            return Err(invalid("invalid_ramp", format!("ramp_seconds must be between 0 and the injecting phase's {injecting} s"))
                .with(json!({ "min": 0, "max": injecting })));
        }
        if self.ramp == Some(false) && seconds > 0.0 {
            return Err(invalid("invalid_ramp", "ramp: false holds the intensity from the start; ramp_seconds would ramp it"));
        }
        if self.adaptive {
            return Err(invalid("invalid_ramp", "adaptive intensity follows health, not a ramp; leave out ramp_seconds"));
        }
        Ok(Some((seconds * 1000.0).round() as u64))
    }
}

fn on_platform(fault: &FaultInfo, platform: Platform, at: &str) -> Result<(), ApiError> {
    if fault.platforms.contains(&platform) {
        return Ok(());
    }
    let on: Vec<_> = fault.platforms.iter().map(|p| p.as_str()).collect();
    Err(invalid("fault_not_on_platform", format!("{at}fault type `{}` runs on {}, not {}", fault.name, on.join(", "), platform.as_str())))
}

/// Marks a refusal as one scenario's: its detail and its `scenario` member.
fn about_scenario(mut e: ApiError, index: usize) -> ApiError {
    e.detail = format!("scenarios[{index}]: {}", e.detail);
    let mut extra = match e.extra.take() {
        Some(Value::Object(map)) => map,
        _ => serde_json::Map::new(),
    };
    extra.insert("scenario".into(), json!(index));
    e.with(Value::Object(extra))
}

/// A scenario's level: the one asked for within the fault's range, else
/// its default; faults without intensity take none.
fn scenario_intensity(fault: &FaultInfo, asked: Option<f64>) -> Result<f64, ApiError> {
    let Some(spec) = &fault.intensity else {
        return match asked {
            Some(i) if i != 0.0 => Err(invalid("intensity_not_supported", format!("fault type `{}` takes no intensity", fault.name))),
            _ => Ok(0.0),
        };
    };
    let level = asked.unwrap_or(spec.default);
    if !level.is_finite() || level < spec.min || level > spec.max {
        return Err(invalid(
            "intensity_out_of_range",
            format!("intensity for `{}` must be between {} and {} {}", fault.name, spec.min, spec.max, spec.unit),
        ));
    }
    Ok(level)
}

/// Checks parameters against the fault's declaration.
fn params(given: &BTreeMap<String, Value>, fault: &FaultInfo) -> Result<Vec<(String, ParamValue)>, ApiError> {
    let mut out = vec![];
    for (name, value) in given {
        let Some(spec) = fault.params.iter().find(|p| &p.name == name) else {
            let known: Vec<_> = fault.params.iter().map(|p| p.name.as_str()).collect();
            return Err(invalid("unknown_param", format!("fault type `{}` has no parameter `{name}`", fault.name))
                .with(json!({ "known": known })));
        };
        let converted = match (spec.kind, value) {
            (ParamKind::Number, Value::Number(n)) => n.as_f64().map(ParamValue::Number),
            (ParamKind::Integer, Value::Number(n)) => n.as_i64().map(ParamValue::Integer),
            (ParamKind::Text, Value::String(s)) => Some(ParamValue::Text(s.clone())),
            (ParamKind::Flag, Value::Bool(b)) => Some(ParamValue::Flag(*b)),
            _ => None,
        };
        let value = converted.ok_or_else(|| invalid("invalid_param", format!("parameter `{name}` must be of kind {:?}", spec.kind)))?;
        out.push((name.clone(), value));
    }
    if let Some(missing) = fault.params.iter().find(|p| p.required && !given.contains_key(&p.name)) {
        return Err(invalid("missing_param", format!("fault type `{}` needs parameter `{}`", fault.name, missing.name)));
    }
    Ok(out)
}
