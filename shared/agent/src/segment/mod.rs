//! One segment of a task: take the lease, run steps while the budget
//! allows, then hand over, finish, or wait.
//!
//! | module | what |
//! | --- | --- |
//! | this one | taking the lease, the step loop, commits under the lease |
//! | [`step`] | one LLM call (phase one of a step), compaction, loop detection |
//! | [`files`] | downloading the files the input carried |
//! | [`listing`] | the tools a segment offers; MCP tools listed once per task |
//! | [`plan`] | what to do with a turn's tool calls: a pure decision |
//! | [`tools`] | running the calls (phase two of a step) |
//! | [`wait`] | waiting at zero compute: approval, children, timer |
//! | [`ask`] | `ask_user`: post the question, wait for the reply |
//! | [`end`] | deliver the answer, end the task, hand over |
//! | [`limit`] | ending at a limit, with a summary of the work |
//! | [`phase`] | the task's phase for chat front ends (Slack agent sessions) |
//! | [`stream`] | the answer streamed as it is written (chat message, events) |
//! | [`stuck`] | empty answers, repeated calls, failing tools |
//! | [`trace`] | the segment's spans |
//! | [`budget`] | the segment's time |

mod ask;
mod budget;
mod end;
mod files;
mod limit;
mod listing;
mod measure;
mod phase;
mod plan;
mod step;
mod stream;
mod stuck;
mod tools;
mod trace;
mod wait;

pub use budget::SegmentBudget;

use crate::error::WorkerError;
use crate::deps::Deps;
use baton_core::approval;
use baton_core::transcript::pending_tool_calls;
use baton_core::{now_ms, Entry, EntryKind, Task, TaskId, TaskStatus, WaitingFor};
use baton_settings::AgentConfig;
use limit::Limit;
use trace::SegmentTrace;

/// How a segment ended (all of these acknowledge the wake message).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum SegmentEnd {
    /// Checkpointed and sent the next wake.
    HandedOver,
    /// The task reached a terminal status.
    Finished(TaskStatus),
    /// The task waits (a timer, an approval, its children), with no worker
    /// running.
    Waiting,
    /// Nothing to do: unknown, terminal or waiting task, or the lease is
    /// held by a live segment (this wake is a duplicate).
    Dropped(&'static str),
}

/// What one step of the loop decided: go on, or the segment ends.
type Step = Result<Option<SegmentEnd>, WorkerError>;

pub(crate) struct Segment<'d> {
    deps: &'d Deps,
    /// The task's agent, resolved once for the whole segment.
    agent: &'d AgentConfig,
    owner: String,
    task: Task,
    transcript: Vec<Entry>,
    /// What this segment offers the model (see [`listing`]).
    tools: crate::deps::Tools,
    budget: SegmentBudget,
    trace: SegmentTrace,
    /// At most one compaction attempt per segment, so a failing summariser
    /// cannot eat the budget.
    compaction_tried: bool,
    compaction_ran: bool,
    /// How this segment writes into the task's streamed answer message.
    stream: stream::ChatStream,
}

impl<'d> Segment<'d> {
    /// Takes the lease of task `id` (or finds it needs none) and runs the
    /// segment.
    pub(crate) async fn run(
        deps: &'d Deps,
        id: &TaskId,
        owner: String,
        budget: SegmentBudget,
    ) -> Result<SegmentEnd, WorkerError> {
        let Some(task) = deps.store.get(id).await? else {
            return Ok(SegmentEnd::Dropped("unknown task"));
        };
        let segment_start = now_ms();
        let ttl = deps.settings.lease_ttl.as_millis() as i64;
        let (task, _) = deps
            .store
            .update(id, Some(task), |t| Ok(acquire(t, &owner, now_ms(), ttl)))
            .await?;
        if let Some(until) = pending_wake(&task) {
            // Woken early (a duplicate, or a 15-minute hop): wait on.
            crate::timer::arm(deps.queue.as_ref(), deps.scheduler(), &task.id, until).await?;
            return Ok(SegmentEnd::Dropped("timer not due yet; re-armed"));
        }
        if !task.lease.is_held_by(&owner) {
            return Ok(SegmentEnd::Dropped(
                if task.status.is_terminal() || task.status == TaskStatus::Waiting {
                    "task is not runnable"
                } else {
                    "lease held by a live segment"
                },
            ));
        }
        let transcript = deps.store.transcript(id).await?;
        let mut segment = Segment {
            deps,
            agent: deps.agents.resolve(&task.agent),
            owner,
            task,
            transcript,
            tools: Default::default(),
            budget,
            trace: SegmentTrace::new(segment_start, deps.span_export.as_deref()),
            compaction_tried: false,
            compaction_ran: false,
            stream: Default::default(),
        };
        segment.show_processing().await;
        let result = segment.steps().await;
        segment.show_end(&result).await;
        segment.measure_segment();
        segment
            .trace
            .write(
                &deps.store,
                deps.span_export.as_deref(),
                &segment.task,
                &result,
            )
            .await;
        match result {
            Err(WorkerError::LeaseLost) => Ok(SegmentEnd::Dropped("lease lost")),
            other => other,
        }
    }

