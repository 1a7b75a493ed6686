//! What an MCP client is told of a Baton task: the tool result (the
//! answer, or where the task stands and how to go on), the tasks
//! extension's view of it, and the status texts progress carries.

use baton_core::wait;
use baton_core::{EntryKind, Task, TaskStatus, WaitingFor};
use rmcp::model::{
    CallToolResult, ContentBlock, DetailedTask, Task as McpTask, TaskPayload,
    TaskStatus as McpStatus,
};
use serde_json::{json, Value};

/// How often a client of the tasks extension is asked to poll, in ms.
pub(crate) const POLL_INTERVAL_MS: u64 = 2_000;

/// Whether a task waits on a person (an approval, a reply, a connection
/// to make): waiting on the tool call for it would only hang the client.
pub(crate) fn awaits_someone(task: &Task) -> bool {
    task.waiting_for().is_some_and(WaitingFor::awaits_a_person)
}

/// What the task waits for and how to go on, in words, with where to act
/// on it: an approval's route, the question, the tasks it waits for.
///
/// The two links that are capabilities are not shown: a callback's URL
/// resumes the task for whoever holds it (it goes to the system that is to
/// call it), and a Connect link is its person's alone (sent to them; a
/// client holding it could bind its own account to them). An MCP client's
/// result may be a model's context; the API's `GET /tasks/{id}`, under
/// the same bearer token, shows them to a program that needs them.
pub(crate) fn awaited(task: &Task) -> Option<String> {
    let id = &task.id;
    Some(match task.waiting_for()? {
        WaitingFor::Approval(wait::Approval {
            approval_id,
            tool,
            summary,
        }) => format!(
            "waiting for approval of `{tool}` ({summary}): approve with \
             POST /tasks/{id}/approvals/{approval_id} {{\"approve\": true}} \
             (or deny with {{\"approve\": false}}), with the API's bearer token"
        ),
        WaitingFor::Reply(wait::Reply { question, .. }) => format!(
            "waiting for a reply to its question: {question} (answer by calling \
             the agent again with the same `thread`)"
        ),
        WaitingFor::Children(wait::Children { pending }) => {
            let open: Vec<String> = task
                .waits
                .children
                .iter()
                .filter(|c| c.outcome.is_none())
                .map(|c| c.task_id.to_string())
                .collect();
            format!(
                "waiting for {pending} delegated task(s) to finish ({}; `get_task` reads each)",
                open.join(", ")
            )
        }
        WaitingFor::Timer(wait::Timer { until }) => format!("waiting until {until}"),
        WaitingFor::Capacity(wait::Capacity { scope, limit }) => format!(
            "queued: {limit} task(s) of its {} are running, its concurrency limit; \
             it starts when one of them ends",
            scope.as_str()
        ),
        WaitingFor::Turn(wait::Turn { behind }) => format!(
            "queued behind task {behind} on its conversation: it starts once that one \
             has ended (`get_task` reads it)"
        ),
        WaitingFor::Callback(wait::Callback { expires_at, .. }) => format!(
            "waiting for an outside system to call its one-time callback URL, until \
             {expires_at}; the URL resumes the task for whoever holds it, so it is not shown \
             here (it went to the system that is to call it)"
        ),
        WaitingFor::Connection(wait::Connection {
            provider,
            expires_at,
            ..
        }) => format!(
            "waiting for its person to connect their `{provider}` account, until {expires_at}; \
             the Connect link is theirs alone, sent to them, and not shown here"
        ),
    })
}

/// `waiting_for` as a client is shown it: without the URL of a callback
/// or a Connect link ([`awaited`] says why).
fn shown_wait(w: &WaitingFor) -> Value {
    let mut v = json!(w);
    match w {
        WaitingFor::Callback(_) | WaitingFor::Connection(_) => {
            if let Some(o) = v.as_object_mut() {
                o.remove("url");
            }
        }
        WaitingFor::Approval(_)
        | WaitingFor::Children(_)
        | WaitingFor::Timer(_)
        | WaitingFor::Capacity(_)
        | WaitingFor::Turn(_)
        | WaitingFor::Reply(_) => {}
    }
    v
}

/// The status text of a task as it stands: its status and what it waits
/// for.
pub(crate) fn status_text(task: &Task) -> String {
    match awaited(task) {
        Some(w) => w,
        None => task.status().as_str().to_owned(),
    }
}

