//! The task routes: submit, status, cancel, events, trace.

use crate::response::{json, json_body, parse_id, Answer, ApiError};
use crate::submission::Submission;
use crate::threads::{request_cancel, Accepted, Submitted};
use crate::Ingest;
use baton_core::{
    attachment, Entry, EntryKind, Instant, Origin, Span, StoreError, TaskId, TaskStatus, Wake,
};
use bytes::Bytes;
use http::{HeaderMap, StatusCode};
use serde::Deserialize;
use serde_json::json;
use std::time::Duration;

/// Longest accepted task input, in characters.
pub(crate) const MAX_INPUT_CHARS: usize = 100_000;
/// Most events returned by one call of the events route.
const MAX_EVENTS: usize = 500;

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct SubmitBody {
    pub input: String,
    #[serde(default)]
    pub thread: Option<String>,
    #[serde(default)]
    pub agent: Option<String>,
    #[serde(default)]
    attachments: Vec<AttachmentBody>,
    /// The model every step asks instead of the agent's.
    #[serde(default)]
    pub model: Option<String>,
    /// The person the task acts for (`slack:TEAM:USER`, or an id for
    /// `api:ID`): whose per-person connections its tools use. Only when
    /// the deployment allows it (`[connection] api_may_name_user`).
    #[serde(default)]
    pub user: Option<String>,
}

impl SubmitBody {
    /// A task's input for `agent`, in `thread` when given, with no files.
    #[cfg(feature = "mcp-server")]
    pub(crate) fn new(input: String, agent: &str, thread: Option<String>) -> Self {
        SubmitBody {
            input,
            thread,
            agent: Some(agent.to_owned()),
            attachments: Vec::new(),
            model: None,
            user: None,
        }
    }
}

/// A file given with the input: `{"name", "media_type", "data_base64"}`.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct AttachmentBody {
    name: String,
    #[serde(default)]
    media_type: Option<String>,
    data_base64: String,
}

/// Most files one request may carry.
pub(crate) const MAX_ATTACHMENTS: usize = 10;

/// The entries of the files given with a task, and the ones refused
/// (`name`, `reason`): too large, bad base64, a type the model cannot
/// read. A refused file is named to the model with the reason; the task
/// runs on all the same.
fn attachment_entries(
    files: Vec<AttachmentBody>,
    max_bytes: u64,
) -> Result<(Vec<EntryKind>, Vec<serde_json::Value>), ApiError> {
    use base64::Engine;
    if files.len() > MAX_ATTACHMENTS {
        return Err(ApiError::bad_request(format!(
            "at most {MAX_ATTACHMENTS} `attachments` per request"
        )));
    }
    let mut entries = Vec::with_capacity(files.len());
    let mut refused = Vec::new();
    for f in files {
        let name: String = f.name.trim().chars().take(255).collect();
        if name.is_empty() {
            return Err(ApiError::bad_request("every attachment needs a `name`"));
        }
        let media_type = attachment::media_type_of(&name, f.media_type.as_deref());
        // Checked before decoding: base64 is 4 characters for 3 bytes.
        let approx = (f.data_base64.len() as u64 / 4) * 3;
        let entry = if approx > max_bytes + 3 {
            attachment::refused(
                &name,
                &media_type,
                approx,
                attachment::too_large(approx, max_bytes),
            )
        } else {
            let cleaned: String = f
                .data_base64
                .chars()
                .filter(|c| !c.is_ascii_whitespace())
                .collect();
            match base64::engine::general_purpose::STANDARD.decode(cleaned) {
                Ok(data) => attachment::from_bytes(&name, Some(&media_type), &data, max_bytes),
                Err(_) => attachment::refused(
                    &name,
                    &media_type,
                    0,
                    "its `data_base64` is not valid base64",
                ),
            }
        };
        if let EntryKind::Attachment {
            note: Some(reason), ..
        } = &entry
        {
            refused.push(json!({"name": name, "reason": reason}));
        }
        entries.push(entry);
    }
    Ok((entries, refused))
}

