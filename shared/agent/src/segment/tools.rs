//! Phase two of a step: the turn's tool calls, as [`plan`](super::plan)
//! decided. Answers and `tool_started` marks are checkpointed first, then
//! the runnable calls run in parallel, each result written as it completes;
//! then the turn waits, if it must (approval, children, a reply, timer).

use super::events::Event;
use super::plan::{plan, Turn, Wait};
use super::result::{replayed_entry, result_entry};
use super::{Segment, Step};
use crate::progress;
use baton_core::{
    EntryKind, Tool, ToolCall, ToolCallShown, ToolCallState, ToolContext, ToolOutput,
};
use futures::stream::{FuturesUnordered, StreamExt};
use std::sync::Arc;
use tokio::time::Instant;

impl Segment<'_> {
    /// Runs the step's missing tool calls. A call that is not safe to
    /// repeat and was started but never recorded is not run again.
    pub(super) async fn run_tools(&mut self, step: u32, pending: Vec<(ToolCall, bool)>) -> Step {
        let (max_chars, guard) = (self.agent.max_tool_result_chars, self.deps.input_guard);
        let may_wait = self.agent.allows_tool(crate::callback::WAIT_FOR_CALLBACK);
        let waits: Vec<ToolCall> = pending
            .iter()
            .filter(|(call, _)| may_wait && call.name == crate::callback::WAIT_FOR_CALLBACK)
            .map(|(call, _)| call.clone())
            .collect();
        // The callback is made first when a call hands its URL over: the
        // calls are decided on what they will run with.
        let callback_url = self.callback_url(step, &waits, &pending).await?;
        let mut turn = self.turn(step);
        turn.callback_url = callback_url.as_deref();
        let mut batch = plan(&turn, pending).batch();
        // A callback's body is in its result now: the task record drops it.
        let called_back: Vec<String> = batch
            .answered
            .iter()
            .filter(|(call, _)| call.name == crate::callback::WAIT_FOR_CALLBACK)
            .map(|(call, _)| call.id.clone())
            .collect();
        let mut written: Vec<EntryKind> = batch
            .answered
            .into_iter()
            .map(|(call, out)| result_entry(step, &call, out, max_chars, guard))
            .collect();
        written.extend(
            batch
                .replayed
                .into_iter()
                .map(|(call, out)| replayed_entry(step, &call, out)),
        );
        written.extend(batch.started.iter().map(|call| EntryKind::ToolStarted {
            step,
            call_id: call.id.clone(),
            name: call.name.clone(),
        }));
        let retried = batch.retried;
        if !written.is_empty() || !retried.is_empty() {
            self.commit(|t| {
                let ids: Vec<&str> = called_back.iter().map(String::as_str).collect();
                baton_core::callback::forget_bodies(t, &ids);
                super::connection::mark_retrying(t, &retried);
                Some(written.clone())
            })
            .await?;
        }
        // Counted as a unit of the segment's time even when nothing ran.
        let batch_clock = Instant::now();
        let runnable = std::mem::take(&mut batch.runnable);
        let (needs, connected) = self.run_parallel(step, runnable).await?;
        if !connected.is_empty() {
            self.relist_connected(connected).await?;
        }
        self.budget.record(batch_clock.elapsed());
        if let Some(prompts) = self.deps.approvals.clone() {
            for a in &batch.decided {
                if let Err(e) = prompts.decided(&self.task, a).await {
                    tracing::warn!(error = %e, "could not update the approval message");
                }
            }
        }
        // A call that needs a connection waits first: the others' waits
        // are planned again once it ran (their calls have no result yet).
        let wait = if needs.is_empty() {
            batch.wait
        } else {
            Some(Wait::Connection(needs))
        };
        match wait {
            None => Ok(None),
            Some(Wait::Connection(needs)) => self.wait_for_connection(step, needs).await,
            Some(Wait::Approval(calls)) => self.wait_for_approval(step, calls).await,
            Some(Wait::Children(calls)) => self.delegate(calls).await,
            Some(Wait::Reply(calls)) => self.wait_for_reply(step, calls).await,
            Some(Wait::Callback(calls)) => self.wait_for_callback(step, calls).await,
            Some(Wait::Timer(call)) => self.start_timer(step, &call).await,
        }
    }

    /// What [`plan`] decides step `step`'s calls from.
    pub(super) fn turn(&self, step: u32) -> Turn<'_> {
        Turn {
            agent: self.agent,
            agents: &self.deps.agents,
            tools: &self.tools,
            task: &self.task,
            transcript: &self.transcript,
            step,
            now: baton_core::Instant::now(),
            recorded: self.recorded.as_ref(),
            policies: self.deps.policies.as_deref(),
            roles: &self.roles,
            callback_url: None,
        }
    }

    /// Runs `calls` in parallel, writing each result as it completes,
    /// but for those of calls that need their person to connect an
    /// account first: those are returned with the provider, unwritten;
    /// and the servers whose `{server}__connect` calls answered.
    async fn run_parallel(
        &mut self,
        step: u32,
        calls: Vec<(ToolCall, Arc<dyn Tool>)>,
    ) -> Result<(Vec<(ToolCall, String)>, Vec<String>), crate::error::WorkerError> {
        let mut needs = Vec::new();
        let mut connected = Vec::new();
        let mut running = self.start_calls(step, calls).await;
        while let Some((call, output, started)) = running.next().await {
            if let Some(provider) = output.needs_connection {
                needs.push((call, provider));
                continue;
            }
            if !output.is_error {
                connected.extend(super::listing::connect_server(&self.transcript, &call.name));
            }
            self.show_call(&call, ended_state(&output)).await;
            let max_chars = self.agent.max_tool_result_chars;
            let entry = result_entry(step, &call, output, max_chars, self.deps.input_guard);
            self.commit(|_| Some(vec![entry.clone()])).await?;
            let answered = Event::ToolAnswered {
                started,
                call: &call,
                result: &entry,
            };
            self.events.emit(&self.task, answered);
        }
        connected.dedup();
        Ok((needs, connected))
    }

    /// Shows `call` in `state` to the user where the front end can (its
    /// name only: never its arguments or result).
    pub(super) async fn show_call(&self, call: &ToolCall, state: ToolCallState) -> bool {
        let shown = ToolCallShown {
            id: &call.id,
            name: &call.name,
            state,
        };
        self.deps.replies.tool_call(&self.task, shown).await
    }

    /// Starts `calls` (says so to the user), each bounded by the tool
    /// timeout; they yield `(call, output, started at)` as they finish.
    pub(super) async fn start_calls(
        &self,
        step: u32,
        calls: Vec<(ToolCall, Arc<dyn Tool>)>,
    ) -> FuturesUnordered<
        impl std::future::Future<Output = (ToolCall, ToolOutput, baton_core::Instant)> + use<>,
    > {
        // Each call is an item of the streamed answer where the front end
        // shows it; any it cannot show are said in the status text.
        let mut unshown = Vec::new();
        for (call, _) in &calls {
            if !self.show_call(call, ToolCallState::Running).await {
                unshown.push(call.name.as_str());
            }
        }
        if !unshown.is_empty() {
            let status = progress::running_tools(unshown);
            self.deps.replies.progress(&self.task, &status).await;
        }
        let timeout = self.deps.settings.tool_timeout;
        calls
            .into_iter()
            .map(|(call, tool)| {
                let credentials = self.deps.credentials.clone();
                let ctx = ToolContext::new(self.task.id.clone(), step, &call.id)
                    .with_allowed_hosts(self.agent.http_request.allow_hosts.clone())
                    .acting_for(self.task.acting_for(), credentials);
                async move {
                    let started = baton_core::Instant::now();
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
            .collect()
    }
}

/// How a call that returned `output` shows.
pub(super) fn ended_state(output: &ToolOutput) -> ToolCallState {
    if output.is_error {
        ToolCallState::Failed
    } else {
        ToolCallState::Done
    }
}

#[cfg(test)]
mod tests {
    use super::super::harness::{calls, roomy, says, Harness, Meddle};
    use super::super::SegmentEnd;
    use baton_core::{EntryKind, TaskStatus};
    use std::sync::atomic::Ordering;

    fn results(transcript: &[baton_core::Entry]) -> Vec<(String, String)> {
        transcript
            .iter()
            .filter_map(|e| match &e.kind {
                EntryKind::ToolResult {
                    call_id, content, ..
                } => Some((call_id.clone(), content.clone())),
                _ => None,
            })
            .collect()
    }

    #[tokio::test]
    async fn safe_calls_run_once_each_with_no_started_marks() {
        let h = Harness::new(|_| {});
        h.llm.then(calls(&["a", "b", "c"])).then(says("three"));
        let id = h.task("count thrice").await;
        assert_eq!(
            h.run(&id, roomy()).await,
            SegmentEnd::Finished(TaskStatus::Succeeded)
        );
        assert_eq!(h.tool.calls(), 3);
        let transcript = h.transcript(&id).await;
        let mut ids: Vec<String> = results(&transcript).into_iter().map(|r| r.0).collect();
        ids.sort();
        assert_eq!(ids, ["a", "b", "c"]);
        assert!(!transcript
            .iter()
            .any(|e| matches!(e.kind, EntryKind::ToolStarted { .. })));
        // The model saw every result before answering.
        let last = h.llm.requests.lock().map(|r| r.len()).unwrap_or(0);
        assert_eq!(last, 2);
    }

    #[tokio::test]
    async fn a_call_not_safe_to_repeat_is_never_run_twice() {
        let h = Harness::new(|_| {});
        h.tool.safe.store(false, Ordering::SeqCst);
        // The segment loses its lease while the call runs: its result is
        // never recorded, as after a crash.
        h.tool.meddle(Meddle::StealLease);
        h.llm.then(calls(&["a"])).then(says("it was interrupted"));
        let id = h.task("count once").await;
        assert_eq!(h.run(&id, roomy()).await, SegmentEnd::Dropped("lease lost"));
        assert!(h
            .transcript(&id)
            .await
            .iter()
            .any(|e| matches!(e.kind, EntryKind::ToolStarted { .. })));
        // The other holder dies too; the reaper's wake finds it queued.
        h.tool.meddle(Meddle::Nothing);
        let freed = h
            .store
            .update(&id, None, |t| {
                t.requeue();
                Ok(Some(Vec::new()))
            })
            .await;
        assert!(freed.is_ok());
        assert_eq!(
            h.run(&id, roomy()).await,
            SegmentEnd::Finished(TaskStatus::Succeeded)
        );
        assert_eq!(h.tool.calls(), 1, "not run again");
        let results = results(&h.transcript(&id).await);
        assert_eq!(results.len(), 1);
        assert!(results[0].1.starts_with("interrupted"), "{results:?}");
    }
}

#[cfg(test)]
mod shown_tests {
    use super::super::harness::{calls, roomy, says, Harness};
    use super::*;
    use crate::segment::SegmentEnd;
    use baton_core::TaskStatus;
    use std::sync::atomic::Ordering;

    /// A front end that shows calls gets each one started and ended, by
    /// id and name, and no status text for them; one that does not gets
    /// the text.
    #[tokio::test]
    async fn calls_show_where_the_front_end_can_else_as_text() {
        let h = Harness::new(|_| {});
        h.replies.shows_calls.store(true, Ordering::SeqCst);
        h.llm.then(calls(&["a"])).then(says("counted"));
        let id = h.task("count once").await;
        assert_eq!(
            h.run(&id, roomy()).await,
            SegmentEnd::Finished(TaskStatus::Succeeded)
        );
        let shown = h
            .replies
            .shown_calls
            .lock()
            .map(|c| c.clone())
            .unwrap_or_default();
        assert_eq!(
            shown,
            [
                ("a".into(), "count".into(), ToolCallState::Running),
                ("a".into(), "count".into(), ToolCallState::Done),
            ]
        );
        let statuses = h
            .replies
            .statuses
            .lock()
            .map(|s| s.clone())
            .unwrap_or_default();
        assert!(
            !statuses.iter().any(|s| s.contains("count")),
            "{statuses:?}"
        );

        let h = Harness::new(|_| {});
        h.llm.then(calls(&["a"])).then(says("counted"));
        let id = h.task("count once").await;
        h.run(&id, roomy()).await;
        let statuses = h
            .replies
            .statuses
            .lock()
            .map(|s| s.clone())
            .unwrap_or_default();
        assert!(
            statuses.iter().any(|s| s == "is running `count`…"),
            "{statuses:?}"
        );
    }
}
