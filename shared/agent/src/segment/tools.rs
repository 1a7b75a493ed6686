//! Phase two of a step: the turn's tool calls, as [`plan`](super::plan)
//! decided. Answers and `tool_started` marks are checkpointed first, then
//! the runnable calls run in parallel, each result written as it completes;
//! then the turn waits, if it must (approval, children, a reply, timer).

use super::plan::{plan, Decision, Turn};
use super::{Segment, Step};
use crate::progress;
use baton_core::input_guard::{screen_tool_output, InputGuardMode};
use baton_core::{now_ms, EntryKind, Tool, ToolCall, ToolContext, ToolOutput};
use futures::stream::{FuturesUnordered, StreamExt};
use serde_json::{json, Map};
use std::sync::Arc;
use tokio::time::Instant;

impl Segment<'_> {
    /// Runs the step's missing tool calls. A call that is not safe to
    /// repeat and was started but never recorded is not run again.
    pub(super) async fn run_tools(&mut self, step: u32, pending: Vec<(ToolCall, bool)>) -> Step {
        let (max_chars, guard) = (self.agent.max_tool_result_chars, self.deps.input_guard);
        let turn = Turn {
            agent: self.agent,
            agents: &self.deps.agents,
            tools: &self.tools,
            task: &self.task,
            transcript: &self.transcript,
            step,
            now: now_ms(),
        };
        let plan = plan(&turn, pending);
        let mut answered = Vec::new();
        let mut started_marks = Vec::new();
        let mut runnable: Vec<(ToolCall, Arc<dyn Tool>)> = Vec::new();
        let (mut approval, mut delegate, mut sleep) = (Vec::new(), Vec::new(), None);
        let mut ask = Vec::new();
        for (call, decision) in plan.calls {
            match decision {
                Decision::Refuse(r) => {
                    let out = ToolOutput::error(r.message(&call.name));
                    answered.push(result_entry(step, &call, out, max_chars, guard));
                }
                Decision::Answer(out) => {
                    answered.push(result_entry(step, &call, out, max_chars, guard))
                }
                Decision::Run { tool, mark_started } => {
                    if mark_started {
                        started_marks.push(EntryKind::ToolStarted {
                            step,
                            call_id: call.id.clone(),
                            name: call.name.clone(),
                        });
                    }
                    runnable.push((call, tool));
                }
                Decision::AwaitApproval => approval.push(call),
                Decision::Delegate => delegate.push(call),
                Decision::Sleep => sleep = Some(call),
                Decision::Ask => ask.push(call),
            }
        }
        answered.extend(started_marks);
        if !answered.is_empty() {
            self.commit(|_| Some(answered.clone())).await?;
        }
        // Counted as a unit of the segment's time even when nothing ran.
        let batch_clock = Instant::now();
        self.run_parallel(step, runnable).await?;
        self.budget.record(batch_clock.elapsed());
        if let Some(prompts) = self.deps.approvals.clone() {
            for a in &plan.decided {
                if let Err(e) = prompts.decided(&self.task, a).await {
                    tracing::warn!(error = %e, "could not update the approval message");
                }
            }
        }
        if !approval.is_empty() {
            return self.wait_for_approval(step, approval).await;
        }
        if !delegate.is_empty() {
            return self.delegate(delegate).await;
        }
        if !ask.is_empty() {
            return self.wait_for_reply(step, ask).await;
        }
        match sleep {
            Some(call) => self.start_timer(step, &call).await,
            None => Ok(None),
        }
    }

    /// Runs `calls` in parallel, writing each result as it completes.
    async fn run_parallel(
        &mut self,
        step: u32,
        calls: Vec<(ToolCall, Arc<dyn Tool>)>,
    ) -> Result<(), crate::error::WorkerError> {
        if calls.is_empty() {
            return Ok(());
        }
        let status = progress::running_tools(calls.iter().map(|(c, _)| c.name.as_str()));
        self.deps.replies.progress(&self.task, &status).await;
        let timeout = self.deps.settings.tool_timeout;
        let mut running: FuturesUnordered<_> = calls
            .into_iter()
            .map(|(call, tool)| {
                let ctx = ToolContext::new(self.task.id.clone(), step, &call.id)
                    .with_allowed_hosts(self.agent.http_request.allow_hosts.clone());
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
            let mut attrs = Map::new();
            attrs.insert("tool".into(), json!(call.name));
            attrs.insert("call_id".into(), json!(call.id));
            attrs.insert("step".into(), json!(step));
            attrs.insert("error".into(), json!(output.is_error));
            let span = self.trace.record("tool_call", started, attrs);
            if self.trace.wants_content() {
                let content = super::trace::tool_content(&call.arguments, &output.content);
                self.trace.content(span, content);
            }
            let max_chars = self.agent.max_tool_result_chars;
            let entry = result_entry(step, &call, output, max_chars, self.deps.input_guard);
            self.commit(|_| Some(vec![entry.clone()])).await?;
            self.measure_tool_result(&entry);
        }
        Ok(())
    }
}

/// The transcript entry of a call's result: cut to `max_chars`, and
/// screened as data (see [`screen_tool_output`]).
pub(super) fn result_entry(
    step: u32,
    call: &ToolCall,
    output: ToolOutput,
    max_chars: usize,
    guard: InputGuardMode,
) -> EntryKind {
    let (content, truncated_chars) =
        baton_core::tool::truncate(&output.content, max_chars, &call.name);
    let content = screen_tool_output(guard, &call.name, &content);
    EntryKind::ToolResult {
        step,
        call_id: call.id.clone(),
        name: call.name.clone(),
        content,
        is_error: output.is_error,
        truncated_chars,
    }
}
