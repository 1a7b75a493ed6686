//! Baton as an A2A agent (docs/integrations.md#a2a-clients), through the
//! real binary and the official A2A Python SDK's client
//! (`tests/fixtures/a2a/client.py`, `a2a-sdk` in .venv): the agent card,
//! a message sent and answered, a stream of the task's states ending with
//! the answer, a question answered by a message to the task, get, cancel;
//! and what is refused: another bearer (401), an agent not exposed (404),
//! malformed or unknown JSON-RPC calls (A2A's error codes).

use crate::common::{Backend, Options, TestApp, TOKEN};
use serde_json::{json, Value};
use std::path::Path;
use std::process::Command;
use std::time::Duration;

const LONG: Duration = Duration::from_secs(90);
// No spaces: the scripted model reads `#args` up to the first space.
const ASK: &str = r#"#tool=ask_user #args={"question":"Which-environment?"}"#;
const SLOW: &str = "#steps=30 #sleep=500";

const EXPOSED_DEFAULT: &str = r#"
[agents.default]
expose = ["a2a"]

[agents.hidden]
description = "Not for A2A."
"#;

const EXPOSED_HELPER: &str = r#"
[agents.helper]
description = "Answers questions about the fleet."
expose = ["a2a"]

[agents.hidden]
description = "Not for A2A."
"#;

async fn spawn(backend: Backend, agents: &str) -> TestApp {
    TestApp::spawn(Options {
        backend,
        extra_env: vec![("BATON_AGENTS_TOML".into(), agents.into())],
        ..Options::default()
    })
    .await
}

/// Runs the SDK client against `agent`'s A2A URL with `token`: its JSON
/// lines, and whether it succeeded.
async fn client_as(app: &TestApp, token: &str, agent: &str, args: &[&str]) -> (bool, Vec<Value>) {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let python = root.join(".venv/bin/python");
    assert!(
        python.exists(),
        "{} is missing: run ./scripts/test.sh (it installs a2a-sdk)",
        python.display()
    );
    let mut cmd = Command::new(python);
    cmd.arg(root.join("tests/fixtures/a2a/client.py"))
        .arg(format!("{}/a2a/{agent}", app.url))
        .arg(token)
        .args(args);
    let out = tokio::task::spawn_blocking(move || cmd.output())
        .await
        .unwrap()
        .expect("run the A2A client");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let lines: Vec<Value> = stdout
        .lines()
        .map(|l| {
            serde_json::from_str(l).unwrap_or_else(|e| panic!("not JSON ({e}): {l}\n{stdout}"))
        })
        .collect();
    if !out.status.success() && lines.is_empty() {
        panic!(
            "the A2A client failed: {}\nlog:\n{}",
            String::from_utf8_lossy(&out.stderr),
            app.log()
        );
    }
    (out.status.success(), lines)
}

async fn client(app: &TestApp, agent: &str, args: &[&str]) -> Vec<Value> {
    let (ok, lines) = client_as(app, TOKEN, agent, args).await;
    assert!(ok, "{lines:?}\nlog:\n{}", app.log());
    lines
}

fn state(task_or_status: &Value) -> &str {
    task_or_status["status"]["state"].as_str().unwrap_or("")
}

async fn send_answers(backend: Backend) {
    let app = spawn(backend, EXPOSED_DEFAULT).await;
    // The card, public, as the SDK resolves it.
    let card = &client(&app, "default", &["card"]).await[0];
    assert_eq!(card["name"], "default", "{card}");
    assert_eq!(card["capabilities"]["streaming"], true, "{card}");
    assert_eq!(
        card["supportedInterfaces"][0]["url"],
        format!("{}/a2a/default", app.url),
        "{card}"
    );
    assert_eq!(card["supportedInterfaces"][0]["protocolBinding"], "JSONRPC");
    assert_eq!(
        card["securitySchemes"]["bearer"]["httpAuthSecurityScheme"]["scheme"], "Bearer",
        "{card}"
    );
    assert_eq!(card["skills"].as_array().map(Vec::len), Some(1), "{card}");
    // The default agent's card is also at the well-known path, no token.
    let r = app
        .http
        .get(format!("{}/.well-known/agent-card.json", app.url))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    assert_eq!(r.json::<Value>().await.unwrap()["name"], "default");

    // A message, answered: one A2A task, one Baton task.
    let lines = client(&app, "default", &["send", "#reply=pong-42"]).await;
    assert_eq!(lines.len(), 1, "{lines:?}");
    let task = &lines[0]["task"];
    assert_eq!(
        state(task),
        "TASK_STATE_COMPLETED",
        "{task}\nlog:\n{}",
        app.log()
    );
    assert_eq!(
        task["artifacts"][0]["parts"][0]["text"], "pong-42",
        "{task}"
    );
    let id = task["id"].as_str().unwrap();
    let context = task["contextId"].as_str().expect("a contextId");
    let baton = app.task(id).await;
    assert_eq!(baton["status"], "succeeded", "{baton}");
    assert_eq!(baton["thread"], context, "contextId is the task's thread");
    assert_eq!(baton["requester"]["kind"], "http", "{baton}");

    // Get.
    let got = &client(&app, "default", &["get", id]).await[0];
    assert_eq!(got["id"], id);
    assert_eq!(state(got), "TASK_STATE_COMPLETED", "{got}");
    assert_eq!(got["artifacts"][0]["parts"][0]["text"], "pong-42");

    // Another message in the context: the conversation's next task.
    let lines = client(&app, "default", &["send", "#reply=again", context]).await;
    let next = &lines[0]["task"];
    assert_ne!(next["id"], id, "{next}");
    assert_eq!(next["contextId"], context, "{next}");
    assert_eq!(state(next), "TASK_STATE_COMPLETED", "{next}");
}

