//! One segment of a task: take the lease, run steps while the budget
//! allows, then hand over, finish, or wait.
//!
//! | module | what |
//! | --- | --- |
//! | this one | taking the lease, carrying out [`next`]'s actions, commits |
//! | [`step`] | one LLM call (phase one of a step), compaction |
//! | [`failed_call`] | what follows a failed model call: shrink, escalate, or end |
//! | [`files`] | downloading the files the input carried |
//! | [`listing`] | the tools a segment offers; MCP tools listed once per task |
//! | [`next`] | what the segment does next: the loop's decision, a value |
//! | [`plan`] | what to do with a turn's tool calls: a pure decision |
//! | [`recorded`] | a recorded fork's tool calls, answered from its source's results |
//! | [`tools`] | running the calls (phase two of a step) |
//! | [`safe_turn`] | one write for a turn whose calls are all safe to repeat |
//! | [`wait`] | waiting at zero compute: approval, children, timer |
//! | [`ask`] | `ask_user`: post the question, wait for the reply |
//! | [`end`] | deliver the answer, end the task, hand over |
//! | [`limit`] | ending at a limit, with a summary of the work |
//! | [`monthly`] | the monthly budgets, read before each model call |
//! | [`phase`] | the task's phase for chat front ends (Slack agent sessions) |
//! | [`stream`] | the answer streamed as it is written (chat message, events) |
//! | [`stuck`] | empty answers, repeated calls, failing tools |
//! | [`events`] | what happened, said once: spans and metrics |
//! | [`trace`] | the segment's spans, written when it ends |
//! | [`budget`] | the segment's time |

mod admit;
mod arguments;
mod ask;
mod budget;
mod callback;
mod connection;
mod end;
mod events;
mod failed_call;
mod files;
#[cfg(test)]
mod harness;
mod judge;
mod limit;
mod listing;
mod monthly;
mod next;
mod phase;
mod plan;
mod recap;
mod recorded;
mod result;
mod safe_turn;
mod step;
mod stream;
mod stuck;
mod thread;
mod tools;
mod trace;
mod turn;
mod wait;

pub(crate) use admit::release as release_capacity;
pub use budget::SegmentBudget;
pub(crate) use turn::pass_on as pass_turn;

