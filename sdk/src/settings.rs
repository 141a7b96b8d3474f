//! Conveniences for reading parameters and declaring faults.

use crate::{IntensityScope, IntensitySpec, ParamValue, Settings};

impl Settings {
    fn param(&self, name: &str) -> Option<&ParamValue> {
        self.params.iter().find(|p| p.name == name).map(|p| &p.value)
    }

    /// A numeric parameter (whole numbers are accepted too).
    pub fn number(&self, name: &str) -> Option<f64> {
        match self.param(name)? {
            ParamValue::Number(n) => Some(*n),
            ParamValue::Integer(n) => Some(*n as f64),
            _ => None,
        }
    }

    /// A whole-number parameter.
    pub fn integer(&self, name: &str) -> Option<i64> {
        match self.param(name)? {
            ParamValue::Integer(n) => Some(*n),
            _ => None,
        }
    }

    /// A text parameter.
    pub fn text(&self, name: &str) -> Option<&str> {
        match self.param(name)? {
            ParamValue::Text(t) => Some(t),
            _ => None,
        }
    }

    /// A flag parameter.
    pub fn flag(&self, name: &str) -> Option<bool> {
        match self.param(name)? {
            ParamValue::Flag(b) => Some(*b),
            _ => None,
        }
    }
}

impl IntensitySpec {
    /// An intensity applied to each target, ramped in `step`s.
    pub fn per_target(unit: &str, min: f64, max: f64, default: f64, step: f64) -> Self {
        IntensitySpec { unit: unit.into(), min, max, default, step, scope: IntensityScope::PerTarget, descending: false }
    }

    /// An intensity applied to each target where lower is harsher (a
    /// battery level): ramps go down from `max` to the level asked for.
    pub fn descending(unit: &str, min: f64, max: f64, default: f64, step: f64) -> Self {
        IntensitySpec { descending: true, ..Self::per_target(unit, min, max, default, step) }
    }

    /// An intensity that is the percentage of targets affected.
    pub fn share_of_targets(default: f64, step: f64) -> Self {
        IntensitySpec { unit: "percent".into(), min: 1.0, max: 100.0, default, step, scope: IntensityScope::ShareOfTargets, descending: false }
    }
}