/// The status text an event adds (a tool being called, a status change),
/// if it says something a client would show.
pub(crate) fn event_text(kind: &EntryKind) -> Option<String> {
    match kind {
        EntryKind::AssistantMessage { tool_calls, .. } if !tool_calls.is_empty() => {
            let names: Vec<&str> = tool_calls.iter().map(|c| c.name.as_str()).collect();
            Some(format!("calling {}", names.join(", ")))
        }
        EntryKind::Status { status, detail } if !status.is_terminal() => {
            Some(if detail.is_empty() {
                status.as_str().to_owned()
            } else {
                format!("{}: {detail}", status.as_str())
            })
        }
        _ => None,
    }
}

/// The machine-readable part of a result: `task_id`, `status`, and
/// `answer`, `error`, `waiting_for` and `awaiting` when they say something.
pub(crate) fn structured(task: &Task) -> Value {
    let mut v = json!({"task_id": task.id, "status": task.status().as_str()});
    if let Some(thread) = task.conversation.shown_thread() {
        v["thread"] = json!(thread);
    }
    if let Some(r) = task
        .answer
        .result
        .as_ref()
        .filter(|_| task.status().is_terminal())
    {
        v["answer"] = json!(r);
    }
    if let Some(e) = &task.answer.error {
        v["error"] = json!(e);
    }
    if let Some(w) = &task.waiting_for() {
        v["waiting_for"] = shown_wait(w);
    }
    if let Some(a) = awaited(task) {
        v["awaiting"] = json!(a);
    }
    v
}

/// The tool result for a task: the answer when it succeeded, a tool error
/// when it failed or was cancelled, and otherwise where it stands with how
/// to get the answer later (`get_task`).
pub(crate) fn tool_result(task: &Task) -> CallToolResult {
    let text = match task.status() {
        TaskStatus::Succeeded => task.answer.result.clone().unwrap_or_default(),
        TaskStatus::Failed => format!(
            "task {} failed: {}",
            task.id,
            task.answer.error.as_deref().unwrap_or("no reason given")
        ),
        TaskStatus::Cancelled => format!("task {} was cancelled", task.id),
        _ => format!(
            "task {} is {}; call `get_task` with {{\"task_id\": \"{}\"}} for its answer",
            task.id,
            status_text(task),
            task.id
        ),
    };
    let mut result = if matches!(task.status(), TaskStatus::Failed | TaskStatus::Cancelled) {
        CallToolResult::error(vec![ContentBlock::text(text)])
    } else {
        CallToolResult::success(vec![ContentBlock::text(text)])
    };
    result.structured_content = Some(structured(task));
    result
}

/// The task as the tasks extension shows it: `working` (with what it waits
/// for as its status message) until it ends, then `completed` with the
/// tool result (a failed task is a completed call whose result is an
/// error, as the extension has it), or `cancelled`.
pub(crate) fn detailed(task: &Task) -> DetailedTask {
    let base = McpTask::new(
        task.id.to_string(),
        McpStatus::Working,
        task.created_at.to_string(),
        task.updated_at.to_string(),
    )
    .with_poll_interval_ms(POLL_INTERVAL_MS)
    .with_status_message(status_text(task));
    let payload = match task.status() {
        TaskStatus::Cancelled => TaskPayload::Cancelled,
        TaskStatus::Succeeded | TaskStatus::Failed => {
            let result = serde_json::to_value(tool_result(task))
                .ok()
                .and_then(|v| v.as_object().cloned())
                .unwrap_or_default();
            TaskPayload::Completed { result }
        }
        _ => TaskPayload::Working,
    };
    DetailedTask::new(base, payload)
}

#[cfg(test)]
mod tests {
    use super::*;
    use baton_core::{Limits, Origin, TaskId};

    fn task(status: TaskStatus) -> Task {
        let mut t = Task::new(
            TaskId::generate(),
            "helper",
            Origin::Http,
            Some("http:t1".into()),
            Limits::default(),
            0,
        );
        baton_core::testing::set_status(&mut t, status);
        t
    }

    fn text(r: &CallToolResult) -> String {
        serde_json::to_value(r).unwrap()["content"][0]["text"]
            .as_str()
            .unwrap()
            .to_owned()
    }

