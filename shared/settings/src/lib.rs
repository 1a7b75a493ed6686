//! Baton's settings as data: agents ([`AgentConfig`], [`Agents`]), their
//! approval rules, context and escalation knobs, model tiers, routing,
//! plans, supervision and quality gate ([`judgment`]), prices and cost budget, and
//! the deployment's guard and monthly budgets — and the agents file that
//! declares them ([`file`], `docs/configuration.md`).
//!
//! Both the ingest handler and the worker read these, so they sit below
//! both: this crate knows the domain types of `baton-core` and nothing of
//! how tasks run.

pub mod agent;
pub mod approval;
pub mod connection;
pub mod context;
pub mod deployment;
pub mod file;
pub mod http_tool;
pub mod judgment;
pub mod mcp;
pub mod new_message;
pub mod price;
pub mod roles;
pub mod route;
pub mod slack;

pub use agent::{AgentConfig, Agents, Exposure, Surface, DEFAULT_SYSTEM_PROMPT};
pub use approval::{ApprovalRule, ApprovalRules};
pub use baton_core::input_guard::InputGuardMode;
pub use connection::{
    ConnectionSettings, HttpToolAuth, McpAuth, McpOAuth, OAuthProviderDecl,
    DEFAULT_CONNECTION_EXPIRES_AFTER,
};
pub use context::{ContextSettings, Escalation};
pub use deployment::{
    AgentsConfig, BudgetSettings, ConcurrencySettings, GlobalSettings, GuardSettings,
    LimitSettings, PolicySource, ScheduleSettings,
};
pub use file::{AgentsSource, ConfigFileError, Problem};
pub use http_tool::{parse_template, HttpToolDecl, TemplatePart};
pub use judgment::{Cadence, PlanMode, PromptModule, RouterMode, Supervision, Tier, Tiers};
pub use mcp::McpServerDecl;
pub use new_message::OnNewMessage;
pub use price::{ModelPrice, ModelPrices};
pub use roles::{RoleDecl, RoleLookup, RoleTable};
pub use route::{Route, RouteChannel, Routes};
pub use slack::{AgentSlack, SuggestedPrompt};
