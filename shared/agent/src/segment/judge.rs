//! The agent's judgment as the segment carries it out ([`crate::judgment`]):
//! the routing, planning, supervision and gate calls, each recorded as its
//! entry (with what it cost) before anything acts on it.

use super::events::Event;
use super::{Segment, Step};
use crate::error::WorkerError;
use crate::judgment;
use crate::judgment::calls::{self, Purpose};
use baton_core::judgment::SupervisorAction;
use baton_core::{Completion, CompletionRequest, EntryKind, LlmError, ToolCall, Usage};
use std::time::Duration;
use tokio::time::Instant;

/// The longest a judging call may take; past it, its fallback applies.
const JUDGE_CALL_MAX: Duration = Duration::from_secs(60);

impl Segment<'_> {
    /// One forced call, bounded by the segment's time, traced with its
    /// purpose and counted in the monthly budgets: its answer, and the
    /// tokens and cost to add to the task with its entry.
    async fn judging_call(
        &mut self,
        purpose: Purpose,
        request: &CompletionRequest,
    ) -> (Result<Completion, LlmError>, Option<(Usage, f64)>) {
        let started = baton_core::Instant::now();
        let clock = Instant::now();
        let window = self.budget.time_left().min(JUDGE_CALL_MAX);
        let llm = self.deps.llm.clone();
        let answer = match tokio::time::timeout(window, llm.complete(request)).await {
            Ok(answer) => answer,
            Err(_) => Err(LlmError::Transport(format!(
                "no answer within {} s",
                window.as_secs()
            ))),
        };
        self.budget.record(clock.elapsed());
        let spent = answer.as_ref().ok().map(|c| {
            let cost = baton_settings::price::completion_cost(self.agent, &request.model, c.usage);
            (c.usage, cost)
        });
        let judged = Event::Judged {
            purpose,
            started,
            took: clock.elapsed(),
            model: &request.model,
            spent,
        };
        self.events.emit(&self.task, judged);
        if let Some((usage, cost)) = spent {
            self.count_monthly(usage, cost).await;
        }
        (answer, spent)
    }

    /// Commits a judging call's entries with what it cost.
    async fn record_judged(
        &mut self,
        entries: Vec<EntryKind>,
        spent: Option<(Usage, f64)>,
        steps: u32,
    ) -> Result<(), WorkerError> {
        self.commit(|t| {
            if let Some((usage, cost)) = spent {
                t.budget.usage.add(usage);
                t.budget.cost_usd += cost;
            }
            t.budget.steps += steps;
            Some(entries.clone())
        })
        .await
    }

    /// The routing call: the task's tier and prompt modules.
    pub(super) async fn route(&mut self) -> Step {
        let request = calls::route_request(self.agent, &self.transcript);
        let (answer, spent) = self.judging_call(Purpose::Route, &request).await;
        let entry = calls::route_entry(self.agent, answer.as_ref());
        self.record_judged(vec![entry], spent, 0).await?;
        Ok(None)
    }

    /// The planning call; the plan is then shown to the user.
    pub(super) async fn plan(&mut self) -> Step {
        let tools: Vec<String> = self.tool_specs().into_iter().map(|t| t.name).collect();
        let request = calls::plan_request(self.agent, &self.transcript, &tools);
        let (answer, spent) = self.judging_call(Purpose::Plan, &request).await;
        let entry = calls::plan_entry(answer.as_ref());
        self.record_judged(vec![entry], spent, 0).await?;
        self.show_plan().await;
        Ok(None)
    }

    /// The plan as the user sees it ([`baton_core::ReplySink::plan`]: in
    /// Slack as the thread's status; over HTTP the `plan` and
    /// `supervision` events are the view).
    pub(super) async fn show_plan(&self) {
        if let Some((steps, done)) = judgment::plan(&self.transcript) {
            self.deps.replies.plan(&self.task, &steps, &done).await;
        }
    }

    /// A supervision checkpoint. Its decision is recorded before it acts:
    /// a note joins the context and `escalate` moves the tier (both read
    /// from the entry), `replan` and `stop` are the next actions
    /// ([`super::next`]), and `ask_user` is recorded with the question as
    /// a call of the `ask_user` tool, which waits for the reply as the
    /// model's own question would.
    pub(super) async fn supervise(&mut self) -> Step {
        let now = baton_core::Instant::now();
        let first_at = self.transcript.first().map_or(now, |e| e.at);
        let elapsed_s = i64::try_from(now.since(first_at).as_secs()).unwrap_or(i64::MAX);
        let request = calls::supervise_request(
            self.agent,
            &self.transcript,
            self.task.budget.steps,
            elapsed_s,
        );
        let (answer, spent) = self.judging_call(Purpose::Supervise, &request).await;
        let can_ask =
            self.task.source.parent.is_none() && self.agent.allows_tool(crate::question::ASK_USER);
        let entry = calls::supervision_entry(self.task.budget.steps, can_ask, answer.as_ref());
        let marks_done = matches!(&entry, EntryKind::Supervision { done, .. } if !done.is_empty());
        let mut entries = vec![entry.clone()];
        let mut steps = 0;
        if let EntryKind::Supervision {
            action: SupervisorAction::AskUser,
            question: Some(question),
            step,
            ..
        } = &entry
        {
            steps = 1;
            entries.push(EntryKind::AssistantMessage {
                step: step + 1,
                text: String::new(),
                tool_calls: vec![ToolCall {
                    id: format!("supervisor-{step}"),
                    name: crate::question::ASK_USER.to_owned(),
                    arguments: serde_json::json!({ "question": question }),
                }],
                usage: Usage::default(),
                model: "supervisor".to_owned(),
            });
        }
        self.record_judged(entries, spent, steps).await?;
        if marks_done {
            self.show_plan().await;
        }
        Ok(None)
    }

    /// The quality gate's call on step `step`'s answer. A fail sends it
    /// back (the next call runs on the strong tier with the problems in
    /// its context) unless it is the turn's second answer, which is
    /// delivered whatever the verdict.
    pub(super) async fn judge(&mut self, step: u32, answer: String, retried: bool) -> Step {
        let request = calls::verdict_request(self.agent, &self.transcript, &answer);
        let (verdict, spent) = self.judging_call(Purpose::Verdict, &request).await;
        let entry = calls::verdict_entry(step, retried, verdict.as_ref());
        self.record_judged(vec![entry], spent, 0).await?;
        Ok(None)
    }

    /// An answer that only narrates goes back to the model, by rule.
    pub(super) async fn send_back(&mut self, step: u32) -> Step {
        self.record_judged(vec![calls::narration_verdict(step)], None, 0)
            .await?;
        Ok(None)
    }
}
