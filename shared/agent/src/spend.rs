//! The monthly token and cost budgets per workspace and per user
//! (`[budgets]`), counted in the usage ledger.
//!
//! Checked before every LLM call; a task that has used one up ends with a
//! message saying which. A check happens before a call and the call may
//! then overshoot, so a budget can be exceeded by at most one step per task
//! running at the same time.

use baton_core::{
    Instant, LedgerError, Month, Origin, Spend, Table, Task, Usage, UsageLedger, UsageScope,
};
use baton_settings::price::{thousands, usd};
use baton_settings::BudgetSettings;
use std::sync::Arc;

/// The monthly token and cost budgets of `[budgets]`, enforced over the
/// [`UsageLedger`].
///
/// A Slack task counts against its workspace (team) and its user; a task
/// made through the HTTP API counts against one shared workspace, `api`
/// (the bearer token is one client), and has no user. Counters are only
/// kept for the scopes some budget is set for, so a budget set in the
/// middle of a month starts counting then. A call's tokens and its cost
/// are one increment of the same counters.
#[derive(Clone)]
pub struct MonthlyBudgets {
    ledger: UsageLedger,
    settings: BudgetSettings,
}

/// Which counter, what it measures, its limit, and how to name its owner
/// to the user.
struct Scoped {
    scope: UsageScope,
    measure: Measure,
    limit: u64,
    whose: Whose,
}

/// What a budget limits.
#[derive(Clone, Copy)]
enum Measure {
    Tokens,
    /// In micro-dollars.
    Cost,
}

impl Measure {
    fn used(self, spend: &Spend) -> u64 {
        match self {
            Measure::Tokens => spend.usage.total(),
            Measure::Cost => spend.cost_micros,
        }
    }

    /// `5,000,000 tokens`, `$50.00`.
    fn amount(self, limit: u64) -> String {
        match self {
            Measure::Tokens => format!("{} tokens", thousands(limit)),
            // Exact enough for a message: budgets are whole cents in practice.
            Measure::Cost => usd(limit as f64 / 1_000_000.0),
        }
    }
}

#[derive(Clone, Copy)]
enum Whose {
    Workspace,
    Api,
    User,
}

impl MonthlyBudgets {
    /// Budgets over the task table. `None` when `settings` sets none, so
    /// there is nothing to count or check.
    pub fn new(table: Arc<dyn Table>, settings: BudgetSettings) -> Option<Self> {
        (settings.workspace_monthly_tokens.is_some()
            || settings.workspace_monthly_cost_micros.is_some()
            || settings.has_person_budgets())
        .then(|| MonthlyBudgets {
            ledger: UsageLedger::new(table),
            settings,
        })
    }

    /// Whether a person's budget depends on their roles
    /// (`[budgets.roles.NAME]`), so they must be looked up.
    pub fn needs_roles(&self) -> bool {
        self.settings.has_role_budgets()
    }

    /// The ledger the budgets read (for reports and tests).
    pub fn ledger(&self) -> &UsageLedger {
        &self.ledger
    }

    /// The budgets that apply to `origin` ([`budget_origin`]), whose person has `roles`: the
    /// person's is their own override, else their roles' largest, else
    /// the default per-user budget; tokens and cost alike.
    fn scopes(&self, origin: &Origin, roles: &[String]) -> Vec<Scoped> {
        let s = &self.settings;
        let mut out = Vec::with_capacity(4);
        let workspace = UsageScope::workspace_of(origin);
        let whose = if workspace == UsageScope::Api {
            Whose::Api
        } else {
            Whose::Workspace
        };
        for (measure, limit) in [
            (Measure::Tokens, s.workspace_monthly_tokens),
            (Measure::Cost, s.workspace_monthly_cost_micros),
        ] {
            if let Some(limit) = limit {
                out.push(Scoped {
                    scope: workspace.clone(),
                    measure,
                    limit,
                    whose,
                });
            }
        }
        if let (Origin::Slack { user, .. }, Some(scope)) = (origin, UsageScope::user_of(origin)) {
            for (measure, limit) in [
                (Measure::Tokens, s.person_monthly_tokens(user, roles)),
                (Measure::Cost, s.person_monthly_cost_micros(user, roles)),
            ] {
                if let Some(limit) = limit {
                    out.push(Scoped {
                        scope: scope.clone(),
                        measure,
                        limit,
                        whose: Whose::User,
                    });
                }
            }
        }
        out
    }

