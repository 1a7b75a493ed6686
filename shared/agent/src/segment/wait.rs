//! Waiting at zero compute: for a human's decision, for child tasks, or
//! for a timer. Each records the wait on the task in one checkpoint that
//! also releases the lease, then arranges what ends it (a wake), and the
//! segment ends.

use super::result::result_entry;
use super::{start_waiting, Segment, SegmentEnd, Step};
use crate::delegation;
use crate::error::WorkerError;
use crate::progress;
use baton_core::always::{self, AlwaysRule};
use baton_core::approval::{self, approval_id};
use baton_core::{
    Approval, Child, Created, EntryKind, Instant, TaskId, TaskStatus, ToolCall, ToolOutput,
    WaitingFor, Wake,
};
use std::time::Duration;

impl Segment<'_> {
    /// What the approver reads about `call`, as it will run (its URL
    /// parsed, a callback's URL in place but its token left out: the
    /// summary is in the task's events): with the policy that asks for
    /// approval named, when one does (docs/policies.md).
    fn approval_summary(&self, call: &ToolCall, now: Instant) -> String {
        let summary = baton_core::callback::without_tokens(&self.task, &approval::summary(call));
        let asking = self
            .deps
            .policies
            .as_deref()
            .map(|p| crate::policy::call(p, &self.task, &self.roles, call, now));
        match asking {
            Some(baton_policy::Verdict::Approval { policy }) => {
                format!("{summary} (policy `{policy}` asks for approval)")
            }
            _ => summary,
        }
    }

    /// Calls that need a human decision: record the approvals (so a decision
    /// can arrive at any time from now on), show them, then wait with no
    /// worker running — unless every one was decided meanwhile.
    pub(super) async fn wait_for_approval(&mut self, step: u32, calls: Vec<ToolCall>) -> Step {
        let now = Instant::now();
        // An approval never outlives the task's deadline.
        let expires_at =
            (now + self.agent.approval.expires_after).capped(self.task.budget.limits.deadline_at);
        let ids: Vec<String> = calls.iter().map(|c| approval_id(step, &c.id)).collect();
        let new: Vec<Approval> = calls
            .iter()
            .zip(&ids)
            .filter(|(_, id)| self.task.waits.approval(id).is_none())
            .map(|(call, id)| Approval {
                approval_id: id.clone(),
                step,
                call_id: call.id.clone(),
                tool: call.name.clone(),
                summary: self.approval_summary(call, now),
                requested_at: now,
                expires_at,
                message: None,
                decision: None,
                always: self
                    .task
                    .conversation
                    .thread
                    .as_ref()
                    .and_then(|_| always::Allowed::of(call)),
            })
            .collect();
        if !new.is_empty() {
            // A kind of call someone allowed for the rest of the conversation
            // is decided by that rule, not asked again.
            let rules = self.always_rules().await;
            let by_rule: Vec<Option<&AlwaysRule>> = calls
                .iter()
                .zip(&ids)
                .filter(|(_, id)| self.task.waits.approval(id).is_none())
                .map(|(call, _)| always::matching(&rules, call))
                .collect();
            self.commit(|t| {
                let mut entries = Vec::new();
                for (a, rule) in new.iter().zip(&by_rule) {
                    if t.waits.approval(&a.approval_id).is_some() {
                        continue;
                    }
                    let mut a = a.clone();
                    entries.push(match rule {
                        Some(rule) => approval::decide_by_rule(&mut a, rule, now),
                        None => EntryKind::Status {
                            status: TaskStatus::Running,
                            detail: format!(
                                "approval {} requested: {} (expires {})",
                                a.approval_id, a.summary, a.expires_at
                            ),
                        },
                    });
                    t.waits.approvals.push(a);
                }
                Some(entries)
            })
            .await?;
        }
        self.show_approvals(&ids).await?;
        self.commit(|t| {
            let mut entries = approval::expire_due(t, Instant::now()).unwrap_or_default();
            if t.cancel_requested {
                // A cancel arrived while this segment ran: end, don't wait.
                return (!entries.is_empty()).then_some(entries);
            }
            let Some(open) = ids
                .iter()
                .filter_map(|id| t.waits.approval(id))
                .find(|a| a.decision.is_none())
                .cloned()
            else {
                // Decided before we could wait: go on.
                return (!entries.is_empty()).then_some(entries);
            };
            let detail = format!("waiting for approval {}", open.approval_id);
            let waiting_for = WaitingFor::Approval(baton_core::wait::Approval {
                approval_id: open.approval_id,
                tool: open.tool,
                summary: open.summary,
            });
            entries.push(start_waiting(t, waiting_for, detail));
            Some(entries)
        })
        .await?;
        if self.task.status() != TaskStatus::Waiting {
            return Ok(None);
        }
        if let Some(at) = self.task.waits.next_approval_expiry() {
            // The expiry is itself a wake: the worker then records the denial.
            self.arm_wake(at).await?;
        }
        self.deps
            .replies
            .progress(&self.task, progress::WAITING_FOR_APPROVAL)
            .await;
        Ok(Some(SegmentEnd::Waiting))
    }

    /// The always-rules of the task's conversation; none for a task
    /// without one, or when it cannot be read (then the call is asked for,
    /// as without a rule).
    async fn always_rules(&self) -> Vec<AlwaysRule> {
        let Some(key) = self.task.conversation.thread.as_deref() else {
            return Vec::new();
        };
        match self.deps.store.thread(key).await {
            Ok(thread) => thread.map(|t| t.always).unwrap_or_default(),
            Err(e) => {
                tracing::warn!(task_id = %self.task.id, error = %e,
                    "could not read the conversation's always-rules; asking");
                Vec::new()
            }
        }
    }

    /// Shows the approvals `ids` not shown yet (Slack buttons), recording
    /// each posted message so the decision can replace it.
    async fn show_approvals(&mut self, ids: &[String]) -> Result<(), WorkerError> {
        let Some(prompts) = self.deps.approvals.clone() else {
            return Ok(());
        };
        let unshown: Vec<Approval> = ids
            .iter()
            .filter_map(|id| self.task.waits.approval(id))
            .filter(|a| a.message.is_none() && a.decision.is_none())
            .cloned()
            .collect();
        for a in unshown {
            let post = self
                .begin_post(format!("{}:{}", self.task.id, a.approval_id))
                .await?;
            let Some(message) = prompts.ask(&self.task, &a, &post).await? else {
                continue;
            };
            self.commit(|t| {
                t.answer.posting = None;
                let slot = t
                    .waits
                    .approvals
                    .iter_mut()
                    .find(|x| x.approval_id == a.approval_id)?;
                slot.message = Some(message.clone());
                Some(Vec::new())
            })
            .await?;
        }
        Ok(())
    }

    /// `delegate` calls: start (or find) a child task per call, wake the
    /// children, then wait at zero compute until they have all reported.
    pub(super) async fn delegate(&mut self, calls: Vec<ToolCall>) -> Step {
        for call in &calls {
            if self.task.waits.child_for_call(&call.id).is_none() {
                self.start_child(call).await?;
            }
        }
        let call_ids: Vec<&str> = calls.iter().map(|c| c.id.as_str()).collect();
        let open: Vec<TaskId> = self
            .task
            .waits
            .children
            .iter()
            .filter(|c| call_ids.contains(&c.call_id.as_str()) && c.outcome.is_none())
            .map(|c| c.task_id.clone())
            .collect();
        for id in &open {
            // Repeated after a crash: a duplicate wake is harmless.
            let wake = Wake::new(id.clone(), "delegated").to_body();
            self.deps.queue.send(&wake, Duration::ZERO).await?;
        }
        self.commit(|t| {
            let pending = t.waits.pending_children();
            if pending == 0 || t.cancel_requested {
                // They all ended already: their results are on the task.
                return None;
            }
            let detail = format!("waiting for {pending} child task(s)");
            Some(vec![start_waiting(
                t,
                WaitingFor::Children(baton_core::wait::Children { pending }),
                detail,
            )])
        })
        .await?;
        if self.task.status() != TaskStatus::Waiting {
            return Ok(None);
        }
        if let Some(deadline) = self.task.budget.limits.deadline_at {
            // Children may take longer than the parent may: wake at its
            // deadline, which ends it (and cancels them).
            self.arm_wake(deadline).await?;
        }
        self.deps
            .replies
            .progress(
                &self.task,
                &progress::waiting_for_subtasks(&self.task.waits.children),
            )
            .await;
        Ok(Some(SegmentEnd::Waiting))
    }

    /// Creates the child task of a `delegate` call (once: under a dedupe key
    /// derived from the call) and records it on the parent.
    async fn start_child(&mut self, call: &ToolCall) -> Result<(), WorkerError> {
        let Ok((child_agent, input)) = delegation::parse_call(self.agent, &self.deps.agents, call)
        else {
            return Ok(());
        };
        let child = delegation::child_task(&self.task, child_agent, &call.id, Instant::now());
        let key = delegation::dedupe_key(&self.task.id, &call.id);
        let first = vec![EntryKind::UserMessage {
            text: input,
            from: Some(baton_core::Author::Parent {
                task_id: self.task.id.clone(),
            }),
        }];
        let child_id = match self
            .deps
            .store
            .create(&child, first, Some(key.as_str().into()))
            .await?
        {
            Created::New(id) => {
                self.deps.measure_created(&child.agent, &id);
                id
            }
            Created::Duplicate(id) => id,
        };
        let record = Child {
            task_id: child_id,
            agent: child_agent.name.clone(),
            call_id: call.id.clone(),
            outcome: None,
        };
        self.commit(|t| {
            if t.waits.child_for_call(&record.call_id).is_some() {
                return None;
            }
            t.waits.children.push(record.clone());
            Some(vec![EntryKind::Status {
                status: TaskStatus::Running,
                detail: format!(
                    "delegated to `{}`: child task {}",
                    record.agent, record.task_id
                ),
            }])
        })
        .await
    }

    /// The `sleep` tool: records its result and the wait in one checkpoint,
    /// releases the lease, then arranges the wake.
    pub(super) async fn start_timer(&mut self, step: u32, call: &ToolCall) -> Step {
        let max_chars = self.agent.max_tool_result_chars;
        let now = Instant::now();
        let until = match crate::timer::wake_time(&call.arguments, now) {
            Ok(u) if u > now + Duration::from_secs(1) => u,
            other => {
                let out = match other {
                    Err(e) => ToolOutput::error(e),
                    Ok(_) => ToolOutput::ok("no wait needed: that time has passed"),
                };
                let entry = result_entry(step, call, out, max_chars, self.deps.input_guard);
                self.commit(|_| Some(vec![entry.clone()])).await?;
                return Ok(None);
            }
        };
        let out = ToolOutput::ok(format!("waited until {until}"));
        let entry = result_entry(step, call, out, max_chars, self.deps.input_guard);
        self.commit(|t| {
            if t.cancel_requested {
                return Some(vec![entry.clone()]);
            }
            let detail = format!("waiting until {until}");
            let waiting_for = WaitingFor::Timer(baton_core::wait::Timer { until });
            Some(vec![entry.clone(), start_waiting(t, waiting_for, detail)])
        })
        .await?;
        if self.task.status() != TaskStatus::Waiting {
            return Ok(None);
        }
        self.arm_wake(until).await?;
        Ok(Some(SegmentEnd::Waiting))
    }

    /// Arranges a wake at `at` (a delayed message, or a one-time schedule
    /// past the queue's 15-minute limit).
    async fn arm_wake(&self, at: Instant) -> Result<(), WorkerError> {
        crate::timer::arm(
            self.deps.queue.as_ref(),
            self.deps.scheduler(),
            &self.task.id,
            at,
        )
        .await
    }
}

