//! Baton's spans as OpenTelemetry spans, named and attributed after the
//! GenAI semantic conventions: the task is `invoke_agent {agent}`, a model
//! call `chat {model}`, a tool call `execute_tool {tool}`; the ingest's
//! handling of the request that created the task (`baton.ingest`) and
//! segments (`baton.segment`, and compactions) are Baton's own. Attributes
//! the conventions have no name for keep Baton's, under `baton.`.
//!
//! Ids are derived, never stored: the trace id is the root task's id (a
//! UUID is 128 bits: the trace id is the task id without its hyphens), so
//! every segment, retry and sub-agent of a task lands in one trace; a
//! task's root span id is a hash of its id, so the ingest and any segment
//! can name it as the parent before the task has ended and the root span
//! is sent.

use crate::Scrub;
use baton_core::trace::task_span_id;
use baton_core::{Instant, Span, SpanBatch, TaskId};
use opentelemetry::trace::{
    SpanContext, SpanId, SpanKind, Status, TraceFlags, TraceId, TraceState,
};
use opentelemetry::{Array, InstrumentationScope, KeyValue, StringValue, Value as OtelValue};
use opentelemetry_sdk::trace::{SpanData, SpanEvents, SpanLinks};
use serde_json::{Map, Value};
use sha2::{Digest, Sha256};
use std::time::{SystemTime, UNIX_EPOCH};

/// The trace id of a task tree: its root task's UUID, as 128 bits.
pub fn trace_id(root: &TaskId) -> TraceId {
    let hex: String = root.as_str().chars().filter(|c| *c != '-').collect();
    match u128::from_str_radix(&hex, 16) {
        Ok(n) if n != 0 => TraceId::from_bytes(n.to_be_bytes()),
        // A TaskId is a parsed UUID, so this is never reached; a hash
        // keeps the id deterministic all the same.
        _ => TraceId::from_bytes(digest(root.as_str())[..16].try_into().unwrap_or([1; 16])),
    }
}

/// The span id of a task's root span (`invoke_agent`): a hash of the
/// whole task id. (Baton's own root span id, [`task_span_id`], is the id's
/// first 16 hex digits: the creation time, shared by sub-agents created in
/// the same millisecond.)
pub fn task_root_span_id(task: &TaskId) -> SpanId {
    span_id_of_digest(&format!("baton task span {task}"))
}

/// Baton's 16-hex-digit span ids are 64 bits already.
fn span_id(baton_id: &str, task: &TaskId, root: &str) -> SpanId {
    if baton_id == root {
        return task_root_span_id(task);
    }
    match u64::from_str_radix(baton_id, 16) {
        Ok(n) if n != 0 && baton_id.len() == 16 => SpanId::from_bytes(n.to_be_bytes()),
        _ => span_id_of_digest(baton_id),
    }
}

fn span_id_of_digest(text: &str) -> SpanId {
    let d = digest(text);
    let bytes: [u8; 8] = d[..8].try_into().unwrap_or([1; 8]);
    if bytes == [0; 8] {
        SpanId::from_bytes([1; 8])
    } else {
        SpanId::from_bytes(bytes)
    }
}

fn digest(text: &str) -> Vec<u8> {
    Sha256::digest(text.as_bytes()).to_vec()
}

fn time(at: Instant) -> SystemTime {
    // An instant before the epoch (none is) reads as the epoch.
    UNIX_EPOCH + at.since(Instant(0))
}

/// The spans of `batch` as OpenTelemetry spans, every string scrubbed.
pub fn spans(batch: &SpanBatch, scope: &InstrumentationScope, scrub: &Scrub) -> Vec<SpanData> {
    let trace = trace_id(&batch.trace_root);
    let root = task_span_id(&batch.task_id);
    batch
        .spans
        .iter()
        .map(|span| {
            let mut out = Converted::new(batch, span);
            if let Some(content) = batch.content.get(&span.span_id) {
                for (k, v) in content {
                    out.attrs.push(KeyValue::new(k.clone(), value(v)));
                }
            }
            let parent = match &span.parent_id {
                Some(p) => span_id(p, &batch.task_id, &root),
                // A sub-agent's root span hangs under its parent's.
                None => batch
                    .parent_task
                    .as_ref()
                    .map_or(SpanId::INVALID, task_root_span_id),
            };
            let context = SpanContext::new(
                trace,
                span_id(&span.span_id, &batch.task_id, &root),
                TraceFlags::SAMPLED,
                false,
                TraceState::default(),
            );
            SpanData {
                span_context: context,
                parent_span_id: parent,
                // Earlier segments and the parent task ran elsewhere.
                parent_span_is_remote: false,
                span_kind: out.kind,
                name: scrub.text(&out.name).into(),
                start_time: time(span.start_ms),
                end_time: time(span.end_ms.max(span.start_ms)),
                attributes: out
                    .attrs
                    .into_iter()
                    .map(|kv| scrub.key_value(kv))
                    .collect(),
                dropped_attributes_count: 0,
                events: SpanEvents::default(),
                links: SpanLinks::default(),
                status: match out.error {
                    Some(description) => Status::error(scrub.text(&description)),
                    None => Status::Unset,
                },
                instrumentation_scope: scope.clone(),
            }
        })
        .collect()
}

/// One span's name, kind, attributes and error, before ids and times.
struct Converted {
    name: String,
    kind: SpanKind,
    attrs: Vec<KeyValue>,
    error: Option<String>,
}

