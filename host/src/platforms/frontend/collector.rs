//! What the browser side asks of the frontend platform: the collector's
//! context (which experiment and phase a page is in), the service worker's
//! rules, and the vitals the collector reports.

use std::sync::Arc;

use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use super::{FrontendPlatform, sites, vitals};
use crate::capabilities::proxy::{FEED_POLL_MS, FeedRule};
use crate::engine::Plan;
use crate::store::{VitalRow, now_ms};

/// Most metrics one report may carry.
pub const MAX_METRICS: usize = 20;
/// How long after its end an experiment still takes the reports of pages
/// that were open during it (a beacon is sent when the page is left).
const LATE_REPORTS_MS: i64 = 10 * 60 * 1000;
const PHASES: [&str; 4] = ["baseline", "injecting", "recovering", "completed"];

/// The experiment a page is part of.
#[derive(Debug, Clone, Serialize, Default, ToSchema)]
pub struct Context {
    pub experiment: Option<String>,
    pub phase: Option<String>,
    pub site: Option<String>,
    /// `proxy` or `service_worker`.
    pub mode: Option<String>,
}

/// The service worker's rules for a site.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct Feed {
    pub experiment: Option<String>,
    pub phase: Option<String>,
    /// How often the worker asks again, in milliseconds.
    pub poll_ms: u64,
    pub rules: Vec<FeedRule>,
}

/// A collector's report: one page load's vitals.
#[derive(Debug, Clone, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct Report {
    /// The collector key (a `sendBeacon` cannot send headers).
    #[serde(rename = "apiKey")]
    pub api_key: Option<String>,
    pub experiment: Option<String>,
    pub phase: Option<String>,
    /// The page's URL.
    pub page: String,
    pub metrics: Vec<ReportedMetric>,
}

#[derive(Debug, Clone, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct ReportedMetric {
    /// LCP, CLS or INP.
    pub name: String,
    pub value: f64,
    /// good, needs-improvement or poor: checked against the value.
    pub rating: Option<String>,
    /// The page load's measurement id.
    pub id: String,
    pub navigation_type: Option<String>,
}

