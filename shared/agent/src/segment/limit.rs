//! Limits that end a task before its answer — steps, segments, the
//! deadline, tokens, cost, the monthly budgets, a model going round in
//! circles — and how it ends then: with one last model call, without
//! tools, for a summary of what was done and what remains (skipped when
//! money or tokens are what ran out), told to the user with the reason in
//! plain words. The task's `error` still names the limit.

use super::events::Event;
use super::Segment;
use crate::context::build_request;
use crate::error::WorkerError;
use crate::sanitize::sanitize;
use baton_core::{now_ms, EntryKind, NoteReason, TaskStatus};
use std::time::Duration;
use tokio::time::Instant;

/// The shortest and longest time the closing summary may take.
const SUMMARY_FLOOR: Duration = Duration::from_secs(10);
const SUMMARY_MAX: Duration = Duration::from_secs(60);

/// A limit that ended the task.
#[derive(Clone, Debug, PartialEq)]
pub(super) enum Limit {
    Steps(u32),
    Segments(u32),
    Deadline,
    Tokens(u64),
    /// The per-task cost budget; the message says how much of it.
    Cost(String),
    /// A monthly token budget; the message says whose.
    Monthly(String),
    /// The model kept asking for the same call after being told.
    Loop {
        tool: String,
        times: u32,
    },
    /// A supervision checkpoint decided to stop; its reason.
    Supervisor(String),
}

impl Limit {
    /// The limit in plain words; also the task's `error`.
    pub(super) fn describe(&self) -> String {
        match self {
            Limit::Steps(n) => format!("step limit reached ({n} steps) before a final answer"),
            Limit::Segments(n) => format!("hop budget exhausted: {n} segments"),
            Limit::Deadline => "wall-clock deadline passed".to_owned(),
            Limit::Tokens(n) => format!("token budget exhausted ({n} tokens)"),
            Limit::Cost(m) | Limit::Monthly(m) => m.clone(),
            Limit::Supervisor(why) => format!("stopped by the supervisor: {why}"),
            Limit::Loop { tool, times } => format!(
                "stopped: the model asked for the same `{tool}` call with the same arguments \
                 {times} times, so it is not making progress"
            ),
        }
    }

    /// Whether one more model call may be spent on a summary: not when
    /// money or tokens are what ran out.
    fn allows_summary(&self) -> bool {
        !matches!(self, Limit::Tokens(_) | Limit::Cost(_) | Limit::Monthly(_))
    }
}

impl Segment<'_> {
    /// Ends the task at `limit`, with a summary of the work when the limit
    /// allows one.
    pub(super) async fn stop_at(&mut self, limit: Limit) -> Result<super::SegmentEnd, WorkerError> {
        let reason = limit.describe();
        let summary = if limit.allows_summary() {
            self.closing_summary(&reason).await?
        } else {
            None
        };
        let told = match &summary {
            Some(s) => format!("I had to stop before finishing: {reason}.\n\n{s}"),
            None => format!("I had to stop before finishing: {reason}."),
        };
        self.finish(TaskStatus::Failed, summary, Some(reason), Some(told))
            .await
    }

    /// One model call without tools asking for what was done and what
    /// remains. `None` when it fails or says nothing: the limit is told
    /// anyway.
    async fn closing_summary(&mut self, reason: &str) -> Result<Option<String>, WorkerError> {
        let note = format!(
            "You have reached a limit and must stop now: {reason}. Do not call any tools. \
             In a few sentences, tell the user what was done so far and what remains to be done."
        );
        let asked = matches!(
            self.transcript.last().map(|e| &e.kind),
            Some(EntryKind::Note {
                reason: NoteReason::Summary,
                ..
            })
        );
        if !asked {
            let entry = EntryKind::Note {
                reason: NoteReason::Summary,
                text: note,
            };
            self.commit(|_| Some(vec![entry.clone()])).await?;
        }
        let agent = self.agent;
        let request = build_request(agent, &self.transcript, Vec::new());
        let window = self.budget.time_left().clamp(SUMMARY_FLOOR, SUMMARY_MAX);
        let started = now_ms();
        let clock = Instant::now();
        let call = crate::model_choice::complete(
            self.deps.llm.as_ref(),
            agent,
            &self.transcript,
            &request,
        );
        let answer = match tokio::time::timeout(window, call).await {
            Ok(Ok(answer)) => answer,
            Ok(Err(e)) => {
                tracing::warn!(task_id = %self.task.id, error = %e, "closing summary failed");
                return Ok(None);
            }
            Err(_) => {
                tracing::warn!(task_id = %self.task.id, "closing summary timed out");
                return Ok(None);
            }
        };
        self.budget.record(clock.elapsed());
        let usage = answer.completion.usage;
        let cost = baton_settings::price::completion_cost(agent, &answer.model, usage);
        let summarised = Event::Summarised {
            started,
            took: clock.elapsed(),
            model: &answer.model,
            usage,
            cost,
        };
        self.events.emit(&self.task, summarised);
        self.count_monthly(usage).await;
        self.commit(|t| {
            t.usage.add(usage);
            t.cost_usd += cost;
            Some(Vec::new())
        })
        .await?;
        let text = sanitize(&answer.completion.content);
        Ok((!text.trim().is_empty()).then_some(text))
    }
}
