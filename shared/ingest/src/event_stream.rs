//! `GET /tasks/{id}/stream`: a task's events live, as Server-Sent Events
//! (docs/api.md#live-event-streams). Each event of `GET /tasks/{id}/events`
//! is one SSE event (`id:` its seq, `event:` its type, `data:` its JSON);
//! `event: end` with the task's outcome closes the stream when the task
//! ends. A stream also closes, between events, by the caller's limit
//! ([`Delivery::within`]); the client reconnects with `Last-Event-ID` and
//! gets every later event once.

use crate::response::parse_id;
use crate::response::ApiError;
use crate::tasks::event_json;
use crate::watch::{watch, Seen, POLL_INTERVAL};
use crate::{sse, Body, Delivery, Ingest};
use bytes::Bytes;
use futures::stream::{self, BoxStream, StreamExt};
use http::{header, HeaderMap, HeaderValue, Response, StatusCode};
use serde_json::json;
use std::time::Duration;
use tokio::time::Instant;

/// A comment is sent after this long without an event, so proxies and
/// load balancers do not close the stream as idle.
pub(crate) const HEARTBEAT: Duration = Duration::from_secs(15);

/// A caller that cannot stream gets its answer once events came and this
/// long passed (a long poll), not only at its limit.
const BUFFERED_LINGER: Duration = Duration::from_secs(1);

impl Ingest {
    pub(crate) async fn task_stream(
        &self,
        id: &str,
        headers: &HeaderMap,
        query: Option<&str>,
        delivery: Delivery,
    ) -> Result<Response<Body>, ApiError> {
        let id = parse_id(id)?;
        let after = sse::resume_after(headers, query)?;
        // A 404 must come before the 200 that starts the stream.
        if self
            .store
            .get(&id)
            .await
            .map_err(ApiError::unavailable)?
            .is_none()
        {
            return Err(ApiError::not_found(format!("no task {id}")));
        }
        let events = watch(self.store.clone(), id, after, POLL_INTERVAL);
        let mut r = Response::new(Body::Stream(frames(events, delivery, HEARTBEAT)));
        *r.status_mut() = StatusCode::OK;
        let h = r.headers_mut();
        h.insert(
            header::CONTENT_TYPE,
            HeaderValue::from_static("text/event-stream"),
        );
        h.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-cache"));
        // nginx and some proxies buffer responses unless told not to.
        h.insert("x-accel-buffering", HeaderValue::from_static("no"));
        Ok(r)
    }
}

/// The SSE bytes of a watch: the `retry:` hint, then each event, a
/// heartbeat comment when idle for `heartbeat` (when streaming), and
/// `event: end` when the task ended; cut, between events, by `delivery`'s
/// limit.
pub(crate) fn frames(
    events: BoxStream<'static, Result<Seen, baton_core::StoreError>>,
    delivery: Delivery,
    heartbeat: Duration,
) -> BoxStream<'static, Bytes> {
    let now = Instant::now();
    let state = Frames {
        events,
        streaming: delivery.streaming,
        until: now + delivery.within,
        heartbeat,
        next_beat: now + heartbeat,
        started: false,
        done: false,
    };
    Box::pin(stream::unfold(state, |mut s| async move {
        let frame = s.next().await?;
        Some((frame, s))
    }))
}

struct Frames {
    events: BoxStream<'static, Result<Seen, baton_core::StoreError>>,
    streaming: bool,
    until: Instant,
    heartbeat: Duration,
    next_beat: Instant,
    started: bool,
    done: bool,
}

impl Frames {
    async fn next(&mut self) -> Option<Bytes> {
        if self.done {
            return None;
        }
        if !self.started {
            self.started = true;
            return Some(sse::retry());
        }
        loop {
            tokio::select! {
                biased;
                // The limit comes first: dropping the pending read loses
                // nothing, the client resumes after the last id it got.
                () = tokio::time::sleep_until(self.until) => {
                    self.done = true;
                    return None;
                }
                item = self.events.next() => {
                    self.next_beat = Instant::now() + self.heartbeat;
                    return self.frame(item);
                }
                () = tokio::time::sleep_until(self.next_beat) => {
                    self.next_beat = Instant::now() + self.heartbeat;
                    if self.streaming {
                        return Some(sse::comment("keep-alive"));
                    }
                }
            }
        }
    }