/// Why a report is refused: a stable code and a sentence.
#[derive(Debug, PartialEq)]
pub struct Refused(pub &'static str, pub String);

/// The origin of a page URL, spelled as sites are (`http://host:port`).
fn origin_of(page: &str) -> Option<String> {
    let uri: axum::http::Uri = page.parse().ok()?;
    let origin = format!("{}://{}", uri.scheme_str()?, uri.authority()?.as_str());
    sites::parse(&origin).ok().map(|e| e.site)
}

impl FrontendPlatform {
    /// The running experiment a page belongs to: through one of its
    /// listeners (proxy), or on one of its sites (service worker).
    pub fn context(&self, page: &str) -> Context {
        let Some(origin) = origin_of(page) else { return Context::default() };
        let through = self.proxy().listener_at(&origin).and_then(|l| self.session(&l.spec.experiment).map(|s| (s, l.spec.site.clone())));
        // A page on the site itself is in an experiment only when a service
        // worker brings the faults there; in proxy mode it is an unfaulted load.
        let on_site = || {
            let worker = |s: &Arc<super::Session>| s.mode == super::options::Mode::ServiceWorker && s.sites.contains(&origin);
            self.sessions().into_iter().find(worker).map(|s| (s, origin.clone()))
        };
        match through.or_else(on_site) {
            Some((session, site)) => Context {
                experiment: Some(session.experiment.clone()),
                phase: Some(session.phase()),
                site: Some(site),
                mode: Some(session.mode.as_str().into()),
            },
            None => Context::default(),
        }
    }

    /// The rules service workers on `site` apply: those of the experiments
    /// running on it in service-worker mode.
    pub fn feed(&self, site: &str) -> Feed {
        let site = sites::parse(site).map(|e| e.site).unwrap_or_default();
        let mut feed = Feed { experiment: None, phase: None, poll_ms: FEED_POLL_MS, rules: vec![] };
        for session in self.sessions().into_iter().filter(|s| s.mode == super::options::Mode::ServiceWorker && s.sites.contains(&site)) {
            feed.rules.extend(self.proxy().rules().of(&site, &session.experiment).iter().map(|r| r.feed()));
            feed.experiment = Some(session.experiment.clone());
            feed.phase = Some(session.phase());
        }
        feed
    }

    /// Checks a report and records its vitals; returns how many. `sender`
    /// is the request's `Origin` header, when the browser sent one: it must
    /// be the page's.
    pub async fn ingest(&self, report: &Report, sender: Option<&str>) -> Result<usize, Refused> {
        let invalid = |why: String| Refused("invalid_report", why);
        if report.page.len() > 2048 {
            return Err(invalid("page is longer than 2048 characters".into()));
        }
        let origin = origin_of(&report.page).ok_or_else(|| invalid("page must be the page's http(s) URL".into()))?;
        if let Some(sender) = sender.filter(|s| *s != "null")
            && origin_of(sender).as_deref() != Some(origin.as_str())
        {
            return Err(Refused("page_not_in_experiment", format!("the report comes from {sender}, not from the page's origin {origin}")));
        }
        if report.metrics.is_empty() || report.metrics.len() > MAX_METRICS {
            return Err(invalid(format!("a report carries 1 to {MAX_METRICS} metrics")));
        }
        let mut rows: Vec<(&ReportedMetric, &'static str)> = vec![];
        for (i, m) in report.metrics.iter().enumerate() {
            if rows.iter().any(|(seen, _)| seen.name == m.name && seen.id == m.id) {
                return Err(invalid(format!("metrics[{i}]: {} of page load `{}` is reported twice", m.name, m.id)));
            }
            if m.id.is_empty() || m.id.len() > 128 || m.navigation_type.as_ref().is_some_and(|n| n.len() > 32) {
                return Err(invalid(format!("metrics[{i}]: id must be 1 to 128 characters, navigation_type at most 32")));
            }
            let rating = vitals::check(&m.name, m.value, m.rating.as_deref()).map_err(|why| invalid(format!("metrics[{i}]: {why}")))?;
            rows.push((m, rating));
        }
        let Some(experiment) = report.experiment.as_deref() else {
            return Err(Refused("no_experiment", "the page is not part of a running experiment (experiment is null)".into()));
        };
        let row = self
            .store()
            .experiment(experiment)
            .await
            .map_err(|e| Refused("store_unavailable", e.to_string()))?
            .filter(|row| row.platform == "frontend")
            .ok_or_else(|| Refused("experiment_not_found", format!("no frontend experiment `{experiment}`")))?;
        if row.ended_at.is_some_and(|end| now_ms() - end > LATE_REPORTS_MS) {
            return Err(Refused("experiment_ended", format!("experiment `{experiment}` ended more than ten minutes ago")));
        }
        let plan: Plan = serde_json::from_str(&row.plan).map_err(|e| Refused("store_unavailable", e.to_string()))?;
        let serves = plan.resources.iter().any(|r| r.address == origin)
            || plan.targets.iter().any(|t| t.attributes.iter().any(|(k, v)| k == sites::SITE && *v == origin));
        if !serves {
            return Err(Refused("page_not_in_experiment", format!("{origin} is neither a site of experiment `{experiment}` nor one of its listeners")));
        }
        // A page cannot have been measured in a phase the experiment has not reached.
        let reached = PHASES.iter().position(|p| *p == row.phase).unwrap_or(PHASES.len());
        let phase = match report.phase.as_deref() {
            Some(p) if PHASES.iter().position(|q| *q == p).is_some_and(|i| i > reached) => {
                return Err(invalid(format!("phase `{p}`: the experiment is in {}", row.phase)));
            }
            Some(p) if PHASES.contains(&p) => p.to_string(),
            Some(p) => return Err(invalid(format!("phase `{p}` is not one of {}", PHASES.join(", ")))),
            None => row.phase.clone(),
        };
        let received_at = now_ms();
        for (m, rating) in &rows {
            let vital = VitalRow {
                experiment_id: experiment.into(),
                metric_id: m.id.clone(),
                name: m.name.clone(),
                phase: phase.clone(),
                value: m.value,
                rating: (*rating).into(),
                page: report.page.clone(),
                received_at,
            };
            self.store().record_vital(&vital).await.map_err(|e| Refused("store_unavailable", e.to_string()))?;
        }
        Ok(rows.len())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_page_origin_is_spelled_as_a_site() {
        assert_eq!(origin_of("http://127.0.0.1:8080/shop?x=1#top").as_deref(), Some("http://127.0.0.1:8080"));
        assert_eq!(origin_of("http://LOCALHOST/").as_deref(), Some("http://localhost:80"));
        assert_eq!(origin_of("about:blank"), None);
        assert_eq!(origin_of("/relative"), None);
    }
}