/// A digest of what a `POST /tasks` asks (input, agent, thread and files),
/// kept with its Idempotency-Key.
fn fingerprint(req: &SubmitBody) -> String {
    use sha2::{Digest, Sha256};
    let files: Vec<_> = req
        .attachments
        .iter()
        .map(|f| json!([f.name, f.media_type, f.data_base64]))
        .collect();
    let mut canonical = json!([
        req.input,
        req.agent.as_deref().unwrap_or("default"),
        req.thread,
        files
    ]);
    // Appended only when given, so a key's fingerprint from before
    // `model` existed still matches the same request.
    if let (Some(model), Some(parts)) = (&req.model, canonical.as_array_mut()) {
        parts.push(json!(model));
    }
    if let (Some(user), Some(parts)) = (&req.user, canonical.as_array_mut()) {
        parts.push(json!({ "user": user }));
    }
    hex::encode(Sha256::digest(canonical.to_string().as_bytes()))
}

fn valid_key(s: &str, what: &str) -> Result<(), ApiError> {
    if s.is_empty() || s.len() > 255 || !s.chars().all(|c| c.is_ascii_graphic()) {
        return Err(ApiError::bad_request(format!(
            "{what} must be 1 to 255 visible ASCII characters"
        )));
    }
    Ok(())
}

/// Why a message was refused under `on_new_message = "reject"`.
const REJECTED: &str =
    "a task is running on this thread: send the message again once it has ended (or send `stop`)";

/// Longest accepted `model`.
const MAX_MODEL_CHARS: usize = 200;

/// A model id as providers spell them (`gpt-4o-mini`,
/// `global.anthropic.claude-haiku-4-5-20251001-v1:0`, `org/model`): the
/// ingest cannot know which the provider serves, so an unknown one fails
/// the task at its first call, with the provider's reason.
pub(crate) fn valid_model(model: &str) -> Result<(), ApiError> {
    let ok = !model.is_empty()
        && model.len() <= MAX_MODEL_CHARS
        && model
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "-_.:/@+".contains(c));
    if ok {
        Ok(())
    } else {
        Err(ApiError::bad_request(format!(
            "`model` must be 1 to {MAX_MODEL_CHARS} characters of letters, digits and - _ . : / @ +"
        )))
    }
}

impl Ingest {
    pub(crate) async fn submit_task(&self, headers: &HeaderMap, body: &Bytes) -> Answer {
        let req: SubmitBody = json_body(headers, body)?;
        let idempotency_key = match headers.get("idempotency-key") {
            None => None,
            Some(v) => {
                let k = v
                    .to_str()
                    .map_err(|_| ApiError::bad_request("Idempotency-Key must be ASCII"))?;
                valid_key(k, "Idempotency-Key")?;
                Some(k.to_owned())
            }
        };
        let (accepted, refused) = self.accept_http(req, idempotency_key).await?;
        if let Submitted::Rejected(running) = &accepted.outcome {
            // `on_new_message = "reject"`: nothing was written.
            return Ok(json(
                StatusCode::CONFLICT,
                &json!({
                    "error": REJECTED,
                    "running_task": running,
                }),
            ));
        }
        let mut body = json!({
            "task_id": accepted.outcome.task_id(),
            "status": accepted.status.as_str()
        });
        match accepted.outcome {
            Submitted::Steered(_) => body["delivered_to_running_task"] = json!(true),
            Submitted::CancelRequested(_) => body["cancel_requested"] = json!(true),
            Submitted::Replied(_) => body["answered_question"] = json!(true),
            Submitted::Queued { behind, .. } => {
                body["queued_behind"] = json!(behind);
                body["waiting_for"] = json!({"kind": "turn", "behind": behind});
            }
            _ => {}
        }
        if !refused.is_empty() {
            body["attachments_refused"] = json!(refused);
        }
        Ok(json(StatusCode::ACCEPTED, &body))
    }

