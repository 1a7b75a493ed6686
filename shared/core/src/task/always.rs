//! "Always in this thread": a person who may approve a call can allow its
//! kind for the rest of the conversation — for `http_request` the same
//! method and host, for any other tool the same tool. The rules are kept on
//! the conversation ([`crate::store::Thread`]), consulted by the worker
//! before it asks for an approval, and removed by `forget approvals`.

use crate::{Instant, ToolCall};
use serde::{Deserialize, Serialize};
use serde_json::Value;

/// Most rules one conversation keeps: the oldest goes past it, so a thread
/// clicked through for hours cannot grow its record without bound.
pub const MAX_RULES: usize = 50;

/// What an always-rule allows. Equal kinds are one rule.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Allowed {
    /// `http_request` with this method (upper case) to this host (lower
    /// case, no port).
    Http { method: String, host: String },
    /// Any call of this tool.
    Tool { tool: String },
}

/// A rule kept on a conversation: what it allows, who chose it and when.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct AlwaysRule {
    #[serde(flatten)]
    pub allowed: Allowed,
    /// The Slack user (or `api`) who chose "Always in this thread".
    pub by: String,
    #[serde(with = "crate::clock::as_millis")]
    pub at: Instant,
}

impl Allowed {
    /// The kind of call `call` is, as a rule would name it; `None` for an
    /// `http_request` without a readable http(s) URL (nothing to match a
    /// later call by, so no rule).
    pub fn of(call: &ToolCall) -> Option<Allowed> {
        if call.name != "http_request" {
            return Some(Allowed::Tool {
                tool: call.name.clone(),
            });
        }
        let args = &call.arguments;
        let host = args
            .get("url")
            .and_then(Value::as_str)
            .and_then(crate::host::host_of)?;
        let method = args
            .get("method")
            .and_then(Value::as_str)
            .unwrap_or("GET")
            .trim()
            .to_ascii_uppercase();
        Some(Allowed::Http { method, host })
    }
}

impl std::fmt::Display for Allowed {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Allowed::Http { method, host } => write!(f, "http_request {method} {host}"),
            Allowed::Tool { tool } => f.write_str(tool),
        }
    }
}

impl AlwaysRule {
    /// Whether `call` is of the kind this rule allows.
    pub fn allows(&self, call: &ToolCall) -> bool {
        Allowed::of(call).is_some_and(|a| a == self.allowed)
    }

    /// The rule in words, as an approval it decided records it: `always in
    /// this thread: http_request GET api.example.com, by U1`.
    pub fn describe(&self) -> String {
        format!("always in this thread: {}, by {}", self.allowed, self.by)
    }
}

/// The rule among `rules` that allows `call`, if any.
pub fn matching<'a>(rules: &'a [AlwaysRule], call: &ToolCall) -> Option<&'a AlwaysRule> {
    let kind = Allowed::of(call)?;
    rules.iter().find(|r| r.allowed == kind)
}

/// Adds `rule` to `rules`; `false` when an equal rule is there already
/// (the first one stands). Keeps at most [`MAX_RULES`], dropping the oldest.
pub fn add(rules: &mut Vec<AlwaysRule>, rule: AlwaysRule) -> bool {
    if rules.iter().any(|r| r.allowed == rule.allowed) {
        return false;
    }
    rules.push(rule);
    if rules.len() > MAX_RULES {
        let extra = rules.len() - MAX_RULES;
        rules.drain(..extra);
    }
    true
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn call(name: &str, arguments: Value) -> ToolCall {
        ToolCall {
            id: "c".into(),
            name: name.into(),
            arguments,
        }
    }

    fn rule_for(c: &ToolCall) -> AlwaysRule {
        AlwaysRule {
            allowed: Allowed::of(c).unwrap(),
            by: "U1".into(),
            at: Instant(0),
        }
    }

    #[test]
    fn http_rules_hold_method_and_host_only() {
        let first = call(
            "http_request",
            json!({"method": "get", "url": "https://API.example.com/a?x=1"}),
        );
        let rule = rule_for(&first);
        assert_eq!(
            rule.describe(),
            "always in this thread: http_request GET api.example.com, by U1"
        );
        // Another path, query and port on the same host: allowed.
        assert!(rule.allows(&call(
            "http_request",
            json!({"url": "https://api.example.com:8443/b"})
        )));
        // Another method, another host, a look-alike host: asked again.
        for other in [
            json!({"method": "POST", "url": "https://api.example.com/a"}),
            json!({"method": "GET", "url": "https://api.example.com.evil.test/a"}),
            json!({"method": "GET", "url": "https://example.com/a"}),
            json!({"method": "GET"}),
            json!({"method": "GET", "url": "file:///etc/passwd"}),
        ] {
            assert!(
                !rule.allows(&call("http_request", other.clone())),
                "{other}"
            );
        }
        // A call without a readable URL cannot make a rule.
        assert_eq!(Allowed::of(&call("http_request", json!({}))), None);
    }

    #[test]
    fn other_tools_are_allowed_by_name_whatever_their_arguments() {
        let rule = rule_for(&call("deploy", json!({"env": "staging"})));
        assert_eq!(rule.describe(), "always in this thread: deploy, by U1");
        assert!(rule.allows(&call("deploy", json!({"env": "prod"}))));
        assert!(!rule.allows(&call("deploy_all", json!({}))));
        assert!(!rule.allows(&call("http_request", json!({"url": "https://deploy/"}))));
    }

    #[test]
    fn equal_rules_are_kept_once_and_the_list_is_bounded() {
        let mut rules = Vec::new();
        let c = call("deploy", json!({}));
        assert!(add(&mut rules, rule_for(&c)));
        let mut again = rule_for(&c);
        again.by = "U2".into();
        assert!(!add(&mut rules, again));
        assert_eq!(rules.len(), 1);
        assert_eq!(rules[0].by, "U1");
        for i in 0..MAX_RULES + 5 {
            add(&mut rules, rule_for(&call(&format!("tool_{i}"), json!({}))));
        }
        assert_eq!(rules.len(), MAX_RULES);
        assert!(matching(&rules, &c).is_none(), "the oldest went first");
        assert!(matching(&rules, &call(&format!("tool_{}", MAX_RULES + 4), json!({}))).is_some());
    }

    #[test]
    fn rules_read_back_as_written() {
        let rule = rule_for(&call("http_request", json!({"url": "http://h.test/"})));
        let text = serde_json::to_string(&rule).unwrap();
        assert_eq!(
            text,
            r#"{"kind":"http","method":"GET","host":"h.test","by":"U1","at":0}"#
        );
        assert_eq!(serde_json::from_str::<AlwaysRule>(&text).unwrap(), rule);
    }
}
