//! The segment's spans (`segment`, `llm_call`, `tool_call`, `compaction`),
//! written to the blob store when it ends, and the task's root span once
//! the task has ended; then handed to the span exporter (OpenTelemetry),
//! when there is one, before the segment returns. Best effort: a trace is
//! never worth failing a task.

use super::SegmentEnd;
use crate::error::WorkerError;
use baton_core::trace::{new_span_id, task_span_id};
use baton_core::{Instant, Span, SpanBatch, SpanExport, SpanRecorder, Task, TaskStatus, TaskStore};
use serde_json::{json, Map, Value};
use std::collections::HashMap;

pub(super) struct SegmentTrace {
    spans: SpanRecorder,
    segment_span: String,
    segment_start: Instant,
    /// Prompts, answers, tool arguments and results by span id, kept only
    /// when the exporter wants them (never written to the blob store).
    content: Option<HashMap<String, Map<String, Value>>>,
}

impl SegmentTrace {
    pub(super) fn new(segment_start: Instant, export: Option<&dyn SpanExport>) -> Self {
        SegmentTrace {
            spans: SpanRecorder::new(),
            segment_span: new_span_id(),
            segment_start,
            content: export.filter(|e| e.wants_content()).map(|_| HashMap::new()),
        }
    }

    /// Records a span under the segment's, from `started` to now; its id.
    pub(super) fn record(
        &mut self,
        name: &str,
        started: Instant,
        attrs: Map<String, Value>,
    ) -> String {
        self.spans
            .record(name, Some(&self.segment_span), started, attrs)
    }

    /// The names of the spans recorded so far, in order.
    #[cfg(test)]
    pub(super) fn span_names(&mut self) -> Vec<String> {
        let spans = self.spans.take();
        let names = spans.iter().map(|s| s.name.clone()).collect();
        for s in spans {
            self.spans.push(s);
        }
        names
    }

    /// Whether spans carry content: only then is [`SegmentTrace::content`]
    /// worth building.
    pub(super) fn wants_content(&self) -> bool {
        self.content.is_some()
    }

    /// Attaches content (OpenTelemetry GenAI attributes) to span `span_id`.
    pub(super) fn content(&mut self, span_id: String, content: Map<String, Value>) {
        if let Some(all) = &mut self.content {
            all.insert(span_id, content);
        }
    }

    /// Writes this segment's spans (and the task span once it has ended),
    /// then exports them.
    pub(super) async fn write(
        &mut self,
        store: &TaskStore,
        export: Option<&dyn SpanExport>,
        task: &Task,
        result: &Result<SegmentEnd, WorkerError>,
    ) {
        let mut attrs = Map::new();
        attrs.insert("segment".into(), json!(task.budget.segments));
        attrs.insert("steps_total".into(), json!(task.budget.steps));
        attrs.insert("outcome".into(), json!(format!("{result:?}")));
        attrs.insert("error".into(), json!(result.is_err()));
        let task_span = task_span_id(&task.id);
        let mut spans = self.spans.take();
        spans.push(Span {
            span_id: self.segment_span.clone(),
            parent_id: Some(task_span.clone()),
            name: "segment".into(),
            start_ms: self.segment_start,
            end_ms: Instant::now(),
            attributes: attrs,
        });
        let blobs = store.blobs();
        let key = format!(
            "traces/{}/segment-{:06}.json",
            task.id, task.budget.segments
        );
        if let Ok(bytes) = serde_json::to_vec(&spans) {
            if let Err(e) = blobs.put(&key, bytes).await {
                tracing::warn!(error = %e, "could not write the segment trace");
            }
        }
        if task.status().is_terminal() {
            let span = task_root_span(task, task_span);
            if let Ok(bytes) = serde_json::to_vec(&[&span]) {
                let key = format!("traces/{}/task.json", task.id);
                if let Err(e) = blobs.put(&key, bytes).await {
                    tracing::warn!(error = %e, "could not write the task trace");
                }
            }
            spans.push(span);
        }
        if let Some(export) = export {
            export
                .export(SpanBatch {
                    task_id: task.id.clone(),
                    trace_root: task.trace_root().clone(),
                    parent_task: task.source.parent.as_ref().map(|p| p.task_id.clone()),
                    agent: task.agent.clone(),
                    spans,
                    content: self.content.take().unwrap_or_default(),
                })
                .await;
        }
    }
}

/// The task's root span, from its creation to now (it has ended).
fn task_root_span(task: &Task, span_id: String) -> Span {
    let mut attrs = Map::new();
    attrs.insert("status".into(), json!(task.status().as_str()));
    attrs.insert("steps".into(), json!(task.budget.steps));
    attrs.insert("segments".into(), json!(task.budget.segments));
    attrs.insert("input_tokens".into(), json!(task.budget.usage.input_tokens));
    attrs.insert(
        "output_tokens".into(),
        json!(task.budget.usage.output_tokens),
    );
    attrs.insert("error".into(), json!(task.status() == TaskStatus::Failed));
    Span {
        span_id,
        parent_id: None,
        name: "task".into(),
        start_ms: task.created_at,
        end_ms: Instant::now(),
        attributes: attrs,
    }
}

/// A model call's content in the OpenTelemetry GenAI conventions: the
/// system instructions, the messages sent and the answer (when there is
/// one), each a JSON string. Files are named, not included.
pub(super) fn chat_content(
    request: &baton_core::CompletionRequest,
    answer: Option<&baton_core::Completion>,
) -> Map<String, Value> {
    use baton_core::Message;
    let text = |content: &str| json!({"type": "text", "content": content});
    let calls = |calls: &[baton_core::ToolCall]| -> Vec<Value> {
        calls
            .iter()
            .map(|c| json!({"type": "tool_call", "id": c.id, "name": c.name, "arguments": c.arguments}))
            .collect()
    };
    let input: Vec<Value> = request
        .messages
        .iter()
        .map(|m| match m {
            Message::User { content } => json!({"role": "user", "parts": [text(content)]}),
            Message::Assistant {
                content,
                tool_calls,
            } => {
                let mut parts = vec![text(content)];
                parts.extend(calls(tool_calls));
                json!({"role": "assistant", "parts": parts})
            }
            Message::Tool {
                call_id, content, ..
            } => json!({"role": "tool", "parts": [
                {"type": "tool_call_response", "id": call_id, "response": content}
            ]}),
            Message::Attachment {
                name, media_type, ..
            } => json!({"role": "user", "parts": [text(&format!("[file {name} ({media_type})]"))]}),
        })
        .collect();
    let mut content = Map::new();
    content.insert(
        "gen_ai.system_instructions".into(),
        json!(json!([text(&request.system)]).to_string()),
    );
    content.insert(
        "gen_ai.input.messages".into(),
        json!(Value::from(input).to_string()),
    );
    if let Some(answer) = answer {
        let mut parts = vec![text(&answer.content)];
        parts.extend(calls(&answer.tool_calls));
        let output = json!([{
            "role": "assistant",
            "parts": parts,
            "finish_reason": answer.stop_reason.as_deref().unwrap_or("stop"),
        }]);
        content.insert("gen_ai.output.messages".into(), json!(output.to_string()));
    }
    content
}

/// A tool call's content in the OpenTelemetry GenAI conventions.
pub(super) fn tool_content(arguments: &Value, result: &str) -> Map<String, Value> {
    let mut content = Map::new();
    content.insert(
        "gen_ai.tool.call.arguments".into(),
        json!(arguments.to_string()),
    );
    content.insert("gen_ai.tool.call.result".into(), json!(result));
    content
}
