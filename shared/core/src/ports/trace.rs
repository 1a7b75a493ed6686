//! Traces: a tree of timed spans per task (task → segment → llm_call /
//! tool_call), written to the blob store one segment at a time.

use crate::clock::{self, Instant};
use crate::TaskId;
use serde::{Deserialize, Serialize};
use std::collections::HashMap;
use std::sync::Mutex;

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Span {
    pub span_id: String,
    pub parent_id: Option<String>,
    pub name: String,
    /// Integer milliseconds, as stored trace blobs and the trace route
    /// (`start_ms`, `end_ms`) have them.
    #[serde(with = "clock::as_millis")]
    pub start_ms: Instant,
    #[serde(with = "clock::as_millis")]
    pub end_ms: Instant,
    #[serde(default)]
    pub attributes: serde_json::Map<String, serde_json::Value>,
}

/// Collects the spans of one segment. Cheap to share between the parallel
/// tool calls of a step.
#[derive(Debug, Default)]
pub struct SpanRecorder {
    spans: Mutex<Vec<Span>>,
}

impl SpanRecorder {
    pub fn new() -> Self {
        Self::default()
    }

    /// Records a finished span and returns its id.
    pub fn record(
        &self,
        name: &str,
        parent_id: Option<&str>,
        start_ms: Instant,
        attributes: serde_json::Map<String, serde_json::Value>,
    ) -> String {
        let span_id = uuid::Uuid::new_v4().simple().to_string()[..16].to_owned();
        let span = Span {
            span_id: span_id.clone(),
            parent_id: parent_id.map(str::to_owned),
            name: name.to_owned(),
            start_ms,
            end_ms: Instant::now(),
            attributes,
        };
        if let Ok(mut spans) = self.spans.lock() {
            spans.push(span);
        }
        span_id
    }

    /// Adds a span whose id was chosen up front (a parent recorded after its
    /// children).
    pub fn push(&self, span: Span) {
        if let Ok(mut spans) = self.spans.lock() {
            spans.push(span);
        }
    }

    pub fn take(&self) -> Vec<Span> {
        self.spans
            .lock()
            .map(|mut s| std::mem::take(&mut *s))
            .unwrap_or_default()
    }
}

/// A fresh span id.
pub fn new_span_id() -> String {
    uuid::Uuid::new_v4().simple().to_string()[..16].to_owned()
}

/// The id of a task's root span, derived from the task id so every
/// segment (and the status route) can name it without storing it.
pub fn task_span_id(id: &crate::TaskId) -> String {
    id.as_str().replace('-', "").chars().take(16).collect()
}

/// The spans one segment recorded (with the task's root span when the
/// task ended there), on their way to a tracing system outside Baton.
#[derive(Clone, Debug, PartialEq)]
pub struct SpanBatch {
    pub task_id: TaskId,
    /// The task whose id names the trace: the root of the delegation
    /// tree ([`crate::Task::trace_root`]), so sub-agents join its trace.
    pub trace_root: TaskId,
    /// The task that delegated this one, whose root span is the parent of
    /// this task's root span.
    pub parent_task: Option<TaskId>,
    pub agent: String,
    pub spans: Vec<Span>,
    /// Prompts, answers, tool arguments and results by span id, only when
    /// the exporter [wants content](SpanExport::wants_content): never
    /// written to the blob store.
    pub content: HashMap<String, serde_json::Map<String, serde_json::Value>>,
}

/// Where spans go besides the blob store (an OpenTelemetry collector).
#[async_trait::async_trait]
pub trait SpanExport: Send + Sync {
    /// Whether spans should carry content (prompts, answers, tool
    /// arguments and results).
    fn wants_content(&self) -> bool;

    /// Sends a batch and waits for it, bounded in time. Failures are the
    /// exporter's to log: a trace is never worth failing a task.
    async fn export(&self, batch: SpanBatch);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_stored_span_reads_and_writes_as_before() {
        let old = r#"{"span_id":"a1b2c3d4e5f60718","parent_id":null,"name":"llm_call","start_ms":1767225600123,"end_ms":1767225600456,"attributes":{"step":1}}"#;
        let span: Span = serde_json::from_str(old).unwrap();
        assert_eq!(span.start_ms, Instant(1_767_225_600_123));
        assert_eq!(span.end_ms.since(span.start_ms).as_millis(), 333);
        assert_eq!(serde_json::to_string(&span).unwrap(), old);
    }
}
