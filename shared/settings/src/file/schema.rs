//! The agents file as written, and its parsing.

use super::ConfigFileError;
use baton_core::input_guard::InputGuardMode;
use serde::de::{self, Deserializer, Visitor};
use serde::Deserialize;
use std::collections::BTreeMap;
use std::fmt;
use std::time::Duration;

// -------------------------------------------------------------------- schema

/// The file as written. Every table denies unknown keys, so a typo is an
/// error rather than a silently ignored setting.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct FileSpec {
    #[serde(default)]
    pub(super) defaults: AgentSpec,
    #[serde(default)]
    pub(super) agents: BTreeMap<String, AgentSpec>,
    #[serde(default)]
    pub(super) guard: GuardSpec,
    #[serde(default)]
    pub(super) budgets: BudgetSpec,
    /// Deployment-wide limits on tasks: how many run at once, how many a
    /// person may start in an hour.
    #[serde(default)]
    pub(super) limits: super::capacity::DeploymentLimitsSpec,
    /// What people may schedule through the agent.
    #[serde(default)]
    pub(super) schedules: SchedulesSpec,
    /// Model prices, by model id.
    #[serde(default)]
    pub(super) prices: BTreeMap<String, PriceSpec>,
    /// Declared HTTP tools, by name.
    #[serde(default)]
    pub(super) http_tools: BTreeMap<String, HttpToolSpec>,
    /// MCP servers, by name.
    #[serde(default)]
    pub(super) mcp: BTreeMap<String, McpSpec>,
    /// Which agent serves Slack messages where, in order.
    #[serde(default)]
    pub(super) routes: Vec<super::routes::RouteSpec>,
    /// The deployment's model tiers.
    #[serde(default)]
    pub(super) models: super::judgment::ModelsSpec,
    /// Prompt modules the router may choose, by name.
    #[serde(default)]
    pub(super) modules: BTreeMap<String, super::judgment::ModuleSpec>,
    /// Roles, by name (docs/policies.md).
    #[serde(default)]
    pub(super) roles: BTreeMap<String, super::roles::RoleSpec>,
    /// The Cedar tool policies (docs/policies.md).
    #[serde(default)]
    pub(super) policy: PolicySpec,
    /// OAuth providers of HTTP APIs, by name (docs/connections.md).
    #[serde(default)]
    pub(super) oauth: BTreeMap<String, super::connection::OAuthSpec>,
    /// Per-person connections: how long a task waits, who may name a user.
    #[serde(default)]
    pub(super) connection: super::connection::ConnectionSpec,
}

/// `[policy]`: a Cedar policy set, in a file (relative to the agents
/// file) or inline; checked and evaluated by the worker side only.
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct PolicySpec {
    pub(super) file: Option<String>,
    pub(super) text: Option<String>,
}

/// `[mcp.NAME]`: an MCP server over streamable HTTP whose tools agents may
/// use (`tools = ["mcp:NAME"]`). The key names are a contract
/// (docs/tools.md).
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct McpSpec {
    pub(super) url: Option<String>,
    #[serde(default)]
    pub(super) headers: BTreeMap<String, String>,
    pub(super) tools: Option<Vec<String>>,
    pub(super) require_approval: Option<Vec<String>>,
    pub(super) timeout: Option<DurationSpec>,
    /// `"oauth"`: per-person connections.
    pub(super) auth: Option<String>,
    pub(super) scopes: Option<Vec<String>>,
    pub(super) client_id: Option<String>,
    pub(super) client_secret: Option<String>,
}

/// `[http_tools.NAME]`: an HTTP API called as a tool. The key names are a
/// contract (docs/tools.md).
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct HttpToolSpec {
    pub(super) description: Option<String>,
    pub(super) method: Option<String>,
    pub(super) url: Option<String>,
    #[serde(default)]
    pub(super) headers: BTreeMap<String, String>,
    pub(super) parameters: Option<toml::Value>,
    pub(super) timeout: Option<DurationSpec>,
    /// `{ oauth = "NAME" }`: the person's token for `[oauth.NAME]`.
    pub(super) auth: Option<super::connection::HttpToolAuthSpec>,
}

