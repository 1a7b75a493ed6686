use super::convert::{spans, task_root_span_id, trace_id};
use super::*;
use baton_core::trace::task_span_id;
use baton_core::{Instant, Span, TaskId};
use opentelemetry::trace::{SpanId, SpanKind, Status};
use serde_json::{json, Map, Value};

fn vars(pairs: &[(&str, &str)]) -> impl Fn(&str) -> Option<String> {
    let map: HashMap<String, String> = pairs
        .iter()
        .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
        .collect();
    move |name| map.get(name).cloned()
}

fn attrs(pairs: Value) -> Map<String, Value> {
    pairs.as_object().cloned().unwrap_or_default()
}

fn attr<'a>(span: &'a SpanData, key: &str) -> Option<&'a OtelValue> {
    span.attributes
        .iter()
        .find(|kv| kv.key.as_str() == key)
        .map(|kv| &kv.value)
}

use opentelemetry_sdk::trace::SpanData;

#[test]
fn the_trace_id_is_the_root_task_id() {
    let id = TaskId::parse("0190f3a2-7b1c-7def-8a12-3456789abcde").unwrap();
    assert_eq!(
        trace_id(&id).to_string(),
        "0190f3a27b1c7def8a123456789abcde"
    );
    // Deterministic, and distinct per task.
    let other = TaskId::generate();
    assert_eq!(trace_id(&other), trace_id(&other));
    assert_ne!(trace_id(&other), trace_id(&id));
    assert_eq!(task_root_span_id(&id), task_root_span_id(&id));
    assert_ne!(task_root_span_id(&id), task_root_span_id(&other));
    assert_ne!(task_root_span_id(&id), SpanId::INVALID);
}

#[test]
fn sub_agents_created_in_the_same_millisecond_get_distinct_root_spans() {
    // Same first 16 hex digits (Baton's own root span id), other tasks.
    let a = TaskId::parse("0190f3a2-7b1c-7def-8a12-3456789abcde").unwrap();
    let b = TaskId::parse("0190f3a2-7b1c-7def-9999-3456789abcde").unwrap();
    assert_eq!(task_span_id(&a), task_span_id(&b));
    assert_ne!(task_root_span_id(&a), task_root_span_id(&b));
}

fn span(id: &str, parent: Option<&str>, name: &str, a: Value) -> Span {
    Span {
        span_id: id.to_owned(),
        parent_id: parent.map(str::to_owned),
        name: name.to_owned(),
        start_ms: Instant(1_700_000_000_000),
        end_ms: Instant(1_700_000_000_250),
        attributes: attrs(a),
    }
}

fn batch(task: &TaskId, root: &TaskId, parent: Option<&TaskId>) -> SpanBatch {
    let root_span = task_span_id(task);
    SpanBatch {
        task_id: task.clone(),
        trace_root: root.clone(),
        parent_task: parent.cloned(),
        agent: "researcher".into(),
        spans: vec![
            span(
                "00000000000000a1",
                Some("00000000000000b2"),
                "llm_call",
                json!({"model": "gpt-4o-mini", "provider": "openai", "input_tokens": 120,
                       "output_tokens": 7, "finish_reason": "tool_calls", "step": 1,
                       "cost_usd": 0.0001, "error": false}),
            ),
            span(
                "00000000000000a2",
                Some("00000000000000b2"),
                "tool_call",
                json!({"tool": "current_time", "call_id": "call_1", "step": 1, "error": true}),
            ),
            span(
                "00000000000000b2",
                Some(&root_span),
                "segment",
                json!({"segment": 1, "steps_total": 1, "outcome": "Ok(HandedOver)", "error": false}),
            ),
            span(
                &root_span,
                None,
                "task",
                json!({"status": "succeeded", "steps": 2, "segments": 2, "input_tokens": 300,
                       "output_tokens": 20, "error": false}),
            ),
        ],
        content: HashMap::new(),
    }
}

fn scope() -> InstrumentationScope {
    InstrumentationScope::builder("baton").build()
}

