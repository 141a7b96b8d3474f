//! What an experiment will do, fixed when it starts.

use std::time::Duration;

use faultline_plugin_runtime::model::{IntensityScope, ParamValue, Platform, Settings, Target};
use serde::{Deserialize, Serialize};

use super::guardrails::Guardrails;
use crate::platforms::{Excluded, Impact, Resource};
use crate::platforms::probes::Probe;

/// Default share of the duration for baseline, injecting and recovering.
pub const DEFAULT_SPLIT: (f64, f64, f64) = (0.2, 0.6, 0.2);

/// The validated plan of an experiment; stored with it as JSON.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Plan {
    pub platform: Platform,
    /// As requested (an alias stays an alias here).
    pub fault_type: String,
    /// The canonical fault name.
    pub fault: String,
    pub plugin: String,
    /// Targets as requested: names or key=value selectors.
    pub selectors: Vec<String>,
    /// Every target they matched when the experiment started.
    pub targets: Vec<Target>,
    /// What they matched that is never a target, and why.
    #[serde(default)]
    pub excluded: Vec<Excluded>,
    pub intensity: Intensity,
    pub adaptive: bool,
    pub phases: PhaseLengths,
    pub params: Vec<(String, ParamValue)>,
    pub sample_interval_ms: u64,
    /// Adaptive mode: how far below baseline health may fall and still count as tolerated (0-1).
    pub tolerance: f64,
    /// Seconds every effect is given to live: the experiment's remaining time plus a margin.
    pub ttl_seconds: u32,
    /// How far a fault on the targets can reach, where the platform knows.
    #[serde(default)]
    pub impact: Option<Impact>,
    /// Checks the host makes at every reading; their success rate counts in health.
    #[serde(default)]
    pub probes: Vec<Probe>,
    /// Limits the request set on itself: sizes checked at start, abort conditions watched.
    #[serde(default)]
    pub guardrails: Guardrails,
    /// The platform's own settings from the request (the frontend's mode and routes).
    #[serde(default)]
    pub options: serde_json::Value,
    /// What the platform put in place for the experiment (proxy listeners).
    #[serde(default)]
    pub resources: Vec<Resource>,
    /// Timed faults besides the primary one, in the order requested.
    #[serde(default)]
    pub scenarios: Vec<ScenarioPlan>,
    /// The capabilities the experiment's drivers were granted (the primary
    /// fault's and the scenarios'): an Android experiment routes the
    /// device's traffic through the fault proxy only when one has `proxy`.
    #[serde(default)]
    pub capabilities: Vec<String>,
}

/// A timed fault: its own driver instance, journal rows and rollback,
/// fired `at_ms` after the experiment's start for `duration_ms`, on every
/// target at one level.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct ScenarioPlan {
    /// As requested (an alias stays an alias here).
    pub fault_type: String,
    /// The canonical fault name.
    pub fault: String,
    pub plugin: String,
    pub at_ms: u64,
    pub duration_ms: u64,
    /// In the fault's unit: the request's, else the fault's default; 0 for
    /// faults without intensity.
    pub intensity: f64,
    pub unit: String,
    /// Whether the intensity is the share of the targets to fault.
    pub share_of_targets: bool,
    pub params: Vec<(String, ParamValue)>,
}

impl ScenarioPlan {
    pub fn end_ms(&self) -> u64 {
        self.at_ms + self.duration_ms
    }

    /// Whether the two run at the same time for a moment.
    pub fn overlaps(&self, start_ms: u64, end_ms: u64) -> bool {
        self.at_ms < end_ms && start_ms < self.end_ms()
    }
}

/// The intensity model: the requested level in the fault's unit, and how
/// the fault declared it moves.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Intensity {
    pub requested: f64,
    pub min: f64,
    /// The fault's highest level (where a descending intensity starts).
    #[serde(default)]
    pub max: f64,
    pub step: f64,
    pub unit: String,
    pub scope: IntensityScope,
    /// False for on/off faults: no ramp, no adaptation.
    pub graded: bool,
    /// Climb in steps to the requested level (the default), or hold it throughout.
    pub ramp: bool,
    /// When the ramp reaches the requested level, from the start of
    /// injecting; by default the middle of injecting.
    #[serde(default)]
    pub ramp_ms: Option<u64>,
    /// Lower is harsher (a battery level): the ramp and the adaptive
    /// controller go down from `max`.
    #[serde(default)]
    pub descending: bool,
}

impl Intensity {
    /// How harsh a level is, on a scale that rises whatever the fault's
    /// direction: the level itself, or how far below `max` it is.
    pub fn severity(&self, level: f64) -> f64 {
        if self.descending { self.max - level } else { level }
    }

    /// The level of a severity (the inverse of `severity`).
    pub fn level(&self, severity: f64) -> f64 {
        if self.descending { self.max - severity } else { severity }
    }

    /// The same model on the rising scale of severity.
    pub fn as_severity(&self) -> Intensity {
        if !self.descending {
            return self.clone();
        }
        Intensity { requested: self.severity(self.requested), min: 0.0, max: self.max - self.min, descending: false, ..self.clone() }
    }
}

#[derive(Debug, Clone, Copy, Serialize, Deserialize, PartialEq)]
pub struct PhaseLengths {
    pub baseline_ms: u64,
    pub injecting_ms: u64,
    pub recovering_ms: u64,
}

impl PhaseLengths {
    pub fn split(total: Duration, split: (f64, f64, f64)) -> Self {
        let total = total.as_millis() as f64;
        let baseline_ms = (total * split.0).round() as u64;
        let recovering_ms = (total * split.2).round() as u64;
        let injecting_ms = (total as u64).saturating_sub(baseline_ms + recovering_ms);
        PhaseLengths { baseline_ms, injecting_ms, recovering_ms }
    }

    pub fn total_ms(&self) -> u64 {
        self.baseline_ms + self.injecting_ms + self.recovering_ms
    }
}

impl Plan {
    /// Settings for the driver at a given intensity.
    pub fn settings(&self, intensity: f64) -> Settings {
        Settings { intensity, params: self.params.clone(), ttl_seconds: self.ttl_seconds }
    }

    /// Settings for a scenario's driver.
    pub fn scenario_settings(&self, scenario: &ScenarioPlan) -> Settings {
        Settings { intensity: scenario.intensity, params: scenario.params.clone(), ttl_seconds: self.ttl_seconds }
    }

    /// A sampling interval that gives every phase several observations.
    pub fn default_sample_interval(phases: &PhaseLengths) -> u64 {
        (phases.total_ms() / 40).clamp(100, 2000)
    }
}
