//! How intensity moves during injecting: a progressive ramp by default, an
//! adaptive controller on request.

use super::plan::Intensity;

/// The most levels a ramp goes through, however small the step.
const MAX_RAMP_LEVELS: usize = 10;

/// Rises in the fault's steps to the requested intensity and holds it: the
/// first level from the start of injecting, the requested one from the end
/// of the ramp (by default the middle of injecting), the others evenly
/// between. So the system is observed at the level asked for for at least
/// half of the phase.
#[derive(Debug, Clone)]
pub struct Ramp {
    levels: Vec<f64>,
    ramp_ms: u64,
}

impl Ramp {
    pub fn new(intensity: &Intensity, injecting_ms: u64) -> Self {
        // Built on the rising scale of severity, then read back as levels.
        let rising = Self::rising(&intensity.as_severity(), injecting_ms);
        Ramp { levels: rising.levels.iter().map(|s| intensity.level(*s)).collect(), ..rising }
    }

    fn rising(intensity: &Intensity, injecting_ms: u64) -> Self {
        let target = intensity.requested;
        let ramp_ms = intensity.ramp_ms.unwrap_or(injecting_ms / 2).min(injecting_ms);
        if !intensity.graded || !intensity.ramp || ramp_ms == 0 || intensity.step <= 0.0 || target <= intensity.min {
            return Ramp { levels: vec![target], ramp_ms: 0 };
        }
        let span = target - intensity.min;
        let count = ((span / intensity.step).ceil() as usize).clamp(1, MAX_RAMP_LEVELS);
        // The last level is the requested one exactly, not a float's near miss.
        let levels = (1..=count).map(|k| if k == count { target } else { intensity.min + span * k as f64 / count as f64 }).collect();
        Ramp { levels, ramp_ms }
    }

    /// The level at a moment of the injecting phase.
    pub fn level_at(&self, elapsed_ms: u64) -> f64 {
        let last = self.levels.len() - 1;
        if last == 0 {
            return self.levels[0];
        }
        let index = u128::from(elapsed_ms) * last as u128 / u128::from(self.ramp_ms.max(1));
        self.levels[(index as usize).min(last)]
    }

    pub fn levels(&self) -> &[f64] {
        &self.levels
    }
}

/// Raises intensity while health stays within tolerance of the baseline,
/// backs off when it does not, and remembers the highest level tolerated.
#[derive(Debug, Clone)]
pub struct Adaptive {
    /// The fault's own model: levels are read back through it.
    model: Intensity,
    /// On the rising scale of severity, like the fields below.
    current: f64,
    floor: f64,
    ceiling: f64,
    step: f64,
    /// Lowest health still counted as tolerated.
    threshold: f64,
    max_tolerated: Option<f64>,
}

impl Adaptive {
    pub fn new(model: &Intensity, baseline_health: f64, tolerance: f64) -> Self {
        let intensity = &model.as_severity();
        let floor = intensity.min.max(0.0);
        // One step is the gentlest level worth trying (50 ms, not 51 ms).
        let first = intensity.step.max(floor).min(intensity.requested);
        Adaptive {
            model: model.clone(),
            current: if intensity.graded { first } else { intensity.requested },
            floor,
            ceiling: intensity.requested,
            step: intensity.step,
            threshold: baseline_health * (1.0 - tolerance),
            max_tolerated: None,
        }
    }

    pub fn current(&self) -> f64 {
        self.model.level(self.current)
    }

    /// The harshest level tolerated: the highest, or for a descending
    /// intensity the lowest.
    pub fn max_tolerated(&self) -> Option<f64> {
        self.max_tolerated.map(|s| self.model.level(s))
    }

    /// Takes the health measured at the current level; returns the next level.
    pub fn observe(&mut self, health: f64) -> f64 {
        self.advance(health);
        self.current()
    }