    /// An HTTP-API task from `req` for another surface (MCP, A2A): as
    /// `POST /tasks` accepts it, except that a message refused because a
    /// task runs on its thread (`on_new_message = "reject"`) is a 409
    /// error naming that task.
    pub(crate) async fn submit_http(
        &self,
        req: SubmitBody,
        idempotency_key: Option<String>,
    ) -> Result<(Accepted, Vec<serde_json::Value>), ApiError> {
        let (accepted, refused) = self.accept_http(req, idempotency_key).await?;
        if let Submitted::Rejected(running) = &accepted.outcome {
            return Err(ApiError::new(
                StatusCode::CONFLICT,
                format!("{REJECTED} (running task: {running})"),
            ));
        }
        Ok((accepted, refused))
    }

    /// An HTTP-API task from `req`: checks it, then accepts it as the
    /// API's requester, with the input guard, rate limits, capacity and
    /// idempotency of every HTTP task. Answers what was done and the
    /// files refused.
    async fn accept_http(
        &self,
        req: SubmitBody,
        idempotency_key: Option<String>,
    ) -> Result<(Accepted, Vec<serde_json::Value>), ApiError> {
        if req.input.trim().is_empty() {
            return Err(ApiError::bad_request("`input` must not be empty"));
        }
        if req.input.chars().count() > MAX_INPUT_CHARS {
            return Err(ApiError::bad_request(format!(
                "`input` is longer than {MAX_INPUT_CHARS} characters"
            )));
        }
        if let Some(t) = &req.thread {
            valid_key(t, "`thread`")?;
            if t.starts_with(baton_core::task::SLACK_THREAD_PREFIX) {
                return Err(ApiError::bad_request(
                    "`thread` may not start with `slack:`: that is how Slack conversations are named",
                ));
            }
        }
        if let Some(model) = &req.model {
            valid_model(model)?;
        }
        let user = match &req.user {
            None => None,
            Some(named) => Some(self.named_user(named)?),
        };
        let fingerprint = fingerprint(&req);
        let (attachments, refused) = attachment_entries(req.attachments, self.max_file_bytes)?;
        let accepted = self
            .accept(Submission {
                text: req.input,
                agent: req.agent.unwrap_or_else(|| "default".to_owned()),
                origin: Origin::Http,
                thread: req.thread.map(|t| format!("http:{t}")),
                dedupe_key: idempotency_key.map(|k| format!("http:{k}")),
                fingerprint: Some(fingerprint),
                attachments,
                files: Vec::new(),
                message_ts: None,
                model: req.model,
                user,
            })
            .await?;
        Ok((accepted, refused))
    }

    /// The person `named` in `POST /tasks`: refused (403) unless the
    /// deployment lets the API token name one, 400 when malformed.
    fn named_user(&self, named: &str) -> Result<baton_core::connection::PersonKey, ApiError> {
        if !self.api_may_name_user {
            return Err(ApiError::new(
                StatusCode::FORBIDDEN,
                "this deployment does not let the API name the `user` a task acts for \
                 (`[connection] api_may_name_user = true` in the agents file allows it)",
            ));
        }
        baton_core::connection::person_named(named).map_err(ApiError::bad_request)
    }

    pub(crate) async fn get_task(&self, id: &str) -> Answer {
        let id = parse_id(id)?;
        let task = self
            .store
            .get(&id)
            .await
            .map_err(ApiError::unavailable)?
            .ok_or_else(|| ApiError::not_found(format!("no task {id}")))?;
        let files = self
            .store
            .sent_files(&id)
            .await
            .map_err(ApiError::unavailable)?;
        let mut status = task.status_json();
        self.name_requesters(
            std::slice::from_ref(&task),
            std::slice::from_mut(&mut status),
        )
        .await;
        status["files"] = crate::sent_files::listed(id.as_str(), &files);
        Ok(json(StatusCode::OK, &status))
    }

    /// A conditional update of a task for a route: `change` is re-applied
    /// on conflict; an unknown task is a 404, a store failure a 503.
    pub(crate) async fn update_task<F>(
        &self,
        id: &TaskId,
        mut change: F,
    ) -> Result<baton_core::Task, ApiError>
    where
        F: FnMut(&mut baton_core::Task) -> Option<Vec<baton_core::EntryKind>>,
    {
        match self.store.update(id, None, |t| Ok(change(t))).await {
            Ok((task, _)) => Ok(task),
            Err(StoreError::NotFound(_)) => Err(ApiError::not_found(format!("no task {id}"))),
            Err(e) => Err(ApiError::unavailable(e)),
        }
    }

