//! `POST /tasks/{id}/fork` through the real binary, on both backends: a
//! fork from step 2 of a five-step task whose every tool step calls a
//! declared HTTP tool (the side-effect sink) starts from exactly the
//! source's first two steps and, with its tools recorded, replays their
//! results without the sink seeing a call; a recorded fork asking for
//! another call is told it was not recorded; bad forks are refused, and a
//! running source runs on to its own end.

use crate::common::{Backend, Options, TestApp};
use baton_core::Message;
use serde_json::{json, Value};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;
use wiremock::{Mock, MockServer, Request, Respond, ResponseTemplate};

const LONG: Duration = Duration::from_secs(90);
/// Four steps that call `ping` with the same arguments, then the answer.
const SOURCE: &str = r#"#tool=ping #args={"n":1} #repeat=4"#;

/// The side-effect sink: counts its calls and says which one each was.
struct Sink(Arc<AtomicUsize>);

impl Respond for Sink {
    fn respond(&self, _: &Request) -> ResponseTemplate {
        let n = self.0.fetch_add(1, Ordering::SeqCst) + 1;
        ResponseTemplate::new(200).set_body_string(format!("pong number {n}"))
    }
}

async fn sink() -> (MockServer, Arc<AtomicUsize>) {
    let server = MockServer::start().await;
    let count = Arc::new(AtomicUsize::new(0));
    Mock::given(wiremock::matchers::method("GET"))
        .and(wiremock::matchers::path("/ping"))
        .respond_with(Sink(count.clone()))
        .mount(&server)
        .await;
    (server, count)
}

async fn app(backend: Backend, sink: &MockServer) -> TestApp {
    let agents = format!(
        r#"
[http_tools.ping]
description = "Ping the sink"
method = "GET"
url = "http://{}/ping"
parameters = {{ type = "object", properties = {{ n = {{ type = "integer" }} }} }}

[agents.default]
tools = ["ping", "current_time"]

[agents.default.limits]
max_identical_calls = 10
"#,
        sink.address()
    );
    TestApp::spawn(Options {
        backend,
        extra_env: vec![("BATON_AGENTS_TOML".into(), agents)],
        ..Options::default()
    })
    .await
}

fn assistant_turns(messages: &[Message]) -> usize {
    messages
        .iter()
        .filter(|m| matches!(m, Message::Assistant { .. }))
        .count()
}

/// The tool results of a task's events, as `(step, content, is_error)`.
async fn tool_results(app: &TestApp, id: &str) -> Vec<(u64, String, bool)> {
    app.events(id)
        .await
        .iter()
        .filter(|e| e["type"] == "tool_result")
        .map(|e| {
            (
                e["step"].as_u64().unwrap_or_default(),
                e["content"].as_str().unwrap_or_default().to_owned(),
                e["is_error"].as_bool().unwrap_or_default(),
            )
        })
        .collect()
}

async fn fork(app: &TestApp, id: &str, body: Value) -> String {
    let (status, v) = app.post_json(&format!("/tasks/{id}/fork"), &body).await;
    assert_eq!(status, 202, "{v}\n{}", app.log());
    assert_eq!(v["status"], "queued", "{v}");
    v["task_id"].as_str().expect("task_id").to_owned()
}

