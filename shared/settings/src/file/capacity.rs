//! `[budgets.users.*]`, `[budgets.roles.*]`, the monthly cost budgets and
//! the deployment's `[limits]`: per-person budgets, concurrency caps and
//! the hourly rate. The key names are a contract (docs/configuration.md,
//! docs/policies.md).

use super::checker::Checker;
use crate::agent::AgentConfig;
use crate::deployment::{ConcurrencySettings, LimitSettings};
use crate::price::unpriced_models;
use serde::Deserialize;
use std::collections::BTreeMap;

/// `[budgets.users.U123]` or `[budgets.roles.NAME]`.
/// `[budgets]`: the monthly token and cost budgets.
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct BudgetSpec {
    pub(super) workspace_monthly_tokens: Option<u64>,
    pub(super) user_monthly_tokens: Option<u64>,
    /// US dollars per workspace (the HTTP API: `api`) per month.
    pub(super) workspace_monthly_cost_usd: Option<f64>,
    /// US dollars per Slack user per month.
    pub(super) user_monthly_cost_usd: Option<f64>,
    /// `[budgets.users.U123]`: one person's own budget, over any role's.
    #[serde(default)]
    pub(super) users: BTreeMap<String, PersonBudgetSpec>,
    /// `[budgets.roles.NAME]`: the budget of the people of a role.
    #[serde(default)]
    pub(super) roles: BTreeMap<String, PersonBudgetSpec>,
}

#[derive(Clone, Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct PersonBudgetSpec {
    pub(super) monthly_tokens: Option<u64>,
    pub(super) monthly_cost_usd: Option<f64>,
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