    /// The counters some budget of `origin` reads, each once.
    fn counters(&self, origin: &Origin, roles: &[String]) -> Vec<UsageScope> {
        let mut scopes: Vec<UsageScope> = Vec::with_capacity(2);
        for s in self.scopes(origin, roles) {
            if !scopes.contains(&s.scope) {
                scopes.push(s.scope);
            }
        }
        scopes
    }

    /// Whether the task's workspace or user has used up a budget for the
    /// month of `now`; the message to end the task with if so. Checked
    /// before each LLM call.
    pub async fn exhausted(
        &self,
        task: &Task,
        roles: &[String],
        now: Instant,
    ) -> Result<Option<String>, LedgerError> {
        let month = Month::of(now);
        let origin = budget_origin(task);
        let counters = self.counters(&origin, roles);
        let spent = self.ledger.spend_of(&counters, month).await?;
        for s in self.scopes(&origin, roles) {
            let used = counters
                .iter()
                .position(|c| *c == s.scope)
                .and_then(|i| spent.get(i))
                .map_or(0, |spend| s.measure.used(spend));
            if used >= s.limit {
                let (who, its) = match s.whose {
                    Whose::Workspace => ("this workspace has", "its"),
                    Whose::Api => ("the HTTP API has", "its"),
                    Whose::User => ("you have", "your"),
                };
                return Ok(Some(format!(
                    "{who} used {its} monthly budget of {}; it resets on {}",
                    s.measure.amount(s.limit),
                    month.next().first_day()
                )));
            }
        }
        Ok(None)
    }

    /// Counts one LLM call's `usage` and its estimated cost (`cost_usd`,
    /// the same estimate as the task's `cost_usd`) for the task's
    /// workspace and user in the month of `now`, as one increment. Call it
    /// once per call that returned (a call repeated after a crash was
    /// billed twice, and counts twice); retries inside are idempotent.
    pub async fn record(
        &self,
        task: &Task,
        roles: &[String],
        usage: Usage,
        cost_usd: f64,
        now: Instant,
    ) -> Result<(), LedgerError> {
        let scopes = self.counters(&budget_origin(task), roles);
        let id = uuid::Uuid::new_v4().simple().to_string();
        self.ledger
            .add(&scopes, Month::of(now), Spend::new(usage, cost_usd), &id)
            .await
    }
}

