//! Baton as an A2A agent (docs/integrations.md#a2a-clients): each agent
//! whose `expose` names `a2a` has an agent card and a JSON-RPC endpoint
//! speaking A2A 1.0 — `SendMessage`, `SendStreamingMessage`, `GetTask`,
//! `CancelTask`, `SubscribeToTask` — one A2A task per Baton task, its
//! `contextId` the task's `thread`.
//!
//! A message becomes a task through `POST /tasks` itself (the same
//! checks, idempotency on the message's id, the input guard, rate limits,
//! capacity), so an A2A task is an HTTP API task in every respect.

mod card;
mod stream;
mod wire;

use crate::response::{json, ApiError};
use crate::{Body, Delivery, Ingest};
use baton_core::{Task, TaskId, TaskStatus, WaitingFor};
use baton_settings::AgentConfig;
use bytes::Bytes;
use http::{HeaderMap, Response, StatusCode};
use serde::de::DeserializeOwned;
use serde_json::{json, Value};
use std::time::Duration;
use wire::State;

/// Longest a blocking `SendMessage` waits for its task to end or ask for
/// input before answering with the task as it is (the client then polls
/// `GetTask` or subscribes).
const MAX_BLOCK: Duration = Duration::from_secs(60);
/// Kept from the caller's own limit, to answer before it cuts us off.
const MARGIN: Duration = Duration::from_secs(2);
/// How often a waiting request reads the task again.
const POLL: Duration = Duration::from_millis(200);
/// How long `CancelTask` waits for the task to end before answering with
/// it as it is (a worker ends it at its next step boundary).
const CANCEL_WAIT: Duration = Duration::from_secs(5);
/// Longest accepted `messageId` (it becomes the request's idempotency
/// key).
const MAX_MESSAGE_ID: usize = 200;

/// A JSON-RPC error, with A2A's codes where A2A has one.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub(crate) enum RpcError {
    #[error("{0}")]
    Parse(String),
    #[error("{0}")]
    InvalidRequest(String),
    #[error("{0}")]
    MethodNotFound(String),
    #[error("{0}")]
    InvalidParams(String),
    #[error("{0}")]
    Internal(String),
    #[error("{0}")]
    TaskNotFound(String),
    #[error("{0}")]
    TaskNotCancelable(String),
    #[error("push notifications are not supported")]
    PushNotSupported,
    #[error("{0}")]
    Unsupported(String),
    #[error("{0}")]
    ContentTypeNotSupported(String),
    #[error("{0}")]
    VersionNotSupported(String),
}

impl RpcError {
    fn code(&self) -> i64 {
        match self {
            RpcError::Parse(_) => -32700,
            RpcError::InvalidRequest(_) => -32600,
            RpcError::MethodNotFound(_) => -32601,
            RpcError::InvalidParams(_) => -32602,
            RpcError::Internal(_) => -32603,
            RpcError::TaskNotFound(_) => -32001,
            RpcError::TaskNotCancelable(_) => -32002,
            RpcError::PushNotSupported => -32003,
            RpcError::Unsupported(_) => -32004,
            RpcError::ContentTypeNotSupported(_) => -32005,
            RpcError::VersionNotSupported(_) => -32009,
        }
    }

    /// What a refusal of the HTTP API's own code means to an A2A client.
    fn from_api(e: ApiError) -> Self {
        match e.status {
            StatusCode::NOT_FOUND => RpcError::TaskNotFound(e.message),
            StatusCode::BAD_REQUEST
            | StatusCode::UNPROCESSABLE_ENTITY
            | StatusCode::PAYLOAD_TOO_LARGE => RpcError::InvalidParams(e.message),
            StatusCode::CONFLICT => RpcError::Unsupported(e.message),
            _ => RpcError::Internal(e.message),
        }
    }
}

fn rpc_result(id: &Value, result: Value) -> Value {
    json!({"jsonrpc": "2.0", "id": id, "result": result})
}

