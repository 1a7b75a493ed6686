//! Who has which roles: the roles port.
//!
//! Roles are declared in the agents file (`[roles.NAME]`: Slack user ids,
//! Slack user groups, API token names) and consulted wherever a decision
//! depends on the person asking: who may approve, who is an admin, and the
//! principals' parents in policies. The implementation over the settings
//! and Slack's `usergroups.users.list` lives in `baton_settings::roles`
//! (declared lists) with `baton_slack::usergroups` (group members).

use async_trait::async_trait;
use std::fmt;

/// A role's name as declared: `[a-z0-9_-]+`.
pub type RoleName = String;

/// Someone a decision is about.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum Person {
    /// A Slack user of workspace `team`.
    Slack { team: String, user: String },
    /// A caller of the HTTP API holding the named token (the deployment's
    /// one `BATON_API_TOKEN` is named `default`).
    Api { token: String },
}

impl Person {
    /// A Slack user of workspace `team`.
    pub fn slack(team: impl Into<String>, user: impl Into<String>) -> Self {
        Person::Slack {
            team: team.into(),
            user: user.into(),
        }
    }

    /// The holder of the deployment's API token (`default`).
    pub fn api_default() -> Self {
        Person::Api {
            token: DEFAULT_API_TOKEN.to_owned(),
        }
    }
}

impl fmt::Display for Person {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Person::Slack { team, user } => write!(f, "{team}/{user}"),
            Person::Api { token } => write!(f, "api:{token}"),
        }
    }
}

/// The name of the deployment's one API token (`BATON_API_TOKEN`).
pub const DEFAULT_API_TOKEN: &str = "default";

/// Which roles a person has.
#[async_trait]
pub trait Roles: Send + Sync {
    /// The roles of `person`, sorted, without repeats. Never fails: when a
    /// source cannot be read (Slack down, a missing scope) the roles known
    /// without it are given, and the failure logged.
    async fn of(&self, person: &Person) -> Vec<RoleName>;
}

/// Nobody has any role (no roles declared).
pub struct NoRoles;

#[async_trait]
impl Roles for NoRoles {
    async fn of(&self, _person: &Person) -> Vec<RoleName> {
        Vec::new()
    }
}

/// The members of Slack user groups, as the roles lookup needs them.
#[async_trait]
pub trait UsergroupMembers: Send + Sync {
    /// The user ids in group `group` of workspace `team`; an error says why
    /// they could not be read (the caller logs it and goes on without).
    async fn members(&self, team: &str, group: &str) -> Result<Vec<String>, String>;
}