use crate::context_cache::ContextCache;
use crate::deps::Deps;
use crate::error::WorkerError;
use baton_core::approval;
use baton_core::{Entry, EntryKind, Instant, Task, TaskId, TaskStatus, ToolMode, WaitingFor};
use baton_settings::AgentConfig;
use events::{Event, Events};
use next::{Next, Situation};
use std::time::Duration;

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
    /// The context, kept up to date with each commit rather than rebuilt
    /// from the transcript at each step.
    context: ContextCache,
    /// What this segment offers the model (see [`listing`]).
    tools: crate::deps::Tools,
    budget: SegmentBudget,
    /// Where spans and metrics go (see [`events`]).
    events: Events,
    /// A compaction failed in this segment: it is not tried again until
    /// the next one, so a failing summariser cannot eat the budget. One
    /// that succeeds may run again once the history has grown again.
    compaction_failed: bool,
    /// The segment has begun: its tools taken, its plan shown.
    begun: bool,
    /// What the monthly budgets said when last read, for the decision
    /// after the reading only.
    monthly: monthly::Monthly,
    /// How this segment writes into the task's streamed answer message.
    stream: stream::ChatStream,
    /// A recorded fork's source calls, read once per segment; `None` for
    /// a task whose tools run.
    recorded: Option<recorded::Recorded>,
    /// The roles of the person the task serves ([`Segment::look_up_roles`]),
    /// read at the segment's start and when someone else is served: their
    /// principal's parents in the Cedar policies, and what their monthly
    /// budget follows.
    roles: Vec<String>,
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
        let segment_start = Instant::now();
        let task = match turn::gate(deps, &task).await? {
            turn::TurnGate::Held => return Ok(SegmentEnd::Waiting),
            turn::TurnGate::Taken(now) => *now,
            turn::TurnGate::Open => task,
        };
        let admitted = match admit::gate(deps, &task).await? {
            admit::Gate::Held => return Ok(SegmentEnd::Waiting),
            admit::Gate::Admitted => true,
            admit::Gate::Open => false,
        };
        let ttl = deps.settings.lease_ttl;
        let fresh = if admitted { None } else { Some(task) };
        let (task, _) = deps
            .store
            .update(id, fresh, |t| {
                let mut entries = acquire(t, &owner, Instant::now(), ttl);
                if admitted && t.lease().is_held_by(&owner) && !t.budget.holds_capacity {
                    t.budget.holds_capacity = true;
                    entries.get_or_insert_with(Vec::new);
                }
                Ok(entries)
            })
            .await?;
        if admitted && task.status().is_terminal() {
            // Ended meanwhile (cancelled): the slots just taken go back.
            admit::release(deps, &task).await;
        }
        if let Some(until) = pending_wake(&task) {
            // Woken early (a duplicate, or a 15-minute hop): wait on.
            crate::timer::arm(deps.queue.as_ref(), deps.scheduler(), &task.id, until).await?;
            return Ok(SegmentEnd::Dropped("timer not due yet; re-armed"));
        }
        if !task.lease().is_held_by(&owner) {
            return Ok(SegmentEnd::Dropped(
                if task.status().is_terminal() || task.status() == TaskStatus::Waiting {
                    "task is not runnable"
                } else {
                    "lease held by a live segment"
                },
            ));
        }
        let transcript = deps.store.transcript(id).await?;
        let recorded = match (&task.fork.tools, &task.fork.forked_from) {
            (ToolMode::Live, _) => None,
            (ToolMode::Recorded, Some(from)) => {
                let source = deps.store.transcript(&from.task_id).await?;
                Some(recorded::Recorded::of(Some(from.task_id.clone()), &source))
            }
            (ToolMode::Recorded, None) => Some(recorded::Recorded::default()),
        };
        let agent = deps.agents.resolve(&task.agent);
        let mut segment = Segment {
            deps,
            agent,
            owner,
            task,
            context: ContextCache::new(agent, &transcript),
            transcript,
            tools: Default::default(),
            budget,
            events: Events::new(
                segment_start,
                deps.span_export.as_deref(),
                deps.metrics.clone(),
                deps.llm.name(),
            ),
            compaction_failed: false,
            begun: false,
            monthly: Default::default(),
            stream: Default::default(),
            recorded,
            roles: Vec::new(),
        };
        segment.look_up_roles().await;
        segment.show_processing().await;
        let result = segment.steps().await;
        segment.show_end(&result).await;
        segment.events.emit(&segment.task, Event::SegmentRan);
        segment
            .events
            .trace()
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
        let ttl = self.deps.settings.lease_ttl;
        let (task, written) = self
            .deps
            .store
            .update_with(&self.task.id.clone(), Some(self.task.clone()), |t| {
                // Every commit renews the lease, and none is made without it.
                t.renew_lease(&owner, Instant::now(), ttl)
                    .map_err(|_| WorkerError::LeaseLost)?;
                Ok::<_, WorkerError>(change(t))
            })
            .await?;
        self.task = task;
        self.context.extend(&written);
        self.transcript.extend(written);
        Ok(())
    }

    /// The loop: asks [`next::next`] what to do, does it, and asks again
    /// until the segment ends.
    async fn steps(&mut self) -> Result<SegmentEnd, WorkerError> {
        // What the policies say of the task's start, asked once;
        // `next` decides whether it still matters.
        let refusal = self.deps.policies.as_deref().and_then(|policies| {
            crate::policy::start_refusal(policies, &self.task, &self.roles, Instant::now())
        });
        loop {
            // A reading of the monthly budgets serves one decision; without
            // budgets there is nothing to read.
            let monthly = match self.deps.budgets {
                Some(_) => std::mem::take(&mut self.monthly),
                None => monthly::Monthly::Within,
            };
            let situation = Situation {
                agent: self.agent,
                owner: &self.owner,
                context: &self.context,
                budget: &self.budget,
                time_left: self.budget.time_left(),
                compaction_failed: self.compaction_failed,
                monthly: &monthly,
                refusal: refusal.as_deref(),
                begun: self.begun,
                now: Instant::now(),
            };
            let action = next::next(&self.task, &self.transcript, &situation);
            if let Some(end) = self.carry_out(action).await? {
                return Ok(end);
            }
        }
    }

    /// Carries out one action; `Some` when the segment ends with it.
    async fn carry_out(&mut self, action: Next) -> Step {
        match action {
            Next::LeaseLost => Err(WorkerError::LeaseLost),
            // The policies' refusal (docs/policies.md).
            Next::Refuse(reason) => self
                .end(TaskStatus::Failed, None, Some(reason))
                .await
                .map(Some),
            Next::Begin => {
                self.take_listing().await?;
                // A front end that keeps the plan in memory (Slack's
                // stream) may be another process than the last segment's:
                // shown again.
                self.show_plan().await;
                self.begun = true;
                Ok(None)
            }
            Next::Cancel => {
                let reason = Some(match &self.task.conversation.interrupted_by {
                    Some(by) => format!(
                        "interrupted by a new message in the conversation (task {by} answers it)"
                    ),
                    None => "cancelled on request".to_owned(),
                });
                self.end(TaskStatus::Cancelled, None, reason)
                    .await
                    .map(Some)
            }
            Next::Stop(limit) => self.stop_at(limit).await.map(Some),
            Next::ReadThread => self.read_thread().await.map(|()| None),
            Next::TakeFiles => self.take_files().await.map(|()| None),
            Next::HandOver => self.hand_over().await.map(Some),
            Next::RunTools { step, pending } => {
                if let Some(end) = self.run_tools(step, pending).await? {
                    return Ok(Some(end));
                }
                self.advise_after_tool_errors().await?;
                Ok(None)
            }
            Next::RefuseRepeated {
                step,
                calls,
                tool,
                times,
            } => self
                .refuse_repeated(step, calls, tool, times)
                .await
                .map(|()| None),
            Next::EmptyAnswer(rung) => self.after_empty_answer(rung).await,
            Next::Deliver(answer) => {
                if let Some(end) = self.deliver(answer).await? {
                    return Ok(Some(end));
                }
                // A message arrived while answering: it is the new input
                // (taken now, or the answer would be found again).
                self.take_inbox().await.map(|()| None)
            }
            Next::Judge {
                step,
                answer,
                retried,
            } => self.judge(step, answer, retried).await,
            Next::SendBack { step } => self.send_back(step).await,
            Next::Route => self.route().await,
            Next::Plan => self.plan().await,
            Next::Supervise => self.supervise().await,
            Next::TakeInbox => self.take_inbox().await.map(|()| None),
            Next::Compact { ends } => self.compact(ends).await,
            Next::ReadMonthly => {
                self.monthly = monthly::read(self.deps, &self.task, &self.roles).await?;
                Ok(None)
            }
            Next::CallModel => self.llm_step().await,
        }
    }

    /// Reads the roles of the person the task serves, when something
    /// decides by them: the policies, or a role's monthly budget
    /// (`[budgets.roles.NAME]`); none, without a lookup, otherwise.
    async fn look_up_roles(&mut self) {
        let budgets = self.deps.budgets.as_ref().is_some_and(|b| b.needs_roles());
        if self.deps.policies.is_some() || budgets {
            let person = crate::policy::served(&self.task);
            self.roles = self.deps.roles.of(&person).await;
        }
    }

    /// Moves messages that arrived while the task ran into the transcript,
    /// each with its author. Whom the task acts for does not change: it
    /// was decided by the message that started the turn ([`Task::actor`]).
    async fn take_inbox(&mut self) -> Result<(), WorkerError> {
        if self.task.conversation.inbox.is_empty() {
            return Ok(());
        }
        self.commit(|t| {
            Some(
                std::mem::take(&mut t.conversation.inbox)
                    .into_iter()
                    .map(|m| EntryKind::UserMessage {
                        text: m.text,
                        from: m.from,
                    })
                    .collect(),
            )
        })
        .await
    }
}