/// Whose budgets a task spends: the person it acts for ([`Task::actor`]):
/// a schedule's task that posts nowhere (an HTTP task) spends its
/// creator's, as it takes their concurrency slots. The origin made for a
/// person names no channel: only its workspace and user are read.
fn budget_origin(task: &Task) -> Origin {
    match task.actor() {
        baton_core::Actor::Slack { team, user } => Origin::Slack {
            team_id: team,
            channel: String::new(),
            thread_ts: String::new(),
            user,
            channel_type: None,
        },
        baton_core::Actor::Api { .. } => Origin::Http,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use baton_core::testing::MemoryTable;
    use baton_core::{Limits, TaskId};

    /// 2026-11-18T11:06:40Z.
    const NOV: Instant = Instant(1_795_000_000_000);
    /// 2026-12-01T00:00:00Z.
    const DEC: Instant = Instant(1_796_083_200_000);

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
            channel_type: None,
        }
    }

    fn usage(i: u64, o: u64) -> Usage {
        Usage {
            input_tokens: i,
            output_tokens: o,
        }
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
                ..Default::default()
            },
        )
        .unwrap();
        let alice = task(slack("T1", "UALICE"));
        let bob = task(slack("T1", "UBOB"));
        let other_team = task(slack("T2", "UALICE"));

        b.record(&alice, &[], usage(200, 99), 0.0, NOV)
            .await
            .unwrap();
        assert_eq!(b.exhausted(&alice, &[], NOV).await.unwrap(), None);
        b.record(&alice, &[], usage(0, 1), 0.0, NOV).await.unwrap();
        assert_eq!(
            b.exhausted(&alice, &[], NOV).await.unwrap().as_deref(),
            Some("you have used your monthly budget of 300 tokens; it resets on 2026-12-01")
        );
        // Bob shares the workspace, not the user budget.
        assert_eq!(b.exhausted(&bob, &[], NOV).await.unwrap(), None);
        b.record(&bob, &[], usage(700, 0), 0.0, NOV).await.unwrap();
        assert_eq!(
            b.exhausted(&bob, &[], NOV).await.unwrap().as_deref(),
            Some("this workspace has used its monthly budget of 1,000 tokens; it resets on 2026-12-01")
        );
        // Another workspace, and the next month, start from zero.
        assert_eq!(b.exhausted(&other_team, &[], NOV).await.unwrap(), None);
        assert_eq!(b.exhausted(&alice, &[], DEC).await.unwrap(), None);
        assert_eq!(b.exhausted(&bob, &[], DEC).await.unwrap(), None);
    }

    #[tokio::test]
    async fn http_tasks_share_the_api_workspace_and_have_no_user_budget() {
        let table = Arc::new(MemoryTable::default());
        let b = MonthlyBudgets::new(
            table.clone(),
            BudgetSettings {
                workspace_monthly_tokens: Some(100),
                user_monthly_tokens: Some(10),
                ..Default::default()
            },
        )
        .unwrap();
        let one = task(Origin::Http);
        let two = task(Origin::Http);
        b.record(&one, &[], usage(50, 0), 0.0, NOV).await.unwrap();
        assert_eq!(
            b.exhausted(&two, &[], NOV).await.unwrap(),
            None,
            "user budget not applied"
        );
        b.record(&two, &[], usage(50, 0), 0.0, NOV).await.unwrap();
        assert_eq!(
            b.exhausted(&one, &[], NOV).await.unwrap().as_deref(),
            Some("the HTTP API has used its monthly budget of 100 tokens; it resets on 2026-12-01")
        );
        // Only the API's counter (its shards), no user's.
        let keys: Vec<String> = table.keys().into_iter().map(|k| k.pk).collect();
        assert!(!keys.is_empty());
        assert!(keys.iter().all(|k| k.starts_with("USAGE#api#")), "{keys:?}");
    }

    #[tokio::test]
    async fn a_schedule_that_posts_nowhere_spends_its_creators_budget() {
        let table = Arc::new(MemoryTable::default());
        let b = MonthlyBudgets::new(
            table,
            BudgetSettings {
                user_monthly_tokens: Some(10),
                ..Default::default()
            },
        )
        .unwrap();
        let mut fired = task(Origin::Http);
        fired.source.schedule_owner = Some("slack:T1:U1".into());
        b.record(&fired, &[], usage(10, 0), 0.0, NOV).await.unwrap();
        let alice = task(slack("T1", "U1"));
        assert_eq!(
            b.exhausted(&alice, &[], NOV).await.unwrap().as_deref(),
            Some("you have used your monthly budget of 10 tokens; it resets on 2026-12-01")
        );
        assert!(b.exhausted(&fired, &[], NOV).await.unwrap().is_some());
        // An API-made schedule's task is the API's, with no user budget.
        let mut api = task(Origin::Http);
        api.source.schedule_owner = Some("api".into());
        assert_eq!(b.exhausted(&api, &[], NOV).await.unwrap(), None);
    }

    #[tokio::test]
    async fn only_budgeted_scopes_are_counted() {
        let table = Arc::new(MemoryTable::default());
        let b = MonthlyBudgets::new(
            table.clone(),
            BudgetSettings {
                workspace_monthly_tokens: None,
                user_monthly_tokens: Some(10),
                ..Default::default()
            },
        )
        .unwrap();
        b.record(&task(slack("T1", "U1")), &[], usage(5, 5), 0.0, NOV)
            .await
            .unwrap();
        let keys: Vec<String> = table.keys().into_iter().map(|k| k.pk).collect();
        assert_eq!(keys.len(), 1);
        assert!(keys[0].starts_with("USAGE#user:T1:U1#"), "{keys:?}");
    }

    #[tokio::test]
    async fn a_persons_own_budget_beats_their_roles_and_the_default() {
        let table = Arc::new(MemoryTable::default());
        let mut settings = BudgetSettings {
            user_monthly_tokens: Some(100),
            ..Default::default()
        };
        settings.users.insert("UBIG".into(), 1_000);
        settings.users.insert("USMALL".into(), 10);
        settings.roles.insert("oncall".into(), 500);
        let b = MonthlyBudgets::new(table, settings).unwrap();
        let oncall = ["oncall".to_owned()];
        for user in ["UBIG", "USMALL", "UONCALL", "UPLAIN"] {
            let t = task(slack("T1", user));
            let roles: &[String] = if user == "UONCALL" { &oncall } else { &[] };
            b.record(&t, roles, usage(200, 0), 0.0, NOV).await.unwrap();
        }
        let over = |user: &'static str| {
            let b = b.clone();
            let oncall = oncall.clone();
            async move {
                let roles: &[String] = if user == "UONCALL" { &oncall } else { &[] };
                b.exhausted(&task(slack("T1", user)), roles, NOV)
                    .await
                    .unwrap()
            }
        };
        assert_eq!(over("UBIG").await, None, "own 1,000 over the default 100");
        assert_eq!(
            over("USMALL").await.as_deref(),
            Some("you have used your monthly budget of 10 tokens; it resets on 2026-12-01")
        );
        assert_eq!(over("UONCALL").await, None, "the role's 500");
        assert!(over("UPLAIN").await.is_some(), "the default 100");
    }

    #[tokio::test]
    async fn cost_budgets_per_workspace_and_person() {
        let table = Arc::new(MemoryTable::default());
        let mut settings = BudgetSettings {
            workspace_monthly_cost_micros: Some(50_000_000),
            user_monthly_cost_micros: Some(1_000_000),
            // A token budget beside them: counted in the same increments.
            workspace_monthly_tokens: Some(1_000_000),
            ..Default::default()
        };
        settings
            .users_cost_micros
            .insert("URICH".into(), 10_000_000);
        settings
            .roles_cost_micros
            .insert("oncall".into(), 3_000_000);
        let b = MonthlyBudgets::new(table, settings).unwrap();
        assert!(b.needs_roles());
        let oncall = ["oncall".to_owned()];
        let plain = task(slack("T1", "UPLAIN"));
        let rich = task(slack("T1", "URICH"));
        let paged = task(slack("T1", "UPAGED"));

        b.record(&plain, &[], usage(10, 10), 0.99, NOV)
            .await
            .unwrap();
        assert_eq!(b.exhausted(&plain, &[], NOV).await.unwrap(), None);
        b.record(&plain, &[], usage(10, 10), 0.01, NOV)
            .await
            .unwrap();
        assert_eq!(
            b.exhausted(&plain, &[], NOV).await.unwrap().as_deref(),
            Some("you have used your monthly budget of $1.00; it resets on 2026-12-01")
        );
        // Their own $10 and the role's $3 are past the default $1.
        b.record(&rich, &[], usage(10, 10), 2.5, NOV).await.unwrap();
        b.record(&paged, &oncall, usage(10, 10), 2.5, NOV)
            .await
            .unwrap();
        assert_eq!(b.exhausted(&rich, &[], NOV).await.unwrap(), None);
        assert_eq!(b.exhausted(&paged, &oncall, NOV).await.unwrap(), None);
        b.record(&paged, &oncall, usage(10, 10), 0.5, NOV)
            .await
            .unwrap();
        assert!(b.exhausted(&paged, &oncall, NOV).await.unwrap().is_some());
        // Without the role, the default applies.
        assert!(b.exhausted(&paged, &[], NOV).await.unwrap().is_some());

        // The workspace's $50: $6.50 so far.
        b.record(&rich, &[], usage(10, 10), 43.5, NOV)
            .await
            .unwrap();
        assert_eq!(
            b.exhausted(&rich, &[], NOV).await.unwrap().as_deref(),
            Some("this workspace has used its monthly budget of $50.00; it resets on 2026-12-01")
        );
        // The token budget saw every call, once.
        let ws = UsageScope::Workspace {
            team_id: "T1".into(),
        };
        let month = Month::of(NOV);
        assert_eq!(
            b.ledger().spend(&ws, month).await.unwrap(),
            Spend {
                usage: usage(60, 60),
                cost_micros: 50_000_000
            }
        );
        assert_eq!(b.exhausted(&rich, &[], DEC).await.unwrap(), None);
    }

    #[tokio::test]
    async fn the_http_api_has_a_cost_budget_and_no_person_one() {
        let table = Arc::new(MemoryTable::default());
        let b = MonthlyBudgets::new(
            table,
            BudgetSettings {
                workspace_monthly_cost_micros: Some(2_000_000),
                user_monthly_cost_micros: Some(1),
                ..Default::default()
            },
        )
        .unwrap();
        let api = task(Origin::Http);
        b.record(&api, &[], usage(1, 1), 1.5, NOV).await.unwrap();
        assert_eq!(b.exhausted(&api, &[], NOV).await.unwrap(), None);
        b.record(&api, &[], usage(1, 1), 0.5, NOV).await.unwrap();
        assert_eq!(
            b.exhausted(&api, &[], NOV).await.unwrap().as_deref(),
            Some("the HTTP API has used its monthly budget of $2.00; it resets on 2026-12-01")
        );
    }
}
