//! The ingest's span of each task it creates (`ingest`, exported as
//! `baton.ingest`): from the request's receipt to the task being queued,
//! in the task's trace, under its root span (whose id is derived from the
//! task id, so the ingest can name it long before the worker sends it).
//!
//! Only with an exporter ([`Ingest::with_span_export`]); without one,
//! nothing here runs. The export is awaited before the answer goes back
//! (bounded by the exporter's own timeout), so a Lambda freeze loses
//! nothing (within a second: Slack's 3-second deadline comes first). The span carries no content, and is not written to the blob
//! store: `baton trace` shows what the worker ran.

use crate::Ingest;
use baton_core::trace::{new_span_id, task_span_id};
use baton_core::{Instant, Origin, Span, SpanBatch, Task};
use serde_json::{json, Map};
use std::collections::HashMap;
use std::future::Future;

/// The longest the ingest waits for its span to be sent.
const EXPORT_WAIT: std::time::Duration = std::time::Duration::from_millis(1000);

tokio::task_local! {
    /// When the request being handled arrived: the span's start. A task
    /// local, so the routes that create tasks need not pass it along.
    static RECEIVED: Instant;
}

/// Runs `handling` (one request) with its receipt time recorded, when
/// there is an exporter; as it is otherwise.
pub(crate) async fn timed<F: Future>(ingest: &Ingest, handling: F) -> F::Output {
    if ingest.span_export.is_some() {
        RECEIVED.scope(Instant::now(), handling).await
    } else {
        handling.await
    }
}

impl Ingest {
    /// Exports the span of `task`, which this request created; `queued`:
    /// its wake was sent (otherwise the span is an error).
    pub(crate) async fn export_ingest_span(&self, task: &Task, queued: bool) {
        let Some(export) = &self.span_export else {
            return;
        };
        let source = match task.source.origin {
            Origin::Http => "http",
            Origin::Slack { .. } => "slack",
        };
        let mut attributes = Map::new();
        attributes.insert("source".into(), json!(source));
        attributes.insert("error".into(), json!(!queued));
        let span = Span {
            span_id: new_span_id(),
            parent_id: Some(task_span_id(&task.id)),
            name: "ingest".into(),
            // Called outside a request (tests calling `submit`): from the
            // task's creation.
            start_ms: RECEIVED.try_with(|at| *at).unwrap_or(task.created_at),
            end_ms: Instant::now(),
            attributes,
        };
        let sent = export.export(SpanBatch {
            task_id: task.id.clone(),
            trace_root: task.trace_root().clone(),
            parent_task: task.source.parent.as_ref().map(|p| p.task_id.clone()),
            agent: task.agent.clone(),
            spans: vec![span],
            content: HashMap::new(),
        });
        // Slack wants its answer within 3 seconds: a slow collector costs
        // this span, never the acknowledgement.
        if tokio::time::timeout(EXPORT_WAIT, sent).await.is_err() {
            tracing::warn!(task_id = %task.id, "the ingest span was not exported in time; dropped");
        }
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use crate::{ApiToken, Ingest};
    use baton_core::trace::task_span_id;
    use baton_core::{Instant, SpanBatch, SpanExport, TaskId, TaskStore};
    use baton_embedded::{EmbeddedBackend, QueueConfig};
    use baton_settings::{AgentConfig, Agents};
    use bytes::Bytes;
    use serde_json::{json, Value};
    use std::sync::{Arc, Mutex};

    const TOKEN: &str = "test-token-0123456789";

    /// Keeps every batch it is given.
    #[derive(Default)]
    pub(crate) struct Recorded(pub(crate) Mutex<Vec<SpanBatch>>);

    #[async_trait::async_trait]
    impl SpanExport for Recorded {
        fn wants_content(&self) -> bool {
            true
        }

        async fn export(&self, batch: SpanBatch) {
            self.0.lock().unwrap().push(batch);
        }
    }

    async fn post(ingest: &Ingest, body: Value, key: &str) -> Value {
        let req = http::Request::builder()
            .method("POST")
            .uri("/tasks")
            .header("authorization", format!("Bearer {TOKEN}"))
            .header("content-type", "application/json")
            .header("idempotency-key", key)
            .body(Bytes::from(body.to_string()))
            .unwrap();
        let resp = ingest.handle(req).await;
        assert_eq!(resp.status(), http::StatusCode::ACCEPTED);
        serde_json::from_slice(resp.body()).unwrap()
    }

    #[tokio::test]
    async fn a_created_task_gets_one_ingest_span_under_its_root() {
        let dir = tempfile::tempdir().unwrap();
        let b = EmbeddedBackend::open(dir.path(), QueueConfig::default()).unwrap();
        let store = TaskStore::new(b.table.clone(), b.blobs.clone());
        let agents = Agents::new(AgentConfig::new("default", "scripted"), Vec::new());
        let recorded = Arc::new(Recorded::default());
        let token = Some(ApiToken::parse(TOKEN).unwrap());
        let ingest = Ingest::new(store, b.queue.clone(), agents, token, None)
            .with_span_export(recorded.clone());
        let before = Instant::now();
        let body = json!({"input": "the secret-plan prompt", "thread": "t1"});
        let answer = post(&ingest, body.clone(), "k1").await;
        let id = TaskId::parse(answer["task_id"].as_str().unwrap()).unwrap();

        let batches = recorded.0.lock().unwrap().clone();
        assert_eq!(batches.len(), 1);
        let batch = &batches[0];
        assert_eq!(batch.task_id, id);
        assert_eq!(batch.trace_root, id);
        assert_eq!(batch.parent_task, None);
        assert_eq!(batch.agent, "default");
        assert!(batch.content.is_empty(), "never content");
        let span = &batch.spans[..];
        assert_eq!(span.len(), 1);
        let span = &span[0];
        assert_eq!(span.name, "ingest");
        assert_eq!(span.parent_id.as_deref(), Some(task_span_id(&id).as_str()));
        assert_eq!(span.attributes["source"], "http");
        assert_eq!(span.attributes["error"], false);
        assert!(before <= span.start_ms && span.start_ms <= span.end_ms);
        assert!(!serde_json::to_string(span).unwrap().contains("secret-plan"));

        // A retried request and a message to the running task create no
        // task, so no span.
        post(&ingest, body, "k1").await;
        post(&ingest, json!({"input": "more", "thread": "t1"}), "k2").await;
        assert_eq!(recorded.0.lock().unwrap().len(), 1);
    }
}