#[cfg(test)]
mod tests {
    use super::super::harness::{calls, roomy, Harness};
    use super::super::SegmentEnd;
    use baton_core::{Completion, TaskStatus, ToolCall, WaitingFor};
    use baton_settings::ApprovalRule;
    use serde_json::json;
    use std::time::Duration;

    #[tokio::test]
    async fn an_approval_waits_with_no_worker_and_nothing_run() {
        let h = Harness::new(|a| {
            a.approval.require = ApprovalRule::parse("count").ok().map(|r| vec![r]);
        });
        h.llm.then(calls(&["a"]));
        let id = h.task("count").await;
        assert_eq!(h.run(&id, roomy()).await, SegmentEnd::Waiting);
        let task = h.get(&id).await;
        assert_eq!(task.status(), TaskStatus::Waiting);
        assert!(matches!(task.waiting_for(), Some(WaitingFor::Approval(_))));
        assert!(task.lease().is_free(), "no worker holds a waiting task");
        assert_eq!(task.waits.approvals.len(), 1);
        assert_eq!(h.tool.calls(), 0);
        // A duplicate wake finds nothing to do.
        assert!(matches!(h.run(&id, roomy()).await, SegmentEnd::Dropped(_)));
        assert_eq!(h.llm.calls(), 1);
    }

    #[tokio::test]
    async fn sleep_waits_on_a_timer_armed_through_the_queue() {
        let h = Harness::new(|_| {});
        h.llm.then(Completion {
            tool_calls: vec![ToolCall {
                id: "s".into(),
                name: "sleep".into(),
                arguments: json!({"seconds": 60}),
            }],
            ..Completion::default()
        });
        let id = h.task("wait a minute").await;
        assert_eq!(h.run(&id, roomy()).await, SegmentEnd::Waiting);
        let task = h.get(&id).await;
        assert!(matches!(task.waiting_for(), Some(WaitingFor::Timer(_))));
        assert!(task.lease().is_free());
        let sent = h.queue.sent();
        assert_eq!(sent.len(), 1, "{sent:?}");
        assert!(sent[0].1 > Duration::from_secs(50) && sent[0].1 <= Duration::from_secs(60));
        // Woken early (a duplicate): it re-arms and waits on.
        assert!(matches!(h.run(&id, roomy()).await, SegmentEnd::Dropped(_)));
        assert_eq!(h.get(&id).await.status(), TaskStatus::Waiting);
    }
}