impl Converted {
    fn new(batch: &SpanBatch, span: &Span) -> Self {
        let mut a = span.attributes.clone();
        let failed = a.remove("error").and_then(|v| v.as_bool()) == Some(true);
        let mut attrs = vec![KeyValue::new("baton.task.id", batch.task_id.to_string())];
        let str_of =
            |a: &Map<String, Value>, k: &str| a.get(k).and_then(Value::as_str).map(str::to_owned);
        let (name, kind, error) = match span.name.as_str() {
            "task" => {
                let status = str_of(&a, "status").unwrap_or_default();
                attrs.push(KeyValue::new("gen_ai.operation.name", "invoke_agent"));
                attrs.push(KeyValue::new("gen_ai.agent.name", batch.agent.clone()));
                tokens(&mut a, &mut attrs);
                let error = failed.then(|| format!("the task {status}"));
                (
                    format!("invoke_agent {}", batch.agent),
                    SpanKind::Internal,
                    error,
                )
            }
            "llm_call" => {
                let model = a
                    .remove("model")
                    .and_then(|v| v.as_str().map(str::to_owned));
                let model = model.unwrap_or_else(|| "unknown".to_owned());
                attrs.push(KeyValue::new("gen_ai.operation.name", "chat"));
                attrs.push(KeyValue::new("gen_ai.request.model", model.clone()));
                attrs.push(KeyValue::new("gen_ai.agent.name", batch.agent.clone()));
                if let Some(p) = a
                    .remove("provider")
                    .and_then(|v| v.as_str().map(provider_name))
                {
                    attrs.push(KeyValue::new("gen_ai.provider.name", p));
                }
                tokens(&mut a, &mut attrs);
                if let Some(reason) = a
                    .remove("finish_reason")
                    .and_then(|v| v.as_str().map(str::to_owned))
                {
                    let reasons = Array::String(vec![StringValue::from(reason)]);
                    attrs.push(KeyValue::new(
                        "gen_ai.response.finish_reasons",
                        OtelValue::Array(reasons),
                    ));
                }
                let error = failed.then(|| {
                    attrs.push(KeyValue::new("error.type", "model_call_failed"));
                    a.remove("error_message")
                        .and_then(|v| v.as_str().map(str::to_owned))
                        .unwrap_or_else(|| "the model call failed".to_owned())
                });
                (format!("chat {model}"), SpanKind::Client, error)
            }
            "tool_call" => {
                let tool = str_of(&a, "tool").unwrap_or_else(|| "unknown".to_owned());
                a.remove("tool");
                attrs.push(KeyValue::new("gen_ai.operation.name", "execute_tool"));
                attrs.push(KeyValue::new("gen_ai.tool.name", tool.clone()));
                attrs.push(KeyValue::new("gen_ai.tool.type", "function"));
                if let Some(id) = a
                    .remove("call_id")
                    .and_then(|v| v.as_str().map(str::to_owned))
                {
                    attrs.push(KeyValue::new("gen_ai.tool.call.id", id));
                }
                let error = failed.then(|| {
                    attrs.push(KeyValue::new("error.type", "tool_error"));
                    "the tool returned an error".to_owned()
                });
                (format!("execute_tool {tool}"), SpanKind::Internal, error)
            }
            // The ingest's handling of the request that created the task.
            "ingest" => {
                attrs.push(KeyValue::new("gen_ai.agent.name", batch.agent.clone()));
                let error = failed.then(|| "the task could not be queued".to_owned());
                ("baton.ingest".to_owned(), SpanKind::Server, error)
            }
            "segment" => {
                let error = failed.then(|| str_of(&a, "outcome").unwrap_or_default());
                ("baton.segment".to_owned(), SpanKind::Internal, error)
            }
            other => {
                let error = failed.then(|| format!("{other} failed"));
                (format!("baton.{other}"), SpanKind::Internal, error)
            }
        };
        for (k, v) in a {
            attrs.push(KeyValue::new(format!("baton.{k}"), value(&v)));
        }
        Converted {
            name,
            kind,
            attrs,
            error,
        }
    }
}

/// Moves Baton's token counts to their GenAI names.
fn tokens(a: &mut Map<String, Value>, attrs: &mut Vec<KeyValue>) {
    for (from, to) in [
        ("input_tokens", "gen_ai.usage.input_tokens"),
        ("output_tokens", "gen_ai.usage.output_tokens"),
    ] {
        if let Some(n) = a.remove(from).and_then(|v| v.as_i64()) {
            attrs.push(KeyValue::new(to, n));
        }
    }
}

/// The well-known `gen_ai.provider.name` of a Baton provider.
fn provider_name(provider: &str) -> String {
    match provider {
        "bedrock" => "aws.bedrock".to_owned(),
        "scripted" => "baton.scripted".to_owned(),
        other => other.to_owned(),
    }
}

/// A JSON value as an attribute value: scalars as themselves, lists of
/// strings as string arrays, anything else as its JSON text.
fn value(v: &Value) -> OtelValue {
    match v {
        Value::Bool(b) => OtelValue::Bool(*b),
        Value::Number(n) => match n.as_i64() {
            Some(i) => OtelValue::I64(i),
            None => OtelValue::F64(n.as_f64().unwrap_or_default()),
        },
        Value::String(s) => OtelValue::String(s.clone().into()),
        Value::Array(items) if items.iter().all(Value::is_string) => {
            OtelValue::Array(Array::String(
                items
                    .iter()
                    .filter_map(|i| i.as_str().map(|s| StringValue::from(s.to_owned())))
                    .collect(),
            ))
        }
        other => OtelValue::String(other.to_string().into()),
    }
}
