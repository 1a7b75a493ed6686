//! The agents file as written, and its parsing.

use super::capacity::{BudgetSpec, DeploymentLimitsSpec};
use super::duration::DurationSpec;
use super::mcp::McpSpec;
use super::ConfigFileError;
use baton_core::input_guard::InputGuardMode;
use serde::de::{self, Deserializer, MapAccess, Visitor};
use serde::Deserialize;
use std::collections::BTreeMap;
use std::fmt;

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
    pub(super) limits: DeploymentLimitsSpec,
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
    pub(super) models: ModelsSpec,
    /// Prompt modules the router may choose, by name.
    #[serde(default)]
    pub(super) modules: BTreeMap<String, ModuleSpec>,
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
    pub(super) models: Option<ModelsSpec>,
    pub(super) router: Option<crate::judgment::RouterMode>,
    pub(super) modules: Option<Vec<String>>,
    pub(super) plan: Option<crate::judgment::PlanMode>,
    pub(super) supervise: Option<SuperviseSpec>,
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

/// `[models]` and an agent's `models`: the model of each tier.
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct ModelsSpec {
    pub(super) fast: Option<String>,
    pub(super) default: Option<String>,
    pub(super) strong: Option<String>,
}

/// `[modules.NAME]`: what the router is told (`description`) and the
/// instructions it may add (`prompt`, or `prompt_file`).
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct ModuleSpec {
    pub(super) description: Option<String>,
    pub(super) prompt: Option<String>,
    pub(super) prompt_file: Option<String>,
}

/// `supervise`: `false` (or `true`), or a table of its cadence.
#[derive(Clone, Debug, PartialEq)]
pub(super) enum SuperviseSpec {
    Switch(bool),
    Cadence(CadenceSpec),
}

/// `[agents.NAME.supervise]`.
#[derive(Clone, Debug, Default, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct CadenceSpec {
    pub(super) every_steps: Option<u32>,
    pub(super) every: Option<DurationSpec>,
}

impl<'de> Deserialize<'de> for SuperviseSpec {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = SuperviseSpec;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("false, true, or a table with `every_steps` and `every`")
            }
            fn visit_bool<E: de::Error>(self, v: bool) -> Result<SuperviseSpec, E> {
                Ok(SuperviseSpec::Switch(v))
            }
            fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<SuperviseSpec, A::Error> {
                CadenceSpec::deserialize(de::value::MapAccessDeserializer::new(map))
                    .map(SuperviseSpec::Cadence)
            }
        }
        d.deserialize_any(V)
    }
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