async fn stream_states_in_order(backend: Backend) {
    let app = spawn(backend, EXPOSED_DEFAULT).await;
    let events = client(
        &app,
        "default",
        &["stream", "#sleep=600 #reply=streamed-answer"],
    )
    .await;
    let rank = |s: &str| match s {
        "TASK_STATE_SUBMITTED" => 0,
        "TASK_STATE_WORKING" => 1,
        "TASK_STATE_COMPLETED" => 2,
        other => panic!("unexpected state {other}: {events:?}"),
    };
    // The task first, then its updates.
    let first = &events[0]["task"];
    assert!(first.is_object(), "{events:?}");
    let id = first["id"].as_str().unwrap();
    let mut states = vec![state(first).to_owned()];
    let mut answer = None;
    for e in &events[1..] {
        if let Some(s) = e.get("statusUpdate") {
            assert_eq!(s["taskId"], id);
            states.push(state(s).to_owned());
        } else if let Some(a) = e.get("artifactUpdate") {
            assert_eq!(a["taskId"], id);
            answer = a["artifact"]["parts"][0]["text"]
                .as_str()
                .map(str::to_owned);
        } else {
            panic!("unexpected event {e}");
        }
    }
    let ranks: Vec<i32> = states.iter().map(|s| rank(s)).collect();
    assert!(ranks.windows(2).all(|w| w[0] <= w[1]), "{states:?}");
    assert!(
        states.iter().any(|s| s == "TASK_STATE_WORKING"),
        "{states:?}"
    );
    assert_eq!(
        states.last().map(String::as_str),
        Some("TASK_STATE_COMPLETED")
    );
    assert_eq!(answer.as_deref(), Some("streamed-answer"), "{events:?}");
    // The answer comes before the last status, and nothing after it.
    assert!(
        events[events.len() - 2].get("artifactUpdate").is_some(),
        "{events:?}"
    );

    // A question: the stream ends asking it; a message to the task answers
    // it, and the same task goes on to its answer.
    let events = client(&app, "default", &["stream", ASK]).await;
    let last = events.last().unwrap();
    let update = &last["statusUpdate"];
    assert_eq!(
        state(update),
        "TASK_STATE_INPUT_REQUIRED",
        "{events:?}\nlog:\n{}",
        app.log()
    );
    assert_eq!(
        update["status"]["message"]["parts"][0]["text"], "Which-environment?",
        "{update}"
    );
    let id = update["taskId"].as_str().unwrap();
    let context = update["contextId"].as_str().unwrap();
    let lines = client(&app, "default", &["send", "staging", context, id]).await;
    let task = &lines[0]["task"];
    assert_eq!(task["id"], id, "the same task: {task}");
    assert_eq!(
        state(task),
        "TASK_STATE_COMPLETED",
        "{task}\nlog:\n{}",
        app.log()
    );
    assert_eq!(
        task["artifacts"][0]["parts"][0]["text"],
        "[scripted model] tool ask_user said: staging"
    );
}

async fn cancel_ends_the_task(backend: Backend) {
    let app = spawn(backend, EXPOSED_DEFAULT).await;
    let lines = client(&app, "default", &["submit", SLOW]).await;
    let task = &lines[0]["task"];
    let id = task["id"].as_str().unwrap().to_owned();
    assert!(
        matches!(state(task), "TASK_STATE_SUBMITTED" | "TASK_STATE_WORKING"),
        "{task}"
    );
    let cancelled = &client(&app, "default", &["cancel", &id]).await[0];
    assert_eq!(cancelled["id"], id.as_str());
    let baton = app.wait_done(&id, LONG).await;
    assert_eq!(baton["status"], "cancelled", "{baton}");
    let got = &client(&app, "default", &["get", &id]).await[0];
    assert_eq!(state(got), "TASK_STATE_CANCELED", "{got}");
    // Far fewer steps than asked for: it was cut short.
    assert!(baton["steps"].as_u64().unwrap() < 30, "{baton}");
}

