//! Sub-agents: the `delegate` tool starts child tasks; the parent waits at
//! zero compute until all have ended and gets their results as tool results.
//!
//! The protocol, so nothing is lost to a crash or a race:
//! 1. the parent creates each child under a dedupe key derived from its own
//!    call (a re-run finds the same child), records it in `children`, then
//!    sends the children's wakes and waits (`waiting_for: children`);
//! 2. a child that ends reports to its parent *before* recording its own
//!    end ([`report_to_parent`]): a conditional update that stores the
//!    outcome and, when it was the last one pending, makes the parent
//!    runnable and wakes it. A crash in between only repeats the report,
//!    which is idempotent;
//! 3. a parent that ends (cancelled, failed, ...) cancels the children still
//!    running ([`cancel_children`]).

use crate::error::WorkerError;
use baton_core::{
    Child, ChildOutcome, EntryKind, Instant, ParentLink, StoreError, Task, TaskId, TaskStatus,
    TaskStore, ToolCall, ToolOutput, ToolSpec, WaitingFor, Wake, WorkQueue,
};
use baton_settings::{AgentConfig, Agents};
use serde_json::{json, Value};
use std::time::Duration;

/// The tool's name.
pub const DELEGATE: &str = baton_core::tool_names::DELEGATE;

/// The most children one turn may start: each has budgets of its own, so
/// a runaway turn must not fan out without bound.
pub const MAX_CHILDREN_PER_STEP: usize = 8;

/// The longest answer a child hands its parent, in characters. The outcome
/// lives on the parent's task record (DynamoDB items stop at 400 KB), and
/// the parent cuts tool results to its own limit anyway.
pub const MAX_OUTCOME_CHARS: usize = 16_000;

/// Whether the agent may start child tasks: it has the tool and someone to
/// delegate to.
pub fn may_delegate(agent: &AgentConfig) -> bool {
    agent.allows_tool(DELEGATE) && !agent.delegates.is_empty()
}

/// The `delegate` tool as the model sees it, listing whom it may start.
/// `None` when the agent may not delegate.
pub fn delegate_spec(agent: &AgentConfig, agents: &Agents) -> Option<ToolSpec> {
    if !may_delegate(agent) {
        return None;
    }
    let listing: Vec<String> = agent
        .delegates
        .iter()
        .map(|name| {
            let what = agents
                .get(name)
                .and_then(|a| a.description.clone())
                .unwrap_or_else(|| "no description".to_owned());
            format!("- `{name}`: {what}")
        })
        .collect();
    Some(ToolSpec {
        name: DELEGATE.to_owned(),
        description: format!(
            "Hand a self-contained piece of work to another agent, which works on it as a \
             separate task with its own tools and limits and returns its answer as this \
             call's result. Several calls in one turn run in parallel. Give the agent \
             everything it needs in `input`: it does not see this conversation.\n\
             Agents you may use:\n{}",
            listing.join("\n")
        ),
        input_schema: json!({
            "type": "object",
            "properties": {
                "agent": {"type": "string", "enum": agent.delegates, "description": "which agent"},
                "input": {"type": "string", "description": "the complete instruction for it"}
            },
            "required": ["agent", "input"],
            "additionalProperties": false
        }),
    })
}

/// The agent and input a `delegate` call asks for, or why it is wrong (the
/// error goes back to the model as the call's result).
pub fn parse_call<'a>(
    agent: &AgentConfig,
    agents: &'a Agents,
    call: &ToolCall,
) -> Result<(&'a AgentConfig, String), String> {
    let name = call
        .arguments
        .get("agent")
        .and_then(Value::as_str)
        .ok_or("`agent` is required: the name of the agent to delegate to")?;
    if !agent.delegates.iter().any(|d| d == name) {
        return Err(format!(
            "`{name}` is not an agent you may delegate to; choose one of: {}",
            agent.delegates.join(", ")
        ));
    }
    let child = agents
        .get(name)
        .ok_or_else(|| format!("agent `{name}` is not configured"))?;
    let input = call
        .arguments
        .get("input")
        .and_then(Value::as_str)
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .ok_or("`input` is required: the complete instruction for the agent")?;
    Ok((child, input.to_owned()))
}

