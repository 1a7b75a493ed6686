//! The segment's spans (`segment`, `llm_call`, `tool_call`, `compaction`),
//! written to the blob store when it ends, and the task's root span once
//! the task has ended. Best effort: a trace is never worth failing a task.

use super::SegmentEnd;
use crate::error::WorkerError;
use baton_core::trace::{new_span_id, task_span_id};
use baton_core::{now_ms, Span, SpanRecorder, Task, TaskStatus, TaskStore};
use serde_json::{json, Map, Value};

pub(super) struct SegmentTrace {
    spans: SpanRecorder,
    segment_span: String,
    segment_start: i64,
}

impl SegmentTrace {
    pub(super) fn new(segment_start: i64) -> Self {
        SegmentTrace {
            spans: SpanRecorder::new(),
            segment_span: new_span_id(),
            segment_start,
        }
    }

    /// Records a span under the segment's, from `started` to now.
    pub(super) fn record(&mut self, name: &str, started: i64, attrs: Map<String, Value>) {
        self.spans
            .record(name, Some(&self.segment_span), started, attrs);
    }

    /// Writes this segment's spans (and the task span once it has ended).
    pub(super) async fn write(
        &mut self,
        store: &TaskStore,
        task: &Task,
        result: &Result<SegmentEnd, WorkerError>,
    ) {
        let mut attrs = Map::new();
        attrs.insert("segment".into(), json!(task.segments));
        attrs.insert("steps_total".into(), json!(task.steps));
        attrs.insert("outcome".into(), json!(format!("{result:?}")));
        attrs.insert("error".into(), json!(result.is_err()));
        let task_span = task_span_id(&task.id);
        let mut spans = self.spans.take();
        spans.push(Span {
            span_id: self.segment_span.clone(),
            parent_id: Some(task_span.clone()),
            name: "segment".into(),
            start_ms: self.segment_start,
            end_ms: now_ms(),
            attributes: attrs,
        });
        let blobs = store.blobs();
        let key = format!("traces/{}/segment-{:06}.json", task.id, task.segments);
        if let Ok(bytes) = serde_json::to_vec(&spans) {
            if let Err(e) = blobs.put(&key, bytes).await {
                tracing::warn!(error = %e, "could not write the segment trace");
            }
        }
        if !task.status.is_terminal() {
            return;
        }
        let mut attrs = Map::new();
        attrs.insert("status".into(), json!(task.status.as_str()));
        attrs.insert("steps".into(), json!(task.steps));
        attrs.insert("segments".into(), json!(task.segments));
        attrs.insert("input_tokens".into(), json!(task.usage.input_tokens));
        attrs.insert("output_tokens".into(), json!(task.usage.output_tokens));
        attrs.insert("error".into(), json!(task.status == TaskStatus::Failed));
        let span = Span {
            span_id: task_span,
            parent_id: None,
            name: "task".into(),
            start_ms: task.created_at,
            end_ms: now_ms(),
            attributes: attrs,
        };
        if let Ok(bytes) = serde_json::to_vec(&vec![span]) {
            let key = format!("traces/{}/task.json", task.id);
            if let Err(e) = blobs.put(&key, bytes).await {
                tracing::warn!(error = %e, "could not write the task trace");
            }
        }
    }
}
