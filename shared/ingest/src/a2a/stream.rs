//! A task's A2A stream (`SendStreamingMessage`, `SubscribeToTask`): the
//! task, then a `statusUpdate` for each change of its state and each
//! status text it records, the answer as an `artifactUpdate`, and the
//! final status; each a JSON-RPC response in one server-sent event. It
//! ends when the task ends or needs input, or when the caller's time for
//! a stream is up (the client subscribes again).

use super::wire::{self, State};
use super::{rpc_result, POLL};
use crate::{Body, Ingest};
use baton_core::{EntryKind, Task, TaskStatus};
use bytes::Bytes;
use futures::StreamExt;
use http::{header, HeaderValue, Response, StatusCode};
use serde_json::Value;
use std::collections::VecDeque;
use std::time::Duration;

/// Most events read per poll.
const EVENTS_PER_POLL: usize = 100;

/// What the stream has said so far, and what it still has to say.
pub(crate) struct TaskEvents {
    ingest: Ingest,
    task: Task,
    rpc_id: Value,
    /// When the stream must have ended.
    until: std::time::Instant,
    /// Events read, not yet sent.
    pending: VecDeque<Value>,
    /// The last state sent.
    sent: Option<State>,
    /// The last task event read.
    after: Option<u64>,
    /// Whether the first read is done (the first event goes at once).
    started: bool,
    done: bool,
}

impl TaskEvents {
    /// The stream of `task`, ending within `within` of now.
    pub(super) fn new(ingest: Ingest, task: Task, rpc_id: Value, within: Duration) -> Self {
        // Past events are not replayed: the task itself says where it is.
        let after = task.next_seq.checked_sub(1);
        TaskEvents {
            ingest,
            until: std::time::Instant::now() + within.saturating_sub(super::MARGIN),
            pending: VecDeque::from([serde_json::json!({ "task": wire::task_json(&task) })]),
            sent: Some(wire::state_of(&task)),
            task,
            rpc_id,
            after,
            started: false,
            done: false,
        }
    }

    /// The next event to send, or `None` once the stream is over.
    async fn next(&mut self) -> Option<Value> {
        loop {
            if let Some(e) = self.pending.pop_front() {
                return Some(e);
            }
            if self.done {
                return None;
            }
            if self.started {
                if std::time::Instant::now() >= self.until {
                    return None;
                }
                tokio::time::sleep(POLL).await;
            }
            self.started = true;
            if !self.poll().await {
                return None;
            }
        }
    }

    /// Reads the task and its new events into `pending`; false when they
    /// cannot be read (the stream ends; the client may subscribe again).
    async fn poll(&mut self) -> bool {
        let store = &self.ingest.store;
        let entries = match store
            .entries(&self.task.id, self.after, EVENTS_PER_POLL)
            .await
        {
            Ok(e) => e,
            Err(e) => {
                tracing::warn!(task_id = %self.task.id, error = %e, "A2A stream: events unreadable");
                return false;
            }
        };
        let task = match store.get(&self.task.id).await {
            Ok(Some(t)) => t,
            Ok(None) => return false,
            Err(e) => {
                tracing::warn!(task_id = %self.task.id, error = %e, "A2A stream: task unreadable");
                return false;
            }
        };
        for entry in &entries {
            self.after = Some(entry.seq);
            if let EntryKind::Status {
                status: TaskStatus::Running,
                detail,
            } = &entry.kind
            {
                if !detail.trim().is_empty() {
                    let id = format!("{}-event-{}", task.id, entry.seq);
                    let mut status = serde_json::json!({
                        "state": State::Working.as_str(),
                        "timestamp": entry.at.to_string(),
                    });
                    status["message"] = wire::agent_message(&task, &id, detail);
                    self.pending.push_back(wire::status_update(&task, status));
                    self.sent = Some(State::Working);
                }
            }
        }
        // More events than one read holds: read on before the state.
        if entries.len() == EVENTS_PER_POLL {
            self.task = task;
            return true;
        }
        let state = wire::state_of(&task);
        if self.sent != Some(state) {
            if state == State::Completed {
                if let Some(artifact) = wire::answer_artifact(&task) {
                    self.pending
                        .push_back(wire::artifact_update(&task, artifact));
                }
            }
            self.pending
                .push_back(wire::status_update(&task, wire::status(&task)));
            self.sent = Some(state);
        }
        self.done = state.settles();
        self.task = task;
        true
    }
}

/// One server-sent event carrying `data` (compact JSON: one line).
fn frame(data: &Value) -> Bytes {
    Bytes::from(format!("data: {data}\n\n"))
}

/// The `text/event-stream` response of `events`.
pub(super) fn response(events: TaskEvents) -> Response<Body> {
    let stream = futures::stream::unfold(events, |mut events| async move {
        let event = events.next().await?;
        let framed = frame(&rpc_result(&events.rpc_id, event));
        Some((framed, events))
    })
    .boxed();
    let mut r = Response::new(Body::Stream(stream));
    *r.status_mut() = StatusCode::OK;
    let h = r.headers_mut();
    h.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("text/event-stream"),
    );
    h.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    r
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_event_is_one_data_line() {
        let f = frame(&serde_json::json!({"a": "two\nlines"}));
        assert_eq!(&f[..], b"data: {\"a\":\"two\\nlines\"}\n\n");
    }
}