/// The per-person budgets, checked: by Slack user id, and by role; tokens,
/// and cost in micro-dollars.
#[derive(Default)]
pub(super) struct PersonBudgets {
    pub(super) users: BTreeMap<String, u64>,
    pub(super) roles: BTreeMap<String, u64>,
    pub(super) users_cost_micros: BTreeMap<String, u64>,
    pub(super) roles_cost_micros: BTreeMap<String, u64>,
    pub(super) workspace_cost_micros: Option<u64>,
    pub(super) user_cost_micros: Option<u64>,
    /// The first cost budget key set, to name when one cannot be counted.
    pub(super) first_cost_key: Option<String>,
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
        let mut out = PersonBudgets {
            workspace_cost_micros: self.cost_micros(
                "budgets.workspace_monthly_cost_usd",
                budgets.workspace_monthly_cost_usd,
            ),
            user_cost_micros: self.cost_micros(
                "budgets.user_monthly_cost_usd",
                budgets.user_monthly_cost_usd,
            ),
            ..PersonBudgets::default()
        };
        for (key, set) in [
            (
                "budgets.workspace_monthly_cost_usd",
                budgets.workspace_monthly_cost_usd,
            ),
            (
                "budgets.user_monthly_cost_usd",
                budgets.user_monthly_cost_usd,
            ),
        ] {
            if set.is_some() && out.first_cost_key.is_none() {
                out.first_cost_key = Some(key.to_owned());
            }
        }
        for (user, spec) in &budgets.users {
            let at = format!("budgets.users.{user}");
            if !looks_like_user_id(user) {
                self.add(&at, "not a Slack user id (e.g. `U0123ABCD`)");
            }
            let (tokens, cost) = self.person_budget(&at, spec, &mut out.first_cost_key);
            if let Some(tokens) = tokens {
                out.users.insert(user.clone(), tokens);
            }
            if let Some(cost) = cost {
                out.users_cost_micros.insert(user.clone(), cost);
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
            let (tokens, cost) = self.person_budget(&at, spec, &mut out.first_cost_key);
            if let Some(tokens) = tokens {
                out.roles.insert(role.clone(), tokens);
            }
            if let Some(cost) = cost {
                out.roles_cost_micros.insert(role.clone(), cost);
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

    /// A person's or a role's budgets: tokens and cost (micro-dollars); at
    /// least one must be set.
    fn person_budget(
        &mut self,
        at: &str,
        spec: &PersonBudgetSpec,
        first_cost_key: &mut Option<String>,
    ) -> (Option<u64>, Option<u64>) {
        if spec.monthly_tokens.is_none() && spec.monthly_cost_usd.is_none() {
            self.add(
                format!("{at}.monthly_tokens"),
                "missing: the budget to apply (`monthly_tokens` or `monthly_cost_usd`)",
            );
            return (None, None);
        }
        let tokens = match spec.monthly_tokens {
            Some(0) => {
                self.add(format!("{at}.monthly_tokens"), "must be at least 1");
                None
            }
            n => n,
        };
        let key = format!("{at}.monthly_cost_usd");
        let cost = self.cost_micros(&key, spec.monthly_cost_usd);
        if spec.monthly_cost_usd.is_some() && first_cost_key.is_none() {
            *first_cost_key = Some(key);
        }
        (tokens, cost)
    }

    /// A monthly cost budget in US dollars, checked, in micro-dollars (the
    /// ledger's unit).
    fn cost_micros(&mut self, key: &str, usd: Option<f64>) -> Option<u64> {
        let usd = usd?;
        let micros = (usd * 1_000_000.0).round();
        if !(usd.is_finite() && micros >= 1.0) {
            self.add(key, "must be a positive amount of US dollars");
            return None;
        }
        // Saturates at u64::MAX: unlimited in practice.
        Some(micros as u64)
    }

    /// A cost budget counts each call at its model's price: every model an
    /// agent may use must have one, or the budget would pass silently.
    pub(super) fn check_cost_priced<'a>(
        &mut self,
        first_cost_key: Option<&str>,
        agents: impl IntoIterator<Item = (&'a str, &'a AgentConfig)>,
    ) {
        let Some(key) = first_cost_key else {
            return;
        };
        // Unpriced model -> the agents using it.
        let mut unpriced: BTreeMap<&str, Vec<&str>> = BTreeMap::new();
        for (name, agent) in agents {
            for model in unpriced_models(agent) {
                unpriced.entry(model).or_default().push(name);
            }
        }
        let Some(first) = unpriced.keys().next().copied() else {
            return;
        };
        let list: Vec<String> = unpriced
            .iter()
            .map(|(model, users)| {
                let names: Vec<String> = users.iter().map(|a| format!("`{a}`")).collect();
                let agents = if names.len() == 1 { "agent" } else { "agents" };
                format!("`{model}` ({agents} {})", names.join(", "))
            })
            .collect();
        self.add(
            key,
            format!(
                "cannot be enforced: no price for {}; add a [prices.\"{first}\"] table \
                 with input_per_mtok and output_per_mtok",
                list.join(", ")
            ),
        );
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
    fn cost_budgets_are_read_in_micro_dollars_with_the_token_precedence() {
        let cfg = load(
            "[prices.env-model]\ninput_per_mtok = 1.0\noutput_per_mtok = 5.0\n\
             [budgets]\nworkspace_monthly_cost_usd = 50\nuser_monthly_cost_usd = 2.5\n\
             [budgets.users.U1ALICE]\nmonthly_cost_usd = 20\n\
             [budgets.users.U1TOKENS]\nmonthly_tokens = 10\n\
             [budgets.roles.oncall]\nmonthly_cost_usd = 5\n\
             [budgets.roles.sre]\nmonthly_cost_usd = 7.25\nmonthly_tokens = 99\n\
             [roles.oncall]\nusers = [\"U1ONCALL\"]\n\
             [roles.sre]\nusers = [\"U1SRE\"]\n",
        )
        .unwrap();
        let b = &cfg.settings.budgets;
        let roles = |r: &[&str]| r.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        assert_eq!(b.workspace_monthly_cost_micros, Some(50_000_000));
        assert_eq!(b.user_monthly_cost_micros, Some(2_500_000));
        assert!(b.has_cost_budgets() && b.has_role_budgets());
        // Own beats roles; the largest role; else the default.
        assert_eq!(
            b.person_monthly_cost_micros("U1ALICE", &roles(&["sre"])),
            Some(20_000_000)
        );
        assert_eq!(
            b.person_monthly_cost_micros("UBOB", &roles(&["oncall", "sre"])),
            Some(7_250_000)
        );
        assert_eq!(
            b.person_monthly_cost_micros("UBOB", &roles(&["other"])),
            Some(2_500_000)
        );
        // An own entry of tokens only leaves cost to the roles and default.
        assert_eq!(
            b.person_monthly_cost_micros("U1TOKENS", &roles(&["oncall"])),
            Some(5_000_000)
        );
        assert_eq!(b.person_monthly_tokens("U1TOKENS", &[]), Some(10));
        assert_eq!(b.person_monthly_tokens("UBOB", &roles(&["sre"])), Some(99));
        assert_eq!(b.person_monthly_tokens("UBOB", &roles(&["oncall"])), None);
    }

    #[test]
    fn a_cost_budget_needs_a_price_for_every_model() {
        let e = load(
            "[budgets]\nworkspace_monthly_cost_usd = 50\n\
             [agents.r]\nmodel = \"big\"\nfallback_models = [\"claude-haiku-4-5\"]\n",
        )
        .unwrap_err()
        .to_string();
        assert!(
            e.contains(
                "budgets.workspace_monthly_cost_usd: cannot be enforced: no price for \
                 `big` (agent `r`), `env-model` (agent `default`); \
                 add a [prices.\"big\"] table with input_per_mtok and output_per_mtok"
            ),
            "{e}"
        );
        // A person's cost budget alone asks the same, naming its key.
        let e = load("[budgets.users.U1ALICE]\nmonthly_cost_usd = 1\n")
            .unwrap_err()
            .to_string();
        assert!(
            e.contains(
                "budgets.users.U1ALICE.monthly_cost_usd: cannot be enforced: no price for \
                 `env-model` (agent `default`)"
            ),
            "{e}"
        );
        // Token budgets need no price.
        load("[budgets]\nworkspace_monthly_tokens = 50\n").unwrap();
    }

    #[test]
    fn bad_cost_budgets_are_named() {
        let e = load(
            "[prices.env-model]\ninput_per_mtok = 1.0\noutput_per_mtok = 5.0\n\
             [budgets]\nworkspace_monthly_cost_usd = 0\nuser_monthly_cost_usd = -3\n\
             [budgets.users.U1ALICE]\nmonthly_cost_usd = nan\n\
             [budgets.users.U1BOB]\n",
        )
        .unwrap_err()
        .to_string();
        for key in [
            "budgets.workspace_monthly_cost_usd",
            "budgets.user_monthly_cost_usd",
            "budgets.users.U1ALICE.monthly_cost_usd",
        ] {
            assert!(
                e.contains(&format!("{key}: must be a positive amount of US dollars")),
                "{key}: {e}"
            );
        }
        assert!(
            e.contains("budgets.users.U1BOB.monthly_tokens: missing: the budget to apply"),
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
