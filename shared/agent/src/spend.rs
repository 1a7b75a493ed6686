//! Spending guards: what a model call costs, the per-task cost budget
//! (`limits.max_cost_usd`), and the monthly token budgets per workspace and
//! per user (`[budgets]`).
//!
//! Both are checked before every LLM call; a task that has used up one ends
//! with a message saying which. A check happens before a call and the call
//! may then overshoot, so a budget can be exceeded by at most one step (per
//! task running at the same time, for the monthly budgets).
//!
//! Cost is computed from the token usage the provider reports and the
//! per-million-token prices of the model that answered: the `[prices]`
//! table of the agents file over a few built-in prices
//! ([`BUILTIN_PRICES`]). A model without a price costs nothing here, which
//! is why the agents file refuses `max_cost_usd` on an agent any of whose
//! models has no price.

use crate::agent::AgentConfig;
use crate::config_file::BudgetSettings;
use baton_core::{LedgerError, Millis, Month, Origin, Table, Task, Usage, UsageLedger, UsageScope};
use std::collections::BTreeMap;
use std::sync::Arc;

/// The price of one model, in US dollars per million tokens.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct ModelPrice {
    pub input_per_mtok: f64,
    pub output_per_mtok: f64,
}

impl ModelPrice {
    /// What `usage` costs at this price, in US dollars.
    pub fn cost(&self, usage: Usage) -> f64 {
        (usage.input_tokens as f64 * self.input_per_mtok
            + usage.output_tokens as f64 * self.output_per_mtok)
            / 1_000_000.0
    }
}

/// Prices known without configuration: `(model id, input, output)` in US
/// dollars per million tokens. Anthropic's published prices as shown on
/// its model pages (platform.claude.com/docs/en/models/…/overview), read on
/// 2026-11-22: Claude Sonnet 4.5 $3 / $15, Claude Haiku 4.5 $1 / $5,
/// Claude Sonnet 5 $2 / $10. Only exact ids match; `[prices]` in the agents
/// file overrides any of them and adds others.
pub const BUILTIN_PRICES: &[(&str, f64, f64)] = &[
    ("claude-sonnet-4-5", 3.0, 15.0),
    ("claude-sonnet-4-5-20250929", 3.0, 15.0),
    ("claude-haiku-4-5", 1.0, 5.0),
    ("claude-haiku-4-5-20251001", 1.0, 5.0),
    ("claude-sonnet-5", 2.0, 10.0),
];

/// Prices by model id. Cheap to clone.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct ModelPrices(Arc<BTreeMap<String, ModelPrice>>);

impl ModelPrices {
    /// No prices at all.
    pub fn none() -> Self {
        ModelPrices::default()
    }

    /// The [`BUILTIN_PRICES`].
    pub fn builtin() -> Self {
        ModelPrices::none().with(BUILTIN_PRICES.iter().map(|(m, i, o)| {
            (
                (*m).to_owned(),
                ModelPrice {
                    input_per_mtok: *i,
                    output_per_mtok: *o,
                },
            )
        }))
    }

    /// These prices with `overrides` laid over them.
    pub fn with(&self, overrides: impl IntoIterator<Item = (String, ModelPrice)>) -> Self {
        let mut map = (*self.0).clone();
        map.extend(overrides);
        ModelPrices(Arc::new(map))
    }

    /// The price of `model`, if known (exact id).
    pub fn get(&self, model: &str) -> Option<ModelPrice> {
        self.0.get(model).copied()
    }

    /// Every priced model id, in order.
    pub fn models(&self) -> impl Iterator<Item = &str> {
        self.0.keys().map(String::as_str)
    }
}

/// Every model an agent's steps may be answered by: its model, its
/// fallbacks, its escalation model.
pub fn models_of(agent: &AgentConfig) -> Vec<&str> {
    let all = std::iter::once(agent.model.as_str())
        .chain(agent.fallback_models.iter().map(String::as_str))
        .chain(agent.escalation.as_ref().map(|e| e.model.as_str()));
    let mut out: Vec<&str> = Vec::new();
    for m in all {
        if !out.contains(&m) {
            out.push(m);
        }
    }
    out
}

