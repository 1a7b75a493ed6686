//! A2A 1.0's JSON-RPC shapes (the protobuf JSON mapping: camelCase
//! fields, enum values by name) as far as Baton speaks them, and how a
//! Baton task reads as an A2A task.

use baton_core::{Task, TaskStatus, WaitingFor};
use serde::Deserialize;
use serde_json::{json, Value};

/// A JSON-RPC 2.0 request; `id` is echoed as given (string, number or
/// null).
#[derive(Deserialize)]
pub(super) struct RpcRequest {
    pub jsonrpc: String,
    #[serde(default)]
    pub id: Value,
    pub method: String,
    #[serde(default)]
    pub params: Value,
}

/// `SendMessage` / `SendStreamingMessage` params. Unknown fields are
/// ignored: the protocol grows by adding them (extensions, metadata).
#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
pub(super) struct SendMessageParams {
    pub message: Message,
    #[serde(default)]
    pub configuration: Option<SendConfiguration>,
}

#[derive(Deserialize, Default)]
#[serde(rename_all = "camelCase")]
pub(super) struct SendConfiguration {
    /// Answer at once with the task as it is, instead of when it ends or
    /// needs input.
    #[serde(default)]
    pub return_immediately: bool,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
pub(super) struct Message {
    pub message_id: String,
    #[serde(default)]
    pub context_id: Option<String>,
    #[serde(default)]
    pub task_id: Option<String>,
    #[serde(default)]
    pub role: Option<String>,
    #[serde(default)]
    pub parts: Vec<Part>,
}

/// One part of a message: exactly one of `text`, `raw` (base64 bytes),
/// `url` or `data` is set.
#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
pub(super) struct Part {
    #[serde(default)]
    pub text: Option<String>,
    #[serde(default)]
    pub raw: Option<String>,
    #[serde(default)]
    pub url: Option<String>,
    #[serde(default)]
    pub data: Option<Value>,
    #[serde(default)]
    pub filename: Option<String>,
    #[serde(default)]
    pub media_type: Option<String>,
}

/// `GetTask`, `CancelTask` and `SubscribeToTask` params.
#[derive(Deserialize)]
pub(super) struct TaskIdParams {
    pub id: String,
}

/// A2A's task states, as the protobuf JSON names them.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum State {
    Submitted,
    Working,
    InputRequired,
    /// A call waits for its person to connect an account (#24).
    AuthRequired,
    Completed,
    Failed,
    Canceled,
}

impl State {
    pub(super) fn as_str(self) -> &'static str {
        match self {
            State::Submitted => "TASK_STATE_SUBMITTED",
            State::Working => "TASK_STATE_WORKING",
            State::InputRequired => "TASK_STATE_INPUT_REQUIRED",
            State::AuthRequired => "TASK_STATE_AUTH_REQUIRED",
            State::Completed => "TASK_STATE_COMPLETED",
            State::Failed => "TASK_STATE_FAILED",
            State::Canceled => "TASK_STATE_CANCELED",
        }
    }

    /// The task will not change again.
    pub(super) fn is_terminal(self) -> bool {
        matches!(self, State::Completed | State::Failed | State::Canceled)
    }

    /// The task ended or waits on its client: where a blocking send
    /// answers and a stream ends.
    pub(super) fn settles(self) -> bool {
        self.is_terminal() || matches!(self, State::InputRequired | State::AuthRequired)
    }
}

/// A Baton task's A2A state: an open `ask_user` question or a pending
/// approval need input from outside; a call waiting for its person to
/// connect an account is `auth-required`; a task waiting for its children
/// or a timer is still at work.
pub(super) fn state_of(task: &Task) -> State {
    match task.status() {
        TaskStatus::Queued => State::Submitted,
        TaskStatus::Running => State::Working,
        TaskStatus::Waiting => match task.waiting_for() {
            Some(WaitingFor::Reply(_)) | Some(WaitingFor::Approval(_)) => State::InputRequired,
            Some(WaitingFor::Connection(_)) => State::AuthRequired,
            Some(
                WaitingFor::Children(_)
                | WaitingFor::Timer(_)
                | WaitingFor::Callback(_)
                | WaitingFor::Capacity(_)
                | WaitingFor::Turn(_),
            )
            | None => State::Working,
        },
        TaskStatus::Succeeded => State::Completed,
        TaskStatus::Failed => State::Failed,
        TaskStatus::Cancelled => State::Canceled,
    }
}

/// The A2A `contextId` of a task: its conversation as the API shows it.
pub(super) fn context_of(task: &Task) -> Option<String> {
    task.conversation.shown_thread().map(str::to_owned)
}

/// An agent message of a task, one text part.
pub(super) fn agent_message(task: &Task, id: &str, text: &str) -> Value {
    let mut m = json!({
        "messageId": id,
        "taskId": task.id,
        "role": "ROLE_AGENT",
        "parts": [{"text": text}],
    });
    if let Some(c) = context_of(task) {
        m["contextId"] = json!(c);
    }
    m
}

/// What the status says beside its state: the question, the approval
/// awaited, the failure's reason.
fn status_text(task: &Task) -> Option<String> {
    match task.status() {
        TaskStatus::Waiting => task.waiting_for().and_then(|w| waiting_text(task, w)),
        TaskStatus::Failed => task.answer.error.clone(),
        TaskStatus::Queued
        | TaskStatus::Running
        | TaskStatus::Succeeded
        | TaskStatus::Cancelled => None,
    }
}