    fn advance(&mut self, health: f64) {
        if health >= self.threshold {
            self.max_tolerated = Some(self.max_tolerated.map_or(self.current, |m| m.max(self.current)));
            self.current = (self.current + self.step).min(self.ceiling);
        } else {
            self.current = (self.current - self.step).max(self.floor.max(self.step.min(self.ceiling)));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use faultline_plugin_runtime::model::IntensityScope;

    fn intensity(requested: f64, step: f64) -> Intensity {
        Intensity {
            requested,
            min: 0.0,
            max: 100.0,
            step,
            unit: "percent".into(),
            scope: IntensityScope::PerTarget,
            graded: true,
            ramp: true,
            ramp_ms: None,
            descending: false,
        }
    }

    fn battery(requested: f64) -> Intensity {
        Intensity { min: 1.0, descending: true, ..intensity(requested, 10.0) }
    }

    #[test]
    fn a_descending_intensity_ramps_down_from_its_maximum_to_the_requested_level() {
        let ramp = Ramp::new(&battery(20.0), 8000);
        assert_eq!(ramp.levels(), &[90.0, 80.0, 70.0, 60.0, 50.0, 40.0, 30.0, 20.0]);
        assert_eq!(ramp.level_at(0), 90.0);
        assert_eq!(ramp.level_at(4000), 20.0);
    }

    #[test]
    fn adaptive_lowers_a_descending_intensity_while_tolerated_and_reports_the_lowest() {
        let mut a = Adaptive::new(&battery(50.0), 1.0, 0.2);
        assert_eq!(a.current(), 90.0);
        assert_eq!(a.observe(1.0), 80.0);
        assert_eq!(a.observe(1.0), 70.0);
        assert_eq!(a.observe(0.1), 80.0);
        assert_eq!(a.max_tolerated(), Some(80.0), "the harshest level tolerated is the lowest");
        for _ in 0..10 {
            a.observe(1.0);
        }
        assert_eq!(a.current(), 50.0, "never below the requested floor");
    }

    #[test]
    fn by_default_the_ramp_reaches_the_requested_level_at_the_middle_of_injecting_and_holds_it() {
        let ramp = Ramp::new(&intensity(80.0, 20.0), 6000);
        assert_eq!(ramp.levels(), &[20.0, 40.0, 60.0, 80.0]);
        assert_eq!(ramp.level_at(0), 20.0);
        assert_eq!(ramp.level_at(999), 20.0);
        assert_eq!(ramp.level_at(1000), 40.0);
        assert_eq!(ramp.level_at(2000), 60.0);
        assert_eq!(ramp.level_at(2999), 60.0);
        assert_eq!(ramp.level_at(3000), 80.0);
        assert_eq!(ramp.level_at(5999), 80.0);
    }

    #[test]
    fn the_last_level_is_exactly_the_requested_one() {
        let ramp = Ramp::new(&Intensity { min: 0.1, ..intensity(0.7, 0.3) }, 1000);
        assert_eq!(*ramp.levels().last().unwrap(), 0.7);
    }

    #[test]
    fn ramp_seconds_sets_when_the_requested_level_is_reached() {
        let ramp = Ramp::new(&Intensity { ramp_ms: Some(1000), ..intensity(80.0, 20.0) }, 6000);
        assert_eq!(ramp.level_at(0), 20.0);
        assert_eq!(ramp.level_at(1000), 80.0);
        let held = Ramp::new(&Intensity { ramp_ms: Some(0), ..intensity(80.0, 20.0) }, 6000);
        assert_eq!(held.levels(), &[80.0]);
        let whole = Ramp::new(&Intensity { ramp_ms: Some(6000), ..intensity(80.0, 20.0) }, 6000);
        assert_eq!(whole.level_at(5999), 60.0);
        assert_eq!(whole.level_at(6000), 80.0);
    }

    #[test]
    fn without_ramp_the_requested_level_holds_throughout() {
        let ramp = Ramp::new(&Intensity { ramp: false, ..intensity(80.0, 20.0) }, 4000);
        assert_eq!(ramp.levels(), &[80.0]);
    }

    #[test]
    fn ramp_never_has_more_than_ten_levels() {
        let ramp = Ramp::new(&intensity(1000.0, 1.0), 10_000);
        assert_eq!(ramp.levels().len(), 10);
        assert_eq!(*ramp.levels().last().unwrap(), 1000.0);
    }

    #[test]
    fn adaptive_rises_while_tolerated_and_backs_off_when_not() {
        let mut a = Adaptive::new(&intensity(100.0, 10.0), 1.0, 0.2);
        assert_eq!(a.current(), 10.0);
        assert_eq!(a.observe(0.95), 20.0);
        assert_eq!(a.observe(0.90), 30.0);
        assert_eq!(a.observe(0.50), 20.0);
        assert_eq!(a.max_tolerated(), Some(20.0));
        assert_eq!(a.observe(0.99), 30.0);
        assert_eq!(a.max_tolerated(), Some(20.0));
    }

    #[test]
    fn adaptive_never_exceeds_the_requested_ceiling() {
        let mut a = Adaptive::new(&intensity(25.0, 10.0), 1.0, 0.1);
        for _ in 0..10 {
            a.observe(1.0);
        }
        assert_eq!(a.current(), 25.0);
        assert_eq!(a.max_tolerated(), Some(25.0));
    }
}