/// The models of [`models_of`] without a price.
pub fn unpriced_models(agent: &AgentConfig) -> Vec<&str> {
    let mut out: Vec<&str> = models_of(agent)
        .into_iter()
        .filter(|m| agent.prices.get(m).is_none())
        .collect();
    out.sort_unstable();
    out.dedup();
    out
}

/// What a completion by `model` with `usage` cost, in US dollars; 0 when
/// the model has no price. `model` is the id the call asked for (what
/// [`crate::model_choice::Answer::model`] says), not the one the provider
/// echoed, which may carry a date suffix.
pub fn completion_cost(agent: &AgentConfig, model: &str, usage: Usage) -> f64 {
    agent.prices.get(model).map_or(0.0, |p| p.cost(usage))
}

/// Whether the task has used up its agent's cost budget; the message to end
/// it with if so (e.g. `cost budget exhausted: $0.52 of $0.50`). Checked
/// before each LLM call.
pub fn exhausted(task: &Task, agent: &AgentConfig) -> Option<String> {
    let max = agent.max_cost_usd?;
    (task.cost_usd >= max).then(|| {
        format!(
            "cost budget exhausted: {} of {}",
            usd(task.cost_usd),
            usd(max)
        )
    })
}

/// `$1.23`, rounded to the cent.
pub fn usd(amount: f64) -> String {
    format!("${amount:.2}")
}

/// `5,000,000`.
fn thousands(n: u64) -> String {
    let digits = n.to_string();
    let mut out = String::with_capacity(digits.len() + digits.len() / 3);
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i) % 3 == 0 {
            out.push(',');
        }
        out.push(c);
    }
    out
}

/// The monthly token budgets of `[budgets]`, enforced over the
/// [`UsageLedger`].
///
/// A Slack task counts against its workspace (team) and its user; a task
/// made through the HTTP API counts against one shared workspace, `api`
/// (the bearer token is one client), and has no user. Counters are only
/// kept for the budgets that are set, so a budget set in the middle of a
/// month starts counting then.
#[derive(Clone)]
pub struct MonthlyBudgets {
    ledger: UsageLedger,
    settings: BudgetSettings,
}

/// Which counter, its limit, and how to name its owner to the user.
struct Scoped {
    scope: UsageScope,
    limit: u64,
    whose: Whose,
}

enum Whose {
    Workspace,
    Api,
    User,
}

impl MonthlyBudgets {
    /// Budgets over the task table. `None` when `settings` sets none, so
    /// there is nothing to count or check.
    pub fn new(table: Arc<dyn Table>, settings: BudgetSettings) -> Option<Self> {
        (settings.workspace_monthly_tokens.is_some() || settings.user_monthly_tokens.is_some())
            .then(|| MonthlyBudgets {
                ledger: UsageLedger::new(table),
                settings,
            })
    }

    /// The ledger the budgets read (for reports and tests).
    pub fn ledger(&self) -> &UsageLedger {
        &self.ledger
    }

    fn scopes(&self, origin: &Origin) -> Vec<Scoped> {
        let mut out = Vec::with_capacity(2);
        if let Some(limit) = self.settings.workspace_monthly_tokens {
            let scope = UsageScope::workspace_of(origin);
            let whose = if scope == UsageScope::Api {
                Whose::Api
            } else {
                Whose::Workspace
            };
            out.push(Scoped {
                scope,
                limit,
                whose,
            });
        }
        if let (Some(limit), Some(scope)) = (
            self.settings.user_monthly_tokens,
            UsageScope::user_of(origin),
        ) {
            out.push(Scoped {
                scope,
                limit,
                whose: Whose::User,
            });
        }
        out
    }

    /// Whether the task's workspace or user has used up its budget for the
    /// month of `now`; the message to end the task with if so. Checked
    /// before each LLM call.
    pub async fn exhausted(&self, task: &Task, now: Millis) -> Result<Option<String>, LedgerError> {
        let month = Month::of(now);
        for s in self.scopes(&task.origin) {
            let used = self.ledger.usage(&s.scope, month).await?.total();
            if used >= s.limit {
                let who = match s.whose {
                    Whose::Workspace => "this workspace has",
                    Whose::Api => "the HTTP API has",
                    Whose::User => "you have",
                };
                let its = if matches!(s.whose, Whose::User) {
                    "your"
                } else {
                    "its"
                };
                return Ok(Some(format!(
                    "{who} used {its} monthly budget of {} tokens; it resets on {}",
                    thousands(s.limit),
                    month.next().first_day()
                )));
            }
        }
        Ok(None)
    }

