//! Faults carried out by fault rules on a web app's traffic (through the
//! fault proxy or the service worker). A frontend target names its site
//! and route in its attributes; the token names the rule and what it
//! selects, so adjusting and reverting need nothing else.

use crate::proxy::{self, RequestMatch, Rule, RuleAction};
use crate::{FaultError, Target};

/// What a rule-backed fault's revert token holds.
#[derive(Debug, Clone, PartialEq)]
pub struct RuleToken {
    pub rule: String,
    pub site: String,
    pub path: String,
    /// Comma-separated; empty: every method.
    pub methods: String,
}

impl RuleToken {
    /// Lines, as a path pattern holds no newline.
    pub fn encode(&self) -> String {
        format!("rule:{}\n{}\n{}\n{}", self.rule, self.site, self.path, self.methods)
    }

    pub fn decode(token: &str) -> Result<RuleToken, FaultError> {
        let bad = || FaultError::Failed(format!("`{token}` is not a rule token"));
        let mut lines = token.strip_prefix("rule:").ok_or_else(bad)?.split('\n');
        let mut next = || lines.next().map(String::from).ok_or_else(bad);
        Ok(RuleToken { rule: next()?, site: next()?, path: next()?, methods: next()? })
    }

    fn request_match(&self) -> RequestMatch {
        let methods = self.methods.split(',').filter(|m| !m.is_empty()).map(String::from).collect();
        RequestMatch { methods, path: self.path.clone() }
    }
}

fn attribute<'a>(target: &'a Target, name: &str) -> Option<&'a str> {
    target.attributes.iter().find(|(k, _)| k == name).map(|(_, v)| v.as_str())
}

/// Puts a rule on the target's route; returns the revert token.
pub fn add(target: &Target, action: RuleAction, probability: f64, ttl_seconds: u32) -> Result<String, FaultError> {
    let site = attribute(target, "site").ok_or_else(|| FaultError::TargetUnavailable(format!("`{}` is not a web target", target.id)))?;
    let token = RuleToken {
        rule: String::new(),
        site: site.into(),
        path: attribute(target, "path").unwrap_or("/*").into(),
        methods: attribute(target, "methods").unwrap_or_default().into(),
    };
    put(token, action, probability, ttl_seconds)
}

fn put(mut token: RuleToken, action: RuleAction, probability: f64, ttl_seconds: u32) -> Result<String, FaultError> {
    let rule = Rule { match_: token.request_match(), action, probability: probability.clamp(0.0, 1.0), ttl_seconds };
    token.rule = proxy::add_rule(&token.site, &rule)?;
    Ok(token.encode())
}

/// Replaces the rule a token names with one doing `action`: the new rule
/// is in place before the old one goes, so there is no gap.
pub fn replace(token: &str, action: RuleAction, probability: f64, ttl_seconds: u32) -> Result<String, FaultError> {
    let old = RuleToken::decode(token)?;
    let new = put(old.clone(), action, probability, ttl_seconds)?;
    proxy::remove_rule(&old.rule)?;
    Ok(new)
}

/// Removes the rule a token names; one already gone is fine.
pub fn remove(token: &str) -> Result<(), FaultError> {
    Ok(proxy::remove_rule(&RuleToken::decode(token)?.rule)?)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tokens_round_trip() {
        let t = RuleToken { rule: "rule-1".into(), site: "http://a:80".into(), path: "/api/*".into(), methods: "GET,POST".into() };
        assert_eq!(RuleToken::decode(&t.encode()).unwrap(), t);
        assert_eq!(t.request_match().methods, ["GET", "POST"]);
        let all = RuleToken { methods: String::new(), ..t };
        assert!(RuleToken::decode(&all.encode()).unwrap().request_match().methods.is_empty());
        assert!(RuleToken::decode("helper:x@y").is_err());
    }
}