/// The lease-taking change: expires due approvals, ends a wait that is
/// over, and takes the lease if it is free (or already ours).
fn acquire(t: &mut Task, owner: &str, now: Instant, ttl: Duration) -> Option<Vec<EntryKind>> {
    if t.status().is_terminal() {
        return None;
    }
    // Approvals nobody decided in time are denied (and may lift the wait).
    let mut entries = approval::expire_due(t, now).unwrap_or_default();
    if t.status() == TaskStatus::Waiting {
        let deadline_passed = t.budget.limits.deadline_at.is_some_and(|d| d <= now);
        if t.cancel_requested || deadline_passed || baton_core::wait::is_over(t, now) {
            // Cancelled or out of time while waiting, or the wait is over
            // (its expiry passed, or what it waited for came): the loop
            // takes it from here.
            t.wake();
        } else {
            return (!entries.is_empty()).then_some(entries);
        }
    }
    // Leaves an admission wait behind: admitted (its turn taken), or
    // running only to end (cancelled, out of time).
    if !t.start(owner, now, ttl) {
        return (!entries.is_empty()).then_some(entries);
    }
    t.budget.segments += 1;
    entries.push(EntryKind::Status {
        status: TaskStatus::Running,
        detail: format!("segment {} started", t.budget.segments),
    });
    Some(entries)
}

