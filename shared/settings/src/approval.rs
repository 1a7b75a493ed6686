//! Approval rules: which tool calls wait for a human, who decides, and for
//! how long.

use std::fmt;
use std::time::Duration;

/// The tool whose presence lets an agent start child tasks.
pub const DELEGATE_TOOL: &str = baton_core::tool_names::DELEGATE;
/// The tool whose calls may be qualified by HTTP method in approval rules.
pub const HTTP_TOOL: &str = baton_core::tool_names::HTTP_REQUEST;
/// The methods `http_request` supports.
pub(crate) const HTTP_METHODS: &[&str] = &["GET", "HEAD", "POST", "PUT", "PATCH", "DELETE"];

/// One approval rule: calls of `tool` (or of any tool, `*`), optionally only
/// those with the given HTTP `method`, wait for a human decision.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ApprovalRule {
    /// A tool name, or [`ApprovalRule::ANY_TOOL`].
    pub tool: String,
    /// Upper-case HTTP method; only for `http_request`.
    pub method: Option<String>,
}

impl ApprovalRule {
    /// Matches every tool.
    pub const ANY_TOOL: &'static str = "*";

    /// Parses `tool` or `http_request:METHOD` (method case-insensitive).
    pub fn parse(rule: &str) -> Result<Self, String> {
        let rule = rule.trim();
        let (tool, method) = match rule.split_once(':') {
            Some((t, m)) => (t.trim(), Some(m.trim())),
            None => (rule, None),
        };
        if tool.is_empty() {
            return Err(
                "expected `TOOL` or `http_request:METHOD`, e.g. `http_request:POST`".into(),
            );
        }
        let method = match method {
            None => None,
            Some(m) => {
                if tool != HTTP_TOOL {
                    return Err(format!(
                        "only `{HTTP_TOOL}` takes a method; write `{tool}` alone"
                    ));
                }
                let upper = m.to_ascii_uppercase();
                if !HTTP_METHODS.contains(&upper.as_str()) {
                    return Err(format!(
                        "unknown HTTP method `{m}`; expected one of {}",
                        HTTP_METHODS.join(", ")
                    ));
                }
                Some(upper)
            }
        };
        Ok(ApprovalRule {
            tool: tool.to_owned(),
            method,
        })
    }

    /// Whether a call of `tool` with these arguments falls under the rule.
    /// `http_request` without a `method` argument is a GET, as in the tool.
    pub fn matches(&self, tool: &str, arguments: &serde_json::Value) -> bool {
        if self.tool != Self::ANY_TOOL && self.tool != tool {
            return false;
        }
        match &self.method {
            None => true,
            Some(m) => match arguments.get("method") {
                None | Some(serde_json::Value::Null) => m == "GET",
                Some(serde_json::Value::String(s)) => s.trim().eq_ignore_ascii_case(m),
                // Malformed: the tool will reject it, but never let it
                // slip past a rule on that account.
                Some(_) => true,
            },
        }
    }
}

impl fmt::Display for ApprovalRule {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.method {
            Some(m) => write!(f, "{}:{m}", self.tool),
            None => f.write_str(&self.tool),
        }
    }
}

/// Which tool calls wait for a human, who may decide, and for how long.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ApprovalRules {
    /// `None`: each tool decides for its own calls
    /// ([`baton_core::Tool::needs_approval`]: `http_request` with any method
    /// but GET or HEAD). `Some`: a call matching any of these rules waits,
    /// and no other does (`Some(vec![])` turns approvals off).
    pub require: Option<Vec<ApprovalRule>>,
    /// Who may decide besides the requester: Slack user ids, and names of
    /// roles (`[roles.NAME]`) whose people may.
    pub approvers: Vec<String>,
    /// An undecided approval counts as denied after this long.
    pub expires_after: Duration,
}

impl Default for ApprovalRules {
    /// What the tools declare; the requester decides; one hour.
    fn default() -> Self {
        ApprovalRules {
            require: None,
            approvers: Vec::new(),
            expires_after: Duration::from_secs(3600),
        }
    }
}

impl ApprovalRules {
    /// Whether this call must wait for a decision; `declared` is what the
    /// tool itself says ([`baton_core::Tool::needs_approval`]).
    pub fn requires_approval(
        &self,
        tool: &str,
        arguments: &serde_json::Value,
        declared: bool,
    ) -> bool {
        match &self.require {
            None => declared,
            Some(rules) => rules.iter().any(|r| r.matches(tool, arguments)),
        }
    }

    /// Whether `user`, who has `roles`, may approve or deny a call the
    /// task of `requester` (its Slack user, if it has one) asked for.
    pub fn may_decide(&self, user: &str, requester: Option<&str>, roles: &[String]) -> bool {
        requester == Some(user) || self.is_approver(user, roles)
    }

    /// Whether `user`, who has `roles`, is one of the `approvers`, by id or
    /// by role.
    pub fn is_approver(&self, user: &str, roles: &[String]) -> bool {
        self.approvers
            .iter()
            .any(|a| a == user || roles.contains(a))
    }

    /// Whether any approver is a role: only then is a person's role worth
    /// looking up.
    pub fn names_roles(&self) -> bool {
        self.approvers
            .iter()
            .any(|a| crate::roles::valid_role_name(a))
    }
}