fn rpc_error(id: &Value, e: &RpcError) -> Value {
    json!({"jsonrpc": "2.0", "id": id, "error": {"code": e.code(), "message": e.to_string()}})
}

/// A JSON-RPC answer: 200 whatever it says, as JSON-RPC over HTTP does.
fn full(body: &Value) -> Response<Body> {
    json(StatusCode::OK, body).map(Body::Full)
}

fn params<T: DeserializeOwned>(p: Value) -> Result<T, RpcError> {
    serde_json::from_value(p).map_err(|e| RpcError::InvalidParams(format!("invalid params: {e}")))
}

/// What a message asks, as the body of a `POST /tasks`.
struct Asked {
    input: String,
    attachments: Vec<Value>,
}

/// The message's parts: text (and `data`, as JSON text) becomes the input,
/// file bytes become attachments; a file by URL is refused (Baton does
/// not fetch what a client names).
fn asked(message: &wire::Message) -> Result<Asked, RpcError> {
    let mut texts = Vec::new();
    let mut attachments = Vec::new();
    for (i, part) in message.parts.iter().enumerate() {
        if let Some(t) = &part.text {
            texts.push(t.clone());
        } else if let Some(d) = &part.data {
            texts.push(d.to_string());
        } else if let Some(raw) = &part.raw {
            attachments.push(json!({
                "name": part.filename.clone().unwrap_or_else(|| format!("part-{}", i + 1)),
                "media_type": part.media_type,
                "data_base64": raw,
            }));
        } else if part.url.is_some() {
            return Err(RpcError::ContentTypeNotSupported(
                "file parts by `url` are not supported: send the file's bytes (`raw`)".into(),
            ));
        } else {
            return Err(RpcError::InvalidParams(format!(
                "part {} has none of `text`, `data`, `raw`",
                i + 1
            )));
        }
    }
    let input = texts.join("\n\n");
    if input.trim().is_empty() {
        return Err(RpcError::InvalidParams(
            "the message needs a `text` or `data` part".into(),
        ));
    }
    Ok(Asked { input, attachments })
}

impl Ingest {
    /// The exposed agent `name`, or a 404 that does not say whether an
    /// unexposed one exists.
    fn a2a_agent(&self, name: &str) -> Result<&AgentConfig, ApiError> {
        self.agents
            .get(name)
            .filter(|a| a.expose.a2a())
            .ok_or_else(|| ApiError::not_found(format!("no A2A agent `{name}`")))
    }

    /// `GET /.well-known/agent-card.json` (the default agent) and
    /// `GET /a2a/{agent}/.well-known/agent-card.json`.
    pub(crate) fn a2a_card(
        &self,
        agent: &str,
        headers: &HeaderMap,
    ) -> Result<Response<Bytes>, ApiError> {
        let agent = self.a2a_agent(agent)?;
        let base = card::base_url(headers)?;
        Ok(json(StatusCode::OK, &card::card(agent, &base)))
    }

    /// `POST /a2a/{agent}`: one JSON-RPC request.
    pub(crate) async fn a2a_rpc(
        &self,
        agent: &str,
        headers: &HeaderMap,
        body: &Bytes,
        delivery: Delivery,
    ) -> Result<Response<Body>, ApiError> {
        self.a2a_agent(agent)?;
        let request: Value = match serde_json::from_slice(body) {
            Ok(v) => v,
            Err(e) => {
                let e = RpcError::Parse(format!("invalid JSON: {e}"));
                return Ok(full(&rpc_error(&Value::Null, &e)));
            }
        };
        let id = request.get("id").cloned().unwrap_or(Value::Null);
        let request = match serde_json::from_value::<wire::RpcRequest>(request) {
            Ok(r) if r.jsonrpc == "2.0" => r,
            Ok(_) => {
                let e = RpcError::InvalidRequest("`jsonrpc` must be \"2.0\"".into());
                return Ok(full(&rpc_error(&id, &e)));
            }
            Err(e) => {
                let e = RpcError::InvalidRequest(format!("not a JSON-RPC request: {e}"));
                return Ok(full(&rpc_error(&id, &e)));
            }
        };
        match self.a2a_call(agent, headers, request, delivery).await {
            Ok(Reply::Result(v)) => Ok(full(&rpc_result(&id, v))),
            Ok(Reply::Stream(s)) => Ok(stream::response(*s)),
            Err(e) => Ok(full(&rpc_error(&id, &e))),
        }
    }

