//! Limits that end a task before its answer — steps, segments, the
//! deadline, tokens, cost, the monthly budgets, a model going round in
//! circles, the supervisor's stop — and a model that cannot be reached,
//! and how the task ends then: with one last model call, without tools,
//! for a summary of what was done and what remains (by another of the
//! agent's models when its own is what failed; skipped when money or
//! tokens are what ran out), told to the user with the reason in plain
//! words. Without a summary, the user is told what was done from the
//! transcript ([`work_so_far`]): never a bare apology. The task's `error`
//! still names the limit.

use super::events::Event;
use super::Segment;
use crate::context::build_request;
use crate::error::WorkerError;
use crate::sanitize::sanitize;
use baton_core::{EntryKind, NoteReason, TaskStatus};
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
    /// A monthly token or cost budget; the message says whose.
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
            self.closing_summary(&reason, &[]).await?
        } else {
            None
        };
        let told = told(
            &format!("I had to stop before finishing: {reason}."),
            &summary,
            &self.transcript,
        );
        self.finish(TaskStatus::Failed, summary, Some(reason), Some(told))
            .await
    }

    /// Ends the task when its models could not answer (`failed`: the ones
    /// tried), with a summary by another of the agent's models when one
    /// answers, else what the transcript shows was done.
    pub(super) async fn fail_unanswered(
        &mut self,
        reason: String,
        failed: &[String],
    ) -> Result<super::SegmentEnd, WorkerError> {
        let summary = self.closing_summary(&reason, failed).await?;
        let told = told(
            &format!("I could not finish: {reason}."),
            &summary,
            &self.transcript,
        );
        self.finish(TaskStatus::Failed, summary, Some(reason), Some(told))
            .await
    }

    /// One model call without tools asking for what was done and what
    /// remains: on the agent's models, or, when those in `failed` are what
    /// could not answer, on its others. `None` when it fails or says
    /// nothing: the reason is told anyway.
    async fn closing_summary(
        &mut self,
        reason: &str,
        failed: &[String],
    ) -> Result<Option<String>, WorkerError> {
        let pinned = self.task.model.as_deref();
        let choice = if failed.is_empty() {
            crate::model_choice::Choice::for_task(self.agent, pinned, &self.transcript)
        } else if pinned.is_some() {
            // The task asked for one model: no other speaks for it.
            return Ok(None);
        } else {
            match crate::model_choice::Choice::instead_of(self.agent, failed) {
                Some(choice) => choice,
                None => return Ok(None),
            }
        };
        let note = format!(
            "You must stop now: {reason}. Do not call any tools. In a few sentences, tell \
             the user what was done so far, what you found, and what remains to be done."
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
        let started = baton_core::Instant::now();
        let clock = Instant::now();
        let call = choice.ask(self.deps.llm.as_ref(), &request, None);
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
        self.count_monthly(usage, cost).await;
        self.commit(|t| {
            t.budget.usage.add(usage);
            t.budget.cost_usd += cost;
            Some(Vec::new())
        })
        .await?;
        let text = sanitize(&answer.completion.content);
        Ok((!text.trim().is_empty()).then_some(text))
    }
}

/// What the user is told at the end: `opening`, then the summary, or what
/// the transcript shows was done when there is none.
fn told(opening: &str, summary: &Option<String>, transcript: &[baton_core::Entry]) -> String {
    match summary {
        Some(s) => format!("{opening}\n\n{s}"),
        None => match work_so_far(transcript) {
            Some(work) => format!("{opening}\n\n{work}"),
            None => opening.to_owned(),
        },
    }
}

/// The work the transcript shows, in plain words, for when no model can
/// summarise it: the tools used, how often, how many failed, and the
/// model's last words before the end. `None` when nothing was done.
pub(super) fn work_so_far(transcript: &[baton_core::Entry]) -> Option<String> {
    let mut used: Vec<(String, u32, u32)> = Vec::new();
    let mut last_words: Option<&str> = None;
    for e in transcript {
        match &e.kind {
            EntryKind::ToolResult { name, is_error, .. } => {
                match used.iter_mut().find(|(n, _, _)| n == name) {
                    Some((_, calls, errors)) => {
                        *calls += 1;
                        *errors += u32::from(*is_error);
                    }
                    None => used.push((name.clone(), 1, u32::from(*is_error))),
                }
            }
            EntryKind::AssistantMessage { text, .. } if !sanitize(text).trim().is_empty() => {
                last_words = Some(text);
            }
            _ => {}
        }
    }
    let mut parts = Vec::new();
    if !used.is_empty() {
        let tools: Vec<String> = used
            .iter()
            .map(|(name, calls, errors)| {
                let times = match calls {
                    1 => "once".to_owned(),
                    2 => "twice".to_owned(),
                    n => format!("{n} times"),
                };
                match errors {
                    0 => format!("`{name}` {times}"),
                    e => format!("`{name}` {times} ({e} failed)"),
                }
            })
            .collect();
        parts.push(format!(
            "What I did before stopping: I used {}.",
            tools.join(", ")
        ));
    }
    if let Some(words) = last_words {
        let words = crate::context::cut_middle(&sanitize(words), 300, "this note");
        parts.push(format!("My last note: {}", words.trim()));
    }
    (!parts.is_empty()).then(|| parts.join("\n\n"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use baton_core::{Entry, ToolCall, Usage};

    fn entries(kinds: Vec<EntryKind>) -> Vec<Entry> {
        kinds
            .into_iter()
            .enumerate()
            .map(|(i, kind)| Entry {
                seq: i as u64,
                at: baton_core::Instant(0),
                kind,
            })
            .collect()
    }

    fn result(name: &str, is_error: bool) -> EntryKind {
        EntryKind::ToolResult {
            step: 1,
            call_id: "c".into(),
            name: name.into(),
            content: "secret page text".into(),
            is_error,
            truncated_chars: 0,
        }
    }

    #[test]
    fn the_work_so_far_names_tools_and_last_words_not_results() {
        let t = entries(vec![
            EntryKind::UserMessage {
                text: "go".into(),
                from: None,
            },
            EntryKind::AssistantMessage {
                step: 1,
                text: "The first two pages list 14 vendors.".into(),
                tool_calls: vec![ToolCall {
                    id: "c".into(),
                    name: "http_request".into(),
                    arguments: serde_json::json!({}),
                }],
                usage: Usage::default(),
                model: "m".into(),
            },
            result("http_request", false),
            result("http_request", true),
            result("http_request", false),
            result("current_time", false),
        ]);
        let work = work_so_far(&t).unwrap();
        assert_eq!(
            work,
            "What I did before stopping: I used `http_request` 3 times (1 failed), \
             `current_time` once.\n\nMy last note: The first two pages list 14 vendors."
        );
        assert!(!work.contains("secret page text"));
        assert_eq!(
            work_so_far(&entries(vec![EntryKind::UserMessage {
                text: "go".into(),
                from: None
            }])),
            None
        );
        let opening = "I could not finish: the model provider is unavailable.";
        assert_eq!(
            told(opening, &Some("Did x.".into()), &t),
            format!("{opening}\n\nDid x.")
        );
        assert!(told(opening, &None, &t).starts_with(&format!("{opening}\n\nWhat I did")));
    }
}
