//! The conversation once the task has ended: its turns recorded on the
//! thread ([`crate::recap::record`]), then, with the answer already
//! delivered and the task's end committed, the turns that overflowed
//! summarised ([`crate::recap::summariser`]). The summary's call is the
//! task's: traced, counted in the monthly budgets and added to its usage
//! and cost.

use super::events::Event;
use super::Segment;
use crate::judgment::calls::Purpose;
use crate::recap::summariser::{self, CALL_MAX};
use baton_core::{StoreError, Usage};

impl Segment<'_> {
    /// Records the ended task on its conversation and summarises what
    /// overflowed. Best effort: nothing here fails the ended task.
    pub(super) async fn remember_conversation(&mut self) {
        crate::recap::record(&self.deps.store, &self.task, &self.transcript).await;
        // Recorded first: the next task starts with these turns.
        super::turn::pass_on(self.deps, &self.task).await;
        let Some(key) = self
            .task
            .conversation
            .thread
            .clone()
            .filter(|_| self.task.source.parent.is_none())
        else {
            return;
        };
        if self.budget_used_up().await {
            // The turns wait, folded for the next task, until there is budget.
            return;
        }
        let window = self.budget.time_left().min(CALL_MAX);
        let llm = self.deps.llm.clone();
        let calls =
            summariser::summarise(&self.deps.store, llm.as_ref(), self.agent, &key, window).await;
        let mut total = Usage::default();
        let mut cost = 0.0;
        for call in calls {
            let spent = call.usage.map(|u| {
                (
                    u,
                    baton_settings::price::completion_cost(self.agent, &call.model, u),
                )
            });
            let summarised = Event::Judged {
                purpose: Purpose::Recap,
                started: call.started,
                took: call.took,
                model: &call.model,
                spent,
            };
            self.events.emit(&self.task, summarised);
            if let Some((usage, c)) = spent {
                self.count_monthly(usage, c).await;
                total.add(usage);
                cost += c;
            }
        }
        if total != Usage::default() {
            self.add_spent(total, cost).await;
        }
    }

    /// Whether the task's workspace or user has no monthly budget left for
    /// another call.
    async fn budget_used_up(&self) -> bool {
        let Some(budgets) = &self.deps.budgets else {
            return false;
        };
        let now = baton_core::Instant::now();
        matches!(
            budgets.exhausted(&self.task, &self.roles, now).await,
            Ok(Some(_))
        )
    }

    /// Adds a call made after the task ended to its usage and cost. The
    /// task holds no lease any more, and nobody else runs it: written as
    /// it is, re-applied after a conflicting write (a vote on the answer).
    async fn add_spent(&mut self, usage: Usage, cost: f64) {
        let id = self.task.id.clone();
        let written = self
            .deps
            .store
            .update_with(&id, Some(self.task.clone()), |t| {
                t.budget.usage.add(usage);
                t.budget.cost_usd += cost;
                Ok::<_, StoreError>(Some(Vec::new()))
            })
            .await;
        match written {
            Ok((task, _)) => self.task = task,
            Err(e) => {
                tracing::warn!(task_id = %id, error = %e, "could not add the conversation summary's usage to the task");
            }
        }
    }
}
