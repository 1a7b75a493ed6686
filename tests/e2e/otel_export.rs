//! OpenTelemetry export: `baton dev` with `OTEL_EXPORTER_OTLP_ENDPOINT`
//! pointed at an OTLP/HTTP receiver started by the test, which records the
//! requests and decodes them as a collector would
//! (`ExportTraceServiceRequest`, protobuf).

use crate::common::{Options, TestApp};
use opentelemetry_proto::tonic::collector::trace::v1::ExportTraceServiceRequest;
use opentelemetry_proto::tonic::common::v1::{any_value, AnyValue};
use prost::Message;
use serde_json::{json, Value};
use std::collections::{BTreeMap, BTreeSet};
use std::time::{Duration, Instant};
use wiremock::matchers::{method, path};
use wiremock::{Mock, MockServer, ResponseTemplate};

const LONG: Duration = Duration::from_secs(60);
/// The collector's API key: sent as a header, never in a span or a log.
const OTLP_KEY: &str = "otlp-secret-key-0123456789";

/// One span as the receiver decoded it.
#[derive(Clone, Debug)]
struct Got {
    trace_id: String,
    span_id: String,
    parent: String,
    name: String,
    attrs: BTreeMap<String, Value>,
    status_error: bool,
}

impl Got {
    fn attr(&self, key: &str) -> &Value {
        self.attrs.get(key).unwrap_or(&Value::Null)
    }
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

fn json_of(v: &Option<AnyValue>) -> Value {
    match v.as_ref().and_then(|v| v.value.as_ref()) {
        Some(any_value::Value::StringValue(s)) => json!(s),
        Some(any_value::Value::IntValue(i)) => json!(i),
        Some(any_value::Value::BoolValue(b)) => json!(b),
        Some(any_value::Value::DoubleValue(d)) => json!(d),
        Some(any_value::Value::ArrayValue(a)) => {
            Value::Array(a.values.iter().map(|v| json_of(&Some(v.clone()))).collect())
        }
        _ => Value::Null,
    }
}

/// An OTLP/HTTP receiver on loopback: answers every export with 200.
async fn receiver() -> MockServer {
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .and(path("/v1/traces"))
        .respond_with(
            ResponseTemplate::new(200).insert_header("content-type", "application/x-protobuf"),
        )
        .mount(&server)
        .await;
    server
}

/// Every span received so far, and the raw requests.
async fn received(server: &MockServer) -> (Vec<Got>, Vec<wiremock::Request>) {
    let requests = server.received_requests().await.unwrap_or_default();
    let mut spans = Vec::new();
    for r in &requests {
        let req = ExportTraceServiceRequest::decode(&r.body[..]).expect("an OTLP protobuf body");
        for rs in req.resource_spans {
            let service = rs
                .resource
                .iter()
                .flat_map(|r| &r.attributes)
                .find(|kv| kv.key == "service.name")
                .map(|kv| json_of(&kv.value));
            assert_eq!(service, Some(json!("baton")));
            for ss in rs.scope_spans {
                for s in ss.spans {
                    spans.push(Got {
                        trace_id: hex(&s.trace_id),
                        span_id: hex(&s.span_id),
                        parent: hex(&s.parent_span_id),
                        name: s.name,
                        attrs: s
                            .attributes
                            .iter()
                            .map(|kv| (kv.key.clone(), json_of(&kv.value)))
                            .collect(),
                        // STATUS_CODE_ERROR
                        status_error: s.status.is_some_and(|st| st.code == 2),
                    });
                }
            }
        }
    }
    (spans, requests)
}

/// Polls until `done` holds for the spans received (the last segment
/// exports just after its task ended).
async fn wait_for(server: &MockServer, done: impl Fn(&[Got]) -> bool) -> Vec<Got> {
    let started = Instant::now();
    loop {
        let (spans, _) = received(server).await;
        if done(&spans) || started.elapsed() > LONG {
            return spans;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

fn otel_env(server: &MockServer) -> Vec<(String, String)> {
    vec![
        ("OTEL_EXPORTER_OTLP_ENDPOINT".into(), server.uri()),
        (
            "OTEL_EXPORTER_OTLP_HEADERS".into(),
            format!("authorization=Bearer%20{OTLP_KEY},x-team=baton-e2e"),
        ),
    ]
}

#[tokio::test(flavor = "multi_thread")]
async fn a_task_over_two_segments_is_one_trace_with_genai_spans_and_no_secret() {
    let server = receiver().await;
    let app = TestApp::spawn(Options {
        // Every segment does one unit of work, then hands over.
        segment_budget_ms: Some(1),
        extra_env: otel_env(&server),
        ..Options::default()
    })
    .await;
    let id = app.submit_ok("#steps=2 the purple-elephant prompt").await;
    // The ingest's span was sent before the answer (a Lambda freezes
    // once it has answered).
    let (early, _) = received(&server).await;
    assert!(early.iter().any(|s| s.name == "baton.ingest"), "{early:#?}");
    let task = app.wait_done(&id, LONG).await;
    assert_eq!(task["status"], "succeeded", "{task}");
    let segments = task["segments"].as_u64().unwrap();
    assert!(segments >= 2, "{task}");
    let spans = wait_for(&server, |s| {
        s.iter().any(|s| s.name.starts_with("invoke_agent"))
            && s.iter().filter(|s| s.name == "baton.segment").count() as u64 >= segments
    })
    .await;

    // One trace, named by the task.
    let trace_id = id.replace('-', "");
    for s in &spans {
        assert_eq!(s.trace_id, trace_id, "{s:?}");
        assert_eq!(s.attr("baton.task.id"), &json!(id));
    }
    // One root, the task; every segment under it.
    let roots: Vec<&Got> = spans.iter().filter(|s| s.parent.is_empty()).collect();
    assert_eq!(roots.len(), 1, "{spans:#?}");
    let root = roots[0];
    assert_eq!(root.name, "invoke_agent default");
    assert_eq!(root.attr("gen_ai.operation.name"), "invoke_agent");
    assert_eq!(root.attr("gen_ai.agent.name"), "default");
    assert_eq!(
        root.attr("gen_ai.usage.input_tokens"),
        &task["usage"]["input_tokens"]
    );
    let segment_ids: BTreeSet<&str> = spans
        .iter()
        .filter(|s| s.name == "baton.segment")
        .inspect(|s| assert_eq!(s.parent, root.span_id, "{s:?}"))
        .map(|s| s.span_id.as_str())
        .collect();
    assert_eq!(segment_ids.len() as u64, segments);
    // The ingest's handling of the request, under the root too.
    let ingests: Vec<&Got> = spans.iter().filter(|s| s.name == "baton.ingest").collect();
    assert_eq!(ingests.len(), 1, "{spans:#?}");
    assert_eq!(ingests[0].parent, root.span_id);
    assert_eq!(ingests[0].attr("baton.source"), "http");
    assert_eq!(ingests[0].attr("gen_ai.agent.name"), "default");
    assert!(!ingests[0].status_error);
    // Model calls and the tool call under their segments: the two model
    // calls in different segments.
    let chats: Vec<&Got> = spans
        .iter()
        .filter(|s| s.name.starts_with("chat "))
        .collect();
    assert_eq!(chats.len(), 2, "{spans:#?}");
    for c in &chats {
        assert!(segment_ids.contains(c.parent.as_str()), "{c:?}");
        assert_eq!(c.attr("gen_ai.operation.name"), "chat");
        assert_eq!(c.attr("gen_ai.provider.name"), "openai");
        assert!(c.attr("gen_ai.request.model").is_string(), "{c:?}");
        assert!(
            c.attr("gen_ai.usage.input_tokens").as_i64() > Some(0),
            "{c:?}"
        );
        assert!(
            c.attr("gen_ai.usage.output_tokens").as_i64() > Some(0),
            "{c:?}"
        );
        assert!(!c.status_error);
    }
    assert_ne!(
        chats[0].parent, chats[1].parent,
        "one model call per segment"
    );
    let tools: Vec<&Got> = spans
        .iter()
        .filter(|s| s.name.starts_with("execute_tool"))
        .collect();
    assert_eq!(tools.len(), 1, "{spans:#?}");
    assert_eq!(tools[0].name, "execute_tool current_time");
    assert!(segment_ids.contains(tools[0].parent.as_str()));
    assert_eq!(tools[0].attr("gen_ai.operation.name"), "execute_tool");
    assert_eq!(tools[0].attr("gen_ai.tool.name"), "current_time");
    assert!(tools[0].attr("gen_ai.tool.call.id").is_string());

    // No content by default: neither the prompt nor any message.
    let (spans, requests) = received(&server).await;
    for s in &spans {
        for (k, v) in &s.attrs {
            assert!(
                !k.starts_with("gen_ai.input") && !k.starts_with("gen_ai.output"),
                "{k}"
            );
            assert!(!k.starts_with("gen_ai.tool.call.arguments"), "{k}");
            assert!(!v.to_string().contains("purple-elephant"), "{k}: {v}");
        }
    }
    // The key went as a header, and nowhere else.
    for r in &requests {
        assert_eq!(
            r.headers["authorization"],
            format!("Bearer {OTLP_KEY}").as_str()
        );
        assert_eq!(r.headers["x-team"], "baton-e2e");
        assert_eq!(r.headers["content-type"], "application/x-protobuf");
        let body = String::from_utf8_lossy(&r.body);
        assert!(!body.contains(OTLP_KEY) && !body.contains("purple-elephant"));
    }
    assert!(!app.log().contains(OTLP_KEY), "the key is in the log");
}

#[tokio::test(flavor = "multi_thread")]
async fn with_content_a_sub_agent_joins_the_trace_and_secrets_are_scrubbed() {
    let server = receiver().await;
    let agents = r#"
[agents.default]
delegates = ["researcher"]

[agents.researcher]
description = "finds facts"
tools = ["current_time"]
"#;
    let mut env = otel_env(&server);
    env.push(("BATON_TRACE_CONTENT".into(), "true".into()));
    env.push(("BATON_AGENTS_TOML".into(), agents.into()));
    let app = TestApp::spawn(Options {
        extra_env: env,
        ..Options::default()
    })
    .await;
    // The child is asked the time (the scripted model then calls
    // `current_time`); the prompt quotes the collector's key, by mistake.
    let id = app
        .submit_ok(&format!(
            r#"#tool=delegate #args={{"agent":"researcher","input":"what-time-is-it-in-Paris"}} key {OTLP_KEY}"#
        ))
        .await;
    let task = app.wait_done(&id, LONG).await;
    assert_eq!(task["status"], "succeeded", "{task}");
    let child_id = task["children"][0]["task_id"]
        .as_str()
        .expect("a child")
        .to_owned();
    let spans = wait_for(&server, |s| {
        s.iter()
            .filter(|s| s.name.starts_with("invoke_agent"))
            .count()
            >= 2
    })
    .await;

    // Parent and child in one trace: the parent's.
    let trace_id = id.replace('-', "");
    assert!(spans.iter().all(|s| s.trace_id == trace_id), "{spans:#?}");
    let root_of = |task: &str| {
        spans
            .iter()
            .find(|s| s.name.starts_with("invoke_agent") && s.attr("baton.task.id") == task)
            .unwrap_or_else(|| panic!("no root span for {task}: {spans:#?}"))
    };
    let parent_root = root_of(&id);
    let child_root = root_of(&child_id);
    assert!(parent_root.parent.is_empty());
    assert_eq!(child_root.name, "invoke_agent researcher");
    assert_eq!(
        child_root.parent, parent_root.span_id,
        "the child hangs under its parent"
    );

    // Content: the messages of each model call, the tool's arguments and
    // result; the key scrubbed from all of it.
    let parent_chat = spans
        .iter()
        .find(|s| s.name.starts_with("chat ") && s.attr("baton.task.id") == id.as_str())
        .expect("the parent's model call");
    let input = parent_chat
        .attr("gen_ai.input.messages")
        .as_str()
        .expect("input messages");
    assert!(input.contains("what-time-is-it-in-Paris"), "{input}");
    assert!(input.contains("[redacted]"), "{input}");
    let messages: Value = serde_json::from_str(input).expect("JSON messages");
    assert_eq!(messages[0]["role"], "user");
    assert!(parent_chat.attr("gen_ai.output.messages").is_string());
    assert!(parent_chat.attr("gen_ai.system_instructions").is_string());
    let tool = spans
        .iter()
        .find(|s| s.name == "execute_tool current_time")
        .expect("the child's tool call");
    assert_eq!(tool.attr("baton.task.id"), child_id.as_str());
    assert!(
        tool.attr("gen_ai.tool.call.arguments").is_string(),
        "{tool:?}"
    );
    assert!(tool.attr("gen_ai.tool.call.result").is_string(), "{tool:?}");
    let (_, requests) = received(&server).await;
    for r in &requests {
        assert!(!String::from_utf8_lossy(&r.body).contains(OTLP_KEY));
    }
    assert!(!app.log().contains(OTLP_KEY), "the key is in the log");
}
