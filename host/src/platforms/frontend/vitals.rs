//! Core Web Vitals as the collector reports them: names, the ratings'
//! thresholds (web-vitals v5: LCP 2500/4000 ms, CLS 0.1/0.25, INP
//! 200/500 ms), the checks on a reported value, and the per-phase p75.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

/// The vitals the collector reports.
pub const NAMES: [&str; 3] = ["LCP", "CLS", "INP"];

/// Good up to the first threshold, poor above the second.
pub fn thresholds(name: &str) -> Option<(f64, f64)> {
    match name {
        "LCP" => Some((2500.0, 4000.0)),
        "CLS" => Some((0.1, 0.25)),
        "INP" => Some((200.0, 500.0)),
        _ => None,
    }
}

/// Largest believable value: ten minutes for LCP and INP, 100 for CLS.
fn ceiling(name: &str) -> f64 {
    if name == "CLS" { 100.0 } else { 600_000.0 }
}

/// `good`, `needs-improvement` or `poor`, as web-vitals spells them.
pub fn rating(name: &str, value: f64) -> Option<&'static str> {
    let (good, poor) = thresholds(name)?;
    Some(if value <= good {
        "good"
    } else if value <= poor {
        "needs-improvement"
    } else {
        "poor"
    })
}

/// A rating as a health figure: good 1, needs improvement 0.5, poor 0.
pub fn rating_score(rating: &str) -> f64 {
    match rating {
        "good" => 1.0,
        "needs-improvement" => 0.5,
        _ => 0.0,
    }
}

/// Checks one reported value; returns the rating the host gives it.
pub fn check(name: &str, value: f64, rating_given: Option<&str>) -> Result<&'static str, String> {
    if !NAMES.contains(&name) {
        return Err(format!("`{name}` is not one of LCP, CLS, INP"));
    }
    if !value.is_finite() || value < 0.0 || value > ceiling(name) {
        return Err(format!("{name} must be between 0 and {}", ceiling(name)));
    }
    let rating = rating(name, value).expect("a known vital");
    match rating_given {
        Some(given) if given != rating => Err(format!("{name} {value} rates `{rating}`, not `{given}`")),
        _ => Ok(rating),
    }
}

/// One vital in one phase: its 75th percentile over page loads (the
/// figure web-vitals reports on) and that figure's rating.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, ToSchema)]
pub struct VitalSummary {
    pub p75: f64,
    pub rating: String,
    /// Page loads that reported it.
    pub count: usize,
}

/// The p75 and rating of each vital, from `(name, value)` pairs.
pub fn summarize(values: &[(String, f64)]) -> BTreeMap<String, VitalSummary> {
    let mut by_name: BTreeMap<String, Vec<f64>> = BTreeMap::new();
    for (name, value) in values {
        by_name.entry(name.clone()).or_default().push(*value);
    }
    by_name
        .into_iter()
        .filter_map(|(name, mut v)| {
            v.sort_by(f64::total_cmp);
            // Nearest rank, as for the other percentiles of the metrics.
            let p75 = v[((0.75 * v.len() as f64).ceil() as usize).clamp(1, v.len()) - 1];
            let rating = rating(&name, p75)?.to_string();
            Some((name, VitalSummary { p75, rating, count: v.len() }))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ratings_follow_the_web_vitals_thresholds() {
        assert_eq!(rating("LCP", 2500.0), Some("good"));
        assert_eq!(rating("LCP", 2501.0), Some("needs-improvement"));
        assert_eq!(rating("LCP", 4001.0), Some("poor"));
        assert_eq!(rating("CLS", 0.1), Some("good"));
        assert_eq!(rating("CLS", 0.26), Some("poor"));
        assert_eq!(rating("INP", 200.0), Some("good"));
        assert_eq!(rating("INP", 500.0), Some("needs-improvement"));
        assert_eq!(rating("FID", 1.0), None);
    }

    #[test]
    fn reported_values_are_checked_and_rated_by_the_host() {
        assert_eq!(check("INP", 120.0, Some("good")), Ok("good"));
        assert_eq!(check("INP", 120.0, None), Ok("good"));
        assert!(check("INP", 820.0, Some("good")).is_err(), "a rating that does not fit its value");
        assert!(check("LCP", -1.0, None).is_err());
        assert!(check("CLS", f64::NAN, None).is_err());
        assert!(check("CLS", 1e9, None).is_err());
        assert!(check("TTFB", 1.0, None).is_err());
    }

    #[test]
    fn the_summary_is_the_p75_of_page_loads_with_its_rating() {
        let lcp = |v: f64| ("LCP".to_string(), v);
        let s = summarize(&[lcp(1000.0), lcp(2000.0), lcp(3000.0), lcp(5000.0), ("CLS".into(), 0.05)]);
        assert_eq!(s["LCP"], VitalSummary { p75: 3000.0, rating: "needs-improvement".into(), count: 4 });
        assert_eq!(s["CLS"].rating, "good");
        assert!(!s.contains_key("INP"));
    }
}
