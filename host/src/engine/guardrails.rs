//! Guardrails: limits a request puts on itself. The size limits are
//! checked before anything is injected; abort conditions are watched at
//! every reading of the baseline and injecting phases, and one that trips
//! ends the experiment `aborted`, rolled back.
//!
//! A condition looks at a window: the readings of the last `for_seconds`.
//! Its value over the window is the share of probe checks that succeeded
//! (`success_rate`), the mean latency of the probe checks (`latency_ms`),
//! or the mean health (`health`). It trips at the first reading where the
//! experiment has been watched for `for_seconds` and that value is below
//! `below` (or above `above`). With `for_seconds: 0` one reading decides.

use std::collections::VecDeque;
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

/// Most abort conditions one experiment may have.
pub const MAX_CONDITIONS: usize = 10;
/// Longest window a condition may look at.
const MAX_WINDOW_SECONDS: f64 = 3600.0;

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct Guardrails {
    /// Refuse the start (422 `blast_radius_exceeded`) when more containers
    /// than this depend on the targets, directly or transitively.
    pub max_blast_radius: Option<usize>,
    /// Refuse the start (422 `too_many_targets`) when the selectors match
    /// more targets than this.
    pub max_targets: Option<usize>,
    /// End the experiment `aborted`, rolled back, when one of these trips.
    #[serde(default)]
    pub abort_when: Vec<AbortCondition>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum Metric {
    /// Share of probe checks that succeeded (0-1).
    SuccessRate,
    /// Mean latency of the probe checks, in milliseconds.
    LatencyMs,
    /// Mean health (0-1): the platform's view times the probes' success.
    Health,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct AbortCondition {
    pub metric: Metric,
    /// Trips when the value falls below this (success_rate, health).
    pub below: Option<f64>,
    /// Trips when the value rises above this (latency_ms).
    pub above: Option<f64>,
    /// How long the window is, in seconds (0 to 3600; 0: one reading).
    #[serde(default)]
    pub for_seconds: f64,
    /// Only this probe (its index in `probes`); every probe by default.
    pub probe: Option<usize>,
}

impl Guardrails {
    /// Why the guardrails are unusable with these probes, if they are.
    /// `watched_ms` is how long conditions are watched (baseline + injecting).
    pub fn check(&self, probes: usize, watched_ms: u64) -> Result<(), String> {
        if self.max_targets == Some(0) {
            return Err("max_targets must be at least 1".into());
        }
        if self.abort_when.len() > MAX_CONDITIONS {
            return Err(format!("at most {MAX_CONDITIONS} abort conditions"));
        }
        for (i, c) in self.abort_when.iter().enumerate() {
            c.check(probes, watched_ms).map_err(|why| format!("abort_when[{i}]: {why}"))?;
        }
        Ok(())
    }
}

impl AbortCondition {
    fn check(&self, probes: usize, watched_ms: u64) -> Result<(), String> {
        match (self.metric, self.below, self.above) {
            (Metric::SuccessRate | Metric::Health, Some(b), None) if (0.0..=1.0).contains(&b) => {}
            (Metric::SuccessRate | Metric::Health, _, _) => return Err("give `below`, between 0 and 1 (and no `above`)".into()),
            (Metric::LatencyMs, None, Some(a)) if a.is_finite() && a > 0.0 => {}
            (Metric::LatencyMs, _, _) => return Err("give `above`, in milliseconds greater than 0 (and no `below`)".into()),
        }
        if !(0.0..=MAX_WINDOW_SECONDS).contains(&self.for_seconds) {
            return Err(format!("for_seconds must be 0 to {MAX_WINDOW_SECONDS}"));
        }
        if self.for_seconds * 1000.0 > watched_ms as f64 {
            return Err(format!(
                "for_seconds ({}) is longer than the baseline and injecting phases ({} s): it could never trip",
                self.for_seconds,
                watched_ms as f64 / 1000.0
            ));
        }
        let needs_probes = self.metric != Metric::Health || self.probe.is_some();
        if needs_probes && probes == 0 {
            return Err("this condition reads the probes, and the request has none".into());
        }
        if self.probe.is_some_and(|p| p >= probes) {
            return Err(format!("probe {} does not exist (the request has {probes})", self.probe.unwrap_or_default()));
        }
        if self.metric == Metric::Health && self.probe.is_some() {
            return Err("`probe` does not apply to health".into());
        }
        Ok(())
    }

    fn describe(&self, value: f64) -> String {
        let probes = self.probe.map_or("the probes".to_string(), |p| format!("probe {p}"));
        let (what, shown) = match self.metric {
            Metric::SuccessRate => (format!("the success rate of {probes}"), format!("{value:.2}")),
            Metric::LatencyMs => (format!("the mean latency of {probes}"), format!("{value:.0} ms")),
            Metric::Health => ("health".to_string(), format!("{value:.2}")),
        };
        let window = if self.for_seconds > 0.0 { format!(" over the last {} s", self.for_seconds) } else { " at one reading".into() };
        let bound = match (self.below, self.above) {
            (Some(b), _) => format!("below {b}"),
            (_, Some(a)) => format!("above {a}"),
            _ => String::new(),
        };
        format!("{what} was {shown}{window}, {bound}")
    }
}

/// One probe check of a reading: whether it passed, and its latency in ms.
pub type ProbeCheck = (bool, f64);

/// A reading as one condition counts it: when, and a sum over a count
/// (passed checks over checks, latency over checks, health over one).
type Counted = (Instant, f64, f64);

/// Watches an experiment's readings against its abort conditions.
pub struct AbortWatch {
    conditions: Vec<(AbortCondition, VecDeque<Counted>)>,
    since: Option<Instant>,
}

impl AbortWatch {
    pub fn new(conditions: &[AbortCondition]) -> Self {
        AbortWatch { conditions: conditions.iter().map(|c| (c.clone(), VecDeque::new())).collect(), since: None }
    }

    /// Takes one reading; the reason to abort, if a condition tripped.
    pub fn observe(&mut self, at: Instant, health: f64, checks: &[ProbeCheck]) -> Option<String> {
        let since = *self.since.get_or_insert(at);
        for (i, (condition, window)) in self.conditions.iter_mut().enumerate() {
            let chosen: Vec<&ProbeCheck> = match condition.probe {
                Some(p) => checks.get(p).into_iter().collect(),
                None => checks.iter().collect(),
            };
            // A sum and a count per reading, so the window weighs every check alike.
            let (sum, count) = match condition.metric {
                Metric::SuccessRate => (chosen.iter().filter(|c| c.0).count() as f64, chosen.len() as f64),
                Metric::LatencyMs => (chosen.iter().map(|c| c.1).sum(), chosen.len() as f64),
                Metric::Health => (health, 1.0),
            };
            window.push_back((at, sum, count));
            let span = Duration::from_secs_f64(condition.for_seconds);
            while window.len() > 1 && window.front().is_some_and(|(t, _, _)| at.duration_since(*t) > span) {
                window.pop_front();
            }
            if at.duration_since(since) < span {
                continue;
            }
            let (sum, count) = window.iter().fold((0.0, 0.0), |(s, c), (_, ws, wc)| (s + ws, c + wc));
            if count == 0.0 {
                continue;
            }
            let value = sum / count;
            let tripped = condition.below.is_some_and(|b| value < b) || condition.above.is_some_and(|a| value > a);
            if tripped {
                return Some(format!("abort condition {i} tripped: {}", condition.describe(value)));
            }
        }
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn condition(metric: Metric, below: Option<f64>, above: Option<f64>, for_seconds: f64) -> AbortCondition {
        AbortCondition { metric, below, above, for_seconds, probe: None }
    }

    #[test]
    fn a_window_must_be_full_before_it_trips() {
        let mut watch = AbortWatch::new(&[condition(Metric::SuccessRate, Some(0.5), None, 2.0)]);
        let t0 = Instant::now();
        let s = Duration::from_secs(1);
        assert_eq!(watch.observe(t0, 1.0, &[(false, 5.0)]), None);
        assert_eq!(watch.observe(t0 + s, 1.0, &[(false, 5.0)]), None);
        let reason = watch.observe(t0 + 2 * s, 1.0, &[(false, 5.0)]).expect("trips once two seconds are watched");
        assert!(reason.contains("success rate of the probes was 0.00 over the last 2 s, below 0.5"), "{reason}");
    }

    #[test]
    fn the_window_slides_and_weighs_every_check() {
        let mut watch = AbortWatch::new(&[condition(Metric::SuccessRate, Some(0.5), None, 2.0)]);
        let t0 = Instant::now();
        let s = Duration::from_secs(1);
        // Three good readings, then failures: the window (readings of the
        // last 2 s, three here) falls below 0.5 once most of its checks failed.
        for i in 0..3 {
            assert_eq!(watch.observe(t0 + i * s, 1.0, &[(true, 1.0), (true, 1.0)]), None);
        }
        assert_eq!(watch.observe(t0 + 3 * s, 1.0, &[(false, 1.0), (false, 1.0)]), None, "4 of 6 checks passed");
        assert!(watch.observe(t0 + 4 * s, 1.0, &[(false, 1.0), (false, 1.0)]).is_some(), "2 of 6 passed");
    }

    #[test]
    fn latency_and_health_and_single_probes() {
        let t0 = Instant::now();
        let mut latency = AbortWatch::new(&[AbortCondition { probe: Some(1), ..condition(Metric::LatencyMs, None, Some(100.0), 0.0) }]);
        assert_eq!(latency.observe(t0, 1.0, &[(true, 500.0), (true, 50.0)]), None, "probe 0 is not watched");
        assert!(latency.observe(t0 + Duration::from_millis(100), 1.0, &[(true, 5.0), (true, 150.0)]).is_some());
        let mut health = AbortWatch::new(&[condition(Metric::Health, Some(0.3), None, 0.0)]);
        assert_eq!(health.observe(t0, 0.5, &[]), None);
        assert!(health.observe(t0 + Duration::from_millis(100), 0.2, &[]).expect("trips").contains("health was 0.20 at one reading, below 0.3"));
    }

    #[test]
    fn unusable_conditions_are_refused() {
        let ok = condition(Metric::SuccessRate, Some(0.9), None, 5.0);
        assert_eq!(ok.check(1, 10_000), Ok(()));
        assert!(ok.check(0, 10_000).unwrap_err().contains("has none"));
        assert!(ok.check(1, 4_000).unwrap_err().contains("could never trip"));
        assert!(condition(Metric::SuccessRate, Some(1.5), None, 0.0).check(1, 1000).is_err());
        assert!(condition(Metric::SuccessRate, None, Some(0.5), 0.0).check(1, 1000).is_err());
        assert!(condition(Metric::LatencyMs, Some(10.0), None, 0.0).check(1, 1000).is_err());
        assert!(condition(Metric::Health, Some(0.5), None, -1.0).check(0, 1000).is_err());
        assert_eq!(condition(Metric::Health, Some(0.5), None, 0.0).check(0, 1000), Ok(()));
        assert!(AbortCondition { probe: Some(2), ..ok.clone() }.check(2, 10_000).unwrap_err().contains("does not exist"));
        assert!(Guardrails { max_targets: Some(0), ..Default::default() }.check(0, 1000).is_err());
    }
}
