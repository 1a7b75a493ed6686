//! `[limits.concurrency]`: a `queued` task that has not started because
//! its scope has its limit of tasks running; it starts when one of them
//! ends, in order of arrival. Its admission decides at each wake, so it
//! has no expiry and no event of its own.

use serde::{Deserialize, Serialize};

/// The scope that is full, and its limit.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Capacity {
    pub scope: CapacityScope,
    pub limit: u32,
}

/// Whose running tasks a concurrency cap counts (`[limits.concurrency]`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum CapacityScope {
    /// One person (`per_user`): the task's Slack user, or a schedule's
    /// creator.
    User,
    /// One Slack workspace (`per_team`).
    Team,
    /// The HTTP API's tasks, which have no person: one workspace-like
    /// scope under `per_team`.
    Api,
    /// One agent (`per_agent`).
    Agent,
}

impl CapacityScope {
    pub fn as_str(self) -> &'static str {
        match self {
            CapacityScope::User => "user",
            CapacityScope::Team => "team",
            CapacityScope::Api => "api",
            CapacityScope::Agent => "agent",
        }
    }
}