/// Puts the task in `waiting` for `what` ([`Task::wait`]: no lease, no
/// worker runs a waiting task), and returns the status entry that records
/// it.
fn start_waiting(t: &mut Task, what: WaitingFor, detail: String) -> EntryKind {
    t.wait(what);
    EntryKind::Status {
        status: TaskStatus::Waiting,
        detail,
    }
}

impl Segment<'_> {
    /// After a commit that may have put the task in `waiting` for
    /// someone (a reply, a callback): a wake at `expires_at`, so an
    /// unanswered wait ends, and the person told. `None` when it did not
    /// wait (cancelled, or nothing open).
    async fn parked(&mut self, expires_at: Option<Instant>, progress: &str) -> Step {
        if self.task.status() != TaskStatus::Waiting {
            return Ok(None);
        }
        if let Some(at) = expires_at {
            crate::timer::arm(
                self.deps.queue.as_ref(),
                self.deps.scheduler(),
                &self.task.id,
                at,
            )
            .await?;
        }
        self.deps.replies.progress(&self.task, progress).await;
        Ok(Some(SegmentEnd::Waiting))
    }
}

/// When a waiting task must next be woken ([`baton_core::wait::next_wake`]).
fn pending_wake(t: &Task) -> Option<Instant> {
    baton_core::wait::next_wake(t, Instant::now())
}

#[cfg(test)]
mod tests {
    use super::harness::{calls, roomy, says, Harness, Meddle};
    use super::*;

    #[tokio::test]
    async fn at_the_budget_it_hands_over_and_the_next_segment_goes_on() {
        let h = Harness::new(|_| {});
        h.llm.then(calls(&["a"])).then(says("counted"));
        let id = h.task("count once").await;
        // The first unit of a segment always runs; the tools then wait.
        let end = h.run(&id, SegmentBudget::new(Duration::ZERO)).await;
        assert_eq!(end, SegmentEnd::HandedOver);
        let task = h.get(&id).await;
        assert_eq!(task.status(), TaskStatus::Queued, "queued between segments");
        assert!(task.lease().is_free(), "released for the next segment");
        assert_eq!(h.tool.calls(), 0);
        let sent = h.queue.sent();
        assert_eq!(sent.len(), 1, "one wake: {sent:?}");
        assert!(sent[0].0.contains(id.as_str()) && sent[0].1 == Duration::ZERO);

        assert_eq!(
            h.run(&id, roomy()).await,
            SegmentEnd::Finished(TaskStatus::Succeeded)
        );
        assert_eq!(h.tool.calls(), 1, "the call ran once, in the next segment");
        assert_eq!(h.replies.answers(), ["counted"]);
        assert_eq!(h.get(&id).await.budget.segments, 2);
    }

    #[tokio::test]
    async fn a_cancel_arriving_mid_step_ends_the_task_before_the_next_model_call() {
        let h = Harness::new(|_| {});
        h.tool.meddle(Meddle::Cancel);
        h.llm.then(calls(&["a"])).then(says("never said"));
        let id = h.task("count").await;
        assert_eq!(
            h.run(&id, roomy()).await,
            SegmentEnd::Finished(TaskStatus::Cancelled)
        );
        assert_eq!(h.llm.calls(), 1);
        assert!(h.replies.answers().is_empty());
        let told = h.replies.endings();
        assert_eq!(told.len(), 1);
        assert!(told[0].contains("cancelled"), "{told:?}");
        // The call that ran is recorded.
        let results = h
            .transcript(&id)
            .await
            .into_iter()
            .filter(|e| matches!(e.kind, EntryKind::ToolResult { .. }))
            .count();
        assert_eq!(results, 1);
    }