    async fn a2a_call(
        &self,
        agent: &str,
        headers: &HeaderMap,
        request: wire::RpcRequest,
        delivery: Delivery,
    ) -> Result<Reply, RpcError> {
        check_version(headers)?;
        let id = request.id.clone();
        match request.method.as_str() {
            "SendMessage" => {
                let p: wire::SendMessageParams = params(request.params)?;
                let immediately = p
                    .configuration
                    .as_ref()
                    .is_some_and(|c| c.return_immediately);
                let task = self.a2a_send(agent, p.message).await?;
                let task = if immediately {
                    task
                } else {
                    let within = delivery.within.saturating_sub(MARGIN).min(MAX_BLOCK);
                    self.a2a_wait(&task.id, within, State::settles).await?
                };
                Ok(Reply::Result(json!({"task": wire::task_json(&task)})))
            }
            "SendStreamingMessage" => {
                let p: wire::SendMessageParams = params(request.params)?;
                let task = self.a2a_send(agent, p.message).await?;
                Ok(Reply::Stream(Box::new(stream::TaskEvents::new(
                    self.clone(),
                    task,
                    id,
                    delivery.within,
                ))))
            }
            "SubscribeToTask" => {
                let p: wire::TaskIdParams = params(request.params)?;
                let task = self.a2a_task(agent, &p.id).await?;
                if task.status().is_terminal() {
                    return Err(RpcError::Unsupported(format!(
                        "task {} has ended: read it with GetTask",
                        task.id
                    )));
                }
                Ok(Reply::Stream(Box::new(stream::TaskEvents::new(
                    self.clone(),
                    task,
                    id,
                    delivery.within,
                ))))
            }
            "GetTask" => {
                let p: wire::TaskIdParams = params(request.params)?;
                let task = self.a2a_task(agent, &p.id).await?;
                Ok(Reply::Result(wire::task_json(&task)))
            }
            "CancelTask" => {
                let p: wire::TaskIdParams = params(request.params)?;
                let task = self.a2a_task(agent, &p.id).await?;
                if task.status().is_terminal() && task.status() != TaskStatus::Cancelled {
                    return Err(RpcError::TaskNotCancelable(format!(
                        "task {} already ended ({})",
                        task.id,
                        task.status().as_str()
                    )));
                }
                self.cancel_task(task.id.as_str())
                    .await
                    .map_err(RpcError::from_api)?;
                let task = self
                    .a2a_wait(&task.id, CANCEL_WAIT, State::is_terminal)
                    .await?;
                Ok(Reply::Result(wire::task_json(&task)))
            }
            "ListTasks" => Err(RpcError::Unsupported(
                "ListTasks is not supported: list tasks with GET /tasks".into(),
            )),
            "CreateTaskPushNotificationConfig"
            | "GetTaskPushNotificationConfig"
            | "ListTaskPushNotificationConfigs"
            | "DeleteTaskPushNotificationConfig" => Err(RpcError::PushNotSupported),
            "GetExtendedAgentCard" => Err(RpcError::Unsupported(
                "there is no extended agent card".into(),
            )),
            m @ ("message/send" | "message/stream" | "tasks/get" | "tasks/cancel"
            | "tasks/resubscribe") => Err(RpcError::VersionNotSupported(format!(
                "`{m}` is A2A 0.3: this agent speaks A2A {} (SendMessage, SendStreamingMessage, GetTask, CancelTask, SubscribeToTask)",
                card::PROTOCOL_VERSION
            ))),
            m => Err(RpcError::MethodNotFound(format!("no method `{m}`"))),
        }
    }