/// The dedupe key under which a call's child is created: the same call
/// always names the same child.
pub fn dedupe_key(parent: &TaskId, call_id: &str) -> String {
    format!("delegate:{parent}:{call_id}")
}

/// A new child task of `parent` for its call `call_id`. It answers to the
/// same person as the parent (approvals, memory) but posts nothing itself,
/// and it can never outlive the parent's deadline.
pub fn child_task(parent: &Task, child: &AgentConfig, call_id: &str, now: Instant) -> Task {
    let mut limits = child.task_limits(now);
    if let Some(parent_deadline) = parent.budget.limits.deadline_at {
        limits.deadline_at = Some(parent_deadline.capped(limits.deadline_at));
    }
    let mut task = Task::new(
        TaskId::generate(),
        &child.name,
        parent.source.origin.clone(),
        None,
        limits,
        now,
    );
    task.source.parent = Some(ParentLink {
        task_id: parent.id.clone(),
        call_id: call_id.to_owned(),
        root_task_id: Some(parent.trace_root().clone()),
        actor: Some(parent.actor()),
    });
    // A sub-agent acts for exactly its parent's person ([`Task::actor`]):
    // principal, roles, connections, memory and budgets alike.
    task.source.user = parent.acting_for();
    task
}

/// The result of a child's call, once the child has ended.
pub fn result_of(child: &Child) -> Option<ToolOutput> {
    let o = child.outcome.as_ref()?;
    Some(match o.status {
        TaskStatus::Succeeded => ToolOutput::ok(o.text.clone()),
        status => ToolOutput::error(format!(
            "the `{}` agent (task {}) {}: {}",
            child.agent,
            child.task_id,
            status.as_str(),
            o.text
        )),
    })
}

/// What a child's end says to its parent (a long answer cut to head and
/// tail, with where to read it whole).
pub fn outcome_of(child: &Task, status: TaskStatus, text: &str) -> ChildOutcome {
    let (mut text, cut) = baton_core::tool::truncate(text, MAX_OUTCOME_CHARS, DELEGATE);
    if cut > 0 {
        text.push_str(&format!(
            "\n[the whole answer is the result of task {}]",
            child.id
        ));
    }
    ChildOutcome {
        status,
        text,
        usage: child.budget.usage,
    }
}

/// Stores a child's outcome on its parent; wakes the parent when it was the
/// last child it waited for. Idempotent. A parent that has ended ignores it.
pub async fn report_to_parent(
    store: &TaskStore,
    queue: &dyn WorkQueue,
    child: &Task,
    outcome: ChildOutcome,
) -> Result<(), WorkerError> {
    let Some(link) = &child.source.parent else {
        return Ok(());
    };
    let result = store
        .update(&link.task_id, None, |p| {
            if p.status().is_terminal() {
                return Ok(None);
            }
            let slot = match p.waits.children.iter_mut().find(|c| c.task_id == child.id) {
                Some(slot) if slot.outcome.is_some() => return Ok(None),
                Some(slot) => slot,
                None => {
                    // The child ran before its parent recorded it (a crash
                    // window): record it now; the parent will find it.
                    p.waits.children.push(Child {
                        task_id: child.id.clone(),
                        agent: child.agent.clone(),
                        call_id: link.call_id.clone(),
                        outcome: None,
                    });
                    let last = p.waits.children.len() - 1;
                    &mut p.waits.children[last]
                }
            };
            slot.outcome = Some(outcome.clone());
            // Children's model use counts against the parent's budgets.
            p.budget.usage.add(outcome.usage);
            p.budget.cost_usd += child.budget.cost_usd;
            let pending = p.waits.pending_children();
            let mut status = p.status();
            if p.status() == TaskStatus::Waiting
                && matches!(p.waiting_for(), Some(WaitingFor::Children(_)))
            {
                if pending == 0 {
                    p.wake();
                    status = TaskStatus::Queued;
                } else {
                    p.wait(WaitingFor::Children(baton_core::wait::Children { pending }));
                }
            }
            Ok(Some(vec![EntryKind::Status {
                status,
                detail: format!(
                    "child task {} ({}) {}; {pending} still running",
                    child.id,
                    child.agent,
                    outcome.status.as_str()
                ),
            }]))
        })
        .await;
    let parent = match result {
        Ok((parent, _)) => parent,
        // The parent is gone: nobody to report to.
        Err(StoreError::NotFound(_)) => return Ok(()),
        Err(e) => return Err(e.into()),
    };
    if parent.status() == TaskStatus::Queued && parent.lease().is_free() {
        queue
            .send(
                &Wake::new(parent.id.clone(), "children done").to_body(),
                Duration::ZERO,
            )
            .await?;
    }
    Ok(())
}

