//! Settings of the deployment rather than of one agent: the `[guard]`,
//! `[budgets]` and `[schedules]` tables, the `[[routes]]`, and what a
//! loaded configuration yields.

use crate::agent::{AgentConfig, Agents};
use crate::http_tool::HttpToolDecl;
use crate::mcp::McpServerDecl;
use crate::route::Routes;
use baton_core::input_guard::InputGuardMode;

/// The `[guard]` table.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct GuardSettings {
    pub input_guard: InputGuardMode,
}

/// The `[budgets]` table: monthly token budgets; `None` means unlimited.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct BudgetSettings {
    pub workspace_monthly_tokens: Option<u64>,
    pub user_monthly_tokens: Option<u64>,
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
    pub schedules: ScheduleSettings,
    /// The `[[routes]]`: which agent serves Slack messages where.
    pub routes: Routes,
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
            policy: None,
        }
    }
}