    /// Commits a change under the lease: `change` is applied to the freshest
    /// task (re-applied after a conflict) and refused if the lease is gone.
    /// Every commit renews the lease.
    async fn commit<F>(&mut self, mut change: F) -> Result<(), WorkerError>
    where
        F: FnMut(&mut Task) -> Option<Vec<EntryKind>>,
    {
        let owner = self.owner.clone();
        let ttl = self.deps.settings.lease_ttl.as_millis() as i64;
        let (task, written) = self
            .deps
            .store
            .update_with(&self.task.id.clone(), Some(self.task.clone()), |t| {
                // Every commit renews the lease, and none is made without it.
                t.lease
                    .renew(&owner, now_ms(), ttl)
                    .map_err(|_| WorkerError::LeaseLost)?;
                Ok::<_, WorkerError>(change(t))
            })
            .await?;
        self.task = task;
        self.transcript.extend(written);
        Ok(())
    }

    /// The loop: guards, then phase two of an unfinished step, or the final
    /// answer, or the next LLM call.
    async fn steps(&mut self) -> Result<SegmentEnd, WorkerError> {
        self.take_listing().await?;
        self.take_files().await?;
        if self.task.segments > self.task.limits.max_segments {
            let limit = Limit::Segments(self.task.limits.max_segments);
            return self.stop_at(limit).await;
        }
        loop {
            if self.task.cancel_requested {
                let reason = Some("cancelled on request".to_owned());
                return self.end(TaskStatus::Cancelled, None, reason).await;
            }
            if self.task.limits.deadline_at.is_some_and(|d| now_ms() >= d) {
                return self.stop_at(Limit::Deadline).await;
            }
            // Phase two of an unfinished step: its missing tool results.
            let (step, pending) = pending_tool_calls(&self.transcript);
            if !pending.is_empty() {
                if !self.budget.fits_another() {
                    return self.hand_over().await;
                }
                if let Some(end) = self.run_tools(step, pending).await? {
                    return Ok(end);
                }
                self.advise_after_tool_errors().await?;
                continue;
            }
            // The last step was a final answer: deliver it and finish.
            if let Some(answer) = final_answer(&self.transcript) {
                if crate::sanitize::sanitize(&answer).is_empty() {
                    if let Some(end) = self.after_empty_answer().await? {
                        return Ok(end);
                    }
                    continue;
                }
                if let Some(end) = self.deliver(answer).await? {
                    return Ok(end);
                }
                // A message arrived while answering: it is the new input.
                self.drain_inbox().await?;
                continue;
            }
            // Steering: messages that arrived while we ran.
            self.drain_inbox().await?;
            if let Some(limit) = self.over_budget().await? {
                return self.stop_at(limit).await;
            }
            if !self.budget.fits_another() {
                return self.hand_over().await;
            }
            if let Some(end) = self.maybe_compact().await? {
                return Ok(end);
            }
            if self.compaction_ran {
                // Compaction used this unit of time: check the budget again.
                self.compaction_ran = false;
                continue;
            }
            if let Some(end) = self.llm_step().await? {
                return Ok(end);
            }
        }
    }

    /// The limit that forbids another LLM call (steps, tokens, cost, the
    /// monthly budgets), if one does.
    async fn over_budget(&self) -> Result<Option<Limit>, WorkerError> {
        let limits = &self.task.limits;
        if self.task.steps >= limits.max_steps {
            return Ok(Some(Limit::Steps(limits.max_steps)));
        }
        if limits.max_tokens > 0 && self.task.usage.total() >= limits.max_tokens {
            return Ok(Some(Limit::Tokens(limits.max_tokens)));
        }
        if let Some(msg) = baton_settings::price::exhausted(&self.task, self.agent) {
            return Ok(Some(Limit::Cost(msg)));
        }
        let Some(budgets) = &self.deps.budgets else {
            return Ok(None);
        };
        match budgets.exhausted(&self.task, now_ms()).await {
            Ok(over) => Ok(over.map(Limit::Monthly)),
            // A counter that cannot be read will not heal by retrying: go
            // on uncounted rather than fail every task.
            Err(e @ baton_core::LedgerError::Corrupt(_)) => {
                tracing::error!(error = %e, "monthly budget counter unreadable; not enforced for this step");
                Ok(None)
            }
            Err(e) => Err(e.into()),
        }
    }