    /// The task `raw` of `agent`: another agent's task is not found there.
    async fn a2a_task(&self, agent: &str, raw: &str) -> Result<Task, RpcError> {
        let not_found = || RpcError::TaskNotFound(format!("no task {raw}"));
        let id = TaskId::parse(raw).map_err(|_| not_found())?;
        self.read_task(&id)
            .await?
            .filter(|t| t.agent == agent)
            .ok_or_else(not_found)
    }

    async fn read_task(&self, id: &TaskId) -> Result<Option<Task>, RpcError> {
        self.store
            .get(id)
            .await
            .map_err(|e| RpcError::from_api(ApiError::unavailable(e)))
    }

    /// The task once `done` says its state is reached, or as it is after
    /// `within`.
    async fn a2a_wait(
        &self,
        id: &TaskId,
        within: Duration,
        done: fn(State) -> bool,
    ) -> Result<Task, RpcError> {
        let started = std::time::Instant::now();
        loop {
            let task = self
                .read_task(id)
                .await?
                .ok_or_else(|| RpcError::TaskNotFound(format!("no task {id}")))?;
            if done(wire::state_of(&task)) || started.elapsed() >= within {
                return Ok(task);
            }
            tokio::time::sleep(POLL).await;
        }
    }

    /// A message: a new task in its context (a new context without one),
    /// or, with a `taskId`, input for that task — the answer to its
    /// question, or a message it reads at its next step — as a
    /// `POST /tasks` on the task's `thread` gives it.
    async fn a2a_send(&self, agent: &str, message: wire::Message) -> Result<Task, RpcError> {
        if !matches!(
            message.role.as_deref(),
            None | Some("ROLE_USER" | "ROLE_UNSPECIFIED")
        ) {
            return Err(RpcError::InvalidParams(
                "a message sent to an agent has the role ROLE_USER".into(),
            ));
        }
        let m = &message.message_id;
        if m.is_empty() || m.len() > MAX_MESSAGE_ID || !m.chars().all(|c| c.is_ascii_graphic()) {
            return Err(RpcError::InvalidParams(format!(
                "`messageId` must be 1 to {MAX_MESSAGE_ID} visible ASCII characters"
            )));
        }
        let asked = asked(&message)?;
        let context = match &message.task_id {
            Some(task_id) => {
                let task = self.a2a_task(agent, task_id).await?;
                let context = open_context(&task)?;
                if message.context_id.as_ref().is_some_and(|c| *c != context) {
                    return Err(RpcError::InvalidParams(format!(
                        "task {task_id} is in context `{context}`, not the message's `contextId`"
                    )));
                }
                context
            }
            None => message
                .context_id
                .clone()
                .unwrap_or_else(|| TaskId::generate().to_string()),
        };
        let mut body = json!({"input": asked.input, "agent": agent, "thread": context});
        if !asked.attachments.is_empty() {
            body["attachments"] = json!(asked.attachments);
        }
        // The same checks and acceptance as `POST /tasks`; the message id
        // is the idempotency key, so a resent message is the same task.
        let req: crate::tasks::SubmitBody = serde_json::from_value(body)
            .map_err(|e| RpcError::InvalidParams(format!("the message's parts: {e}")))?;
        let (accepted, _refused) = self
            .submit_http(req, Some(format!("a2a-{m}")))
            .await
            .map_err(RpcError::from_api)?;
        let id = accepted.outcome.task_id().clone();
        self.read_task(&id)
            .await?
            .ok_or_else(|| RpcError::TaskNotFound(format!("no task {id}")))
    }
}