#[test]
fn spans_follow_the_genai_conventions_and_are_parented() {
    let task = TaskId::generate();
    let out = spans(&batch(&task, &task, None), &scope(), &Scrub::default());
    let by_name = |n: &str| out.iter().find(|s| s.name == n).expect(n);
    let chat = by_name("chat gpt-4o-mini");
    let tool = by_name("execute_tool current_time");
    let segment = by_name("baton.segment");
    let root = by_name("invoke_agent researcher");
    for s in &out {
        assert_eq!(s.span_context.trace_id(), trace_id(&task));
    }
    assert_eq!(root.span_context.span_id(), task_root_span_id(&task));
    assert_eq!(root.parent_span_id, SpanId::INVALID, "the trace's root");
    assert_eq!(segment.parent_span_id, task_root_span_id(&task));
    assert_eq!(chat.parent_span_id, segment.span_context.span_id());
    assert_eq!(tool.parent_span_id, segment.span_context.span_id());
    assert_eq!(
        chat.span_context.span_id(),
        SpanId::from_bytes(0xa1u64.to_be_bytes())
    );
    assert_eq!(chat.span_kind, SpanKind::Client);
    let s = |v: &str| Some(OtelValue::from(v.to_owned()));
    assert_eq!(attr(chat, "gen_ai.operation.name").cloned(), s("chat"));
    assert_eq!(
        attr(chat, "gen_ai.request.model").cloned(),
        s("gpt-4o-mini")
    );
    assert_eq!(attr(chat, "gen_ai.provider.name").cloned(), s("openai"));
    assert_eq!(
        attr(chat, "gen_ai.usage.input_tokens"),
        Some(&OtelValue::I64(120))
    );
    assert_eq!(
        attr(chat, "gen_ai.usage.output_tokens"),
        Some(&OtelValue::I64(7))
    );
    assert!(attr(chat, "gen_ai.response.finish_reasons").is_some());
    assert_eq!(attr(chat, "baton.step"), Some(&OtelValue::I64(1)));
    assert_eq!(chat.status, Status::Unset);
    assert_eq!(attr(tool, "gen_ai.tool.name").cloned(), s("current_time"));
    assert_eq!(attr(tool, "gen_ai.tool.call.id").cloned(), s("call_1"));
    assert!(matches!(tool.status, Status::Error { .. }));
    assert_eq!(
        attr(root, "gen_ai.operation.name").cloned(),
        s("invoke_agent")
    );
    assert_eq!(attr(root, "gen_ai.agent.name").cloned(), s("researcher"));
    assert_eq!(
        attr(root, "gen_ai.usage.input_tokens"),
        Some(&OtelValue::I64(300))
    );
    assert_eq!(attr(root, "baton.status").cloned(), s("succeeded"));
    // No content unless it was asked for.
    assert!(out
        .iter()
        .all(|s| attr(s, "gen_ai.input.messages").is_none()));
}

#[test]
fn a_sub_agent_joins_its_roots_trace_under_its_parents_root_span() {
    let root = TaskId::generate();
    let parent = TaskId::generate();
    let child = TaskId::generate();
    let out = spans(
        &batch(&child, &root, Some(&parent)),
        &scope(),
        &Scrub::default(),
    );
    assert!(out
        .iter()
        .all(|s| s.span_context.trace_id() == trace_id(&root)));
    let top = out
        .iter()
        .find(|s| s.name == "invoke_agent researcher")
        .unwrap();
    assert_eq!(top.span_context.span_id(), task_root_span_id(&child));
    assert_eq!(top.parent_span_id, task_root_span_id(&parent));
}

#[test]
fn the_ingest_span_hangs_under_the_tasks_root_span() {
    let task = TaskId::generate();
    let mut b = batch(&task, &task, None);
    b.spans = vec![span(
        "00000000000000c3",
        Some(&task_span_id(&task)),
        "ingest",
        json!({"source": "slack", "error": false}),
    )];
    let out = spans(&b, &scope(), &Scrub::default());
    let ingest = &out[0];
    assert_eq!(ingest.name, "baton.ingest");
    assert_eq!(ingest.span_kind, SpanKind::Server);
    assert_eq!(ingest.span_context.trace_id(), trace_id(&task));
    assert_eq!(ingest.parent_span_id, task_root_span_id(&task));
    let s = |v: &str| Some(OtelValue::from(v.to_owned()));
    assert_eq!(attr(ingest, "gen_ai.agent.name").cloned(), s("researcher"));
    assert_eq!(attr(ingest, "baton.source").cloned(), s("slack"));
    assert_eq!(attr(ingest, "baton.task.id").cloned(), s(task.as_str()));
    assert_eq!(ingest.status, Status::Unset);
    b.spans[0].attributes.insert("error".into(), json!(true));
    let out = spans(&b, &scope(), &Scrub::default());
    assert!(matches!(out[0].status, Status::Error { .. }));
}

