//! One segment (a *leg*) of a task: take the lease, run steps while the
//! budget allows, then hand over, finish, or wait.

use crate::approval;
use crate::budget::SegmentBudget;
use crate::compaction::{self, CompactionError};
use crate::context::build_request;
use crate::delegation::{self, DELEGATE};
use crate::progress;
use crate::sanitize::{is_no_reply, sanitize};
use crate::worker::Worker;
use baton_core::lease::can_acquire;
use baton_core::trace::new_span_id;
use baton_core::transcript::pending_tool_calls;
use baton_core::{
    now_ms, rfc3339, Approval, Child, Created, Entry, EntryKind, Lease, Span, SpanRecorder,
    StoreError, Task, TaskId, TaskStatus, Tool, ToolCall, ToolContext, ToolOutput, WaitingFor,
    Wake,
};
use futures::stream::{FuturesUnordered, StreamExt};
use serde_json::json;
use std::sync::Arc;
use std::time::Duration;
use tokio::time::Instant;

/// How a leg ended (all of these acknowledge the wake message).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum LegEnd {
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

#[derive(Debug)]
pub enum LegError {
    /// Worth retrying the message (store or queue unavailable, reply not
    /// delivered).
    Transient(String),
}

impl From<StoreError> for LegError {
    fn from(e: StoreError) -> Self {
        LegError::Transient(e.to_string())
    }
}

/// The least time a model call is given before the segment gives up on it
/// and hands over (the first call of a segment runs whatever its budget).
const LLM_CALL_FLOOR: Duration = Duration::from_secs(30);

/// The lease was lost mid-leg: another worker owns the task now.
const LEASE_LOST: &str = "lease lost";

pub(crate) struct Leg<'w> {
    w: &'w Worker,
    owner: String,
    task: Task,
    transcript: Vec<Entry>,
    budget: SegmentBudget,
    spans: SpanRecorder,
    segment_span: String,
    segment_start: i64,
    /// At most one compaction attempt per leg, so a failing summariser
    /// cannot eat the budget.
    compaction_tried: bool,
    compaction_ran: bool,
}

impl<'w> Leg<'w> {
    pub(crate) async fn run(
        w: &'w Worker,
        id: &TaskId,
        owner: String,
        budget: SegmentBudget,
    ) -> Result<LegEnd, LegError> {
        let Some(task) = w.store.get(id).await? else {
            return Ok(LegEnd::Dropped("unknown task"));
        };
        let segment_start = now_ms();
        let ttl = w.settings.lease_ttl.as_millis() as i64;
        let acquired = w
            .store
            .update(id, Some(task), |t| {
                let now = now_ms();
                if t.status.is_terminal() {
                    return Ok(None);
                }
                // Approvals nobody decided in time are denied (and may lift
                // the wait).
                let mut entries = approval::expire_due(t, now).unwrap_or_default();
                if t.status == TaskStatus::Waiting {
                    let deadline_passed = t.limits.deadline_at.is_some_and(|d| d <= now);
                    if t.cancel_requested || deadline_passed || timer_due(t, now) {
                        // Cancelled or out of time while waiting, or the
                        // timer is up: the loop takes it from here.
                        t.waiting_for = None;
                    } else {
                        return Ok((!entries.is_empty()).then_some(entries));
                    }
                }
                if !can_acquire(t.lease.as_ref(), &owner, now) {
                    return Ok((!entries.is_empty()).then_some(entries));
                }
                t.lease = Some(Lease {
                    owner: owner.clone(),
                    expires_at: now + ttl,
                });
                t.status = TaskStatus::Running;
                t.segments += 1;
                let detail = format!("segment {} started", t.segments);
                entries.push(EntryKind::Status {
                    status: TaskStatus::Running,
                    detail,
                });
                Ok(Some(entries))
            })
            .await?;
        let (task, _) = acquired;
        if let Some(until) = pending_wake(&task) {
            // Woken early (a duplicate, or a 15-minute hop): wait on.
            let scheduler = w.schedules.as_ref().map(|s| s.service.scheduler().as_ref());
            crate::wake::arm(w.queue.as_ref(), scheduler, &task.id, until)
                .await
                .map_err(LegError::Transient)?;
            return Ok(LegEnd::Dropped("timer not due yet; re-armed"));
        }
        if task.lease.as_ref().is_none_or(|l| l.owner != owner) {
            return Ok(LegEnd::Dropped(
                if task.status.is_terminal() || task.status == TaskStatus::Waiting {
                    "task is not runnable"
                } else {
                    "lease held by a live segment"
                },
            ));
        }
        let transcript = w.store.transcript(id).await?;
        let mut leg = Leg {
            w,
            owner,
            task,
            transcript,
            budget,
            spans: SpanRecorder::new(),
            segment_span: new_span_id(),
            segment_start,
            compaction_tried: false,
            compaction_ran: false,
        };
        let result = leg.steps().await;
        leg.write_trace(&result).await;
        match result {
            Err(LegError::Transient(reason)) if reason.contains(LEASE_LOST) => {
                Ok(LegEnd::Dropped("lease lost"))
            }
            other => other,
        }
    }

