//! The `[roles.NAME]` tables: who has each role.

use super::checker::{valid_slack_user_id, Checker};
use crate::roles::{looks_like_user_id, valid_role_name, valid_usergroup_id, RoleDecl, RoleTable};
use baton_core::roles::DEFAULT_API_TOKEN;
use serde::Deserialize;
use std::collections::BTreeMap;

/// `[roles.NAME]`: Slack user ids, Slack user group ids and API token
/// names. The key names are a contract (docs/policies.md).
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RoleSpec {
    pub(super) users: Option<Vec<String>>,
    pub(super) usergroups: Option<Vec<String>>,
    pub(super) tokens: Option<Vec<String>>,
}

/// The API token names a role may list: the deployment has one token.
const TOKEN_NAMES: &[&str] = &[DEFAULT_API_TOKEN];

/// Why an entry of `approvers` (or `BATON_ADMINS`) is refused.
pub(crate) fn not_an_approver(entry: &str) -> String {
    format!(
        "`{entry}` is neither a Slack user id (like U024BE7LH) nor a declared role \
         (declare it with `[roles.{entry}]`)"
    )
}

impl Checker<'_> {
    /// The roles, each named `[a-z0-9_-]+` and listing at least someone.
    pub(super) fn check_roles(&mut self, specs: &BTreeMap<String, RoleSpec>) -> RoleTable {
        let mut roles = Vec::with_capacity(specs.len());
        for (name, spec) in specs {
            let at = format!("roles.{name}");
            if !valid_role_name(name) {
                self.add(
                    &at,
                    "role names are lower-case letters, digits, `-` and `_` (at most 64)",
                );
            } else if looks_like_user_id(name) {
                self.add(
                    &at,
                    format!("`{name}` reads like a Slack user id; choose another role name"),
                );
            }
            let users = spec.users.clone().unwrap_or_default();
            let usergroups = spec.usergroups.clone().unwrap_or_default();
            let tokens = spec.tokens.clone().unwrap_or_default();
            if users.is_empty() && usergroups.is_empty() && tokens.is_empty() {
                self.add(&at, "lists nobody: give `users`, `usergroups` or `tokens`");
            }
            for (i, u) in users.iter().enumerate() {
                if !valid_slack_user_id(u) {
                    self.add(
                        format!("{at}.users[{i}]"),
                        format!("`{u}` is not a Slack user id (like U024BE7LH)"),
                    );
                }
            }
            for (i, g) in usergroups.iter().enumerate() {
                if !valid_usergroup_id(g) {
                    self.add(
                        format!("{at}.usergroups[{i}]"),
                        format!("`{g}` is not a Slack user group id (like S0614TZR7)"),
                    );
                }
            }
            for (i, t) in tokens.iter().enumerate() {
                if !TOKEN_NAMES.contains(&t.as_str()) {
                    self.add(
                        format!("{at}.tokens[{i}]"),
                        format!(
                            "unknown API token `{t}`; the deployment's token \
                             (BATON_API_TOKEN) is named `{DEFAULT_API_TOKEN}`"
                        ),
                    );
                }
            }
            roles.push(RoleDecl {
                name: name.clone(),
                users,
                usergroups,
                tokens,
            });
        }
        RoleTable::new(roles)
    }
}
