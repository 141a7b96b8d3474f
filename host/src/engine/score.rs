//! The resilience score: the one place its formula lives.
//!
//! With B the mean health of the baseline phase (1 when it has no sample):
//!
//! | component    | weight | value                                                            |
//! |--------------|--------|------------------------------------------------------------------|
//! | retained     | 0.4    | mean health while injecting / B                                  |
//! | worst        | 0.2    | lowest health while injecting / B                                |
//! | recovery     | 0.4    | 1 − (time until health is back within the band) / recovering length; 0 if it never is |
//! | expectations | 0.3    | expectations met / expectations given; only when some are given  |
//!
//! Each component is clamped to 0..1; the score is 100 × the weighted mean
//! of the components present, clamped to 0..100 and rounded to one decimal.
//! "Within the band" means health ≥ B × (1 − tolerance), tolerance as in the plan.
//!
//! What "while injecting" covers: every reading of the injecting phase. By
//! default the ramp (`intensity.rs`) reaches the requested intensity at the
//! middle of that phase and holds it, so at least half of those readings
//! are taken at the level asked for (`ramp_seconds` moves that point,
//! `ramp: false` holds it from the start); the metrics route marks them
//! (`at_requested`) and summarizes them apart. An experiment that ends
//! `failed` (a revert it could not make included) gets no score.

use serde::Serialize;
use utoipa::ToSchema;

const W_RETAINED: f64 = 0.4;
const W_WORST: f64 = 0.2;
const W_RECOVERY: f64 = 0.4;
const W_EXPECTATIONS: f64 = 0.3;

/// What the score is computed from.
#[derive(Debug, Clone, Default)]
pub struct ScoreInputs {
    pub baseline: Vec<f64>,
    pub injecting: Vec<f64>,
    /// Milliseconds from the start of recovering until health was back in
    /// the band; none if it never was.
    pub recovered_after_ms: Option<u64>,
    pub recovering_ms: u64,
    /// Expectations met and given.
    pub expectations: Option<(u32, u32)>,
}

/// The score and the components it came from.
#[derive(Debug, Clone, Serialize, ToSchema, PartialEq)]
pub struct Score {
    /// 0 to 100.
    pub value: f64,
    pub baseline_health: f64,
    pub retained: f64,
    pub worst: f64,
    pub recovery: f64,
    pub expectations: Option<f64>,
}

fn mean(v: &[f64]) -> Option<f64> {
    (!v.is_empty()).then(|| v.iter().sum::<f64>() / v.len() as f64)
}

pub fn score(inputs: &ScoreInputs) -> Score {
    let baseline = mean(&inputs.baseline).unwrap_or(1.0).max(0.01);
    let ratio = |h: f64| (h / baseline).clamp(0.0, 1.0);
    let retained = mean(&inputs.injecting).map_or(1.0, ratio);
    let worst = inputs.injecting.iter().copied().reduce(f64::min).map_or(1.0, ratio);
    let recovery = match inputs.recovered_after_ms {
        None => 0.0,
        Some(_) if inputs.recovering_ms == 0 => 1.0,
        Some(t) => (1.0 - t as f64 / inputs.recovering_ms as f64).clamp(0.0, 1.0),
    };
    let expectations = inputs.expectations.map(|(met, given)| if given == 0 { 1.0 } else { (met as f64 / given as f64).clamp(0.0, 1.0) });

    let mut weighted = W_RETAINED * retained + W_WORST * worst + W_RECOVERY * recovery;
    let mut weights = W_RETAINED + W_WORST + W_RECOVERY;
    if let Some(e) = expectations {
        weighted += W_EXPECTATIONS * e;
        weights += W_EXPECTATIONS;
    }
    let value = (100.0 * weighted / weights).clamp(0.0, 100.0);
    Score { value: (value * 10.0).round() / 10.0, baseline_health: baseline, retained, worst, recovery, expectations }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_system_that_never_degrades_and_recovers_at_once_scores_100() {
        let s = score(&ScoreInputs {
            baseline: vec![1.0, 1.0],
            injecting: vec![1.0, 1.0],
            recovered_after_ms: Some(0),
            recovering_ms: 1000,
            expectations: None,
        });
        assert_eq!(s.value, 100.0);
    }

    #[test]
    fn a_system_that_goes_down_and_never_recovers_scores_0() {
        let s = score(&ScoreInputs {
            baseline: vec![1.0],
            injecting: vec![0.0, 0.0],
            recovered_after_ms: None,
            recovering_ms: 1000,
            expectations: Some((0, 3)),
        });
        assert_eq!(s.value, 0.0);
    }

    #[test]
    fn health_above_baseline_never_scores_above_100() {
        let s = score(&ScoreInputs {
            baseline: vec![0.5],
            injecting: vec![1.0],
            recovered_after_ms: Some(0),
            recovering_ms: 1000,
            expectations: Some((5, 3)),
        });
        assert_eq!(s.value, 100.0);
    }

    #[test]
    fn half_health_and_half_time_recovery_weigh_as_documented() {
        let s = score(&ScoreInputs {
            baseline: vec![1.0],
            injecting: vec![0.5, 0.5],
            recovered_after_ms: Some(500),
            recovering_ms: 1000,
            expectations: None,
        });
        assert_eq!(s.value, 50.0);
    }
}