#[test]
fn content_is_attached_and_scrubbed() {
    let task = TaskId::generate();
    let mut b = batch(&task, &task, None);
    let mut content = Map::new();
    content.insert(
        "gen_ai.input.messages".into(),
        json!("[{\"role\":\"user\",\"parts\":[{\"type\":\"text\",\"content\":\"key sk-live-0123456789\"}]}]"),
    );
    b.content.insert("00000000000000a1".into(), content);
    b.spans[0]
        .attributes
        .insert("error_message".into(), json!("bad key sk-live-0123456789"));
    b.spans[0].attributes.insert("error".into(), json!(true));
    let scrub = Scrub::new([SecretString::from("sk-live-0123456789".to_owned())]);
    let out = spans(&b, &scope(), &scrub);
    let chat = out.iter().find(|s| s.name == "chat gpt-4o-mini").unwrap();
    let input = attr(chat, "gen_ai.input.messages").unwrap().as_str();
    assert!(input.contains("key [redacted]"), "{input}");
    match &chat.status {
        Status::Error { description } => assert_eq!(description, "bad key [redacted]"),
        other => panic!("{other:?}"),
    }
    assert!(attr(chat, "error.type").is_some());
}

#[test]
fn settings_read_the_standard_variables() {
    assert!(OtlpSettings::from_vars(vars(&[])).unwrap().is_none());
    let s = OtlpSettings::from_vars(vars(&[
        ("OTEL_EXPORTER_OTLP_ENDPOINT", "https://api.honeycomb.io/"),
        (
            "OTEL_EXPORTER_OTLP_HEADERS",
            "x-honeycomb-team=abc%2Fdef123,Authorization=Bearer%20tok-0123456789",
        ),
    ]))
    .unwrap()
    .unwrap();
    assert_eq!(s.traces_endpoint, "https://api.honeycomb.io/v1/traces");
    assert!(!s.content);
    assert_eq!(s.service_name, "baton");
    let headers: Vec<(&str, &str)> = s
        .headers
        .iter()
        .map(|(k, v)| (k.as_str(), v.expose_secret()))
        .collect();
    assert_eq!(
        headers,
        [
            ("x-honeycomb-team", "abc/def123"),
            ("Authorization", "Bearer tok-0123456789")
        ]
    );
    let shown = format!("{s:?}");
    assert!(
        !shown.contains("abc/def123") && !shown.contains("tok-0123"),
        "{shown}"
    );
    let s = OtlpSettings::from_vars(vars(&[
        ("OTEL_EXPORTER_OTLP_ENDPOINT", "http://ignored:4318"),
        (
            "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT",
            "http://127.0.0.1:4318/custom",
        ),
        ("BATON_TRACE_CONTENT", "true"),
    ]))
    .unwrap()
    .unwrap();
    assert_eq!(s.traces_endpoint, "http://127.0.0.1:4318/custom");
    assert!(s.content);
}

#[test]
fn bad_settings_are_refused_without_quoting_secrets() {
    let endpoint = ("OTEL_EXPORTER_OTLP_ENDPOINT", "http://127.0.0.1:4318");
    for (headers, expected) in [
        ("novalue", "expected key=value"),
        ("bad name=x", "`bad name` is not a header name"),
        ("k=%zz-secret-value", "the value of `k` is not URL-encoded"),
    ] {
        let err =
            OtlpSettings::from_vars(vars(&[endpoint, ("OTEL_EXPORTER_OTLP_HEADERS", headers)]))
                .expect_err(headers)
                .to_string();
        assert!(err.contains(expected), "{err}");
        assert!(!err.contains("secret-value"), "{err}");
    }
    let err = OtlpSettings::from_vars(vars(&[("OTEL_EXPORTER_OTLP_ENDPOINT", "ftp://user:pw@x")]))
        .unwrap_err()
        .to_string();
    assert!(!err.contains("pw"), "{err}");
    let err =
        OtlpSettings::from_vars(vars(&[endpoint, ("BATON_TRACE_CONTENT", "yes")])).unwrap_err();
    assert_eq!(err.name, "BATON_TRACE_CONTENT");
}

#[test]
fn scrub_takes_short_values_never_and_long_ones_whole() {
    let scrub = Scrub::new([
        SecretString::from("short".to_owned()),
        SecretString::from("abcdefgh".to_owned()),
        SecretString::from("abcdefgh-longer".to_owned()),
    ]);
    assert_eq!(
        scrub.text("short abcdefgh-longer abcdefgh"),
        "short [redacted] [redacted]"
    );
}

#[tokio::test]
async fn an_unreachable_collector_costs_a_bounded_wait_and_no_error() {
    // A port nothing listens on: refused at once.
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    drop(listener);
    let settings = OtlpSettings::from_vars(vars(&[(
        "OTEL_EXPORTER_OTLP_ENDPOINT",
        &format!("http://127.0.0.1:{port}"),
    )]))
    .unwrap()
    .unwrap();
    let export = OtlpExport::new(&settings, []).unwrap();
    let task = TaskId::generate();
    let started = std::time::Instant::now();
    export.export(batch(&task, &task, None)).await;
    assert!(started.elapsed() <= EXPORT_TIMEOUT + Duration::from_secs(1));
}