/// Reports a child that has already ended (its status and result or error
/// recorded) — for the paths that end a task outside its own loop: the
/// dead-letter consumer, and the reaper settling a lost report. Failures
/// are logged: the reaper retries them.
pub async fn report_ended(store: &TaskStore, queue: &dyn WorkQueue, child: &Task) {
    if child.source.parent.is_none() || !child.status().is_terminal() {
        return;
    }
    let text = child
        .answer
        .result
        .clone()
        .or_else(|| child.answer.error.clone())
        .unwrap_or_default();
    let outcome = outcome_of(child, child.status(), &text);
    if let Err(e) = report_to_parent(store, queue, child, outcome).await {
        tracing::warn!(child = %child.id, error = %e, "could not report an ended child to its parent");
    }
}

/// Asks every child still running to stop (best effort: a child that
/// cannot be reached now ends on its own budgets, and its report to an
/// ended parent is ignored).
pub async fn cancel_children(store: &TaskStore, queue: &dyn WorkQueue, parent: &Task) {
    for child in parent.waits.children.iter().filter(|c| c.outcome.is_none()) {
        let result = store
            .update(&child.task_id, None, |t| {
                if t.status().is_terminal() || t.cancel_requested {
                    return Ok(None);
                }
                t.cancel_requested = true;
                Ok(Some(Vec::new()))
            })
            .await;
        match result {
            Ok((t, _)) if !t.status().is_terminal() => {
                let wake = Wake::new(t.id.clone(), "parent ended").to_body();
                if let Err(e) = queue.send(&wake, Duration::ZERO).await {
                    tracing::warn!(child = %t.id, error = %e, "could not wake a child to cancel it");
                }
            }
            Ok(_) => {}
            Err(e) => {
                tracing::warn!(child = %child.task_id, error = %e, "could not cancel a child")
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use baton_core::{Limits, Origin};

    fn agents() -> Agents {
        let mut lead = AgentConfig::new("default", "m");
        lead.delegates = vec!["researcher".into()];
        let mut r = AgentConfig::new("researcher", "m");
        r.description = Some("finds things".into());
        r.deadline_after = Some(std::time::Duration::from_secs(60));
        Agents::new(lead, vec![r])
    }

    fn call(args: Value) -> ToolCall {
        ToolCall {
            id: "call_1".into(),
            name: DELEGATE.into(),
            arguments: args,
        }
    }

    #[test]
    fn a_child_acts_for_exactly_its_parents_person() {
        let a = agents();
        let origin = Origin::Slack {
            team_id: "T1".into(),
            channel: "C1".into(),
            thread_ts: "1.0".into(),
            user: "U2".into(),
            channel_type: None,
        };
        // A second person's own turn on the conversation, delegating.
        let parent = Task::new(
            TaskId::generate(),
            "default",
            origin,
            None,
            Limits::default(),
            0,
        );
        let child = child_task(&parent, a.resolve("researcher"), "call_1", Instant(1_000));
        let u2 = baton_core::connection::PersonKey::new("T1", "U2");
        assert_eq!(child.acting_for(), Some(u2.clone()));
        // Principal and tokens together: one actor.
        assert_eq!(child.actor(), parent.actor());
        // And a grandchild too, whatever its parent's origin says.
        let grandchild = child_task(&child, a.resolve("researcher"), "call_2", Instant(2_000));
        assert_eq!(grandchild.acting_for(), Some(u2));
        assert_eq!(grandchild.actor(), parent.actor());
        // A schedule's HTTP task acts for its creator, and so do its
        // children.
        let mut fired = Task::new(
            TaskId::generate(),
            "default",
            Origin::Http,
            None,
            Limits::default(),
            0,
        );
        fired.source.schedule_owner = Some("slack:T9:U9".into());
        let child = child_task(&fired, a.resolve("researcher"), "call_1", Instant(1_000));
        assert_eq!(child.actor(), fired.actor());
        // A parent acting for nobody has children acting for nobody.
        let http = Task::new(
            TaskId::generate(),
            "default",
            Origin::Http,
            None,
            Limits::default(),
            0,
        );
        let child = child_task(&http, a.resolve("researcher"), "call_1", Instant(1_000));
        assert_eq!(child.acting_for(), None);
        assert_eq!(child.actor(), http.actor());
    }

    #[test]
    fn spec_lists_delegates_only_for_agents_that_may() {
        let a = agents();
        let spec = delegate_spec(a.resolve("default"), &a).unwrap();
        assert!(spec.description.contains("`researcher`: finds things"));
        assert_eq!(
            spec.input_schema["properties"]["agent"]["enum"][0],
            "researcher"
        );
        assert!(delegate_spec(a.resolve("researcher"), &a).is_none());
    }

    #[test]
    fn calls_are_checked() {
        let a = agents();
        let lead = a.resolve("default");
        let (child, input) = parse_call(
            lead,
            &a,
            &call(json!({"agent": "researcher", "input": " go "})),
        )
        .unwrap();
        assert_eq!((child.name.as_str(), input.as_str()), ("researcher", "go"));
        for bad in [
            json!({"agent": "default", "input": "x"}),
            json!({"agent": "researcher"}),
            json!({"agent": "researcher", "input": "  "}),
            json!({}),
        ] {
            assert!(parse_call(lead, &a, &call(bad.clone())).is_err(), "{bad}");
        }
    }

    #[test]
    fn a_child_never_outlives_its_parent() {
        let a = agents();
        let limits = Limits {
            deadline_at: Some(baton_core::Instant(30_000)),
            ..Limits::default()
        };
        let parent = Task::new(TaskId::generate(), "default", Origin::Http, None, limits, 0);
        let child = child_task(&parent, a.resolve("researcher"), "call_1", Instant(1_000));
        assert_eq!(
            child.budget.limits.deadline_at,
            Some(baton_core::Instant(30_000))
        );
        assert_eq!(child.source.parent.as_ref().unwrap().task_id, parent.id);
        assert_eq!(child.conversation.thread, None);
        let free = Task::new(
            TaskId::generate(),
            "default",
            Origin::Http,
            None,
            Limits::default(),
            0,
        );
        let child = child_task(&free, a.resolve("researcher"), "call_1", Instant(1_000));
        assert_eq!(child.budget.limits.deadline_at, Some(Instant(61_000)));
    }

    #[test]
    fn a_grandchild_joins_the_trace_of_the_root_task() {
        let a = agents();
        let root = Task::new(
            TaskId::generate(),
            "default",
            Origin::Http,
            None,
            Limits::default(),
            0,
        );
        let child = child_task(&root, a.resolve("researcher"), "call_1", Instant(1_000));
        let grandchild = child_task(&child, a.resolve("researcher"), "call_2", Instant(2_000));
        assert_eq!(root.trace_root(), &root.id);
        assert_eq!(child.trace_root(), &root.id);
        assert_eq!(grandchild.trace_root(), &root.id);
        // A link written before the root was recorded: the parent is it.
        let mut old = grandchild.clone();
        old.source.parent.as_mut().unwrap().root_task_id = None;
        assert_eq!(old.trace_root(), &child.id);
    }

    #[test]
    fn results_name_failures() {
        let mut c = Child {
            task_id: TaskId::generate(),
            agent: "researcher".into(),
            call_id: "call_1".into(),
            outcome: None,
        };
        assert!(result_of(&c).is_none());
        c.outcome = Some(ChildOutcome {
            status: TaskStatus::Failed,
            text: "step limit".into(),
            usage: Default::default(),
        });
        let out = result_of(&c).unwrap();
        assert!(out.is_error);
        assert!(out.content.contains("researcher") && out.content.contains("step limit"));
    }
}