    #[test]
    fn an_answered_task_gives_its_answer_and_a_failed_one_an_error() {
        let mut t = task(TaskStatus::Succeeded);
        t.answer.result = Some("42".into());
        let r = tool_result(&t);
        assert_eq!((text(&r), r.is_error), ("42".into(), Some(false)));
        let s = r.structured_content.unwrap();
        assert_eq!(
            (s["answer"].as_str(), s["thread"].as_str()),
            (Some("42"), Some("t1"))
        );

        let mut t = task(TaskStatus::Failed);
        t.answer.error = Some("model unavailable".into());
        let r = tool_result(&t);
        assert_eq!(r.is_error, Some(true));
        assert!(text(&r).contains("model unavailable"), "{}", text(&r));
        assert!(matches!(
            detailed(&t).payload,
            TaskPayload::Completed { .. }
        ));
        assert!(matches!(
            detailed(&task(TaskStatus::Cancelled)).payload,
            TaskPayload::Cancelled
        ));
    }

    #[test]
    fn a_task_awaiting_approval_says_what_and_how_to_approve() {
        let mut t = task(TaskStatus::Waiting);
        t.wait(WaitingFor::Approval(wait::Approval {
            approval_id: "ap1".into(),
            tool: "http_request".into(),
            summary: "GET http://x/".into(),
        }));
        assert!(awaits_someone(&t));
        let r = tool_result(&t);
        let said = text(&r);
        assert_eq!(r.is_error, Some(false));
        assert!(
            said.contains(&format!("POST /tasks/{}/approvals/ap1", t.id)),
            "{said}"
        );
        assert!(said.contains("get_task"), "{said}");
        let s = r.structured_content.unwrap();
        assert_eq!(s["waiting_for"]["kind"], "approval");
        assert!(s.get("answer").is_none());
        let d = detailed(&t);
        assert_eq!(d.status(), McpStatus::Working);
        assert!(d.task.status_message.unwrap().contains("approvals/ap1"));
    }

    #[test]
    fn every_wait_is_named_and_no_capability_url_is_shown() {
        use baton_core::wait::testing::{cases, KINDS};
        let cases = cases(baton_core::Instant::now());
        assert_eq!(cases.len(), KINDS);
        for c in cases {
            // Still waiting where it can be (a child not yet reported).
            let t = c.waiting.unwrap_or(c.lost);
            let said = awaited(&t).unwrap();
            let s = structured(&t);
            assert_eq!(s["waiting_for"]["kind"], c.kind);
            let everything = format!("{said} {s}");
            for secret in ["/callbacks/", "/connect/"] {
                assert!(!everything.contains(secret), "{}: {everything}", c.kind);
            }
            let named = match t.waiting_for().unwrap() {
                WaitingFor::Approval(wait::Approval { approval_id, .. }) => {
                    format!("approvals/{approval_id}")
                }
                WaitingFor::Children(_) => t.waits.children[0].task_id.to_string(),
                WaitingFor::Timer(_) => "waiting until".into(),
                WaitingFor::Capacity(_) => "concurrency limit".into(),
                WaitingFor::Turn(wait::Turn { behind }) => behind.to_string(),
                WaitingFor::Callback(_) => "callback URL".into(),
                WaitingFor::Connection(wait::Connection { provider, .. }) => {
                    format!("`{provider}` account")
                }
                WaitingFor::Reply(wait::Reply { question, .. }) => question.clone(),
            };
            assert!(said.contains(&named), "{}: {said}", c.kind);
        }
    }

    #[test]
    fn a_running_task_is_not_awaiting_anyone_and_its_events_say_what_it_does() {
        let t = task(TaskStatus::Running);
        assert!(!awaits_someone(&t));
        assert_eq!(status_text(&t), "running");
        let call = EntryKind::AssistantMessage {
            step: 1,
            text: String::new(),
            tool_calls: vec![baton_core::ToolCall {
                id: "c1".into(),
                name: "http_request".into(),
                arguments: json!({}),
            }],
            usage: Default::default(),
            model: "m".into(),
        };
        assert_eq!(event_text(&call).as_deref(), Some("calling http_request"));
        let answer = EntryKind::UserMessage {
            text: "hi".into(),
            from: None,
        };
        assert_eq!(event_text(&answer), None);
    }
}
