//! Baton as an MCP server (`/mcp`, issue #27 item 1), end to end on both
//! backends, with the official MCP Python SDK's client
//! (`tests/fixtures/mcp/baton_client.py`) in both its modes: the
//! handshake of the earlier protocol (`legacy`) and the stateless
//! `2026-07-28` one (`auto`). Only exposed agents are tools; an agent
//! answers a call; a task waiting for approval says so at once, how to
//! approve it, and `get_task` gives its answer once approved over the
//! API; without the bearer, a 401 that names the scheme; a browser's
//! request from a foreign `Origin`, a 403 before the bearer is looked at
//! (the MCP specification's rule against DNS rebinding).

use crate::common::{Backend, Options, TestApp, TOKEN};
use serde_json::{json, Value};
use std::path::Path;
use std::process::Command;
use wiremock::{Mock, MockServer, ResponseTemplate};

const AGENTS: &str = r#"
[agents.helper]
description = "Answers what it is asked."
expose = ["mcp"]

[agents.gated]
expose = ["mcp", "a2a"]

[agents.gated.approval]
require = ["http_request:GET"]

[agents.hidden]
description = "Not for MCP clients."
"#;

/// A browser origin `/mcp` answers besides the deployment's own.
const LISTED_ORIGIN: &str = "http://localhost:5173";

async fn spawn(backend: Backend, allow: &str) -> TestApp {
    TestApp::spawn(Options {
        backend,
        extra_env: vec![
            ("BATON_AGENTS_TOML".into(), AGENTS.into()),
            ("BATON_HTTP_ALLOW".into(), allow.into()),
            ("BATON_MCP_ALLOWED_ORIGINS".into(), LISTED_ORIGIN.into()),
        ],
        ..Options::default()
    })
    .await
}

/// The client script's JSON for `args` against the app's `/mcp`.
async fn client(app: &TestApp, mode: &str, args: &[&str]) -> Value {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut cmd = Command::new(root.join(".venv/bin/python"));
    cmd.arg(root.join("tests/fixtures/mcp/baton_client.py"))
        .arg(format!("{}/mcp", app.url))
        .arg(mode)
        .args(args)
        .env("BATON_MCP_TOKEN", TOKEN);
    let out = tokio::task::spawn_blocking(move || cmd.output())
        .await
        .unwrap()
        .expect("run .venv/bin/python (./scripts/test.sh installs mcp)");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "client {args:?} failed: {}\n{stdout}\nlog:\n{}",
        String::from_utf8_lossy(&out.stderr),
        app.log()
    );
    serde_json::from_str(stdout.trim()).unwrap_or_else(|e| panic!("{e}: {stdout}"))
}

async fn call(app: &TestApp, mode: &str, tool: &str, args: Value) -> Value {
    client(app, mode, &["call", tool, &args.to_string()]).await
}