    pub(crate) async fn cancel_task(&self, id: &str) -> Answer {
        let id = parse_id(id)?;
        let task = self
            .update_task(&id, |t| {
                if t.status().is_terminal() {
                    return None;
                }
                Some(request_cancel(t))
            })
            .await?;
        if task.status().is_terminal() && task.status() != TaskStatus::Cancelled {
            return Err(ApiError::new(
                StatusCode::CONFLICT,
                format!("task already ended with status {}", task.status().as_str()),
            ));
        }
        if !task.status().is_terminal() {
            // A wake makes a queued or handed-over task end promptly.
            self.queue
                .send(&Wake::new(id.clone(), "cancel").to_body(), Duration::ZERO)
                .await
                .map_err(ApiError::unavailable)?;
        }
        Ok(json(
            StatusCode::ACCEPTED,
            &json!({"task_id": id, "status": task.status().as_str(), "cancel_requested": true}),
        ))
    }

    pub(crate) async fn task_events(&self, id: &str, query: Option<&str>) -> Answer {
        let id = parse_id(id)?;
        #[derive(Deserialize)]
        struct Q {
            after: Option<i64>,
        }
        let q: Q = serde_urlencoded::from_str(query.unwrap_or(""))
            .map_err(|e| ApiError::bad_request(format!("invalid query: {e}")))?;
        if self
            .store
            .get(&id)
            .await
            .map_err(ApiError::unavailable)?
            .is_none()
        {
            return Err(ApiError::not_found(format!("no task {id}")));
        }
        let after = match q.after {
            None => None,
            Some(n) if n < 0 => None,
            Some(n) => Some(n as u64),
        };
        let entries = self
            .store
            .entries(&id, after, MAX_EVENTS)
            .await
            .map_err(ApiError::unavailable)?;
        let events: Vec<serde_json::Value> = entries.iter().map(event_json).collect();
        Ok(json(
            StatusCode::OK,
            &json!({"task_id": id, "events": events}),
        ))
    }

    pub(crate) async fn task_trace(&self, id: &str) -> Answer {
        let id = parse_id(id)?;
        let task = self
            .store
            .get(&id)
            .await
            .map_err(ApiError::unavailable)?
            .ok_or_else(|| ApiError::not_found(format!("no task {id}")))?;
        let blobs = self.store.blobs();
        let keys = blobs
            .list(&format!("traces/{id}/"))
            .await
            .map_err(ApiError::unavailable)?;
        let mut spans: Vec<Span> = Vec::new();
        for key in keys {
            if let Some(bytes) = blobs.get(&key).await.map_err(ApiError::unavailable)? {
                match serde_json::from_slice::<Vec<Span>>(&bytes) {
                    Ok(s) => spans.extend(s),
                    Err(e) => tracing::warn!(%key, error = %e, "unreadable trace blob skipped"),
                }
            }
        }
        if !spans.iter().any(|s| s.name == "task") {
            // Still running: the task span so far.
            let mut attrs = serde_json::Map::new();
            attrs.insert("status".into(), json!(task.status().as_str()));
            attrs.insert("steps".into(), json!(task.budget.steps));
            attrs.insert("segments".into(), json!(task.budget.segments));
            attrs.insert("in_progress".into(), json!(true));
            spans.push(Span {
                span_id: baton_core::trace::task_span_id(&id),
                parent_id: None,
                name: "task".into(),
                start_ms: task.created_at,
                end_ms: Instant::now().max(task.updated_at),
                attributes: attrs,
            });
        }
        spans.sort_by_key(|s| (s.start_ms, s.end_ms));
        Ok(json(
            StatusCode::OK,
            &json!({"task_id": id, "spans": spans}),
        ))
    }
}

/// An event as the API gives it (`GET /tasks/{id}/events`, the stream):
/// its time in RFC 3339, and of a file its name, type and size, not its
/// content.
pub(crate) fn event_json(e: &Entry) -> serde_json::Value {
    let mut v = serde_json::to_value(e).unwrap_or_default();
    v["at"] = json!(e.at.to_string());
    if let Some(o) = v
        .as_object_mut()
        .filter(|_| e.kind.type_name() == "attachment")
    {
        o.remove("text");
        o.remove("data_base64");
    }
    v
}