    /// Counts one LLM call's `usage` for the task's workspace and user in
    /// the month of `now`. Call it once per call that returned (a call
    /// repeated after a crash was billed twice, and counts twice); retries
    /// inside are idempotent.
    pub async fn record(&self, task: &Task, usage: Usage, now: Millis) -> Result<(), LedgerError> {
        let scopes: Vec<UsageScope> = self
            .scopes(&task.origin)
            .into_iter()
            .map(|s| s.scope)
            .collect();
        let id = uuid::Uuid::new_v4().simple().to_string();
        self.ledger.add(&scopes, Month::of(now), usage, &id).await
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config_file::Escalation;
    use baton_core::testing::MemoryTable;
    use baton_core::{Limits, TaskId};

    /// 2026-11-18T11:06:40Z.
    const NOV: Millis = 1_795_000_000_000;
    /// 2026-12-01T00:00:00Z.
    const DEC: Millis = 1_796_083_200_000;

    fn agent() -> AgentConfig {
        let mut a = AgentConfig::new("default", "claude-sonnet-4-5");
        a.fallback_models = vec!["cheap".into()];
        a.escalation = Some(Escalation {
            model: "big".into(),
            after_tool_errors: 3,
        });
        a
    }

    fn task(origin: Origin) -> Task {
        Task::new(
            TaskId::generate(),
            "default",
            origin,
            None,
            Limits::default(),
            0,
        )
    }

    fn slack(team: &str, user: &str) -> Origin {
        Origin::Slack {
            team_id: team.into(),
            channel: "C1".into(),
            thread_ts: "1.0".into(),
            user: user.into(),
        }
    }

    fn usage(i: u64, o: u64) -> Usage {
        Usage {
            input_tokens: i,
            output_tokens: o,
        }
    }

    #[test]
    fn cost_is_tokens_times_price_per_million() {
        let a = agent();
        let c = completion_cost(&a, "claude-sonnet-4-5", usage(100_000, 10_000));
        assert!((c - 0.45).abs() < 1e-9, "{c}");
        assert_eq!(completion_cost(&a, "cheap", usage(1_000_000, 0)), 0.0);
        let a = AgentConfig {
            prices: a.prices.with([(
                "cheap".to_owned(),
                ModelPrice {
                    input_per_mtok: 0.5,
                    output_per_mtok: 0.0,
                },
            )]),
            ..a
        };
        assert_eq!(completion_cost(&a, "cheap", usage(2_000_000, 9)), 1.0);
        // The dated id the provider may echo is priced on its own.
        assert!(completion_cost(&a, "claude-sonnet-4-5-20250929", usage(1, 0)) > 0.0);
    }

    #[test]
    fn unpriced_models_cover_fallbacks_and_escalation() {
        let a = agent();
        assert_eq!(models_of(&a), ["claude-sonnet-4-5", "cheap", "big"]);
        assert_eq!(unpriced_models(&a), ["big", "cheap"]);
        let mut none = AgentConfig::new("x", "claude-haiku-4-5");
        none.prices = ModelPrices::none();
        assert_eq!(unpriced_models(&none), ["claude-haiku-4-5"]);
        assert!(unpriced_models(&AgentConfig::new("x", "claude-haiku-4-5")).is_empty());
    }

    #[test]
    fn cost_budget_is_exhausted_at_the_limit() {
        let mut a = agent();
        let mut t = task(Origin::Http);
        t.cost_usd = 0.52;
        assert_eq!(exhausted(&t, &a), None, "no budget set");
        a.max_cost_usd = Some(0.5);
        assert_eq!(
            exhausted(&t, &a).as_deref(),
            Some("cost budget exhausted: $0.52 of $0.50")
        );
        t.cost_usd = 0.4999;
        assert_eq!(exhausted(&t, &a), None);
        t.cost_usd = 0.5;
        assert!(exhausted(&t, &a).is_some());
    }

    #[test]
    fn numbers_are_written_for_people() {
        assert_eq!(thousands(0), "0");
        assert_eq!(thousands(999), "999");
        assert_eq!(thousands(1000), "1,000");
        assert_eq!(thousands(5_000_000), "5,000,000");
        assert_eq!(thousands(12_345_678), "12,345,678");
        assert_eq!(usd(2.0), "$2.00");
    }

    #[test]
    fn no_budget_means_nothing_to_do() {
        let table: Arc<dyn Table> = Arc::new(MemoryTable::default());
        assert!(MonthlyBudgets::new(table, BudgetSettings::default()).is_none());
    }

    #[tokio::test]
    async fn workspace_and_user_budgets_per_month() {
        let table = Arc::new(MemoryTable::default());
        let b = MonthlyBudgets::new(
            table.clone(),
            BudgetSettings {
                workspace_monthly_tokens: Some(1000),
                user_monthly_tokens: Some(300),
            },
        )
        .unwrap();
        let alice = task(slack("T1", "UALICE"));
        let bob = task(slack("T1", "UBOB"));
        let other_team = task(slack("T2", "UALICE"));

        b.record(&alice, usage(200, 99), NOV).await.unwrap();
        assert_eq!(b.exhausted(&alice, NOV).await.unwrap(), None);
        b.record(&alice, usage(0, 1), NOV).await.unwrap();
        assert_eq!(
            b.exhausted(&alice, NOV).await.unwrap().as_deref(),
            Some("you have used your monthly budget of 300 tokens; it resets on 2026-12-01")
        );
        // Bob shares the workspace, not the user budget.
        assert_eq!(b.exhausted(&bob, NOV).await.unwrap(), None);
        b.record(&bob, usage(700, 0), NOV).await.unwrap();
        assert_eq!(
            b.exhausted(&bob, NOV).await.unwrap().as_deref(),
            Some("this workspace has used its monthly budget of 1,000 tokens; it resets on 2026-12-01")
        );
        // Another workspace, and the next month, start from zero.
        assert_eq!(b.exhausted(&other_team, NOV).await.unwrap(), None);
        assert_eq!(b.exhausted(&alice, DEC).await.unwrap(), None);
        assert_eq!(b.exhausted(&bob, DEC).await.unwrap(), None);
    }

    #[tokio::test]
    async fn http_tasks_share_the_api_workspace_and_have_no_user_budget() {
        let table = Arc::new(MemoryTable::default());
        let b = MonthlyBudgets::new(
            table.clone(),
            BudgetSettings {
                workspace_monthly_tokens: Some(100),
                user_monthly_tokens: Some(10),
            },
        )
        .unwrap();
        let one = task(Origin::Http);
        let two = task(Origin::Http);
        b.record(&one, usage(50, 0), NOV).await.unwrap();
        assert_eq!(
            b.exhausted(&two, NOV).await.unwrap(),
            None,
            "user budget not applied"
        );
        b.record(&two, usage(50, 0), NOV).await.unwrap();
        assert_eq!(
            b.exhausted(&one, NOV).await.unwrap().as_deref(),
            Some("the HTTP API has used its monthly budget of 100 tokens; it resets on 2026-12-01")
        );
        let keys: Vec<String> = table.keys().into_iter().map(|k| k.pk).collect();
        assert_eq!(keys, ["USAGE#api"]);
    }

    #[tokio::test]
    async fn only_budgeted_scopes_are_counted() {
        let table = Arc::new(MemoryTable::default());
        let b = MonthlyBudgets::new(
            table.clone(),
            BudgetSettings {
                workspace_monthly_tokens: None,
                user_monthly_tokens: Some(10),
            },
        )
        .unwrap();
        b.record(&task(slack("T1", "U1")), usage(5, 5), NOV)
            .await
            .unwrap();
        let keys: Vec<String> = table.keys().into_iter().map(|k| k.pk).collect();
        assert_eq!(keys, ["USAGE#user:T1:U1"]);
    }
}
