//! Roles: `[roles.NAME]` in the agents file, and the roles lookup over
//! them (the `baton_core::Roles` port).
//!
//! A role lists Slack user ids, Slack user groups (their members read from
//! Slack, cached by the [`UsergroupMembers`] given) and API token names. A
//! role name may stand in `approval.approvers` and in `BATON_ADMINS` beside
//! user ids; role names are lower-case and user ids upper-case, so the two
//! never meet.

use async_trait::async_trait;
use baton_core::{Person, RoleName, Roles, UsergroupMembers};
use std::sync::Arc;

/// One `[roles.NAME]` table.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct RoleDecl {
    pub name: RoleName,
    /// Slack user ids (`U…`, `W…`).
    pub users: Vec<String>,
    /// Slack user group ids (`S…`).
    pub usergroups: Vec<String>,
    /// API token names (`default`: `BATON_API_TOKEN`).
    pub tokens: Vec<String>,
}

/// The declared roles, by name.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct RoleTable {
    roles: Vec<RoleDecl>,
}

impl RoleTable {
    /// The roles, sorted by name.
    pub fn new(mut roles: Vec<RoleDecl>) -> Self {
        roles.sort_by(|a, b| a.name.cmp(&b.name));
        RoleTable { roles }
    }

    pub fn is_empty(&self) -> bool {
        self.roles.is_empty()
    }

    /// Whether a role of this name is declared.
    pub fn contains(&self, name: &str) -> bool {
        self.roles.iter().any(|r| r.name == name)
    }

    pub fn iter(&self) -> impl Iterator<Item = &RoleDecl> {
        self.roles.iter()
    }

    /// The roles `person` has by the lists alone (user ids, token names).
    pub fn static_roles(&self, person: &Person) -> Vec<RoleName> {
        self.roles
            .iter()
            .filter(|r| match person {
                Person::Slack { user, .. } => r.users.iter().any(|u| u == user),
                Person::Api { token } => r.tokens.iter().any(|t| t == token),
            })
            .map(|r| r.name.clone())
            .collect()
    }

    /// Whether any role lists a Slack user group.
    pub fn has_usergroups(&self) -> bool {
        self.roles.iter().any(|r| !r.usergroups.is_empty())
    }
}

/// Whether `name` is acceptable as a role name: `[a-z0-9_-]+`, at most 64.
pub fn valid_role_name(name: &str) -> bool {
    (1..=64).contains(&name.len())
        && name
            .chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-' || c == '_')
}

/// Whether a role name could be read as a Slack user id (`u024be7lh`):
/// refused, so that a list of approvers is never ambiguous to a reader.
pub fn looks_like_user_id(name: &str) -> bool {
    let upper = name.to_ascii_uppercase();
    (upper.starts_with('U') || upper.starts_with('W'))
        && upper.len() >= 3
        && upper.chars().any(|c| c.is_ascii_digit())
        && upper.chars().all(|c| c.is_ascii_alphanumeric())
}

/// Whether `id` is a Slack user group id (`S0123ABCD`).
pub fn valid_usergroup_id(id: &str) -> bool {
    (3..=32).contains(&id.len())
        && id.starts_with('S')
        && id
            .chars()
            .all(|c| c.is_ascii_uppercase() || c.is_ascii_digit())
}

/// The roles lookup: the declared lists, and the members of the declared
/// Slack user groups when a source for them is given.
#[derive(Clone)]
pub struct RoleLookup {
    table: RoleTable,
    members: Option<Arc<dyn UsergroupMembers>>,
}

impl RoleLookup {
    /// Without `members`, user groups give nobody their role.
    pub fn new(table: RoleTable, members: Option<Arc<dyn UsergroupMembers>>) -> Self {
        RoleLookup { table, members }
    }
}

#[async_trait]
impl Roles for RoleLookup {
    async fn of(&self, person: &Person) -> Vec<RoleName> {
        let mut roles = self.table.static_roles(person);
        if let (Person::Slack { team, user }, Some(members)) = (person, &self.members) {
            for role in self.table.iter() {
                if roles.contains(&role.name) {
                    continue;
                }
                for group in &role.usergroups {
                    match members.members(team, group).await {
                        Ok(ids) if ids.iter().any(|u| u == user) => {
                            roles.push(role.name.clone());
                            break;
                        }
                        Ok(_) => {}
                        Err(error) => tracing::warn!(
                            role = %role.name,
                            usergroup = %group,
                            %error,
                            "cannot read a Slack user group's members; its role is not given by it"
                        ),
                    }
                }
            }
        }
        roles.sort();
        roles.dedup();
        roles
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;
    use std::sync::Mutex;

    struct Groups {
        members: HashMap<String, Vec<String>>,
        asked: Mutex<Vec<String>>,
    }

    #[async_trait]
    impl UsergroupMembers for Groups {
        async fn members(&self, _team: &str, group: &str) -> Result<Vec<String>, String> {
            if let Ok(mut asked) = self.asked.lock() {
                asked.push(group.to_owned());
            }
            self.members
                .get(group)
                .cloned()
                .ok_or_else(|| "no_such_subteam".to_owned())
        }
    }

    fn table() -> RoleTable {
        RoleTable::new(vec![
            RoleDecl {
                name: "oncall".into(),
                usergroups: vec!["S1".into(), "S404".into()],
                ..RoleDecl::default()
            },
            RoleDecl {
                name: "admins".into(),
                users: vec!["U1".into()],
                tokens: vec!["default".into()],
                ..RoleDecl::default()
            },
        ])
    }

    #[tokio::test]
    async fn roles_come_from_users_tokens_and_user_groups() {
        let groups = Arc::new(Groups {
            members: HashMap::from([("S1".to_owned(), vec!["U2".to_owned(), "U1".to_owned()])]),
            asked: Mutex::new(Vec::new()),
        });
        let lookup = RoleLookup::new(table(), Some(groups.clone()));
        assert_eq!(
            lookup.of(&Person::slack("T1", "U1")).await,
            ["admins", "oncall"]
        );
        assert_eq!(lookup.of(&Person::slack("T1", "U2")).await, ["oncall"]);
        // In no group that can be read: S404 fails, and only gives nothing.
        assert!(lookup.of(&Person::slack("T1", "U3")).await.is_empty());
        assert_eq!(lookup.of(&Person::api_default()).await, ["admins"]);
        let other = Person::Api { token: "ci".into() };
        assert!(lookup.of(&other).await.is_empty());
    }

    #[tokio::test]
    async fn without_a_source_user_groups_give_nothing() {
        let lookup = RoleLookup::new(table(), None);
        assert!(lookup.of(&Person::slack("T1", "U2")).await.is_empty());
        assert_eq!(lookup.of(&Person::slack("T1", "U1")).await, ["admins"]);
    }

    #[test]
    fn role_names_are_lower_case_and_never_user_ids() {
        for ok in ["admins", "on-call", "tier_2", "users", "ops"] {
            assert!(valid_role_name(ok) && !looks_like_user_id(ok), "{ok}");
        }
        for bad in ["", "Admins", "on call", "a.b", "ünï"] {
            assert!(!valid_role_name(bad), "{bad}");
        }
        assert!(looks_like_user_id("u024be7lh"));
        assert!(looks_like_user_id("w42"));
        assert!(valid_usergroup_id("S0123ABCD"));
        assert!(!valid_usergroup_id("U0123ABCD"));
        assert!(!valid_usergroup_id("s0123"));
    }
}