async fn a_recorded_fork_replays_the_source_without_running_a_tool(backend: Backend) {
    let (server, calls) = sink().await;
    let app = app(backend, &server).await;
    let src = app.submit_ok(SOURCE).await;
    let source = app.wait_done(&src, LONG).await;
    assert_eq!(source["status"], "succeeded", "{source}\n{}", app.log());
    assert_eq!(source["steps"], 5, "{source}");
    assert_eq!(
        calls.load(Ordering::SeqCst),
        4,
        "the source called the sink per step"
    );
    let asked_by_source = app.llm.received();

    let id = fork(&app, &src, json!({"from_step": 2, "tools": "recorded"})).await;
    let forked = app.wait_done(&id, LONG).await;
    assert_eq!(forked["status"], "succeeded", "{forked}\n{}", app.log());
    assert_eq!(
        calls.load(Ordering::SeqCst),
        4,
        "the sink saw no call of the fork"
    );
    assert_eq!(
        forked["result"], source["result"],
        "the same answer, from the record"
    );
    assert_eq!(forked["steps"], 5);
    assert_eq!(forked["forked_from"], json!({"task_id": src, "step": 2}));
    assert_eq!(forked["tools"], "recorded");
    assert_eq!(forked["requester"], json!({"kind": "http"}));
    assert_eq!(app.task(&src).await["forks"], json!([id]));
    // Steps 3 and 4 answered with the source's results: the same content.
    let recorded = tool_results(&app, &src).await;
    let replayed = tool_results(&app, &id).await;
    assert_eq!(
        replayed, recorded,
        "copied steps 1-2, then 3-4 from the record"
    );

    // The fork's first model request carries exactly the source's first two
    // steps: the messages the source's third request had.
    let asked_by_fork = app.llm.received()[asked_by_source.len()..].to_vec();
    let first = asked_by_fork.first().expect("the fork asked the model");
    assert_eq!(assistant_turns(&first.messages), 2, "{:?}", first.messages);
    let source_third = asked_by_source
        .iter()
        .find(|r| assistant_turns(&r.messages) == 2)
        .expect("the source's third request");
    assert_eq!(first.messages, source_third.messages);

    // Another call than the source's at that position is not recorded.
    let other = fork(
        &app,
        &src,
        json!({"from_step": 2, "tools": "recorded",
               "input": r#"#tool=ping #args={"n":2} #repeat=4"#}),
    )
    .await;
    let forked = app.wait_done(&other, LONG).await;
    assert_eq!(forked["status"], "succeeded", "{forked}\n{}", app.log());
    assert_eq!(calls.load(Ordering::SeqCst), 4, "nothing ran");
    let results = tool_results(&app, &other).await;
    let (step, content, is_error) = results.last().expect("a result").clone();
    assert!(
        step == 4 && is_error && content.contains("was not recorded"),
        "{results:?}"
    );
    assert!(
        forked["result"]
            .as_str()
            .unwrap_or_default()
            .contains("was not recorded"),
        "{forked}"
    );
    let forks = app.task(&src).await["forks"].clone();
    assert_eq!(forks, json!([id, other]));
}

async fn bad_forks_are_refused_and_a_running_source_runs_on(backend: Backend) {
    let (server, calls) = sink().await;
    let app = app(backend, &server).await;
    let (status, v) = app
        .post_json("/tasks/nope!/fork", &json!({"from_step": 1}))
        .await;
    assert_eq!(status, 400, "{v}");
    let unknown = baton_core::TaskId::generate();
    let (status, v) = app
        .post_json(&format!("/tasks/{unknown}/fork"), &json!({"from_step": 1}))
        .await;
    assert_eq!(status, 404, "{v}");

    // A slow source: each answer takes a while, so it is still running.
    let src = app
        .submit_ok(r#"#tool=ping #args={"n":1} #repeat=4 #sleep=1000"#)
        .await;
    let started = std::time::Instant::now();
    while calls.load(Ordering::SeqCst) < 2 {
        assert!(started.elapsed() < LONG, "the source never reached step 2");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let running = app.task(&src).await;
    assert!(
        ["queued", "running"].contains(&running["status"].as_str().unwrap_or_default()),
        "{running}"
    );
    for (body, says) in [
        (json!({"from_step": 9}), "`from_step` 9"),
        (json!({"from_step": 1, "tools": "simulated"}), "`tools`"),
        (json!({"from_step": -1}), "`from_step`"),
        (
            json!({"from_step": 1, "agent": "nobody"}),
            "unknown agent `nobody`",
        ),
    ] {
        let (status, v) = app.post_json(&format!("/tasks/{src}/fork"), &body).await;
        assert_eq!(status, 400, "{body}: {v}");
        assert!(
            v["error"].as_str().unwrap_or_default().contains(says),
            "{v}"
        );
    }
    let id = fork(&app, &src, json!({"from_step": 1})).await;
    let source = app.wait_done(&src, LONG).await;
    assert_eq!(source["status"], "succeeded", "{source}\n{}", app.log());
    assert_eq!(
        source["steps"], 5,
        "the source ran to its own end: {source}"
    );
    assert_eq!(source["forks"], json!([id]));
    // A live fork runs its tools: from step 1 it calls the sink three times.
    let forked = app.wait_done(&id, LONG).await;
    assert_eq!(forked["status"], "succeeded", "{forked}\n{}", app.log());
    assert!(forked.get("tools").is_none(), "{forked}");
    assert_eq!(calls.load(Ordering::SeqCst), 4 + 3);
}

on_both_backends!(
    a_recorded_fork_replays_the_source_without_running_a_tool,
    bad_forks_are_refused_and_a_running_source_runs_on
);