    /// Moves messages that arrived while the task ran into the transcript.
    async fn drain_inbox(&mut self) -> Result<(), WorkerError> {
        if self.task.inbox.is_empty() {
            return Ok(());
        }
        self.commit(|t| {
            let msgs = std::mem::take(&mut t.inbox);
            // The latest message is the one answered next: whose it is
            // decides whose memory, schedules and budget apply.
            if let Some(last) = msgs.last() {
                t.speaker = baton_core::task::author_of(last).map(str::to_owned);
            }
            Some(
                msgs.into_iter()
                    .map(|text| EntryKind::UserMessage { text })
                    .collect(),
            )
        })
        .await?;
        // Files that came with those messages follow them.
        self.take_files().await
    }
}

/// The lease-taking change: expires due approvals, ends a wait that is
/// over, and takes the lease if it is free (or already ours).
fn acquire(t: &mut Task, owner: &str, now: i64, ttl: i64) -> Option<Vec<EntryKind>> {
    if t.status.is_terminal() {
        return None;
    }
    // Approvals nobody decided in time are denied (and may lift the wait).
    let mut entries = approval::expire_due(t, now).unwrap_or_default();
    if t.status == TaskStatus::Waiting {
        let deadline_passed = t.limits.deadline_at.is_some_and(|d| d <= now);
        let reply_overdue = baton_core::question::overdue(t, now);
        if t.cancel_requested || deadline_passed || timer_due(t, now) || reply_overdue {
            // Cancelled or out of time while waiting, or the timer is up:
            // the loop takes it from here.
            t.waiting_for = None;
        } else {
            return (!entries.is_empty()).then_some(entries);
        }
    }
    if !t.lease.take(owner, now, ttl) {
        return (!entries.is_empty()).then_some(entries);
    }
    t.status = TaskStatus::Running;
    t.segments += 1;
    entries.push(EntryKind::Status {
        status: TaskStatus::Running,
        detail: format!("segment {} started", t.segments),
    });
    Some(entries)
}

/// Puts the task in `waiting` for `what`, with no lease (no worker runs a
/// waiting task), and returns the status entry that records it.
fn start_waiting(t: &mut Task, what: WaitingFor, detail: String) -> EntryKind {
    t.status = TaskStatus::Waiting;
    t.waiting_for = Some(what);
    t.lease.clear();
    EntryKind::Status {
        status: TaskStatus::Waiting,
        detail,
    }
}

/// Whether a waiting task's timer is up.
fn timer_due(t: &Task, now: i64) -> bool {
    match &t.waiting_for {
        Some(WaitingFor::Timer { until }) => until.millis() <= now,
        _ => false,
    }
}

/// When a waiting task must next be woken (its timer, or its approval's
/// expiry), if that is still ahead.
fn pending_wake(t: &Task) -> Option<i64> {
    if t.status != TaskStatus::Waiting {
        return None;
    }
    let at = match &t.waiting_for {
        Some(WaitingFor::Timer { until }) => Some(until.millis()),
        Some(WaitingFor::Approval { .. }) => approval::next_expiry(t),
        Some(WaitingFor::Children { .. }) => t.limits.deadline_at,
        Some(WaitingFor::Reply { .. }) => baton_core::question::open(t).map(|q| q.expires_at),
        None => None,
    };
    at.filter(|u| *u > now_ms())
}

/// The text of the final answer, if the conversation's last message is an
/// assistant message without tool calls (a runtime note after it asks for
/// more).
fn final_answer(transcript: &[Entry]) -> Option<String> {
    let last = transcript.iter().rev().find(|e| {
        matches!(
            e.kind,
            EntryKind::UserMessage { .. }
                | EntryKind::AssistantMessage { .. }
                | EntryKind::ToolResult { .. }
                | EntryKind::Note { .. }
        )
    })?;
    match &last.kind {
        EntryKind::AssistantMessage {
            text, tool_calls, ..
        } if tool_calls.is_empty() => Some(text.clone()),
        _ => None,
    }
}
