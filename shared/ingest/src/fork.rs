//! `POST /tasks/{id}/fork`: a new task from a step of another
//! ([`baton_core::fork`]), linked both ways, that goes on from there on the
//! chosen agent, with its tools live or recorded.

use crate::response::parse_id;
use crate::response::{json, json_body, Answer, ApiError};
use crate::tasks::{valid_model, MAX_INPUT_CHARS};
use crate::Ingest;
use baton_core::fork::{fork, ForkRequest};
use baton_core::{Created, Instant, Origin, StoreError, Task, TaskId, TaskStatus, ToolMode, Wake};
use bytes::Bytes;
use http::{HeaderMap, StatusCode};
use serde::Deserialize;
use serde_json::json;
use std::time::Duration;

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct ForkBody {
    /// Read as any JSON value, so a wrong one is refused naming the field.
    from_step: serde_json::Value,
    #[serde(default)]
    agent: Option<String>,
    #[serde(default)]
    model: Option<String>,
    #[serde(default)]
    input: Option<String>,
    #[serde(default)]
    tools: Option<String>,
}

/// `from_step`: a whole number of at most `u32::MAX`.
fn from_step(v: &serde_json::Value) -> Result<u32, ApiError> {
    v.as_u64()
        .and_then(|n| u32::try_from(n).ok())
        .ok_or_else(|| {
            ApiError::bad_request(format!(
                "`from_step` must be a step number (0 or more), not {v}"
            ))
        })
}

/// `tools`: `live` (the default) or `recorded`.
fn tool_mode(v: Option<&str>) -> Result<ToolMode, ApiError> {
    match v {
        None | Some("live") => Ok(ToolMode::Live),
        Some("recorded") => Ok(ToolMode::Recorded),
        Some(other) => Err(ApiError::bad_request(format!(
            "`tools` must be `live` or `recorded`, not `{}`",
            other.chars().take(40).collect::<String>()
        ))),
    }
}

impl Ingest {
    pub(crate) async fn fork_task(&self, id: &str, headers: &HeaderMap, body: &Bytes) -> Answer {
        let source_id = parse_id(id)?;
        let req: ForkBody = json_body(headers, body)?;
        let step = from_step(&req.from_step)?;
        let tools = tool_mode(req.tools.as_deref())?;
        if let Some(input) = &req.input {
            if input.trim().is_empty() {
                return Err(ApiError::bad_request("`input` must not be empty"));
            }
            if input.chars().count() > MAX_INPUT_CHARS {
                return Err(ApiError::bad_request(format!(
                    "`input` is longer than {MAX_INPUT_CHARS} characters"
                )));
            }
        }
        if let Some(model) = &req.model {
            valid_model(model)?;
        }
        let source = self
            .store
            .get(&source_id)
            .await
            .map_err(ApiError::unavailable)?
            .ok_or_else(|| ApiError::not_found(format!("no task {source_id}")))?;
        let agent_name = req.agent.as_deref().unwrap_or(&source.agent);
        let agent = self
            .agents
            .get(agent_name)
            .ok_or_else(|| ApiError::bad_request(format!("unknown agent `{agent_name}`")))?;
        let transcript = self
            .store
            .transcript(&source_id)
            .await
            .map_err(ApiError::unavailable)?;
        let now = Instant::now();
        // Answered on its status, never in a chat: a fork joins no
        // conversation and posts nowhere.
        let fresh = Task::new(
            TaskId::generate(),
            &agent.name,
            Origin::Http,
            None,
            agent.task_limits(now),
            now,
        );
        let ask = ForkRequest {
            from_step: step,
            input: req.input,
            tools,
        };
        let (mut task, first) = fork(&source, &transcript, &ask, fresh)
            .map_err(|e| ApiError::bad_request(e.to_string()))?;
        // Without one of its own, the fork asks the model the source was
        // pinned to, if any.
        task.model = req.model.or_else(|| source.model.clone());
        let id = match self.store.create(&task, first, None).await {
            Ok(Created::New(id)) | Ok(Created::Duplicate(id)) => id,
            Err(e) => return Err(ApiError::unavailable(e)),
        };
        // The source may be running: a conditional update its segment's
        // own commits re-apply their change over, as for a message sent in.
        match self
            .store
            .update(&source_id, None, |t| Ok(t.fork.add(&id).then(Vec::new)))
            .await
        {
            Ok(_) => {}
            Err(StoreError::NotFound(_)) => {
                tracing::warn!(task_id = %id, source = %source_id, "the forked task vanished before it was linked to its fork");
            }
            Err(e) => {
                tracing::warn!(task_id = %id, source = %source_id, error = %e, "could not name the fork on its source task");
            }
        }
        self.metrics.emit(
            &baton_core::metric::Measurement::for_agent(&task.agent)
                .count(baton_core::metric::TASKS_CREATED)
                .property("task_id", id.to_string()),
        );
        let queued = self
            .queue
            .send(&Wake::new(id.clone(), "created").to_body(), Duration::ZERO)
            .await;
        // Accepted all the same: the reaper re-sends the wake of a queued
        // task nobody runs.
        if let Err(e) = &queued {
            tracing::warn!(task_id = %id, error = %e, "the fork's wake was not sent; the reaper will send it");
        }
        Ok(json(
            StatusCode::ACCEPTED,
            &json!({"task_id": id, "status": TaskStatus::Queued.as_str()}),
        ))
    }
}