#[derive(Clone, Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct AgentSpec {
    pub(super) description: Option<String>,
    pub(super) model: Option<String>,
    pub(super) fallback_models: Option<Vec<String>>,
    pub(super) system_prompt: Option<String>,
    pub(super) system_prompt_file: Option<String>,
    pub(super) tools: Option<Vec<String>>,
    pub(super) delegates: Option<Vec<String>>,
    pub(super) max_output_tokens: Option<u32>,
    pub(super) max_tool_result_chars: Option<usize>,
    pub(super) stream: Option<bool>,
    pub(super) limits: Option<LimitsSpec>,
    pub(super) approval: Option<ApprovalSpec>,
    pub(super) context: Option<ContextSpec>,
    pub(super) escalation: Option<EscalationSpec>,
    pub(super) ask_user: Option<AskUserSpec>,
    pub(super) slack: Option<super::slack::SlackSpec>,
    pub(super) http_request: Option<HttpRequestSpec>,
    pub(super) models: Option<super::judgment::ModelsSpec>,
    pub(super) router: Option<crate::judgment::RouterMode>,
    pub(super) modules: Option<Vec<String>>,
    pub(super) plan: Option<crate::judgment::PlanMode>,
    pub(super) supervise: Option<super::judgment::SuperviseSpec>,
    pub(super) quality_gate: Option<bool>,
    pub(super) expose: Option<Vec<crate::agent::Surface>>,
    pub(super) on_new_message: Option<crate::OnNewMessage>,
}

/// `[agents.NAME.http_request]`: where the agent's `http_request` may go.
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct HttpRequestSpec {
    pub(super) allow_hosts: Option<Vec<String>>,
    pub(super) approve_new_hosts: Option<bool>,
}

/// `[agents.NAME.ask_user]`: how long a question waits for its reply.
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct AskUserSpec {
    pub(super) expires_after: Option<DurationSpec>,
}

#[derive(Clone, Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct LimitsSpec {
    pub(super) max_steps: Option<u32>,
    pub(super) max_segments: Option<u32>,
    pub(super) max_tokens: Option<u64>,
    pub(super) max_cost_usd: Option<f64>,
    pub(super) deadline: Option<DurationSpec>,
    pub(super) max_tool_calls: Option<BTreeMap<String, u32>>,
    pub(super) max_identical_calls: Option<u32>,
    pub(super) loop_window: Option<u32>,
}

#[derive(Clone, Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct ApprovalSpec {
    pub(super) require: Option<Vec<String>>,
    pub(super) approvers: Option<Vec<String>>,
    pub(super) expires_after: Option<DurationSpec>,
}

#[derive(Clone, Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct ContextSpec {
    pub(super) window_tokens: Option<u32>,
    pub(super) keep_last_turns: Option<u32>,
    pub(super) soft_trim_at: Option<f64>,
    pub(super) hard_clear_at: Option<f64>,
    pub(super) compact_at: Option<f64>,
    pub(super) trim_tool_results_over_chars: Option<usize>,
}

#[derive(Clone, Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct EscalationSpec {
    pub(super) model: Option<String>,
    pub(super) after_tool_errors: Option<u32>,
}

#[derive(Clone, Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct GuardSpec {
    pub(super) input_guard: Option<InputGuardMode>,
}

#[derive(Clone, Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct BudgetSpec {
    pub(super) workspace_monthly_tokens: Option<u64>,
    pub(super) user_monthly_tokens: Option<u64>,
    /// US dollars per workspace (the HTTP API: `api`) per month.
    pub(super) workspace_monthly_cost_usd: Option<f64>,
    /// US dollars per Slack user per month.
    pub(super) user_monthly_cost_usd: Option<f64>,
    /// `[budgets.users.U123]`: one person's own budget, over any role's.
    #[serde(default)]
    pub(super) users: BTreeMap<String, super::capacity::PersonBudgetSpec>,
    /// `[budgets.roles.NAME]`: the budget of the people of a role.
    #[serde(default)]
    pub(super) roles: BTreeMap<String, super::capacity::PersonBudgetSpec>,
}

/// `[schedules]`: how many schedules people may make through the agent,
/// and how often they may fire. The key names are a contract
/// (docs/configuration.md).
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct SchedulesSpec {
    pub(super) max_per_user: Option<u32>,
    pub(super) max_per_team: Option<u32>,
    pub(super) min_interval: Option<DurationSpec>,
}

/// `[prices."MODEL"]`: US dollars per million tokens.
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct PriceSpec {
    pub(super) input_per_mtok: Option<f64>,
    pub(super) output_per_mtok: Option<f64>,
}

/// A positive duration written as a string: `"90s"`, `"15m"`, `"2h"`,
/// `"1d"`, `"500ms"`, or a sum such as `"1h30m"`.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(super) struct DurationSpec(pub(super) Duration);