/// Why a message cannot go to `task` while it waits for `w`: an approval
/// and a connection are ended by someone acting elsewhere, not by a
/// message.
fn no_message_for(task: &Task, w: &WaitingFor) -> Option<RpcError> {
    let id = &task.id;
    match w {
        WaitingFor::Approval(a) => Some(RpcError::Unsupported(format!(
            "task {id} waits for an approval, not a message: decide it with POST /tasks/{id}/approvals/{}",
            a.approval_id
        ))),
        WaitingFor::Connection(c) => Some(RpcError::Unsupported(format!(
            "task {id} waits for its person to connect `{}`, not a message: they open the \
             link in the task's status",
            c.provider
        ))),
        WaitingFor::Children(_)
        | WaitingFor::Timer(_)
        | WaitingFor::Capacity(_)
        | WaitingFor::Turn(_)
        | WaitingFor::Callback(_)
        | WaitingFor::Reply(_) => None,
    }
}

/// The context a message to `task` goes to: its HTTP conversation, while
/// it has not ended and does not wait for an approval (which its
/// approvers decide, not a message).
fn open_context(task: &Task) -> Result<String, RpcError> {
    if task.status().is_terminal() {
        return Err(RpcError::Unsupported(format!(
            "task {} has ended ({}): send the message without `taskId`, in its `contextId`, to go on with the conversation",
            task.id,
            task.status().as_str()
        )));
    }
    if let Some(refused) = task.waiting_for().and_then(|w| no_message_for(task, w)) {
        return Err(refused);
    }
    match task
        .conversation
        .thread
        .as_deref()
        .and_then(|t| t.strip_prefix("http:"))
    {
        Some(context) => Ok(context.to_owned()),
        None => Err(RpcError::Unsupported(format!(
            "task {} has no HTTP conversation a message could join",
            task.id
        ))),
    }
}

/// An `A2A-Version` other than 1.x is refused; none means the client's
/// default, taken as ours.
fn check_version(headers: &HeaderMap) -> Result<(), RpcError> {
    let Some(v) = headers.get("a2a-version") else {
        return Ok(());
    };
    let v = v.to_str().unwrap_or("").trim();
    let ours = card::PROTOCOL_VERSION;
    let major_minor: Vec<&str> = v.split('.').take(2).collect();
    if v.is_empty() || major_minor == ours.split('.').collect::<Vec<_>>() {
        return Ok(());
    }
    Err(RpcError::VersionNotSupported(format!(
        "A2A-Version {v} is not supported: this agent speaks A2A {ours}"
    )))
}

/// What a method answers: one result, or a stream of events.
enum Reply {
    Result(Value),
    Stream(Box<stream::TaskEvents>),
}

#[cfg(test)]
mod tests {
    use super::*;

    fn message(parts: Value) -> wire::Message {
        serde_json::from_value(json!({"messageId": "m1", "role": "ROLE_USER", "parts": parts}))
            .unwrap()
    }

    #[test]
    fn parts_become_the_input_and_files() {
        let a = asked(&message(json!([
            {"text": "hello"},
            {"data": {"k": 1}},
            {"raw": "aGk=", "filename": "hi.txt", "mediaType": "text/plain"}
        ])))
        .unwrap();
        assert_eq!(a.input, "hello\n\n{\"k\":1}");
        assert_eq!(a.attachments[0]["name"], "hi.txt");
        assert_eq!(a.attachments[0]["data_base64"], "aGk=");
        let e = asked(&message(json!([{"url": "https://x/y"}])))
            .err()
            .unwrap();
        assert_eq!(e.code(), -32005);
        let e = asked(&message(json!([{"raw": "aGk="}]))).err().unwrap();
        assert_eq!(e.code(), -32602);
        let e = asked(&message(json!([{}]))).err().unwrap();
        assert_eq!(e.code(), -32602);
    }

    #[test]
    fn only_a2a_1_0_is_spoken() {
        let mut h = HeaderMap::new();
        assert!(check_version(&h).is_ok());
        for ok in ["1.0", "1.0.0"] {
            h.insert("a2a-version", ok.parse().unwrap());
            assert!(check_version(&h).is_ok(), "{ok}");
        }
        h.insert("a2a-version", "0.3".parse().unwrap());
        assert_eq!(check_version(&h).unwrap_err().code(), -32009);
    }
}