#[cfg(test)]
mod tests {
    use crate::{ApiToken, Ingest};
    use baton_core::{
        now_ms, EntryKind, Limits, Origin, Task, TaskId, TaskStore, ToolCall, ToolMode, Usage,
        WorkQueue,
    };
    use baton_embedded::{EmbeddedBackend, QueueConfig};
    use baton_settings::{AgentConfig, Agents};
    use bytes::Bytes;
    use serde_json::{json, Value};
    use std::time::Duration;

    const TOKEN: &str = "test-token-0123456789abcdef";

    struct Rig {
        _dir: tempfile::TempDir,
        backend: EmbeddedBackend,
        store: TaskStore,
        ingest: Ingest,
    }

    fn call(id: &str) -> ToolCall {
        ToolCall {
            id: id.into(),
            name: "fetch".into(),
            arguments: json!({"id": id}),
        }
    }

    fn assistant(step: u32, id: &str) -> EntryKind {
        EntryKind::AssistantMessage {
            step,
            text: String::new(),
            tool_calls: vec![call(id)],
            usage: Usage::default(),
            model: "m".into(),
        }
    }

    /// A Slack task in a thread at step 2, whose call has no result yet.
    async fn rig() -> (Rig, TaskId) {
        let dir = tempfile::tempdir().unwrap();
        let backend = EmbeddedBackend::open(dir.path(), QueueConfig::default()).unwrap();
        let store = TaskStore::new(backend.table.clone(), backend.blobs.clone());
        let agents = Agents::new(
            AgentConfig::new("default", "scripted"),
            vec![AgentConfig::new("other", "scripted")],
        );
        let ingest = Ingest::new(
            store.clone(),
            backend.queue.clone(),
            agents,
            Some(ApiToken::parse(TOKEN).unwrap()),
            None,
        );
        let mut t = Task::new(
            TaskId::generate(),
            "default",
            Origin::Slack {
                team_id: "T1".into(),
                channel: "C1".into(),
                thread_ts: "1.0".into(),
                user: "U1".into(),
                channel_type: None,
            },
            Some("slack:T1:C1:1.0".into()),
            Limits::default(),
            now_ms(),
        );
        t.budget.steps = 2;
        let entries = vec![
            EntryKind::UserMessage {
                text: "go".into(),
                from: None,
            },
            assistant(1, "a"),
            EntryKind::ToolResult {
                step: 1,
                call_id: "a".into(),
                name: "fetch".into(),
                content: "A".into(),
                is_error: false,
                truncated_chars: 0,
            },
            assistant(2, "b"),
        ];
        store.create(&t, entries, None).await.unwrap();
        let id = t.id.clone();
        let rig = Rig {
            _dir: dir,
            backend,
            store,
            ingest,
        };
        (rig, id)
    }

    async fn post(r: &Rig, path: &str, body: &str) -> (u16, Value) {
        let req = http::Request::builder()
            .method("POST")
            .uri(path)
            .header("authorization", format!("Bearer {TOKEN}"))
            .header("content-type", "application/json")
            .body(Bytes::copy_from_slice(body.as_bytes()))
            .unwrap();
        let resp = r.ingest.handle(req).await;
        (
            resp.status().as_u16(),
            serde_json::from_slice(resp.body()).unwrap(),
        )
    }

    async fn wakes(r: &Rig) -> usize {
        r.backend
            .queue
            .receive(10, Duration::from_millis(50))
            .await
            .unwrap()
            .len()
    }

