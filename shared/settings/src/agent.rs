//! Agent configurations: what a task runs with.

use crate::approval::ApprovalRules;
use crate::context::{ContextSettings, Escalation};
use crate::judgment::{PlanMode, PromptModule, RouterMode, Supervision, Tier, Tiers};
use crate::price::ModelPrices;
use baton_core::Limits;
use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

/// One named agent: its instructions, model, tools and limits.
#[derive(Clone, Debug, PartialEq)]
pub struct AgentConfig {
    pub name: String,
    pub system_prompt: String,
    /// The model of its default tier (`model`, or `models.default`).
    pub model: String,
    pub max_tokens: u32,
    /// Names of the tools it may use; `None` means every registered tool.
    pub tools: Option<Vec<String>>,
    /// Budgets given to each new task; their `deadline_at` is always
    /// `None` here ([`AgentConfig::deadline_after`] sets it per task).
    pub limits: Limits,
    /// How long after its creation a task must end (`limits.deadline`);
    /// [`AgentConfig::task_limits`] makes it the task's `deadline_at`.
    pub deadline_after: Option<Duration>,
    /// Tool results longer than this many characters are cut, with a marker.
    pub max_tool_result_chars: usize,
    /// What it is for: shown to a parent choosing whom to delegate to.
    pub description: Option<String>,
    /// Models tried in order when `model` is overloaded or keeps failing.
    pub fallback_models: Vec<String>,
    /// A stronger model to switch to after repeated tool errors.
    pub escalation: Option<Escalation>,
    /// Per-task caps on the calls of one tool, by tool name.
    pub tool_call_caps: BTreeMap<String, u32>,
    /// The same call (tool and arguments) this many times in a row, or
    /// twice this many times among the last `loop_window` calls, is
    /// repeating: refused with a warning once, then it ends the task.
    pub max_identical_calls: u32,
    /// How many recent calls the repetition check looks at.
    pub loop_window: u32,
    /// Per-task cost budget in US dollars; `None`: none.
    pub max_cost_usd: Option<f64>,
    /// Prices of models, to count what each step costs (`[prices]` of the
    /// agents file over the built-in ones).
    pub prices: ModelPrices,
    /// Which tool calls wait for a human decision.
    pub approval: ApprovalRules,
    /// The context pipeline's thresholds.
    pub context: ContextSettings,
    /// Named agents its `delegate` calls may start.
    pub delegates: Vec<String>,
    /// How long an `ask_user` question waits for its reply
    /// (`ask_user.expires_after`).
    pub ask_user_expires_after: Duration,
    /// Its Slack surfaces (`[agents.NAME.slack]`): suggested prompts.
    pub slack: crate::slack::AgentSlack,
    /// Whether answers stream as the model writes them (`stream`, default
    /// on): into the Slack message, and as `answer_delta` events.
    pub stream: bool,
    /// Where its `http_request` may go ([`baton_core::egress`]).
    pub http_request: HttpRequestPolicy,
    /// Its fast and strong tiers (`[models]`, `models`); the default tier
    /// is `model`. [`AgentConfig::tier_model`] picks a tier's model.
    pub tiers: Tiers,
    /// Whether a task starts by routing (`router`;
    /// [`AgentConfig::routes`] says whether it does).
    pub router: RouterMode,
    /// The prompt modules the router may choose from (`modules`), in the
    /// order listed.
    pub modules: Vec<PromptModule>,
    /// When a task writes a plan first (`plan`).
    pub plan: PlanMode,
    /// Whether and how often progress is checked (`supervise`).
    pub supervision: Supervision,
    /// Whether an answer is judged before it is delivered
    /// (`quality_gate`).
    pub quality_gate: bool,
    /// Where else it can be called from (`expose`): an MCP tool at `/mcp`,
    /// an A2A agent (docs/integrations.md). None by default.
    pub expose: Exposure,
    /// What a message does to the conversation's running task
    /// (`on_new_message`).
    pub on_new_message: crate::OnNewMessage,
}

/// A surface an agent may be exposed on (`expose = ["mcp", "a2a"]`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Surface {
    /// A tool of Baton's MCP server, `/mcp`.
    Mcp,
    /// An A2A agent with its agent card.
    A2a,
}

/// The surfaces an agent is exposed on, beyond Slack and `POST /tasks`.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Exposure(Vec<Surface>);

impl Exposure {
    pub fn new(surfaces: impl IntoIterator<Item = Surface>) -> Self {
        let mut v: Vec<Surface> = surfaces.into_iter().collect();
        v.sort();
        v.dedup();
        Exposure(v)
    }
    pub fn contains(&self, surface: Surface) -> bool {
        self.0.contains(&surface)
    }
    pub fn mcp(&self) -> bool {
        self.contains(Surface::Mcp)
    }
    pub fn a2a(&self) -> bool {
        self.contains(Surface::A2a)
    }
}

/// How long an `ask_user` question waits when the agent does not say.
/// `[agents.NAME.http_request]`: per-agent egress control
/// (docs/tools.md, *Egress*).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct HttpRequestPolicy {
    /// The only hosts `http_request` reaches, every hop; `None`: any
    /// public host.
    pub allow_hosts: Option<baton_core::egress::AllowedHosts>,
    /// A GET to a host the conversation has not seen waits for approval
    /// once untrusted tool output is in the context.
    pub approve_new_hosts: bool,
}

pub const DEFAULT_ASK_USER_EXPIRES_AFTER: Duration = Duration::from_secs(24 * 3600);