    #[tokio::test]
    async fn a_lost_lease_stops_the_segment_without_writing_or_telling() {
        let h = Harness::new(|_| {});
        h.tool.meddle(Meddle::StealLease);
        h.llm.then(calls(&["a"]));
        let id = h.task("count").await;
        assert_eq!(h.run(&id, roomy()).await, SegmentEnd::Dropped("lease lost"));
        let task = h.get(&id).await;
        assert!(task.lease().is_held_by("another-segment"));
        assert_eq!(task.status(), TaskStatus::Running);
        let transcript = h.transcript(&id).await;
        assert!(
            !transcript
                .iter()
                .any(|e| matches!(e.kind, EntryKind::ToolResult { .. })),
            "the result is the new holder's to write"
        );
        assert!(h.replies.answers().is_empty() && h.replies.endings().is_empty());
        assert!(h.queue.sent().is_empty());
    }

    /// The policies refuse a task's start before anything of it runs;
    /// once it started, they are not asked.
    #[tokio::test]
    async fn a_start_the_policies_refuse_fails_before_anything_runs() {
        let known = baton_policy::Known {
            tools: ["count", "sleep"].map(str::to_owned).into(),
            agents: ["default"].map(str::to_owned).into(),
            ..Default::default()
        };
        let text = r#"
            @id("all") permit(principal, action, resource);
            @id("no-api-starts") forbid(principal == Baton::Api::"default",
                action == Baton::Action::"start_task", resource);
        "#;
        let policies = match baton_policy::Policies::load("p", text, known) {
            Ok(p) => std::sync::Arc::new(p),
            Err(e) => panic!("{e}"),
        };
        let settings = crate::WorkerSettings::default();
        let h = Harness::build(|_| {}, Vec::new(), settings, |w| w.with_policies(policies));
        let id = h.task("go").await;
        assert_eq!(
            h.run(&id, roomy()).await,
            SegmentEnd::Finished(TaskStatus::Failed)
        );
        assert_eq!(h.llm.calls(), 0);
        let error = h.get(&id).await.answer.error.unwrap_or_default();
        assert!(error.contains("no-api-starts"), "{error}");
        assert_eq!(h.replies.endings().len(), 1);

        // A task the model has answered once has started: not asked again.
        let started = h.task("go on").await;
        let answered = vec![
            EntryKind::AssistantMessage {
                step: 1,
                text: "earlier".into(),
                tool_calls: Vec::new(),
                usage: Default::default(),
                model: "m".into(),
            },
            EntryKind::UserMessage {
                text: "and then?".into(),
                from: None,
            },
        ];
        let written = h
            .store
            .update(&started, None, |_| Ok(Some(answered.clone())))
            .await;
        assert!(written.is_ok());
        h.llm.then(says("went on"));
        assert_eq!(
            h.run(&started, roomy()).await,
            SegmentEnd::Finished(TaskStatus::Succeeded)
        );
    }

    #[tokio::test]
    async fn the_deadline_ends_the_task_with_a_summary_told() {
        let h = Harness::new(|_| {});
        let id = h.task("go").await;
        let set = h
            .store
            .update(&id, None, |t| {
                t.budget.limits.deadline_at = Some(Instant::now() - Duration::from_millis(1));
                Ok(Some(Vec::new()))
            })
            .await;
        assert!(set.is_ok());
        h.llm.then(says("I had started."));
        assert_eq!(
            h.run(&id, roomy()).await,
            SegmentEnd::Finished(TaskStatus::Failed)
        );
        let task = h.get(&id).await;
        assert_eq!(
            task.answer.error.as_deref(),
            Some("wall-clock deadline passed")
        );
        assert!(task.lease().is_free());
        let told = h.replies.endings();
        assert_eq!(told.len(), 1);
        assert!(told[0].contains("deadline") && told[0].contains("I had started."));
    }
}
