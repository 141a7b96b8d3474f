//! The rule book: every fault rule plugins have put on a site, with the
//! experiment that owns it and the moment it ends by itself. The fault
//! proxy's listeners and the service worker's rules feed both read it, so
//! a rule means the same thing in either place.

use std::collections::BTreeMap;
use std::sync::Mutex;
use std::time::Duration;

use faultline_plugin_runtime::capability::proxy::{Rule, RuleAction};
use serde::Serialize;

use crate::store::now_ms;

/// Most rules one site may hold: a plugin adding rules in a loop fails
/// instead of growing the host.
pub const MAX_RULES_PER_SITE: usize = 64;
/// Longest a rule may live, whatever a plugin asks.
pub const MAX_TTL: Duration = Duration::from_secs(48 * 3600);

/// A rule as stored.
#[derive(Debug, Clone)]
pub struct StoredRule {
    pub id: String,
    pub site: String,
    /// The experiment whose plugin added it.
    pub owner: String,
    pub rule: Rule,
    /// Epoch milliseconds after which it no longer applies.
    pub expires_at: i64,
    /// Order of addition: the first matching rule applies first.
    seq: u64,
}

impl StoredRule {
    fn live(&self, now: i64) -> bool {
        self.expires_at > now
    }

    /// Whether the rule selects a request with this method and path.
    pub fn selects(&self, method: &str, path: &str) -> bool {
        let m = &self.rule.match_;
        (m.methods.is_empty() || m.methods.iter().any(|x| x.eq_ignore_ascii_case(method))) && path_matches(&m.path, path)
    }

    /// The rule as the service worker's feed carries it.
    pub fn feed(&self) -> FeedRule {
        let now = now_ms();
        let action = match self.rule.action {
            RuleAction::Delay((ms, jitter_ms)) => FeedAction::Delay { ms, jitter_ms },
            RuleAction::Abort(status) => FeedAction::Status { status },
            RuleAction::Reset => FeedAction::Reset,
            RuleAction::Throttle(kbps) => FeedAction::Throttle { kbps },
        };
        FeedRule {
            id: self.id.clone(),
            methods: self.rule.match_.methods.iter().map(|m| m.to_ascii_uppercase()).collect(),
            path: self.rule.match_.path.clone(),
            probability: self.rule.probability,
            expires_at: self.expires_at,
            expires_in_ms: (self.expires_at - now).max(0),
            action,
        }
    }
}

/// A rule in the service worker's feed (`GET /collector/rules`).
#[derive(Debug, Clone, Serialize, PartialEq, utoipa::ToSchema)]
pub struct FeedRule {
    pub id: String,
    /// Methods it applies to; empty: all.
    pub methods: Vec<String>,
    /// Pattern on the URL path; `*` matches any run of characters.
    pub path: String,
    /// Share of matching requests affected, 0 to 1.
    pub probability: f64,
    /// Epoch milliseconds after which the worker drops it, host or no host.
    pub expires_at: i64,
    /// The same, as a span from this answer: the worker counts it on its own
    /// clock, which may not agree with the host's.
    pub expires_in_ms: i64,
    pub action: FeedAction,
}

#[derive(Debug, Clone, Serialize, PartialEq, utoipa::ToSchema)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum FeedAction {
    /// Hold the request this long, plus up to `jitter_ms` either way.
    Delay { ms: u32, jitter_ms: u32 },
    /// Answer with this status instead of forwarding.
    Status { status: u16 },
    /// Fail the request as a network error.
    Reset,
    /// Release the response body at this many kilobytes per second.
    Throttle { kbps: u32 },
}

#[derive(Debug, thiserror::Error, PartialEq)]
pub enum RuleError {
    #[error("{0}")]
    Invalid(String),
    #[error("site `{0}` holds {MAX_RULES_PER_SITE} rules already")]
    Full(String),
}

#[derive(Default)]
pub struct RuleBook {
    rules: Mutex<BTreeMap<String, StoredRule>>,
    next_seq: std::sync::atomic::AtomicU64,
    /// When each experiment's effects must be gone (its listeners' expiry):
    /// no rule of it lives past that, whatever time-to-live a plugin asks.
    deadlines: Mutex<BTreeMap<String, i64>>,
}

