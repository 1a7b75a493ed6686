//! The monthly token budgets per workspace and per user (`[budgets]`),
//! counted in the usage ledger.
//!
//! Checked before every LLM call; a task that has used one up ends with a
//! message saying which. A check happens before a call and the call may
//! then overshoot, so a budget can be exceeded by at most one step per task
//! running at the same time.

use baton_core::{
    Instant, LedgerError, Month, Origin, Table, Task, Usage, UsageLedger, UsageScope,
};
use baton_settings::price::thousands;
use baton_settings::BudgetSettings;
use std::sync::Arc;

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
        (settings.workspace_monthly_tokens.is_some() || settings.has_person_budgets()).then(|| {
            MonthlyBudgets {
                ledger: UsageLedger::new(table),
                settings,
            }
        })
    }

    /// Whether a person's budget depends on their roles
    /// (`[budgets.roles.NAME]`), so they must be looked up.
    pub fn needs_roles(&self) -> bool {
        !self.settings.roles.is_empty()
    }

    /// The ledger the budgets read (for reports and tests).
    pub fn ledger(&self) -> &UsageLedger {
        &self.ledger
    }

    /// The budgets that apply to `origin`, whose person has `roles`: the
    /// person's is their own override, else their roles' largest, else
    /// the default per-user budget.
    fn scopes(&self, origin: &Origin, roles: &[String]) -> Vec<Scoped> {
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
        let person = match origin {
            Origin::Slack { user, .. } => self.settings.person_monthly_tokens(user, roles),
            Origin::Http => None,
        };
        if let (Some(limit), Some(scope)) = (person, UsageScope::user_of(origin)) {
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
    pub async fn exhausted(
        &self,
        task: &Task,
        roles: &[String],
        now: Instant,
    ) -> Result<Option<String>, LedgerError> {
        let month = Month::of(now);
        let scoped = self.scopes(&task.serving(), roles);
        let scopes: Vec<UsageScope> = scoped.iter().map(|s| s.scope.clone()).collect();
        let used = self.ledger.usage_of(&scopes, month).await?;
        for (s, used) in scoped.into_iter().zip(used) {
            if used.total() >= s.limit {
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
    pub async fn record(
        &self,
        task: &Task,
        roles: &[String],
        usage: Usage,
        now: Instant,
    ) -> Result<(), LedgerError> {
        let scopes: Vec<UsageScope> = self
            .scopes(&task.serving(), roles)
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

        b.record(&alice, &[], usage(200, 99), NOV).await.unwrap();
        assert_eq!(b.exhausted(&alice, &[], NOV).await.unwrap(), None);
        b.record(&alice, &[], usage(0, 1), NOV).await.unwrap();
        assert_eq!(
            b.exhausted(&alice, &[], NOV).await.unwrap().as_deref(),
            Some("you have used your monthly budget of 300 tokens; it resets on 2026-12-01")
        );
        // Bob shares the workspace, not the user budget.
        assert_eq!(b.exhausted(&bob, &[], NOV).await.unwrap(), None);
        b.record(&bob, &[], usage(700, 0), NOV).await.unwrap();
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
        b.record(&one, &[], usage(50, 0), NOV).await.unwrap();
        assert_eq!(
            b.exhausted(&two, &[], NOV).await.unwrap(),
            None,
            "user budget not applied"
        );
        b.record(&two, &[], usage(50, 0), NOV).await.unwrap();
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
        b.record(&task(slack("T1", "U1")), &[], usage(5, 5), NOV)
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
            b.record(&t, roles, usage(200, 0), NOV).await.unwrap();
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
}