    fn frame(&mut self, item: Option<Result<Seen, baton_core::StoreError>>) -> Option<Bytes> {
        match item {
            Some(Ok(Seen::Event(e))) => {
                if !self.streaming {
                    self.until = self.until.min(Instant::now() + BUFFERED_LINGER);
                }
                let data = event_json(&e).to_string();
                Some(sse::event(Some(e.seq), e.kind.type_name(), &data))
            }
            Some(Ok(Seen::Ended(task))) => {
                self.done = true;
                let data = json!({
                    "task_id": task.id.to_string(),
                    "status": task.status().as_str(),
                    "result": task.answer.result,
                    "error": task.answer.error,
                });
                Some(sse::event(None, "end", &data.to_string()))
            }
            Some(Err(e)) => {
                // The client reconnects and resumes; the cause is logged,
                // not sent.
                tracing::warn!(error = %e, "event stream cut by a store error");
                self.done = true;
                Some(sse::comment("temporarily unavailable, reconnect"))
            }
            None => {
                self.done = true;
                None
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use baton_core::{now_ms, EntryKind, Limits, Origin, Task, TaskId, TaskStatus, TaskStore};
    use baton_embedded::{EmbeddedBackend, QueueConfig};

    async fn ended_task(events: usize) -> (tempfile::TempDir, TaskStore, TaskId) {
        let dir = tempfile::tempdir().unwrap();
        let backend = EmbeddedBackend::open(dir.path(), QueueConfig::default()).unwrap();
        let store = TaskStore::new(backend.table.clone(), backend.blobs.clone());
        let t = Task::new(
            TaskId::generate(),
            "default",
            Origin::Http,
            None,
            Limits::default(),
            now_ms(),
        );
        let text = "hi".to_owned();
        store
            .create(&t, vec![EntryKind::UserMessage { text, from: None }], None)
            .await
            .unwrap();
        let mut t = store.get(&t.id).await.unwrap().unwrap();
        for i in 1..events {
            if i + 1 == events {
                t.finish(TaskStatus::Succeeded);
                t.answer.result = Some("done".into());
            }
            let text = format!("m{i}");
            store
                .commit(&mut t, vec![EntryKind::UserMessage { text, from: None }])
                .await
                .unwrap();
        }
        (dir, store, t.id)
    }

    fn text(frames: &[Bytes]) -> String {
        frames
            .iter()
            .map(|b| String::from_utf8_lossy(b).into_owned())
            .collect()
    }

    #[tokio::test]
    async fn an_ended_task_streams_its_events_then_end() {
        let (_dir, store, id) = ended_task(3).await;
        let w = watch(store, id.clone(), None, Duration::from_millis(5));
        let delivery = Delivery {
            streaming: true,
            within: Duration::from_secs(60),
        };
        let out: Vec<Bytes> = frames(w, delivery, HEARTBEAT).collect().await;
        let all = text(&out);
        assert!(all.starts_with("retry: 3000\n\n"), "{all}");
        let ids: Vec<&str> = all.lines().filter_map(|l| l.strip_prefix("id: ")).collect();
        assert_eq!(ids, ["0", "1", "2"], "{all}");
        assert_eq!(all.matches("event: user_message\n").count(), 3, "{all}");
        let end = all.rsplit("event: end\ndata: ").next().unwrap();
        let end: serde_json::Value = serde_json::from_str(end.trim()).unwrap();
        assert_eq!(end["status"], "succeeded");
        assert_eq!(end["result"], "done");
        assert_eq!(end["task_id"], id.to_string());
    }

    #[tokio::test(start_paused = true)]
    async fn a_running_task_gets_heartbeats_and_is_cut_at_the_limit() {
        let (_dir, store, id) = ended_task(1).await;
        let w = watch(store, id, None, Duration::from_secs(1));
        let delivery = Delivery {
            streaming: true,
            within: Duration::from_secs(40),
        };
        let out: Vec<Bytes> = frames(w, delivery, HEARTBEAT).collect().await;
        let all = text(&out);
        // 40 s with a beat every 15 s idle: two, and no end (the task runs).
        assert_eq!(all.matches(": keep-alive\n\n").count(), 2, "{all}");
        assert_eq!(all.matches("id: ").count(), 1, "{all}");
        assert!(!all.contains("event: end"), "{all}");
    }

    #[tokio::test(start_paused = true)]
    async fn a_buffered_caller_gets_no_heartbeats_and_an_early_answer() {
        let (_dir, store, id) = ended_task(1).await;
        let w = watch(store, id, None, Duration::from_millis(200));
        let delivery = Delivery {
            streaming: false,
            within: Duration::from_secs(25),
        };
        let started = Instant::now();
        let out: Vec<Bytes> = frames(w, delivery, HEARTBEAT).collect().await;
        let all = text(&out);
        assert!(!all.contains("keep-alive"), "{all}");
        assert_eq!(all.matches("id: ").count(), 1, "{all}");
        // Paused time: the linger after the first event, not the limit.
        assert!(started.elapsed() < Duration::from_secs(25));
    }
}