/// What a waiting task's status says of its wait: only what its client
/// acts on (the question, the approval, the connection to make).
fn waiting_text(task: &Task, w: &WaitingFor) -> Option<String> {
    match w {
        WaitingFor::Reply(r) => Some(r.question.clone()),
        WaitingFor::Approval(a) => Some(format!(
            "waiting for approval of {}: decide it with POST /tasks/{}/approvals/{}",
            a.summary, task.id, a.approval_id
        )),
        // The link is the requester's (an HTTP client acting for the
        // person it named): shown to them as the status shows it.
        WaitingFor::Connection(c) => Some(format!(
            "waiting for a connection to `{}`: the person connects at {}",
            c.provider, c.url
        )),
        WaitingFor::Children(_)
        | WaitingFor::Timer(_)
        | WaitingFor::Capacity(_)
        | WaitingFor::Turn(_)
        | WaitingFor::Callback(_) => None,
    }
}

/// A task's `status` object.
pub(super) fn status(task: &Task) -> Value {
    let mut s = json!({
        "state": state_of(task).as_str(),
        "timestamp": task.updated_at.to_string(),
    });
    if let Some(text) = status_text(task) {
        let id = format!("{}-status-{}", task.id, task.version);
        s["message"] = agent_message(task, &id, &text);
    }
    s
}

/// The answer as an artifact (only once the task succeeded with one).
pub(super) fn answer_artifact(task: &Task) -> Option<Value> {
    let result = task.answer.result.as_deref()?;
    (task.status() == TaskStatus::Succeeded).then(|| {
        json!({
            "artifactId": format!("{}-answer", task.id),
            "name": "answer",
            "parts": [{"text": result}],
        })
    })
}

/// The A2A task of a Baton task. `metadata.baton` keeps what A2A has no
/// word for (the Baton status, what it waits for).
pub(super) fn task_json(task: &Task) -> Value {
    let mut t = json!({
        "id": task.id,
        "status": status(task),
        "artifacts": answer_artifact(task).into_iter().collect::<Vec<_>>(),
        "metadata": {"baton": {
            "status": task.status().as_str(),
            "agent": task.agent,
            "waiting_for": task.waiting_for(),
        }},
    });
    if let Some(c) = context_of(task) {
        t["contextId"] = json!(c);
    }
    t
}

/// A `statusUpdate` stream event.
pub(super) fn status_update(task: &Task, status: Value) -> Value {
    let mut e = json!({"taskId": task.id, "status": status});
    if let Some(c) = context_of(task) {
        e["contextId"] = json!(c);
    }
    json!({ "statusUpdate": e })
}

/// An `artifactUpdate` stream event carrying the whole answer.
pub(super) fn artifact_update(task: &Task, artifact: Value) -> Value {
    let mut e =
        json!({"taskId": task.id, "artifact": artifact, "append": false, "lastChunk": true});
    if let Some(c) = context_of(task) {
        e["contextId"] = json!(c);
    }
    json!({ "artifactUpdate": e })
}

#[cfg(test)]
mod tests {
    use super::*;
    use baton_core::wait;
    use baton_core::{Limits, Origin, TaskId};

    fn task(status: TaskStatus, waiting_for: Option<WaitingFor>) -> Task {
        let mut t = Task::new(
            TaskId::generate(),
            "default",
            Origin::Http,
            Some("http:ctx-1".into()),
            Limits::default(),
            baton_core::Instant(0),
        );
        match waiting_for {
            Some(w) => t.wait(w),
            None => baton_core::testing::set_status(&mut t, status),
        }
        assert_eq!(t.status(), status);
        t
    }

    #[test]
    fn baton_statuses_map_onto_a2a_states() {
        let reply = WaitingFor::Reply(wait::Reply {
            question: "Which?".into(),
            expires_at: baton_core::Instant(1),
        });
        let approval = WaitingFor::Approval(wait::Approval {
            approval_id: "ap-1".into(),
            tool: "http_request".into(),
            summary: "POST https://x".into(),
        });
        let cases = [
            (TaskStatus::Queued, None, State::Submitted),
            (TaskStatus::Running, None, State::Working),
            (TaskStatus::Waiting, Some(reply), State::InputRequired),
            (TaskStatus::Waiting, Some(approval), State::InputRequired),
            (
                TaskStatus::Waiting,
                Some(WaitingFor::Children(wait::Children { pending: 1 })),
                State::Working,
            ),
            (
                TaskStatus::Waiting,
                Some(WaitingFor::Connection(wait::Connection {
                    provider: "github".into(),
                    url: "https://b.example/connect/s".into(),
                    expires_at: baton_core::Instant(1),
                })),
                State::AuthRequired,
            ),
            (TaskStatus::Succeeded, None, State::Completed),
            (TaskStatus::Failed, None, State::Failed),
            (TaskStatus::Cancelled, None, State::Canceled),
        ];
        for (status, waiting, want) in cases {
            assert_eq!(state_of(&task(status, waiting)), want, "{status:?}");
        }
    }

    #[test]
    fn a_task_reads_as_an_a2a_task() {
        let mut t = task(TaskStatus::Succeeded, None);
        t.answer.result = Some("42".into());
        let v = task_json(&t);
        assert_eq!(v["id"], t.id.to_string());
        assert_eq!(v["contextId"], "ctx-1");
        assert_eq!(v["status"]["state"], "TASK_STATE_COMPLETED");
        assert_eq!(v["artifacts"][0]["parts"][0]["text"], "42");
        let asking = task(
            TaskStatus::Waiting,
            Some(WaitingFor::Reply(wait::Reply {
                question: "Which?".into(),
                expires_at: baton_core::Instant(1),
            })),
        );
        let v = task_json(&asking);
        assert_eq!(v["status"]["state"], "TASK_STATE_INPUT_REQUIRED");
        assert_eq!(v["status"]["message"]["parts"][0]["text"], "Which?");
        assert_eq!(v["status"]["message"]["role"], "ROLE_AGENT");
        assert_eq!(v["artifacts"], json!([]));
    }
}
