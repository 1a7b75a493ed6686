//! Settings of the deployment rather than of one agent: the `[guard]`,
//! `[budgets]` and `[schedules]` tables, the `[[routes]]`, and what a
//! loaded configuration yields.

use crate::agent::{AgentConfig, Agents};
use crate::http_tool::HttpToolDecl;
use crate::mcp::McpServerDecl;
use crate::route::Routes;
use baton_core::input_guard::InputGuardMode;
use std::collections::BTreeMap;

/// The `[guard]` table.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct GuardSettings {
    pub input_guard: InputGuardMode,
}

/// The `[budgets]` table: monthly token and cost budgets; `None` means
/// unlimited. Cost budgets are in micro-dollars (US$ 0.000001), the unit
/// the usage ledger counts in.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct BudgetSettings {
    pub workspace_monthly_tokens: Option<u64>,
    pub user_monthly_tokens: Option<u64>,
    /// `[budgets.users.U123] monthly_tokens`: one person's own budget, in
    /// place of `user_monthly_tokens` (and of any role's), by Slack user id.
    pub users: BTreeMap<String, u64>,
    /// `[budgets.roles.NAME] monthly_tokens`: the budget of a role's
    /// people; with several roles, the largest applies.
    pub roles: BTreeMap<String, u64>,
    /// `budgets.workspace_monthly_cost_usd`, in micro-dollars.
    pub workspace_monthly_cost_micros: Option<u64>,
    /// `budgets.user_monthly_cost_usd`, in micro-dollars.
    pub user_monthly_cost_micros: Option<u64>,
    /// `[budgets.users.U123] monthly_cost_usd`, in micro-dollars.
    pub users_cost_micros: BTreeMap<String, u64>,
    /// `[budgets.roles.NAME] monthly_cost_usd`, in micro-dollars.
    pub roles_cost_micros: BTreeMap<String, u64>,
}

impl BudgetSettings {
    /// Whether any per-person budget is set (default, role or own; tokens
    /// or cost).
    pub fn has_person_budgets(&self) -> bool {
        self.user_monthly_tokens.is_some()
            || !self.users.is_empty()
            || !self.roles.is_empty()
            || self.has_person_cost_budgets()
    }

    fn has_person_cost_budgets(&self) -> bool {
        self.user_monthly_cost_micros.is_some()
            || !self.users_cost_micros.is_empty()
            || !self.roles_cost_micros.is_empty()
    }

    /// Whether any monthly cost budget is set.
    pub fn has_cost_budgets(&self) -> bool {
        self.workspace_monthly_cost_micros.is_some() || self.has_person_cost_budgets()
    }

    /// Whether a person's budget may depend on their roles.
    pub fn has_role_budgets(&self) -> bool {
        !self.roles.is_empty() || !self.roles_cost_micros.is_empty()
    }

    /// The monthly token budget of `user`, who has `roles`: their own
    /// override, else the largest of their roles' budgets, else
    /// `user_monthly_tokens`; `None` is unlimited.
    pub fn person_monthly_tokens(&self, user: &str, roles: &[String]) -> Option<u64> {
        person_budget(
            &self.users,
            &self.roles,
            self.user_monthly_tokens,
            user,
            roles,
        )
    }

    /// The monthly cost budget of `user` in micro-dollars, by the same
    /// precedence as [`Self::person_monthly_tokens`], over the cost keys
    /// only (a person's own entry that sets only tokens leaves their cost
    /// budget to their roles and the default).
    pub fn person_monthly_cost_micros(&self, user: &str, roles: &[String]) -> Option<u64> {
        person_budget(
            &self.users_cost_micros,
            &self.roles_cost_micros,
            self.user_monthly_cost_micros,
            user,
            roles,
        )
    }
}

/// A person's own budget, else their roles' largest, else the default.
fn person_budget(
    users: &BTreeMap<String, u64>,
    by_role: &BTreeMap<String, u64>,
    default: Option<u64>,
    user: &str,
    roles: &[String],
) -> Option<u64> {
    if let Some(own) = users.get(user) {
        return Some(*own);
    }
    roles
        .iter()
        .filter_map(|r| by_role.get(r).copied())
        .max()
        .or(default)
}

/// The `[limits]` table of the deployment: how many tasks run at once
/// (`[limits.concurrency]`) and how many one person may start in an hour.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct LimitSettings {
    pub concurrency: ConcurrencySettings,
    /// Tasks one person may start per clock hour (UTC); `None` is
    /// unlimited.
    pub tasks_per_hour: Option<u32>,
}

/// `[limits.concurrency]`: tasks running at once, per person, per Slack
/// workspace (the HTTP API counts as one, `api`) and per agent; `None` is
/// unlimited.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ConcurrencySettings {
    pub per_user: Option<u32>,
    pub per_team: Option<u32>,
    pub per_agent: Option<u32>,
}

impl ConcurrencySettings {
    /// Whether any cap is set.
    pub fn any(&self) -> bool {
        self.per_user.is_some() || self.per_team.is_some() || self.per_agent.is_some()
    }
}

/// The `[schedules]` table: what people may schedule through the agent
/// (schedules made over the HTTP API, and by schedule admins, are not
/// limited).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ScheduleSettings {
    /// Schedules one person may own (default 10).
    pub max_per_user: u32,
    /// Schedules the people of one workspace may own together (default 100).
    pub max_per_team: u32,
    /// The shortest time between two firings of a person's schedule
    /// (default 15 minutes).
    pub min_interval: std::time::Duration,
}

impl Default for ScheduleSettings {
    fn default() -> Self {
        ScheduleSettings {
            max_per_user: 10,
            max_per_team: 100,
            min_interval: std::time::Duration::from_secs(15 * 60),
        }
    }
}

/// Settings of the deployment rather than of one agent.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct GlobalSettings {
    pub guard: GuardSettings,
    pub budgets: BudgetSettings,
    pub limits: LimitSettings,
    pub schedules: ScheduleSettings,
    /// The `[[routes]]`: which agent serves Slack messages where.
    pub routes: Routes,
    /// The `[roles.NAME]` tables.
    pub roles: crate::roles::RoleTable,
    /// The `[connection]` table (per-person OAuth connections).
    pub connection: crate::connection::ConnectionSettings,
}

/// What a loaded configuration yields.
#[derive(Clone, Debug)]
pub struct AgentsConfig {
    pub agents: Agents,
    pub settings: GlobalSettings,
    /// The file's `[http_tools]`, by name, `${NAME}` references unresolved.
    pub http_tools: Vec<HttpToolDecl>,
    /// The file's `[mcp]` servers, by name, `${NAME}` references
    /// unresolved.
    pub mcp_servers: Vec<McpServerDecl>,
    /// The file's `[oauth.NAME]` providers, `${NAME}` references
    /// unresolved.
    pub oauth_providers: Vec<crate::connection::OAuthProviderDecl>,
    /// The `[policy]` set's text, not yet parsed: Cedar is the worker's
    /// (the ingest links no policy engine).
    pub policy: Option<PolicySource>,
}

/// A Cedar policy set as the agents file gives it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PolicySource {
    /// Where it came from, for errors: the file's path, or `policy.text`.
    pub origin: String,
    pub text: String,
}

impl AgentsConfig {
    /// The configuration when there is no file: `base` as the only agent.
    pub fn from_base(base: AgentConfig) -> Self {
        AgentsConfig {
            agents: Agents::new(base, Vec::new()),
            settings: GlobalSettings::default(),
            http_tools: Vec::new(),
            mcp_servers: Vec::new(),
            oauth_providers: Vec::new(),
            policy: None,
        }
    }
}