impl<'de> Deserialize<'de> for DurationSpec {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl Visitor<'_> for V {
            type Value = DurationSpec;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a duration such as \"90s\", \"15m\", \"2h\" or \"1h30m\"")
            }
            fn visit_str<E: de::Error>(self, v: &str) -> Result<DurationSpec, E> {
                parse_duration(v).map(DurationSpec).map_err(E::custom)
            }
        }
        d.deserialize_str(V)
    }
}

/// Parses a duration such as `"90s"`, `"15m"`, `"2h"`, `"1d"`, `"250ms"` or
/// `"1h30m"`. Zero is refused: every duration in the file is a limit.
pub fn parse_duration(text: &str) -> Result<Duration, String> {
    let bad =
        || format!("`{text}` is not a duration; write e.g. \"90s\", \"15m\", \"2h\" or \"1h30m\"");
    let s = text.trim();
    if s.is_empty() {
        return Err(bad());
    }
    let mut total_ms: u64 = 0;
    let mut rest = s;
    while !rest.is_empty() {
        let digits = rest
            .find(|c: char| !c.is_ascii_digit())
            .unwrap_or(rest.len());
        if digits == 0 {
            return Err(bad());
        }
        let n: u64 = rest[..digits].parse().map_err(|_| bad())?;
        rest = &rest[digits..];
        let unit_len = rest
            .find(|c: char| c.is_ascii_digit())
            .unwrap_or(rest.len());
        let unit_ms: u64 = match &rest[..unit_len] {
            "ms" => 1,
            "s" => 1000,
            "m" => 60_000,
            "h" => 3_600_000,
            "d" => 86_400_000,
            _ => return Err(bad()),
        };
        rest = &rest[unit_len..];
        total_ms = n
            .checked_mul(unit_ms)
            .and_then(|v| total_ms.checked_add(v))
            .ok_or_else(|| format!("`{text}` is too long"))?;
    }
    if total_ms == 0 {
        return Err(format!("`{text}`: must be longer than zero"));
    }
    Ok(Duration::from_millis(total_ms))
}

/// Keys that belong in `limits` rather than directly in an agent table;
/// used to turn an "unknown field" error into a hint.
pub(super) const LIMIT_KEYS: &[&str] = &[
    "max_steps",
    "max_segments",
    "max_tokens",
    "max_cost_usd",
    "deadline",
    "max_tool_calls",
    "max_identical_calls",
    "loop_window",
];

pub(super) fn parse_file(origin: &str, text: &str) -> Result<FileSpec, ConfigFileError> {
    let de = toml::Deserializer::parse(text).map_err(|e| parse_error(origin, text, None, &e))?;
    serde_path_to_error::deserialize(de).map_err(|e| {
        let path = e.path().to_string();
        parse_error(origin, text, Some(path), e.inner())
    })
}

pub(super) fn parse_error(
    origin: &str,
    text: &str,
    path: Option<String>,
    e: &toml::de::Error,
) -> ConfigFileError {
    let line = e.span().map(|span| line_col(text, span.start));
    let mut message = e.message().trim().to_owned();
    let path = path.filter(|p| !p.is_empty() && p != ".");
    // A limit written directly in an agent table: say where it goes.
    if let Some(field) = message
        .strip_prefix("unknown field `")
        .and_then(|r| r.split('`').next())
        .map(str::to_owned)
    {
        let table = path.as_deref().and_then(|p| {
            p.strip_suffix(field.as_str())
                .and_then(|t| t.strip_suffix('.'))
                .map(str::to_owned)
        });
        if LIMIT_KEYS.contains(&field.as_str()) {
            if let Some(table) = table.filter(|t| is_agent_table(t)) {
                message.push_str(&format!(
                    " (limits go in a `limits` table: `[{table}.limits]`)"
                ));
            }
        }
    }
    ConfigFileError::Parse {
        origin: origin.to_owned(),
        line,
        path,
        message,
    }
}

/// `defaults` or `agents.NAME`.
pub(super) fn is_agent_table(path: &str) -> bool {
    path == "defaults"
        || path
            .strip_prefix("agents.")
            .is_some_and(|n| !n.contains('.'))
}

pub(super) fn line_col(text: &str, offset: usize) -> (usize, usize) {
    let before = text.get(..offset).unwrap_or(text);
    let line = before.matches('\n').count() + 1;
    let col = before.rsplit('\n').next().map_or(0, |l| l.chars().count()) + 1;
    (line, col)
}