    /// Commits a change under the lease: `change` is applied to the freshest
    /// task (re-applied after a conflict) and refused if the lease is gone.
    /// Every commit renews the lease.
    async fn commit<F>(&mut self, mut change: F) -> Result<(), LegError>
    where
        F: FnMut(&mut Task) -> Option<Vec<EntryKind>>,
    {
        let owner = self.owner.clone();
        let ttl = self.w.settings.lease_ttl.as_millis() as i64;
        let (task, written) = self
            .w
            .store
            .update(&self.task.id.clone(), Some(self.task.clone()), |t| {
                match &t.lease {
                    Some(l) if l.owner == owner => {}
                    _ => return Err(StoreError::Precondition(LEASE_LOST.to_owned())),
                }
                t.lease = Some(Lease {
                    owner: owner.clone(),
                    expires_at: now_ms() + ttl,
                });
                Ok(change(t))
            })
            .await?;
        self.task = task;
        self.transcript.extend(written);
        Ok(())
    }

    async fn steps(&mut self) -> Result<LegEnd, LegError> {
        if self.task.segments > self.task.limits.max_segments {
            let msg = format!(
                "hop budget exhausted: {} segments",
                self.task.limits.max_segments
            );
            return self.end(TaskStatus::Failed, None, Some(msg)).await;
        }
        loop {
            if self.task.cancel_requested {
                return self
                    .end(
                        TaskStatus::Cancelled,
                        None,
                        Some("cancelled on request".into()),
                    )
                    .await;
            }
            if let Some(deadline) = self.task.limits.deadline_at {
                if now_ms() >= deadline {
                    return self
                        .end(
                            TaskStatus::Failed,
                            None,
                            Some("wall-clock deadline passed".into()),
                        )
                        .await;
                }
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
                continue;
            }
            // The last step was a final answer: deliver it and finish.
            if let Some(answer) = final_answer(&self.transcript) {
                if let Some(end) = self.deliver(answer).await? {
                    return Ok(end);
                }
                // A message arrived while answering: it is the new input.
                self.drain_inbox().await?;
                continue;
            }
            // Steering: messages that arrived while we ran.
            self.drain_inbox().await?;
            let limits = &self.task.limits;
            if self.task.steps >= limits.max_steps {
                let msg = format!(
                    "step limit reached ({} steps) before a final answer",
                    limits.max_steps
                );
                return self.end(TaskStatus::Failed, None, Some(msg)).await;
            }
            if limits.max_tokens > 0 && self.task.usage.total() >= limits.max_tokens {
                let msg = format!("token budget exhausted ({} tokens)", limits.max_tokens);
                return self.end(TaskStatus::Failed, None, Some(msg)).await;
            }
            if let Some(msg) =
                crate::spend::exhausted(&self.task, self.w.agents.resolve(&self.task.agent))
            {
                return self.end(TaskStatus::Failed, None, Some(msg)).await;
            }
            if let Some(budgets) = &self.w.budgets {
                match budgets.exhausted(&self.task, now_ms()).await {
                    Ok(Some(msg)) => return self.end(TaskStatus::Failed, None, Some(msg)).await,
                    Ok(None) => {}
                    // A counter that cannot be read will not heal by
                    // retrying: go on uncounted rather than fail every task.
                    Err(e @ baton_core::ledger::LedgerError::Corrupt(_)) => {
                        tracing::error!(error = %e, "monthly budget counter unreadable; not enforced for this step");
                    }
                    Err(e) => {
                        return Err(LegError::Transient(format!(
                            "could not read the monthly budgets: {e}"
                        )))
                    }
                }
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

    /// Compaction, when the context is large or `/compact` was asked for:
    /// older turns are summarised by the model into a summary entry; if
    /// summarising fails the history stays as it is. A bare `/compact`
    /// answers and ends the task.
    async fn maybe_compact(&mut self) -> Result<Option<LegEnd>, LegError> {
        let agent = self.w.agents.resolve(&self.task.agent).clone();
        let forced = compaction::compact_requested(&self.transcript);
        if self.compaction_tried
            || !(forced || compaction::needs_compaction(&agent, &self.transcript))
        {
            return Ok(None);
        }
        self.compaction_tried = true;
        self.compaction_ran = true;
        let started = now_ms();
        let clock = Instant::now();
        self.w
            .replies
            .progress(&self.task, progress::COMPACTING)
            .await;
        let outcome = compaction::compact(&agent, &self.transcript, self.w.llm.as_ref()).await;
        self.budget.record(clock.elapsed());
        let mut attrs = serde_json::Map::new();
        attrs.insert("error".into(), json!(outcome.is_err()));
        self.spans
            .record("compaction", Some(&self.segment_span), started, attrs);
        match &outcome {
            Ok(done) => {
                let (entry, usage) = (done.entry.clone(), done.usage);
                let cost = crate::spend::completion_cost(&agent, &agent.model, usage);
                self.count_monthly(usage).await;
                self.commit(|t| {
                    t.usage.add(usage);
                    t.cost_usd += cost;
                    Some(vec![entry.clone()])
                })
                .await?;
            }
            Err(CompactionError::EmptySummary { usage }) => {
                let usage = *usage;
                let cost = crate::spend::completion_cost(&agent, &agent.model, usage);
                self.count_monthly(usage).await;
                self.commit(|t| {
                    t.usage.add(usage);
                    t.cost_usd += cost;
                    Some(Vec::new())
                })
                .await?;
            }
            Err(e) => tracing::warn!(error = %e, "compaction failed; history kept"),
        }
        if forced && !compaction::answer_needed(&self.transcript) && self.task.parent.is_none() {
            let msg = match &outcome {
                Ok(d) => format!(
                    "Compacted: {} earlier messages are now a summary.",
                    d.summarised_messages
                ),
                Err(CompactionError::NothingToCompact) => "Nothing to compact yet.".to_owned(),
                Err(e) => format!("Could not compact ({e}); the history is unchanged."),
            };
            self.w
                .replies
                .answer(&self.task, &msg)
                .await
                .map_err(|e| LegError::Transient(e.to_string()))?;
            return self
                .end(TaskStatus::Succeeded, Some(msg), None)
                .await
                .map(Some);
        }
        Ok(None)
    }

    /// Counts a model call's tokens in the monthly budgets, once it has
    /// returned (before the checkpoint: a crash in between counts a call
    /// that is made again, never one that goes uncounted). A failed count
    /// is logged, not fatal: the month is undercounted rather than the call
    /// paid for twice.
    async fn count_monthly(&self, usage: baton_core::Usage) {
        if let Some(budgets) = &self.w.budgets {
            if let Err(e) = budgets.record(&self.task, usage, now_ms()).await {
                tracing::warn!(error = %e, "could not count tokens in the monthly budgets");
            }
        }
    }

    /// Loop detection: the same tool call (name and arguments) requested
    /// `max_identical_calls` times means the model is stuck.
    fn repeated_call(&self, max_identical: u32) -> Option<String> {
        let mut seen: std::collections::HashMap<(String, String), u32> =
            std::collections::HashMap::new();
        for e in &self.transcript {
            if let EntryKind::AssistantMessage { tool_calls, .. } = &e.kind {
                for c in tool_calls {
                    let n = seen
                        .entry((c.name.clone(), c.arguments.to_string()))
                        .or_default();
                    *n += 1;
                    if *n >= max_identical.max(2) {
                        return Some(c.name.clone());
                    }
                }
            }
        }
        None
    }

    /// How many calls of `tool` the task has made so far.
    fn calls_of(&self, tool: &str) -> u32 {
        self.transcript
            .iter()
            .filter_map(|e| match &e.kind {
                EntryKind::AssistantMessage { tool_calls, .. } => {
                    Some(tool_calls.iter().filter(|c| c.name == tool).count() as u32)
                }
                _ => None,
            })
            .sum()
    }

    /// Moves messages that arrived while the task ran into the transcript.
    async fn drain_inbox(&mut self) -> Result<(), LegError> {
        if self.task.inbox.is_empty() {
            return Ok(());
        }
        self.commit(|t| {
            let msgs = std::mem::take(&mut t.inbox);
            Some(
                msgs.into_iter()
                    .map(|text| EntryKind::UserMessage { text })
                    .collect(),
            )
        })
        .await
    }

    /// Phase one: one LLM call, checkpointed with its tool calls before any
    /// tool runs.
    async fn llm_step(&mut self) -> Result<Option<LegEnd>, LegError> {
        let agent = self.w.agents.resolve(&self.task.agent).clone();
        let specs = self
            .w
            .tools
            .iter()
            .filter(|(name, _)| agent.allows_tool(name))
            .map(|(_, t)| t.spec())
            .chain(
                agent
                    .allows_tool(crate::wake::SLEEP)
                    .then(crate::wake::sleep_spec),
            )
            .chain(delegation::delegate_spec(&agent, &self.w.agents))
            .collect();
        let mut request = build_request(&agent, &self.transcript, specs);
        // Remembered facts relevant to the latest message, as data in the
        // system prompt (only for agents that may `recall`).
        if let Some(query) = crate::context::memory_query(&request, &self.transcript) {
            let memory = baton_tools::memory::MemoryStore::new(self.w.store.table().clone());
            let facts = crate::context::recall_for_prompt(&memory, &self.task.origin, query).await;
            crate::context::with_memory(&mut request, &facts);
        }
        self.w
            .replies
            .progress(&self.task, progress::THINKING)
            .await;
        let started = now_ms();
        let clock = Instant::now();
        // The agent's model (or its escalation model), falling back along
        // the agent's own chain on repeated overload or failure.
        // Retries and fallbacks can outlast the segment (and a Lambda's
        // 15 minutes): past the time left, hand over and try again in the
        // next leg. At least LLM_CALL_FLOOR, so a tiny budget still moves.
        let window = self.budget.time_left().max(LLM_CALL_FLOOR);
        let result = match tokio::time::timeout(
            window,
            crate::model_choice::complete(self.w.llm.as_ref(), &agent, &self.transcript, &request),
        )
        .await
        {
            Ok(result) => result,
            Err(_) => {
                self.budget.record(clock.elapsed());
                tracing::warn!(
                    waited_s = window.as_secs(),
                    "model call outlasted the segment; handing over"
                );
                return self.hand_over().await.map(Some);
            }
        };
        self.budget.record(clock.elapsed());
        let mut attrs = serde_json::Map::new();
        attrs.insert("provider".into(), json!(self.w.llm.name()));
        attrs.insert("step".into(), json!(self.task.steps + 1));
        let answer = match result {
            Ok(a) => a,
            Err(e) => {
                let tried: Vec<&str> = e.failures.iter().map(|f| f.model.as_str()).collect();
                attrs.insert("model".into(), json!(request.model));
                attrs.insert("models_failed".into(), json!(tried));
                attrs.insert("error".into(), json!(true));
                attrs.insert("error_message".into(), json!(e.to_string()));
                self.spans
                    .record("llm_call", Some(&self.segment_span), started, attrs);
                let msg = format!("the model call failed: {e}");
                return self
                    .end(TaskStatus::Failed, None, Some(msg))
                    .await
                    .map(Some);
            }
        };
        attrs.insert("model".into(), json!(answer.model));
        attrs.insert("escalated".into(), json!(answer.escalated));
        if !answer.failures.is_empty() {
            let from: Vec<&str> = answer.failures.iter().map(|f| f.model.as_str()).collect();
            attrs.insert("fell_back_from".into(), json!(from));
        }
        let model = answer.model;
        let completion = answer.completion;
        let cost = crate::spend::completion_cost(&agent, &model, completion.usage);
        attrs.insert("cost_usd".into(), json!(cost));
        self.count_monthly(completion.usage).await;
        attrs.insert("input_tokens".into(), json!(completion.usage.input_tokens));
        attrs.insert(
            "output_tokens".into(),
            json!(completion.usage.output_tokens),
        );
        attrs.insert("tool_calls".into(), json!(completion.tool_calls.len()));
        attrs.insert("error".into(), json!(false));
        self.spans
            .record("llm_call", Some(&self.segment_span), started, attrs);
        self.commit(|t| {
            t.steps += 1;
            t.usage.add(completion.usage);
            t.cost_usd += cost;
            Some(vec![EntryKind::AssistantMessage {
                step: t.steps,
                text: completion.content.clone(),
                tool_calls: completion.tool_calls.clone(),
                usage: completion.usage,
                model: if completion.model.is_empty() {
                    model.clone()
                } else {
                    completion.model.clone()
                },
            }])
        })
        .await?;
        if let Some(tool) = self.repeated_call(agent.max_identical_calls) {
            let msg = format!(
                "stopped: the model asked for the same `{tool}` call with the same arguments {} times, \
                 so it is not making progress",
                agent.max_identical_calls.max(2)
            );
            return self
                .end(TaskStatus::Failed, None, Some(msg))
                .await
                .map(Some);
        }
        Ok(None)
    }

    /// Phase two: runs the step's missing tool calls in parallel, writing
    /// each result as it completes. A non-idempotent call that was started
    /// but never recorded is not run again.
    async fn run_tools(
        &mut self,
        step: u32,
        pending: Vec<(ToolCall, bool)>,
    ) -> Result<Option<LegEnd>, LegError> {
        let agent = self.w.agents.resolve(&self.task.agent).clone();
        let mut immediate = Vec::new();
        let mut started_marks = Vec::new();
        let mut runnable: Vec<(ToolCall, Arc<dyn Tool>)> = Vec::new();
        let mut sleep_call = None;
        let mut needs_approval = Vec::new();
        let mut decided: Vec<Approval> = Vec::new();
        let mut delegate_calls = Vec::new();
        let max_chars = agent.max_tool_result_chars;
        for (call, was_started) in pending {
            let is_sleep = call.name == crate::wake::SLEEP && agent.allows_tool(crate::wake::SLEEP);
            let is_delegate = call.name == DELEGATE && delegation::may_delegate(&agent);
            let tool = self
                .w
                .tools
                .get(&call.name)
                .filter(|_| agent.allows_tool(&call.name))
                .cloned();
            if !is_sleep && !is_delegate && tool.is_none() {
                let out = ToolOutput::error(format!("unknown tool `{}`", call.name));
                immediate.push(result_entry(step, &call, out, max_chars));
                continue;
            }
            if let Some(cap) = agent
                .tool_call_caps
                .get(&call.name)
                .filter(|cap| self.calls_of(&call.name) > **cap)
            {
                let out = ToolOutput::error(format!(
                    "refused: `{}` may be called at most {cap} times per task, and that is used up",
                    call.name
                ));
                immediate.push(result_entry(step, &call, out, max_chars));
                continue;
            }
            // Human approval, for whatever tool the rules name (`sleep` and
            // `delegate` included).
            let declared = tool
                .as_ref()
                .is_some_and(|t| t.needs_approval(&call.arguments));
            if agent
                .approval
                .requires_approval(&call.name, &call.arguments, declared)
            {
                let id = approval::approval_id(step, &call.id);
                match self.task.approval(&id) {
                    Some(a) if a.decision.is_some() => {
                        decided.push(a.clone());
                        if let Some(refusal) = approval::refusal(a) {
                            let out = ToolOutput::error(refusal);
                            immediate.push(result_entry(step, &call, out, max_chars));
                            continue;
                        }
                        // Approved: it goes on below.
                    }
                    _ => {
                        needs_approval.push(call);
                        continue;
                    }
                }
            }
            if is_sleep {
                sleep_call = Some(call);
                continue;
            }
            if is_delegate {
                let known = self.task.child_for_call(&call.id);
                match (known, delegation::parse_call(&agent, &self.w.agents, &call)) {
                    (Some(child), _) => match delegation::result_of(child) {
                        Some(out) => immediate.push(result_entry(step, &call, out, max_chars)),
                        None => delegate_calls.push(call),
                    },
                    (None, Err(msg)) => {
                        let out = ToolOutput::error(msg);
                        immediate.push(result_entry(step, &call, out, max_chars));
                    }
                    (None, Ok(_)) if delegate_calls.len() >= delegation::MAX_CHILDREN_PER_STEP => {
                        let out = ToolOutput::error(format!(
                            "refused: at most {} delegate calls per turn; wait for these results, then delegate more",
                            delegation::MAX_CHILDREN_PER_STEP
                        ));
                        immediate.push(result_entry(step, &call, out, max_chars));
                    }
                    (None, Ok(_)) => delegate_calls.push(call),
                }
                continue;
            }
            let Some(tool) = tool else { continue };
            let idempotent = tool.idempotent(&call.arguments);
            if was_started && !idempotent {
                let out = ToolOutput::error(
                    "interrupted: this call was started but its result was never recorded; \
                     it may or may not have happened. It was not run again.",
                );
                immediate.push(result_entry(step, &call, out, max_chars));
            } else {
                if !idempotent {
                    started_marks.push(EntryKind::ToolStarted {
                        step,
                        call_id: call.id.clone(),
                        name: call.name.clone(),
                    });
                }
                runnable.push((call, tool));
            }
        }
        immediate.extend(started_marks);
        if !immediate.is_empty() {
            self.commit(|_| Some(immediate.clone())).await?;
        }
        if !runnable.is_empty() {
            let status = progress::running_tools(runnable.iter().map(|(c, _)| c.name.as_str()));
            self.w.replies.progress(&self.task, &status).await;
        }
        let batch_clock = Instant::now();
        let timeout = self.w.settings.tool_timeout;
        let mut running: FuturesUnordered<_> = runnable
            .into_iter()
            .map(|(call, tool)| {
                let ctx = ToolContext::new(self.task.id.clone(), step, &call.id);
                async move {
                    let started = now_ms();
                    let output = match tokio::time::timeout(
                        timeout,
                        tool.call(call.arguments.clone(), &ctx),
                    )
                    .await
                    {
                        Ok(out) => out,
                        Err(_) => {
                            ToolOutput::error(format!("timed out after {} s", timeout.as_secs()))
                        }
                    };
                    (call, output, started)
                }
            })
            .collect();
        while let Some((call, output, started)) = running.next().await {
            let mut attrs = serde_json::Map::new();
            attrs.insert("tool".into(), json!(call.name));
            attrs.insert("call_id".into(), json!(call.id));
            attrs.insert("step".into(), json!(step));
            attrs.insert("error".into(), json!(output.is_error));
            self.spans
                .record("tool_call", Some(&self.segment_span), started, attrs);
            let entry = result_entry(step, &call, output, agent.max_tool_result_chars);
            self.commit(|_| Some(vec![entry.clone()])).await?;
        }
        self.budget.record(batch_clock.elapsed());
        if let Some(prompts) = self.w.approvals.clone() {
            for a in &decided {
                if let Err(e) = prompts.decided(&self.task, a).await {
                    tracing::warn!(error = %e, "could not update the approval message");
                }
            }
        }
        if !needs_approval.is_empty() {
            return self.wait_for_approval(step, needs_approval).await;
        }
        if !delegate_calls.is_empty() {
            return self.delegate(delegate_calls).await;
        }
        match sleep_call {
            Some(call) => {
                self.start_wait(step, &call, agent.max_tool_result_chars)
                    .await
            }
            None => Ok(None),
        }
    }

    /// Calls that need a human decision: record the approvals (so a decision
    /// can arrive at any time from now on), show them, then wait with no
    /// worker running — unless every one was decided meanwhile.
    async fn wait_for_approval(
        &mut self,
        step: u32,
        calls: Vec<ToolCall>,
    ) -> Result<Option<LegEnd>, LegError> {
        let agent = self.w.agents.resolve(&self.task.agent).clone();
        let now = now_ms();
        // An approval never outlives the task's deadline.
        let expires_at = now
            .saturating_add(
                i64::try_from(agent.approval.expires_after.as_millis()).unwrap_or(i64::MAX),
            )
            .min(self.task.limits.deadline_at.unwrap_or(i64::MAX));
        let ids: Vec<String> = calls
            .iter()
            .map(|c| approval::approval_id(step, &c.id))
            .collect();
        let new: Vec<Approval> = calls
            .iter()
            .zip(&ids)
            .filter(|(_, id)| self.task.approval(id).is_none())
            .map(|(call, id)| Approval {
                approval_id: id.clone(),
                step,
                call_id: call.id.clone(),
                tool: call.name.clone(),
                summary: approval::summary(call),
                requested_at: now,
                expires_at,
                message: None,
                decision: None,
            })
            .collect();
        if !new.is_empty() {
            self.commit(|t| {
                let mut entries = Vec::new();
                for a in &new {
                    if t.approval(&a.approval_id).is_none() {
                        t.approvals.push(a.clone());
                        entries.push(EntryKind::Status {
                            status: TaskStatus::Running,
                            detail: format!(
                                "approval {} requested: {} (expires {})",
                                a.approval_id,
                                a.summary,
                                rfc3339(a.expires_at)
                            ),
                        });
                    }
                }
                Some(entries)
            })
            .await?;
        }
        if let Some(prompts) = self.w.approvals.clone() {
            let unshown: Vec<Approval> = ids
                .iter()
                .filter_map(|id| self.task.approval(id))
                .filter(|a| a.message.is_none() && a.decision.is_none())
                .cloned()
                .collect();
            for a in unshown {
                let posted = prompts.ask(&self.task, &a).await.map_err(|e| {
                    LegError::Transient(format!("could not post the approval request: {e}"))
                })?;
                if let Some(message) = posted {
                    self.commit(|t| {
                        let slot = t
                            .approvals
                            .iter_mut()
                            .find(|x| x.approval_id == a.approval_id)?;
                        slot.message = Some(message.clone());
                        Some(Vec::new())
                    })
                    .await?;
                }
            }
        }
        self.commit(|t| {
            let mut entries = approval::expire_due(t, now_ms()).unwrap_or_default();
            if t.cancel_requested {
                // A cancel arrived while this segment ran: end, don't wait.
                return (!entries.is_empty()).then_some(entries);
            }
            let Some(open) = ids
                .iter()
                .filter_map(|id| t.approval(id))
                .find(|a| a.decision.is_none())
                .cloned()
            else {
                // Decided before we could wait: go on.
                return (!entries.is_empty()).then_some(entries);
            };
            let detail = format!("waiting for approval {}", open.approval_id);
            let waiting_for = WaitingFor::Approval {
                approval_id: open.approval_id,
                tool: open.tool,
                summary: open.summary,
            };
            entries.push(start_waiting(t, waiting_for, detail));
            Some(entries)
        })
        .await?;
        if self.task.status != TaskStatus::Waiting {
            return Ok(None);
        }
        if let Some(at) = approval::next_expiry(&self.task) {
            // The expiry is itself a wake: the worker then records the denial.
            self.arm_wake(at).await?;
        }
        self.w
            .replies
            .progress(&self.task, progress::WAITING_FOR_APPROVAL)
            .await;
        Ok(Some(LegEnd::Waiting))
    }

    /// `delegate` calls: start (or find) a child task per call, wake the
    /// children, then wait at zero compute until they have all reported.
    async fn delegate(&mut self, calls: Vec<ToolCall>) -> Result<Option<LegEnd>, LegError> {
        let agent = self.w.agents.resolve(&self.task.agent).clone();
        for call in &calls {
            if self.task.child_for_call(&call.id).is_some() {
                continue;
            }
            let Ok((child_agent, input)) = delegation::parse_call(&agent, &self.w.agents, call)
            else {
                continue;
            };
            let child = delegation::child_task(&self.task, child_agent, &call.id, now_ms());
            let key = delegation::dedupe_key(&self.task.id, &call.id);
            let child_id = match self
                .w
                .store
                .create(
                    &child,
                    vec![EntryKind::UserMessage { text: input }],
                    Some(&key),
                )
                .await?
            {
                Created::New(id) | Created::Duplicate(id) => id,
            };
            let record = Child {
                task_id: child_id,
                agent: child_agent.name.clone(),
                call_id: call.id.clone(),
                outcome: None,
            };
            self.commit(|t| {
                if t.child_for_call(&record.call_id).is_some() {
                    return None;
                }
                t.children.push(record.clone());
                Some(vec![EntryKind::Status {
                    status: TaskStatus::Running,
                    detail: format!(
                        "delegated to `{}`: child task {}",
                        record.agent, record.task_id
                    ),
                }])
            })
            .await?;
        }
        let call_ids: Vec<&str> = calls.iter().map(|c| c.id.as_str()).collect();
        let open: Vec<TaskId> = self
            .task
            .children
            .iter()
            .filter(|c| call_ids.contains(&c.call_id.as_str()) && c.outcome.is_none())
            .map(|c| c.task_id.clone())
            .collect();
        for id in &open {
            // Repeated after a crash: a duplicate wake is harmless.
            self.w
                .queue
                .send(
                    &Wake::new(id.clone(), "delegated").to_body(),
                    Duration::ZERO,
                )
                .await
                .map_err(|e| LegError::Transient(format!("could not start a child task: {e}")))?;
        }
        self.commit(|t| {
            let pending = t.pending_children();
            if pending == 0 || t.cancel_requested {
                // They all ended already: their results are on the task.
                return None;
            }
            let detail = format!("waiting for {pending} child task(s)");
            Some(vec![start_waiting(
                t,
                WaitingFor::Children { pending },
                detail,
            )])
        })
        .await?;
        if self.task.status != TaskStatus::Waiting {
            return Ok(None);
        }
        if let Some(deadline) = self.task.limits.deadline_at {
            // Children may take longer than the parent may: wake at its
            // deadline, which ends it (and cancels them).
            self.arm_wake(deadline).await?;
        }
        let pending = self.task.pending_children() as usize;
        self.w
            .replies
            .progress(&self.task, &progress::waiting_for_subtasks(pending))
            .await;
        Ok(Some(LegEnd::Waiting))
    }

    /// Arranges a wake at `at` (a delayed message, or a one-time schedule
    /// past the queue's 15-minute limit).
    async fn arm_wake(&self, at: i64) -> Result<(), LegError> {
        let scheduler = self
            .w
            .schedules
            .as_ref()
            .map(|s| s.service.scheduler().as_ref());
        crate::wake::arm(self.w.queue.as_ref(), scheduler, &self.task.id, at)
            .await
            .map_err(LegError::Transient)
    }

    /// The `sleep` tool: records its result and the wait in one checkpoint,
    /// releases the lease, then arranges the wake.
    async fn start_wait(
        &mut self,
        step: u32,
        call: &ToolCall,
        max_chars: usize,
    ) -> Result<Option<LegEnd>, LegError> {
        let now = now_ms();
        let until = match crate::wake::wake_time(&call.arguments, now) {
            Ok(u) if u > now + 1000 => u,
            Ok(_) => {
                let entry = result_entry(
                    step,
                    call,
                    ToolOutput::ok("no wait needed: that time has passed"),
                    max_chars,
                );
                self.commit(|_| Some(vec![entry.clone()])).await?;
                return Ok(None);
            }
            Err(e) => {
                let entry = result_entry(step, call, ToolOutput::error(e), max_chars);
                self.commit(|_| Some(vec![entry.clone()])).await?;
                return Ok(None);
            }
        };
        let entry = result_entry(
            step,
            call,
            ToolOutput::ok(format!("waited until {}", rfc3339(until))),
            max_chars,
        );
        self.commit(|t| {
            if t.cancel_requested {
                return Some(vec![entry.clone()]);
            }
            let detail = format!("waiting until {}", rfc3339(until));
            let waiting_for = WaitingFor::Timer {
                until: rfc3339(until),
            };
            Some(vec![entry.clone(), start_waiting(t, waiting_for, detail)])
        })
        .await?;
        if self.task.status != TaskStatus::Waiting {
            return Ok(None);
        }
        self.arm_wake(until).await?;
        Ok(Some(LegEnd::Waiting))
    }

    /// Delivers the final answer, then finishes. `None` means a message
    /// arrived meanwhile and the loop goes on.
    async fn deliver(&mut self, answer: String) -> Result<Option<LegEnd>, LegError> {
        let clean = sanitize(&answer);
        // A child's answer goes to its parent, not to the user.
        if !is_no_reply(&clean) && self.task.parent.is_none() {
            self.w
                .replies
                .answer(&self.task, &clean)
                .await
                .map_err(|e| LegError::Transient(e.to_string()))?;
        }
        let end = self.end(TaskStatus::Succeeded, Some(clean), None).await?;
        Ok((self.task.status == TaskStatus::Succeeded).then_some(end))
    }

    /// Ends the task. Failures and cancellations are told to the user first
    /// (at least once), then recorded. A success is not recorded while the
    /// inbox holds unread messages: the loop answers those first.
    async fn end(
        &mut self,
        status: TaskStatus,
        result: Option<String>,
        error: Option<String>,
    ) -> Result<LegEnd, LegError> {
        if self.task.parent.is_some() {
            // Report first: a crash after it only repeats the (idempotent)
            // report, a crash before the task's own end re-runs this.
            let text = error.clone().or_else(|| result.clone()).unwrap_or_default();
            let outcome = delegation::outcome_of(&self.task, status, &text);
            delegation::report_to_parent(&self.w.store, self.w.queue.as_ref(), &self.task, outcome)
                .await
                .map_err(LegError::Transient)?;
        } else if status != TaskStatus::Succeeded {
            let what = if status == TaskStatus::Cancelled {
                "This task was cancelled"
            } else {
                "Sorry, this task failed"
            };
            let reason = error.clone().unwrap_or_default();
            if let Err(e) = self
                .w
                .replies
                .ended(&self.task, &format!("{what}: {reason}"))
                .await
            {
                tracing::warn!(error = %e, "could not tell the user how the task ended");
            }
        }
        let detail = error.clone().or_else(|| result.clone()).unwrap_or_default();
        let detail: String = detail.chars().take(500).collect();
        self.commit(|t| {
            if status == TaskStatus::Succeeded && !t.inbox.is_empty() {
                return None;
            }
            t.status = status;
            t.result = result.clone();
            t.error = error.clone();
            t.lease = None;
            t.waiting_for = None;
            Some(vec![EntryKind::Status {
                status,
                detail: detail.clone(),
            }])
        })
        .await?;
        if self.task.status.is_terminal() && self.task.pending_children() > 0 {
            delegation::cancel_children(&self.w.store, self.w.queue.as_ref(), &self.task).await;
        }
        Ok(LegEnd::Finished(status))
    }

    /// Checkpoint and release the lease, send the next wake, and only then
    /// (by returning) acknowledge the current one: a crash in between can
    /// duplicate a wake but never lose one.
    async fn hand_over(&mut self) -> Result<LegEnd, LegError> {
        let segments = self.task.segments;
        self.commit(|t| {
            t.lease = None;
            Some(vec![EntryKind::Status {
                status: TaskStatus::Running,
                detail: format!("segment {segments} handed over"),
            }])
        })
        .await?;
        let wake = Wake::new(self.task.id.clone(), "handover");
        self.w
            .queue
            .send(&wake.to_body(), Duration::ZERO)
            .await
            .map_err(|e| LegError::Transient(format!("could not send the next wake: {e}")))?;
        Ok(LegEnd::HandedOver)
    }

    /// Writes this segment's spans (and the task span once it has ended) to
    /// the blob store. Best effort: a trace is never worth failing a task.
    async fn write_trace(&mut self, result: &Result<LegEnd, LegError>) {
        let mut attrs = serde_json::Map::new();
        attrs.insert("segment".into(), json!(self.task.segments));
        attrs.insert("steps_total".into(), json!(self.task.steps));
        attrs.insert("outcome".into(), json!(format!("{result:?}")));
        attrs.insert("error".into(), json!(result.is_err()));
        let task_span = task_span_id(&self.task.id);
        let mut spans = self.spans.take();
        spans.push(Span {
            span_id: self.segment_span.clone(),
            parent_id: Some(task_span.clone()),
            name: "segment".into(),
            start_ms: self.segment_start,
            end_ms: now_ms(),
            attributes: attrs,
        });
        let blobs = self.w.store.blobs();
        let key = format!(
            "traces/{}/segment-{:06}.json",
            self.task.id, self.task.segments
        );
        if let Ok(bytes) = serde_json::to_vec(&spans) {
            if let Err(e) = blobs.put(&key, bytes).await {
                tracing::warn!(error = %e, "could not write the segment trace");
            }
        }
        if self.task.status.is_terminal() {
            let mut attrs = serde_json::Map::new();
            attrs.insert("status".into(), json!(self.task.status.as_str()));
            attrs.insert("steps".into(), json!(self.task.steps));
            attrs.insert("segments".into(), json!(self.task.segments));
            attrs.insert("input_tokens".into(), json!(self.task.usage.input_tokens));
            attrs.insert("output_tokens".into(), json!(self.task.usage.output_tokens));
            attrs.insert(
                "error".into(),
                json!(self.task.status == TaskStatus::Failed),
            );
            let span = Span {
                span_id: task_span,
                parent_id: None,
                name: "task".into(),
                start_ms: self.task.created_at,
                end_ms: now_ms(),
                attributes: attrs,
            };
            if let Ok(bytes) = serde_json::to_vec(&vec![span]) {
                let key = format!("traces/{}/task.json", self.task.id);
                if let Err(e) = blobs.put(&key, bytes).await {
                    tracing::warn!(error = %e, "could not write the task trace");
                }
            }
        }
    }
}

/// Puts the task in `waiting` for `what`, with no lease (no worker runs a
/// waiting task), and returns the status entry that records it.
fn start_waiting(t: &mut Task, what: WaitingFor, detail: String) -> EntryKind {
    t.status = TaskStatus::Waiting;
    t.waiting_for = Some(what);
    t.lease = None;
    EntryKind::Status {
        status: TaskStatus::Waiting,
        detail,
    }
}

/// Whether a waiting task's timer is up.
fn timer_due(t: &Task, now: i64) -> bool {
    match &t.waiting_for {
        Some(WaitingFor::Timer { until }) => chrono::DateTime::parse_from_rfc3339(until)
            .map(|u| u.timestamp_millis() <= now)
            .unwrap_or(true),
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
        Some(WaitingFor::Timer { until }) => chrono::DateTime::parse_from_rfc3339(until)
            .ok()
            .map(|u| u.timestamp_millis()),
        Some(WaitingFor::Approval { .. }) => approval::next_expiry(t),
        Some(WaitingFor::Children { .. }) => t.limits.deadline_at,
        None => None,
    };
    at.filter(|u| *u > now_ms())
}

/// The id of a task's root span, derived so every segment can name it.
pub fn task_span_id(id: &TaskId) -> String {
    id.as_str().replace('-', "")[..16].to_owned()
}

/// The text of the final answer, if the conversation's last message is an
/// assistant message without tool calls.
fn final_answer(transcript: &[Entry]) -> Option<String> {
    let last = transcript.iter().rev().find(|e| {
        matches!(
            e.kind,
            EntryKind::UserMessage { .. }
                | EntryKind::AssistantMessage { .. }
                | EntryKind::ToolResult { .. }
        )
    })?;
    match &last.kind {
        EntryKind::AssistantMessage {
            text, tool_calls, ..
        } if tool_calls.is_empty() => Some(text.clone()),
        _ => None,
    }
}

fn result_entry(step: u32, call: &ToolCall, output: ToolOutput, max_chars: usize) -> EntryKind {
    let (content, truncated_chars) = truncate(&output.content, max_chars, &call.name);
    EntryKind::ToolResult {
        step,
        call_id: call.id.clone(),
        name: call.name.clone(),
        content,
        is_error: output.is_error,
        truncated_chars,
    }
}

/// Cuts a tool result to `max_chars`, keeping its head and tail, with a
/// marker the model can read saying how much was cut.
pub fn truncate(text: &str, max_chars: usize, tool: &str) -> (String, u64) {
    let total = text.chars().count();
    if total <= max_chars {
        return (text.to_owned(), 0);
    }
    let tail_len = max_chars / 5;
    let head_len = max_chars - tail_len;
    let cut = total - head_len - tail_len;
    let head: String = text.chars().take(head_len).collect();
    let tail: String = text.chars().skip(total - tail_len).collect();
    let marker = format!(
        "\n[OUTPUT TRUNCATED: {cut} of {total} characters from {tool} were cut here; ask for a narrower result if you need them]\n"
    );
    (format!("{head}{marker}{tail}"), cut as u64)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn truncation_keeps_head_and_tail_and_says_how_much() {
        let text: String = (0..1000)
            .map(|i| char::from(b'a' + (i % 26) as u8))
            .collect();
        let (out, cut) = truncate(&text, 100, "http_request");
        assert_eq!(cut, 900);
        assert!(out.starts_with(&text[..80]));
        assert!(out.ends_with(&text[980..]));
        assert!(out.contains("900 of 1000 characters from http_request"));
        assert_eq!(truncate("short", 100, "t"), ("short".to_owned(), 0));
    }
}