#[cfg(test)]
mod user_tests {
    use crate::{ApiToken, Ingest};
    use baton_core::connection::PersonKey;
    use baton_core::{TaskId, TaskStore};
    use baton_embedded::{EmbeddedBackend, QueueConfig};
    use baton_settings::{AgentConfig, Agents};
    use bytes::Bytes;
    use serde_json::{json, Value};

    const TOKEN: &str = "test-token-0123456789";

    struct Fixture {
        _dir: tempfile::TempDir,
        store: TaskStore,
        ingest: Ingest,
    }

    fn fixture(api_may_name_user: bool) -> Fixture {
        let dir = tempfile::tempdir().unwrap();
        let b = EmbeddedBackend::open(dir.path(), QueueConfig::default()).unwrap();
        let store = TaskStore::new(b.table.clone(), b.blobs.clone());
        let agents = Agents::new(AgentConfig::new("default", "scripted"), Vec::new());
        let token = Some(ApiToken::parse(TOKEN).unwrap());
        let ingest = Ingest::new(store.clone(), b.queue.clone(), agents, token, None)
            .with_api_may_name_user(api_may_name_user);
        Fixture {
            _dir: dir,
            store,
            ingest,
        }
    }

    async fn post(ingest: &Ingest, body: Value) -> (http::StatusCode, Value) {
        let req = http::Request::builder()
            .method("POST")
            .uri("/tasks")
            .header("authorization", format!("Bearer {TOKEN}"))
            .header("content-type", "application/json")
            .body(Bytes::from(body.to_string()))
            .unwrap();
        let resp = ingest.handle(req).await;
        let body = serde_json::from_slice(resp.body()).unwrap_or(Value::Null);
        (resp.status(), body)
    }

    async fn acting_for(f: &Fixture, answer: &Value) -> Option<PersonKey> {
        let id = TaskId::parse(answer["task_id"].as_str().unwrap()).unwrap();
        f.store.get(&id).await.unwrap().unwrap().acting_for()
    }

    #[tokio::test]
    async fn a_user_is_named_only_where_the_deployment_allows_it() {
        let f = fixture(false);
        let (status, body) = post(&f.ingest, json!({"input": "hi", "user": "alice"})).await;
        assert_eq!(status, http::StatusCode::FORBIDDEN);
        assert!(
            body["error"]
                .as_str()
                .unwrap_or_default()
                .contains("api_may_name_user"),
            "{body}"
        );
        let listed = f
            .store
            .list_tasks(&Default::default(), 10, None)
            .await
            .map(|p| p.tasks.len());
        assert_eq!(listed.ok(), Some(0), "nothing created");
        // Without `user`, a task acts for nobody, as before.
        let (status, body) = post(&f.ingest, json!({"input": "hi"})).await;
        assert_eq!(status, http::StatusCode::ACCEPTED);
        assert_eq!(acting_for(&f, &body).await, None);
    }

    #[tokio::test]
    async fn a_named_user_is_a_slack_person_or_an_api_id() {
        let f = fixture(true);
        let (status, body) = post(&f.ingest, json!({"input": "hi", "user": "alice@x.org"})).await;
        assert_eq!(status, http::StatusCode::ACCEPTED, "{body}");
        assert_eq!(
            acting_for(&f, &body).await,
            Some(PersonKey::new("api", "alice@x.org"))
        );
        let (status, body) = post(&f.ingest, json!({"input": "hi", "user": "slack:T1:U2"})).await;
        assert_eq!(status, http::StatusCode::ACCEPTED, "{body}");
        assert_eq!(
            acting_for(&f, &body).await,
            Some(PersonKey::new("T1", "U2"))
        );
        for bad in ["", "a b", "slack:T1", "x:y", &"x".repeat(129)] {
            let (status, body) = post(&f.ingest, json!({"input": "hi", "user": bad})).await;
            assert_eq!(status, http::StatusCode::BAD_REQUEST, "{bad}: {body}");
        }
    }
}