impl RuleBook {
    /// No rule of `owner` lives past `at` (epoch ms).
    pub fn set_deadline(&self, owner: &str, at: i64) {
        self.deadlines.lock().expect("deadlines lock").insert(owner.into(), at);
    }

    /// Checks a rule and adds it; returns its id.
    pub fn add(&self, site: &str, rule: Rule, owner: &str) -> Result<String, RuleError> {
        check(&rule)?;
        let now = now_ms();
        let ttl = Duration::from_secs(u64::from(rule.ttl_seconds)).min(MAX_TTL);
        let mut expires_at = now + ttl.as_millis() as i64;
        if let Some(deadline) = self.deadlines.lock().expect("deadlines lock").get(owner) {
            expires_at = expires_at.min(*deadline);
        }
        let mut rules = self.rules.lock().expect("rule book lock");
        rules.retain(|_, r| r.live(now));
        if rules.values().filter(|r| r.site == site).count() >= MAX_RULES_PER_SITE {
            return Err(RuleError::Full(site.into()));
        }
        let id = format!("rule-{}", uuid::Uuid::now_v7());
        let seq = self.next_seq.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let stored = StoredRule { id: id.clone(), site: site.into(), owner: owner.into(), rule, expires_at, seq };
        rules.insert(id.clone(), stored);
        Ok(id)
    }

    /// Removes a rule; `None` when it is gone (removed or expired).
    pub fn remove(&self, id: &str) -> Option<StoredRule> {
        self.rules.lock().expect("rule book lock").remove(id)
    }

    /// The owner of a live rule.
    pub fn owner(&self, id: &str) -> Option<String> {
        let rules = self.rules.lock().expect("rule book lock");
        rules.get(id).filter(|r| r.live(now_ms())).map(|r| r.owner.clone())
    }

    /// The live rules an experiment holds on a site, in the order they were added.
    pub fn of(&self, site: &str, owner: &str) -> Vec<StoredRule> {
        let now = now_ms();
        let rules = self.rules.lock().expect("rule book lock");
        let mut found: Vec<StoredRule> = rules.values().filter(|r| r.site == site && r.owner == owner && r.live(now)).cloned().collect();
        found.sort_by_key(|r| r.seq);
        found
    }

    /// Drops every rule of an experiment (its end, whatever its plugin did).
    pub fn drop_owner(&self, owner: &str) -> usize {
        self.deadlines.lock().expect("deadlines lock").remove(owner);
        let mut rules = self.rules.lock().expect("rule book lock");
        let before = rules.len();
        rules.retain(|_, r| r.owner != owner);
        before - rules.len()
    }
}

fn check(rule: &Rule) -> Result<(), RuleError> {
    let invalid = |why: &str| Err(RuleError::Invalid(why.into()));
    if !(0.0..=1.0).contains(&rule.probability) {
        return invalid("probability must be between 0 and 1");
    }
    let path = &rule.match_.path;
    if path.is_empty() || path.len() > 512 || !(path.starts_with('/') || path.starts_with('*')) {
        return invalid("the path pattern must start with / or *, at most 512 characters");
    }
    if rule.match_.methods.len() > 16 || rule.match_.methods.iter().any(|m| m.is_empty() || m.len() > 16 || !m.bytes().all(|b| b.is_ascii_alphabetic())) {
        return invalid("methods must be HTTP method names");
    }
    if rule.ttl_seconds == 0 {
        return invalid("a rule needs a time-to-live");
    }
    match rule.action {
        RuleAction::Delay((ms, jitter)) if ms > 600_000 || jitter > 600_000 => invalid("a delay is at most 600000 ms"),
        RuleAction::Abort(status) if !(200..=599).contains(&status) => invalid("the status must be an HTTP status 200-599 (a service worker can answer no other)"),
        RuleAction::Throttle(0) => invalid("a throttle needs at least 1 KB/s"),
        _ => Ok(()),
    }
}

