//! `[budgets.users.*]`, `[budgets.roles.*]` and the deployment's
//! `[limits]`: per-person budgets, concurrency caps and the hourly rate.
//! The key names are a contract (docs/configuration.md, docs/policies.md).

use super::check::Checker;
use super::schema::BudgetSpec;
use crate::deployment::{ConcurrencySettings, LimitSettings};
use serde::Deserialize;
use std::collections::BTreeMap;

/// `[budgets.users.U123]` or `[budgets.roles.NAME]`.
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct PersonBudgetSpec {
    pub(super) monthly_tokens: Option<u64>,
}

/// The deployment's `[limits]` (an agent's `[agents.X.limits]` is another
/// table: per task).
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct DeploymentLimitsSpec {
    pub(super) tasks_per_hour: Option<u32>,
    #[serde(default)]
    pub(super) concurrency: ConcurrencySpec,
}

/// `[limits.concurrency]`.
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct ConcurrencySpec {
    pub(super) per_user: Option<u32>,
    pub(super) per_team: Option<u32>,
    pub(super) per_agent: Option<u32>,
}

/// The per-person budgets, checked: by Slack user id, and by role.
#[derive(Default)]
pub(super) struct PersonBudgets {
    pub(super) users: BTreeMap<String, u64>,
    pub(super) roles: BTreeMap<String, u64>,
}

/// Whether `id` reads as a Slack user id (`U…` or `W…`, upper-case letters
/// and digits).
fn looks_like_user_id(id: &str) -> bool {
    id.len() >= 2
        && id.len() <= 32
        && (id.starts_with('U') || id.starts_with('W'))
        && id
            .chars()
            .all(|c| c.is_ascii_uppercase() || c.is_ascii_digit())
}

/// Whether `name` is a role name: `[a-z0-9_-]+` (the roles contract).
fn valid_role_name(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= 64
        && name
            .chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-' || c == '_')
}

impl Checker<'_> {
    pub(super) fn check_capacity(
        &mut self,
        budgets: &BudgetSpec,
        limits: &DeploymentLimitsSpec,
    ) -> (PersonBudgets, LimitSettings) {
        let mut out = PersonBudgets::default();
        for (user, spec) in &budgets.users {
            let at = format!("budgets.users.{user}");
            if !looks_like_user_id(user) {
                self.add(&at, "not a Slack user id (e.g. `U0123ABCD`)");
            }
            if let Some(tokens) = self.budget_tokens(&at, spec) {
                out.users.insert(user.clone(), tokens);
            }
        }
        for (role, spec) in &budgets.roles {
            let at = format!("budgets.roles.{role}");
            if !valid_role_name(role) {
                self.add(
                    &at,
                    "role names are lower-case letters, digits, `-` and `_`",
                );
            } else if !self.declared_roles.contains(role) {
                self.add(
                    &at,
                    format!("no role `{role}`: declare it in `[roles.{role}]`"),
                );
            }
            if let Some(tokens) = self.budget_tokens(&at, spec) {
                out.roles.insert(role.clone(), tokens);
            }
        }
        let c = &limits.concurrency;
        for (key, value) in [
            ("per_user", c.per_user),
            ("per_team", c.per_team),
            ("per_agent", c.per_agent),
        ] {
            self.at_least(format!("limits.concurrency.{key}"), value, 1);
        }
        self.at_least("limits.tasks_per_hour".to_owned(), limits.tasks_per_hour, 1);
        let settings = LimitSettings {
            concurrency: ConcurrencySettings {
                per_user: c.per_user,
                per_team: c.per_team,
                per_agent: c.per_agent,
            },
            tasks_per_hour: limits.tasks_per_hour,
        };
        (out, settings)
    }

    fn budget_tokens(&mut self, at: &str, spec: &PersonBudgetSpec) -> Option<u64> {
        match spec.monthly_tokens {
            None => {
                self.add(
                    format!("{at}.monthly_tokens"),
                    "missing: the budget to apply",
                );
                None
            }
            Some(0) => {
                self.add(format!("{at}.monthly_tokens"), "must be at least 1");
                None
            }
            Some(n) => Some(n),
        }
    }
}

#[cfg(test)]
mod tests {
    use crate::file::{AgentsSource, ConfigFileError};
    use crate::AgentConfig;
    use std::path::Path;

    fn load(text: &str) -> Result<crate::AgentsConfig, ConfigFileError> {
        AgentsSource::new("baton.toml", text, Path::new("/nonexistent-baton-dir"))
            .load(&AgentConfig::new("default", "env-model"), &[])
    }

    #[test]
    fn person_and_role_budgets_and_limits_are_read() {
        let cfg = load(
            "[budgets]\nuser_monthly_tokens = 1000\n\
             [budgets.users.U1ALICE]\nmonthly_tokens = 5000\n\
             [budgets.roles.oncall]\nmonthly_tokens = 3000\n\
             [budgets.roles.sre]\nmonthly_tokens = 4000\n\
             [roles.oncall]\nusers = [\"U1ONCALL\"]\n\
             [roles.sre]\nusers = [\"U1SRE\"]\n\
             [limits]\ntasks_per_hour = 30\n\
             [limits.concurrency]\nper_user = 3\nper_team = 20\n",
        )
        .unwrap();
        let b = &cfg.settings.budgets;
        let roles = |r: &[&str]| r.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        // Own beats roles; the largest role; else the default.
        assert_eq!(
            b.person_monthly_tokens("U1ALICE", &roles(&["oncall"])),
            Some(5000)
        );
        assert_eq!(
            b.person_monthly_tokens("UBOB", &roles(&["oncall", "sre"])),
            Some(4000)
        );
        assert_eq!(
            b.person_monthly_tokens("UBOB", &roles(&["other"])),
            Some(1000)
        );
        let l = &cfg.settings.limits;
        assert_eq!(l.tasks_per_hour, Some(30));
        assert_eq!(l.concurrency.per_user, Some(3));
        assert_eq!(l.concurrency.per_team, Some(20));
        assert_eq!(l.concurrency.per_agent, None);
    }

    #[test]
    fn bad_person_budgets_and_limits_are_named() {
        let e = load(
            "[budgets.users.alice]\nmonthly_tokens = 5\n\
             [budgets.roles.Oncall]\nmonthly_tokens = 0\n\
             [budgets.roles.ghosts]\nmonthly_tokens = 10\n\
             [limits.concurrency]\nper_user = 0\n",
        )
        .unwrap_err()
        .to_string();
        assert!(
            e.contains("budgets.users.alice: not a Slack user id"),
            "{e}"
        );
        assert!(e.contains("budgets.roles.Oncall: role names are"), "{e}");
        assert!(
            e.contains("budgets.roles.Oncall.monthly_tokens: must be at least 1"),
            "{e}"
        );
        assert!(
            e.contains("limits.concurrency.per_user: must be at least 1"),
            "{e}"
        );
        assert!(
            e.contains("budgets.roles.ghosts: no role `ghosts`: declare it in `[roles.ghosts]`"),
            "{e}"
        );
    }

    #[test]
    fn unknown_keys_are_refused() {
        let e = load("[limits.concurrency]\nper_person = 3\n")
            .unwrap_err()
            .to_string();
        assert!(e.contains("unknown field `per_person`"), "{e}");
    }
}