    #[tokio::test]
    async fn a_fork_is_linked_both_ways_and_leaves_its_source_as_it_was() {
        let (r, src) = rig().await;
        let before = r.store.get(&src).await.unwrap().unwrap();
        let (code, body) = post(
            &r,
            &format!("/tasks/{src}/fork"),
            r#"{"from_step": 1, "agent": "other", "input": "instead", "tools": "recorded", "model": "m2"}"#,
        )
        .await;
        assert_eq!(code, 202, "{body}");
        assert_eq!(body["status"], "queued");
        let fork_id = TaskId::parse(body["task_id"].as_str().unwrap()).unwrap();
        assert_eq!(wakes(&r).await, 1);

        let fork = r.store.get(&fork_id).await.unwrap().unwrap();
        assert_eq!(fork.agent, "other");
        assert_eq!(
            (fork.source.origin.clone(), fork.conversation.thread.clone()),
            (Origin::Http, None)
        );
        assert_eq!(fork.fork.tools, ToolMode::Recorded);
        assert_eq!(fork.model.as_deref(), Some("m2"));
        let status = fork.status_json();
        assert_eq!(status["forked_from"], json!({"task_id": src, "step": 1}));
        assert_eq!(status["tools"], "recorded");
        let kinds: Vec<_> = r
            .store
            .transcript(&fork_id)
            .await
            .unwrap()
            .into_iter()
            .map(|e| (e.seq, e.kind))
            .collect();
        assert_eq!(kinds.len(), 3);
        assert_eq!(
            kinds[0],
            (
                0,
                EntryKind::UserMessage {
                    text: "instead".into(),
                    from: Some(baton_core::Author::Person(baton_core::Actor::Api {
                        person: None
                    })),
                }
            )
        );

        let after = r.store.get(&src).await.unwrap().unwrap();
        assert_eq!(after.fork.forks, vec![fork_id.clone()]);
        assert_eq!(after.status_json()["forks"], json!([fork_id]));
        assert_eq!(
            (after.status(), after.budget.steps, after.next_seq),
            (before.status(), before.budget.steps, before.next_seq)
        );
    }

    #[tokio::test]
    async fn bad_requests_are_refused_naming_what_is_wrong_and_change_nothing() {
        let (r, src) = rig().await;
        let path = format!("/tasks/{src}/fork");
        let cases = [
            (
                path.as_str(),
                r#"{"from_step": 2}"#,
                400,
                "tool calls without results",
            ),
            (
                path.as_str(),
                r#"{"from_step": 3}"#,
                400,
                "`from_step` 3 is beyond",
            ),
            (path.as_str(), r#"{"from_step": -1}"#, 400, "`from_step`"),
            (path.as_str(), r#"{"from_step": 1e30}"#, 400, "`from_step`"),
            (path.as_str(), r#"{"from_step": "1"}"#, 400, "`from_step`"),
            (
                path.as_str(),
                r#"{"from_step": 1, "tools": "sim"}"#,
                400,
                "`tools`",
            ),
            (
                path.as_str(),
                r#"{"from_step": 1, "agent": "nope"}"#,
                400,
                "unknown agent `nope`",
            ),
            (
                path.as_str(),
                r#"{"from_step": 1, "input": " "}"#,
                400,
                "`input`",
            ),
            (
                path.as_str(),
                r#"{"from_step": 1, "extra": 1}"#,
                400,
                "unknown field",
            ),
            (path.as_str(), r#"{"from_step": 1"#, 400, "invalid JSON"),
            (path.as_str(), r#"{}"#, 400, "from_step"),
            (
                "/tasks/not-an-id!/fork",
                r#"{"from_step": 1}"#,
                400,
                "not a task id",
            ),
        ];
        for (p, body, code, says) in cases {
            let (got, answer) = post(&r, p, body).await;
            assert_eq!(got, code, "{body}: {answer}");
            let error = answer["error"].as_str().unwrap();
            assert!(error.contains(says), "{body}: {error}");
        }
        let unknown = format!("/tasks/{}/fork", TaskId::generate());
        assert_eq!(post(&r, &unknown, r#"{"from_step": 1}"#).await.0, 404);
        assert_eq!(wakes(&r).await, 0);
        assert!(r
            .store
            .get(&src)
            .await
            .unwrap()
            .unwrap()
            .fork
            .forks
            .is_empty());
    }
}