async fn exposed_agents_are_listed_and_answer(backend: Backend) {
    let app = spawn(backend, "127.0.0.1:9").await;
    for mode in ["legacy", "auto"] {
        let v = client(&app, mode, &["list"]).await;
        let names: Vec<&str> = v["tools"]
            .as_array()
            .unwrap()
            .iter()
            .map(|t| t["name"].as_str().unwrap())
            .collect();
        assert_eq!(names, ["gated", "helper", "get_task"], "{mode}: {v}");
        assert_eq!(v["tools"][1]["description"], "Answers what it is asked.");
        assert_eq!(v["tools"][1]["input_schema"]["required"], json!(["input"]));

        let thread = format!("mcp-{mode}");
        let v = call(
            &app,
            mode,
            "helper",
            json!({"input": "#reply=forty-two", "thread": thread}),
        )
        .await;
        assert_eq!(v["is_error"], false, "{mode}: {v}");
        assert_eq!(v["text"], "forty-two", "{mode}: {v}");
        // The first status text is sent as progress whatever it is.
        let progress = v["progress"].as_array().unwrap();
        assert!(!progress.is_empty(), "{mode}: {v}");
        let s = &v["structured"];
        assert_eq!(
            (s["status"].as_str(), s["thread"].as_str()),
            (Some("succeeded"), Some(thread.as_str()))
        );
        // The task is the API's, on the thread the call named.
        let task = app.task(s["task_id"].as_str().unwrap()).await;
        assert_eq!(task["agent"], "helper");
        assert_eq!(task["thread"], thread.as_str());
        assert_eq!(task["requester"]["kind"], "http", "{task}");
    }
    // The protocol the modes speak: the handshake, then the stateless one.
    assert_eq!(
        client(&app, "legacy", &["list"]).await["protocol_version"],
        "2025-11-25"
    );
    assert_eq!(
        client(&app, "auto", &["list"]).await["protocol_version"],
        "2026-07-28"
    );

    // An agent not exposed is not callable over MCP.
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let out = Command::new(root.join(".venv/bin/python"))
        .arg(root.join("tests/fixtures/mcp/baton_client.py"))
        .arg(format!("{}/mcp", app.url))
        .args(["auto", "call", "hidden", r#"{"input": "hi"}"#])
        .env("BATON_MCP_TOKEN", TOKEN)
        .output()
        .unwrap();
    assert!(!out.status.success(), "hidden was called");
    let (_, listed) = app.get("/tasks?agent=hidden").await;
    assert_eq!(listed["tasks"], json!([]), "{listed}");
}

async fn a_task_awaiting_approval_says_so_and_get_task_answers_once_approved(backend: Backend) {
    let server = MockServer::start().await;
    Mock::given(wiremock::matchers::any())
        .respond_with(ResponseTemplate::new(200).set_body_string("the weather is fine"))
        .mount(&server)
        .await;
    let app = spawn(backend, &server.address().to_string()).await;
    let input = format!(
        r#"#tool=http_request #args={{"method":"GET","url":"http://{}/weather"}}"#,
        server.address()
    );
    // The call answers while the task waits, without waiting out its bound.
    let v = call(&app, "auto", "gated", json!({"input": input})).await;
    assert_eq!(v["is_error"], false, "{v}");
    let s = &v["structured"];
    assert_eq!(s["status"], "waiting", "{v}");
    assert_eq!(s["waiting_for"]["kind"], "approval", "{v}");
    let id = s["task_id"].as_str().unwrap().to_owned();
    let approval = s["waiting_for"]["approval_id"].as_str().unwrap().to_owned();
    let route = format!("/tasks/{id}/approvals/{approval}");
    let text = v["text"].as_str().unwrap();
    assert!(text.contains(&route) && text.contains("get_task"), "{text}");

    // get_task says the same until someone decides; nothing ran.
    let v = call(&app, "legacy", "get_task", json!({"task_id": id})).await;
    assert_eq!(v["structured"]["status"], "waiting", "{v}");
    assert!(server.received_requests().await.unwrap().is_empty());

    let (status, decided) = app.post_json(&route, &json!({"approve": true})).await;
    assert_eq!(status, 202, "{decided}");
    app.wait_done(&id, std::time::Duration::from_secs(60)).await;
    let v = call(&app, "auto", "get_task", json!({"task_id": id})).await;
    assert_eq!(v["structured"]["status"], "succeeded", "{v}");
    let answer = v["text"].as_str().unwrap();
    assert!(answer.contains("the weather is fine"), "{v}");
    assert_eq!(server.received_requests().await.unwrap().len(), 1);
}

async fn without_the_bearer_or_from_a_foreign_origin_mcp_refuses(backend: Backend) {
    let app = spawn(backend, "127.0.0.1:9").await;
    let body = json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-11-25", "capabilities": {},
        "clientInfo": {"name": "e2e", "version": "0"}}});
    for token in [None, Some("not-the-token-0123456789")] {
        let mut req = app
            .http
            .post(format!("{}/mcp", app.url))
            .header("accept", "application/json, text/event-stream")
            .json(&body);
        if let Some(t) = token {
            req = req.bearer_auth(t);
        }
        let r = req.send().await.unwrap();
        assert_eq!(r.status(), 401);
        assert_eq!(r.headers()["www-authenticate"], "Bearer");
    }
    // Origins: a foreign one is refused first, with or without the
    // bearer; the deployment's own (`baton dev`'s address), one listed in
    // BATON_MCP_ALLOWED_ORIGINS, and none at all are answered.
    let send = |origin: Option<String>, token: Option<&'static str>| {
        let mut req = app
            .http
            .post(format!("{}/mcp", app.url))
            .header("accept", "application/json, text/event-stream")
            .json(&body);
        if let Some(o) = origin {
            req = req.header("origin", o);
        }
        if let Some(t) = token {
            req = req.bearer_auth(t);
        }
        async move { req.send().await.unwrap().status().as_u16() }
    };
    for token in [None, Some(TOKEN)] {
        assert_eq!(send(Some("https://evil.example".into()), token).await, 403);
        assert_eq!(send(Some("null".into()), token).await, 403);
    }
    let own = app.url.trim_end_matches('/').to_owned();
    for ok in [Some(own.clone()), Some(LISTED_ORIGIN.into()), None] {
        assert_eq!(send(ok.clone(), Some(TOKEN)).await, 200, "{ok:?}");
    }
    assert_eq!(send(Some(own), None).await, 401);
    let (_, listed) = app.get("/tasks").await;
    assert_eq!(listed["tasks"], json!([]), "{listed}");
}

on_both_backends!(
    exposed_agents_are_listed_and_answer,
    a_task_awaiting_approval_says_so_and_get_task_answers_once_approved,
    without_the_bearer_or_from_a_foreign_origin_mcp_refuses,
);