/// A JSON-RPC call with the token: the HTTP status and the body.
async fn rpc(app: &TestApp, agent: &str, body: &str) -> (u16, Value) {
    let r = app
        .http
        .post(format!("{}/a2a/{agent}", app.url))
        .bearer_auth(TOKEN)
        .header("content-type", "application/json")
        .body(body.to_owned())
        .send()
        .await
        .unwrap();
    (r.status().as_u16(), r.json().await.unwrap_or(Value::Null))
}

async fn refusals(backend: Backend) {
    let app = spawn(backend, EXPOSED_HELPER).await;
    let get = |path: &'static str| {
        let url = format!("{}{path}", app.url);
        let http = app.http.clone();
        async move { http.get(url).send().await.unwrap().status().as_u16() }
    };
    // `default` is not exposed here: no well-known card; `helper` is.
    assert_eq!(get("/.well-known/agent-card.json").await, 404);
    assert_eq!(get("/a2a/helper/.well-known/agent-card.json").await, 200);
    assert_eq!(get("/a2a/hidden/.well-known/agent-card.json").await, 404);
    assert_eq!(get("/a2a/nobody/.well-known/agent-card.json").await, 404);
    let get_task = json!({"jsonrpc": "2.0", "id": 1, "method": "GetTask",
                          "params": {"id": "0193aaaa-0000-7000-8000-000000000000"}})
    .to_string();
    for agent in ["default", "hidden", "nobody"] {
        assert_eq!(rpc(&app, agent, &get_task).await.0, 404, "{agent}");
    }
    // Another bearer: 401, through the SDK too.
    let r = app
        .http
        .post(format!("{}/a2a/helper", app.url))
        .bearer_auth("not-the-token-0123456789")
        .header("content-type", "application/json")
        .body(get_task.clone())
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 401);
    let (ok, lines) = client_as(&app, "not-the-token-0123456789", "helper", &["send", "hi"]).await;
    assert!(!ok, "{lines:?}");
    assert!(
        lines[0]["message"].as_str().unwrap_or("").contains("401"),
        "{lines:?}"
    );

    // JSON-RPC errors with A2A's codes, and nothing created.
    let code = |v: &Value| v["error"]["code"].as_i64();
    let (status, v) = rpc(&app, "helper", &get_task).await;
    assert_eq!((status, code(&v)), (200, Some(-32001)), "{v}");
    assert_eq!(v["id"], 1);
    let (_, v) = rpc(&app, "helper", "{not json").await;
    assert_eq!(code(&v), Some(-32700), "{v}");
    let (_, v) = rpc(
        &app,
        "helper",
        r#"{"jsonrpc":"2.0","id":"x","method":"Nope"}"#,
    )
    .await;
    assert_eq!(code(&v), Some(-32601), "{v}");
    let (_, v) = rpc(
        &app,
        "helper",
        r#"{"jsonrpc":"2.0","id":2,"method":"message/send","params":{}}"#,
    )
    .await;
    assert_eq!(code(&v), Some(-32009), "{v}");
    let empty = json!({"jsonrpc": "2.0", "id": 3, "method": "SendMessage",
                       "params": {"message": {"messageId": "m-1", "role": "ROLE_USER", "parts": []}}});
    let (_, v) = rpc(&app, "helper", &empty.to_string()).await;
    assert_eq!(code(&v), Some(-32602), "{v}");
    let slack = json!({"jsonrpc": "2.0", "id": 4, "method": "SendMessage",
                       "params": {"message": {"messageId": "m-2", "contextId": "slack:T1:C1",
                                              "parts": [{"text": "hi"}]}}});
    let (_, v) = rpc(&app, "helper", &slack.to_string()).await;
    assert_eq!(code(&v), Some(-32602), "{v}");
    let (_, listed) = app.get("/tasks").await;
    assert_eq!(listed["tasks"], json!([]), "nothing was created: {listed}");
    // A task unknown to the SDK's client: its TaskNotFoundError.
    let (ok, lines) = client_as(
        &app,
        TOKEN,
        "helper",
        &["get", "0193aaaa-0000-7000-8000-000000000000"],
    )
    .await;
    assert!(!ok);
    assert_eq!(lines[0]["error"], "TaskNotFoundError", "{lines:?}");
}

on_both_backends!(
    send_answers,
    stream_states_in_order,
    cancel_ends_the_task,
    refusals
);