/// Whether `path` matches `pattern`, where `*` stands for any run of
/// characters (slashes included) and everything else matches itself.
pub fn path_matches(pattern: &str, path: &str) -> bool {
    let parts: Vec<&str> = pattern.split('*').collect();
    if parts.len() == 1 {
        return pattern == path;
    }
    let (first, last) = (parts[0], parts[parts.len() - 1]);
    if !path.starts_with(first) || path.len() < first.len() + last.len() || !path.ends_with(last) {
        return false;
    }
    let mut rest = &path[first.len()..path.len() - last.len()];
    for middle in &parts[1..parts.len() - 1] {
        match rest.find(middle) {
            Some(at) => rest = &rest[at + middle.len()..],
            None => return false,
        }
    }
    true
}

#[cfg(test)]
mod tests {
    use super::*;
    use faultline_plugin_runtime::capability::proxy::RequestMatch;

    fn rule(path: &str, action: RuleAction) -> Rule {
        Rule { match_: RequestMatch { methods: vec![], path: path.into() }, action, probability: 1.0, ttl_seconds: 60 }
    }

    #[test]
    fn patterns_match_with_wildcards_anywhere() {
        assert!(path_matches("/api/*", "/api/items"));
        assert!(path_matches("/api/*", "/api/"));
        assert!(!path_matches("/api/*", "/apix"));
        assert!(path_matches("*", "/"));
        assert!(path_matches("/*.js", "/static/app.js"));
        assert!(!path_matches("/*.js", "/static/app.css"));
        assert!(path_matches("/a/*/c/*", "/a/b/c/d"));
        assert!(!path_matches("/a/*/c", "/a/c"));
        assert!(path_matches("/exact", "/exact"));
        assert!(!path_matches("/exact", "/exact/"));
    }

    #[test]
    fn rules_are_checked_owned_ordered_and_end_by_themselves() {
        let book = RuleBook::default();
        assert!(matches!(book.add("s", rule("api", RuleAction::Reset), "e1"), Err(RuleError::Invalid(_))));
        assert!(matches!(book.add("s", rule("/x", RuleAction::Abort(1000)), "e1"), Err(RuleError::Invalid(_))));
        let a = book.add("s", rule("/a", RuleAction::Reset), "e1").unwrap();
        let b = book.add("s", rule("/b", RuleAction::Abort(503)), "e1").unwrap();
        book.add("s", rule("/c", RuleAction::Reset), "e2").unwrap();
        assert_eq!(book.of("s", "e1").iter().map(|r| r.id.clone()).collect::<Vec<_>>(), [a.clone(), b]);
        assert_eq!(book.owner(&a).as_deref(), Some("e1"));
        let mut expired = rule("/old", RuleAction::Reset);
        expired.ttl_seconds = 1;
        let old = book.add("s", expired, "e1").unwrap();
        book.rules.lock().unwrap().get_mut(&old).unwrap().expires_at = now_ms() - 1;
        assert_eq!(book.owner(&old), None, "an expired rule is gone");
        assert_eq!(book.of("s", "e1").len(), 2);
        assert_eq!(book.drop_owner("e1"), 3);
        assert!(book.of("s", "e1").is_empty() && book.of("s", "e2").len() == 1);
    }

    #[test]
    fn no_rule_outlives_its_experiments_deadline() {
        let book = RuleBook::default();
        let deadline = now_ms() + 5_000;
        book.set_deadline("e1", deadline);
        let mut long = rule("/a", RuleAction::Reset);
        long.ttl_seconds = 3600;
        book.add("s", long.clone(), "e1").unwrap();
        let held = &book.of("s", "e1")[0];
        assert_eq!(held.expires_at, deadline);
        let fed = held.feed();
        assert!(fed.expires_in_ms > 0 && fed.expires_in_ms <= 5_000, "{fed:?}");
        book.add("s", long, "e2").unwrap();
        assert!(book.of("s", "e2")[0].expires_at > deadline + 3_000_000, "other experiments keep their own");
    }

    #[test]
    fn a_site_holds_a_bounded_number_of_rules() {
        let book = RuleBook::default();
        for _ in 0..MAX_RULES_PER_SITE {
            book.add("s", rule("/a", RuleAction::Reset), "e").unwrap();
        }
        assert_eq!(book.add("s", rule("/a", RuleAction::Reset), "e"), Err(RuleError::Full("s".into())));
    }
}