impl AgentConfig {
    pub fn new(name: &str, model: &str) -> Self {
        AgentConfig {
            name: name.to_owned(),
            system_prompt: DEFAULT_SYSTEM_PROMPT.to_owned(),
            model: model.to_owned(),
            max_tokens: 4096,
            tools: None,
            limits: Limits::default(),
            deadline_after: None,
            max_tool_result_chars: 16_000,
            description: None,
            fallback_models: Vec::new(),
            ask_user_expires_after: DEFAULT_ASK_USER_EXPIRES_AFTER,
            escalation: None,
            tool_call_caps: BTreeMap::new(),
            max_identical_calls: 3,
            loop_window: 10,
            max_cost_usd: None,
            prices: ModelPrices::builtin(),
            approval: ApprovalRules::default(),
            context: ContextSettings::default(),
            delegates: Vec::new(),
            slack: Default::default(),
            stream: true,
            http_request: HttpRequestPolicy::default(),
            tiers: Tiers::default(),
            router: RouterMode::default(),
            modules: Vec::new(),
            plan: PlanMode::default(),
            supervision: Supervision::default(),
            quality_gate: true,
            expose: Exposure::default(),
            on_new_message: crate::OnNewMessage::Steer,
        }
    }

    /// The model of `tier`, falling back to what the agent has: `fast`
    /// without a fast tier is the default tier (`model`); `strong` without
    /// a strong tier is the escalation model, else the default tier.
    pub fn tier_model(&self, tier: Tier) -> &str {
        let configured = match tier {
            Tier::Fast => self.tiers.fast.as_deref(),
            Tier::Default => None,
            Tier::Strong => self
                .tiers
                .strong
                .as_deref()
                .or(self.escalation.as_ref().map(|e| e.model.as_str())),
        };
        configured.unwrap_or(&self.model)
    }

    /// Whether a task of this agent starts with a routing call: `router`
    /// is `auto` and there is a fast tier to route with.
    pub fn routes(&self) -> bool {
        self.router == RouterMode::Auto && self.tiers.fast.is_some()
    }

    /// One of its prompt modules, by name.
    pub fn module(&self, name: &str) -> Option<&PromptModule> {
        self.modules.iter().find(|m| m.name == name)
    }

    /// The limits of a task of this agent created at `now`: the agent's
    /// relative deadline made absolute.
    pub fn task_limits(&self, now: baton_core::Instant) -> Limits {
        Limits {
            deadline_at: self.deadline_after.map(|d| now + d),
            ..self.limits.clone()
        }
    }

    pub fn allows_tool(&self, name: &str) -> bool {
        self.tools
            .as_ref()
            .is_none_or(|t| t.iter().any(|n| n == name))
    }

    /// The MCP servers whose tools it may use (`mcp:NAME` in `tools`);
    /// none without a `tools` list.
    pub fn mcp_servers(&self) -> impl Iterator<Item = &str> {
        self.tools
            .iter()
            .flatten()
            .filter_map(|t| crate::mcp::server_of_entry(t))
    }
}

pub const DEFAULT_SYSTEM_PROMPT: &str = "You are Baton, a helpful assistant that can call tools. \
Answer concisely. Use tools when they help; when a tool fails, say so plainly. \
If there is nothing worth saying, answer exactly NO_REPLY.";

/// The agents this deployment knows, by name. `default` always exists.
#[derive(Clone, Debug)]
pub struct Agents {
    by_name: Arc<BTreeMap<String, AgentConfig>>,
}

impl Agents {
    /// A set with `default` as given plus any others.
    pub fn new(default: AgentConfig, others: Vec<AgentConfig>) -> Self {
        let mut by_name = BTreeMap::new();
        let mut default = default;
        default.name = "default".to_owned();
        by_name.insert(default.name.clone(), default);
        for a in others {
            by_name.insert(a.name.clone(), a);
        }
        Agents {
            by_name: Arc::new(by_name),
        }
    }

    pub fn get(&self, name: &str) -> Option<&AgentConfig> {
        self.by_name.get(name)
    }

    /// The agent for `name`, falling back to `default` for tasks created by
    /// an older configuration that named an agent since removed.
    pub fn resolve(&self, name: &str) -> &AgentConfig {
        self.by_name
            .get(name)
            .or_else(|| self.by_name.get("default"))
            .unwrap_or_else(|| unreachable!("Agents::new always inserts default"))
    }

    pub fn names(&self) -> impl Iterator<Item = &str> {
        self.by_name.keys().map(String::as_str)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tiers_fall_back_to_what_the_agent_has() {
        let mut a = AgentConfig::new("a", "mid");
        for tier in [Tier::Fast, Tier::Default, Tier::Strong] {
            assert_eq!(a.tier_model(tier), "mid");
        }
        assert!(!a.routes(), "nothing to route with");
        a.escalation = Some(Escalation {
            model: "esc".into(),
            after_tool_errors: 3,
        });
        assert_eq!(a.tier_model(Tier::Strong), "esc");
        a.tiers = Tiers {
            fast: Some("quick".into()),
            strong: Some("big".into()),
        };
        assert_eq!(a.tier_model(Tier::Fast), "quick");
        assert_eq!(a.tier_model(Tier::Default), "mid");
        assert_eq!(a.tier_model(Tier::Strong), "big");
        assert!(a.routes());
        a.router = RouterMode::Off;
        assert!(!a.routes());
    }

    #[test]
    fn the_judgment_is_on_by_default() {
        let a = AgentConfig::new("a", "m");
        assert_eq!(a.router, RouterMode::Auto);
        assert_eq!(a.plan, PlanMode::Auto);
        assert_eq!(a.supervision, Supervision::default());
        assert!(a.quality_gate);
        assert!(a.modules.is_empty() && a.module("x").is_none());
    }
}
