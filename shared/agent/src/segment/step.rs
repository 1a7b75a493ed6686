//! Phase one of a step: one LLM call, checkpointed with its tool calls
//! before any tool runs; and what happens around it — compaction of a long
//! history, counting tokens in the monthly budgets, loop detection.

use super::events::{Call, Event};
use super::failed_call::{after_failure, plain_failure, AfterFailure, FailedCall};
use super::{Segment, Step};
use crate::compaction::{self, CompactionError};
use crate::context;
use crate::error::WorkerError;
use crate::model_choice::{Answer, ModelsFailed};
use crate::progress;
use baton_core::{CompletionRequest, EntryKind, LlmError, NoteReason, TaskStatus, ToolSpec, Usage};
use std::time::Duration;
use tokio::time::Instant;

/// The least time a model call is given before the segment gives up on it
/// and hands over (the first call of a segment runs whatever its budget).
const LLM_CALL_FLOOR: Duration = Duration::from_secs(30);

impl Segment<'_> {
    /// Compaction, when the context is large or `/compact` was asked for
    /// ([`super::next`] decides): older turns are summarised by the model
    /// into a summary entry; if summarising fails the history stays as it
    /// is. A bare `/compact` (`ends`) answers and ends the task. A failure
    /// is not retried in the segment, so a failing summariser cannot eat
    /// the budget; after a success the history may be compacted again once
    /// it has grown again (a long segment).
    pub(super) async fn compact(&mut self, ends: bool) -> Step {
        let outcome = self.compact_history().await?;
        self.compaction_failed = outcome.is_err();
        if ends {
            let msg = match &outcome {
                Ok(d) => format!(
                    "Compacted: {} earlier messages are now a summary.",
                    d.summarised_messages
                ),
                Err(CompactionError::NothingToCompact) => "Nothing to compact yet.".to_owned(),
                Err(e) => {
                    // The detail (a provider's body) is for the logs only.
                    tracing::warn!(task_id = %self.task.id, error = %e, "/compact failed; history kept");
                    let why = match e {
                        CompactionError::Llm(err) if err.is_retryable() => {
                            "the model provider is unavailable"
                        }
                        CompactionError::Llm(
                            LlmError::Rejected { .. } | LlmError::ContextOverflow { .. },
                        ) => "the model provider refused the request",
                        CompactionError::EmptySummary { .. } => "the model returned no summary",
                        _ => "the model call failed",
                    };
                    format!("Could not compact the conversation: {why}. The history is unchanged.")
                }
            };
            let post = self
                .begin_post(format!("{}:compacted", self.task.id))
                .await?;
            self.deps.replies.answer(&self.task, &msg, &post).await?;
            return self
                .end(TaskStatus::Succeeded, Some(msg), None)
                .await
                .map(Some);
        }
        Ok(None)
    }

    /// Summarises the older turns into a summary entry (the model's time
    /// and tokens counted); the history stays as it is if that fails.
    pub(super) async fn compact_history(
        &mut self,
    ) -> Result<Result<compaction::Compacted, CompactionError>, crate::error::WorkerError> {
        let agent = self.agent;
        let started = baton_core::Instant::now();
        let clock = Instant::now();
        self.deps
            .replies
            .progress(&self.task, progress::COMPACTING)
            .await;
        let outcome = compaction::compact(agent, &self.transcript, self.deps.llm.as_ref()).await;
        self.budget.record(clock.elapsed());
        let spent = match &outcome {
            Ok(done) => Some((Some(done.entry.clone()), done.usage)),
            Err(CompactionError::EmptySummary { usage }) => Some((None, *usage)),
            Err(e) => {
                tracing::warn!(error = %e, "compaction failed; history kept");
                None
            }
        };
        let cost = spent
            .as_ref()
            .map(|(_, usage)| baton_settings::price::completion_cost(agent, &agent.model, *usage));
        let compacted = Event::Compacted {
            started,
            took: clock.elapsed(),
            model: &agent.model,
            failed: outcome.is_err(),
            spent: spent
                .as_ref()
                .zip(cost)
                .map(|((_, usage), cost)| (*usage, cost)),
        };
        self.events.emit(&self.task, compacted);
        if let (Some((entry, usage)), Some(cost)) = (spent, cost) {
            self.count_monthly(usage, cost).await;
            self.commit(|t| {
                t.budget.usage.add(usage);
                t.budget.cost_usd += cost;
                Some(entry.clone().into_iter().collect())
            })
            .await?;
        }
        Ok(outcome)
    }

    /// Counts a model call's tokens and estimated cost in the monthly
    /// budgets, once it has returned (before the checkpoint: a crash in
    /// between counts a call that is made again, never one that goes
    /// uncounted). A failed count is logged, not fatal: the month is
    /// undercounted rather than the call paid for twice.
    pub(super) async fn count_monthly(&self, usage: Usage, cost_usd: f64) {
        if let Some(budgets) = &self.deps.budgets {
            if let Err(e) = budgets
                .record(
                    &self.task,
                    &self.roles,
                    usage,
                    cost_usd,
                    baton_core::Instant::now(),
                )
                .await
            {
                tracing::warn!(error = %e, "could not count a model call in the monthly budgets");
            }
        }
    }

    /// The tools this agent may call this step: those the segment offers
    /// ([`super::listing`]), `sleep`, `ask_user` (not in a sub-agent),
    /// `wait_for_callback`, and
    /// `delegate` when it has agents to delegate to.
    pub(super) fn tool_specs(&self) -> Vec<ToolSpec> {
        let agent = self.agent;
        self.tools
            .values()
            .map(|t| t.spec())
            .chain(
                agent
                    .allows_tool(crate::timer::SLEEP)
                    .then(crate::timer::sleep_spec),
            )
            // A sub-agent has nobody to ask.
            .chain(
                (agent.allows_tool(crate::question::ASK_USER) && self.task.source.parent.is_none())
                    .then(crate::question::ask_user_spec),
            )
            .chain(
                agent
                    .allows_tool(crate::callback::WAIT_FOR_CALLBACK)
                    .then(crate::callback::wait_for_callback_spec),
            )
            .chain(crate::delegation::delegate_spec(agent, &self.deps.agents))
            .collect()
    }

    /// The request for this step: the context pipeline's messages, and the
    /// remembered facts relevant to the latest message, as data in the
    /// system prompt (only for agents that may `recall`). `shrunk`: the
    /// provider found the last one too long, so old tool results are
    /// cleared whatever the estimate says.
    async fn request(&mut self, shrunk: bool) -> CompletionRequest {
        let mut request = self.context.request(self.agent, self.tool_specs());
        if let Some(modules) = crate::judgment::calls::modules_prompt(self.agent, &self.transcript)
        {
            request.system = format!("{}\n\n{modules}", request.system.trim_end());
        }
        if shrunk {
            context::clear_old_tool_results(&mut request.messages);
        }
        if let Some(note) = self.people_note().await {
            request.system.push_str(&note);
        }
        if let Some(query) = context::memory_query(&request, &self.transcript) {
            let memory = baton_core::memory::MemoryStore::new(self.deps.store.table().clone());
            let facts = context::recall_for_prompt(&memory, &self.task.source.origin, query).await;
            context::with_memory(&mut request, &facts);
        }
        request
    }

    /// Who is in a Slack conversation, by name: the requester and everyone
    /// whose messages the transcript records as theirs. `None` outside
    /// Slack or without names.
    async fn people_note(&self) -> Option<String> {
        let people = self.deps.people.as_ref()?;
        let baton_core::Origin::Slack { team_id, user, .. } = &self.task.source.origin else {
            return None;
        };
        let mut others: Vec<&str> = self
            .transcript
            .iter()
            .flat_map(|e| match &e.kind {
                EntryKind::UserMessage { from, .. } => from
                    .as_ref()
                    .and_then(baton_core::Author::slack_user)
                    .into_iter()
                    .collect(),
                // Earlier turns of the conversation carried into the task.
                EntryKind::Recap { turns, .. } => {
                    turns.iter().filter_map(|t| t.author.as_deref()).collect()
                }
                _ => Vec::new(),
            })
            .filter(|a| a != user)
            .collect();
        others.sort_unstable();
        others.dedup();
        let requester = people.display_name(team_id, user).await;
        let mut lines = vec![match &requester {
            Some(name) => format!("- <@{user}> is {name}, who asked for this task"),
            None => format!("- <@{user}> asked for this task"),
        }];
        for a in others {
            if let Some(name) = people.display_name(team_id, a).await {
                lines.push(format!("- <@{a}> is {name}"));
            }
        }
        if requester.is_none() && lines.len() == 1 {
            return None;
        }
        Some(format!(
            "\n\nPeople in this Slack conversation (messages marked [from <@ID>] were written by that person; the others by the one who asked):\n{}",
            lines.join("\n")
        ))
    }

    /// Phase one: one LLM call, checkpointed with its tool calls before any
    /// tool runs. A failed call goes where [`after_failure`] says: shrunk
    /// (a forced compaction, old tool results cleared) and tried once more,
    /// handed to the escalation model, or the task ended.
    pub(super) async fn llm_step(&mut self) -> Step {
        let mut shrunk = false;
        loop {
            let request = self.request(shrunk).await;
            let clock = Instant::now();
            let called = self.call_model(&request).await;
            if !shrunk {
                // Its messages are the next step's, with that step's added.
                self.context.keep(request);
            }
            let failed = match called? {
                Called::Answered(answer) => return self.record_answer(answer).await,
                Called::OutOfTime => return self.hand_over().await.map(Some),
                Called::Failed(e) => e,
            };
            let situation = FailedCall {
                error: failed.last_error(),
                shrunk,
                can_escalate: self.agent.escalation.is_some()
                    && !crate::model_choice::escalated(self.agent, &self.transcript),
            };
            match after_failure(&situation) {
                AfterFailure::Shrink => {
                    tracing::warn!(task_id = %self.task.id, "request too long for the model; compacting and retrying");
                    shrunk = true;
                    // A failed summary leaves the history as it is: clearing
                    // old tool results may still be enough.
                    if let Err(e) = self.compact_history().await? {
                        tracing::warn!(task_id = %self.task.id, error = %e, "forced compaction did not shrink the history");
                    }
                    continue;
                }
                AfterFailure::Escalate => {
                    let note = EntryKind::Note {
                        reason: NoteReason::Escalated,
                        text:
                            "The model provider refused the last request; continue with the task."
                                .to_owned(),
                    };
                    self.commit(|_| Some(vec![note.clone()])).await?;
                    return Ok(None);
                }
                AfterFailure::Fail => {
                    let reason = plain_failure(&failed, clock.elapsed());
                    tracing::error!(task_id = %self.task.id, error = %failed, %reason, "model call failed; ending the task");
                    let tried: Vec<String> =
                        failed.failures.iter().map(|f| f.model.clone()).collect();
                    return self.fail_unanswered(reason, &tried).await.map(Some);
                }
            }
        }
    }

    /// One call to the step's model (with its fallbacks), bounded by the
    /// time the segment has left.
    async fn call_model(&mut self, request: &CompletionRequest) -> Result<Called, WorkerError> {
        self.deps
            .replies
            .progress(&self.task, progress::THINKING)
            .await;
        let started = baton_core::Instant::now();
        let clock = Instant::now();
        // The agent's model (or its escalation model), falling back along
        // the agent's own chain on repeated overload or failure. Retries and
        // fallbacks can outlast the segment (and a Lambda's 15 minutes):
        // past the time left, hand over and try again in the next segment.
        // At least LLM_CALL_FLOOR, so a tiny budget still moves.
        let window = self.budget.time_left().max(LLM_CALL_FLOOR);
        let Ok(result) = self.ask_model(request, window).await? else {
            self.budget.record(clock.elapsed());
            tracing::warn!(
                waited_s = window.as_secs(),
                "model call outlasted the segment; handing over"
            );
            return Ok(Called::OutOfTime);
        };
        self.budget.record(clock.elapsed());
        let call = Call {
            request,
            started,
            took: clock.elapsed(),
            step: self.task.budget.steps + 1,
        };
        match result {
            Ok(answer) => {
                let usage = answer.completion.usage;
                let cost = baton_settings::price::completion_cost(self.agent, &answer.model, usage);
                let answered = Event::ModelAnswered {
                    call,
                    answer: &answer,
                    cost,
                };
                self.events.emit(&self.task, answered);
                self.count_monthly(usage, cost).await;
                Ok(Called::Answered(answer))
            }
            Err(failed) => {
                let event = Event::ModelFailed {
                    call,
                    failed: &failed,
                };
                self.events.emit(&self.task, event);
                Ok(Called::Failed(failed))
            }
        }
    }

    /// Checkpoints the model's answer (phase one); [`super::next`] then
    /// checks its calls for repetition before any runs. A turn whose calls
    /// are all safe to repeat (and repeat nothing) skips the
    /// separate checkpoint: its calls run at once and the answer is
    /// written with their results (see [`Segment::run_safe_turn`]).
    async fn record_answer(&mut self, answer: Answer) -> Step {
        let completion = answer.completion;
        let usage = completion.usage;
        let cost = baton_settings::price::completion_cost(self.agent, &answer.model, usage);
        let answered_by = if completion.model.is_empty() {
            answer.model
        } else {
            completion.model.clone()
        };
        let message = EntryKind::AssistantMessage {
            step: self.task.budget.steps + 1,
            text: completion.content,
            tool_calls: completion.tool_calls,
            usage,
            model: answered_by,
        };
        let spent = Spent { usage, cost };
        if let Some(batch) = self.one_write_turn(&message) {
            return self.run_safe_turn(message, spent, batch).await;
        }
        self.commit(|t| {
            spent.count(t);
            Some(vec![message.clone()])
        })
        .await?;
        Ok(None)
    }
}

/// What a step's model call cost, added to the task when the step is
/// written.
#[derive(Clone, Copy)]
pub(super) struct Spent {
    usage: Usage,
    cost: f64,
}

impl Spent {
    pub(super) fn count(&self, t: &mut baton_core::Task) {
        t.budget.steps += 1;
        t.budget.usage.add(self.usage);
        t.budget.cost_usd += self.cost;
    }
}

/// What one model call came to.
enum Called {
    Answered(Answer),
    /// It would outlast the segment: the next one tries again.
    OutOfTime,
    Failed(ModelsFailed),
}
