//! `/mcp` through [`Ingest::handle`], as a client of the stateless
//! protocol (`2026-07-28`, each request carrying its own metadata) and of
//! the handshake one speaks it. No worker runs here, so a task stays
//! queued until a test ends it in the store.

use crate::{ApiToken, Ingest};
use baton_core::{TaskId, TaskStatus, TaskStore};
use baton_embedded::{EmbeddedBackend, QueueConfig};
use baton_settings::{AgentConfig, Agents, Exposure, Surface};
use bytes::Bytes;
use serde_json::{json, Value};
use std::time::Duration;

const TOKEN: &str = "test-token-0123456789";

struct Fixture {
    ingest: Ingest,
    store: TaskStore,
    _dir: tempfile::TempDir,
}

fn fixture() -> Fixture {
    fixture_exposing(true)
}

/// `helper` exposed over MCP when `mcp`, `shy` over A2A only.
fn fixture_exposing(mcp: bool) -> Fixture {
    let dir = tempfile::tempdir().unwrap();
    let b = EmbeddedBackend::open(dir.path(), QueueConfig::default()).unwrap();
    let store = TaskStore::new(b.table.clone(), b.blobs.clone());
    let mut helper = AgentConfig::new("helper", "scripted");
    helper.description = Some("Answers questions about the weather.".into());
    if mcp {
        helper.expose = Exposure::new([Surface::Mcp]);
    }
    let mut shy = AgentConfig::new("shy", "scripted");
    shy.expose = Exposure::new([Surface::A2a]);
    let agents = Agents::new(AgentConfig::new("default", "scripted"), vec![helper, shy]);
    let token = Some(ApiToken::parse(TOKEN).unwrap());
    Fixture {
        ingest: Ingest::new(store.clone(), b.queue.clone(), agents, token, None),
        store,
        _dir: dir,
    }
}

/// The per-request metadata of the stateless protocol; `tasks` declares
/// the tasks extension.
fn meta(tasks: bool) -> Value {
    let caps = if tasks {
        json!({"extensions": {"io.modelcontextprotocol/tasks": {}}})
    } else {
        json!({})
    };
    json!({
        "io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientInfo": {"name": "test", "version": "1"},
        "io.modelcontextprotocol/clientCapabilities": caps
    })
}

fn request(method: &str, mut params: Value, tasks: bool) -> Value {
    params["_meta"] = meta(tasks);
    json!({"jsonrpc": "2.0", "id": 1, "method": method, "params": params})
}

/// The HTTP answer's status and its JSON-RPC message (the last one of an
/// event stream).
async fn post(f: &Fixture, body: &Value, token: Option<&str>, wait: Duration) -> (u16, Value) {
    let mut req = http::Request::builder()
        .method("POST")
        .uri("/mcp")
        .header("content-type", "application/json")
        .header("accept", "application/json, text/event-stream")
        .header("mcp-protocol-version", "2026-07-28");
    if let Some(t) = token {
        req = req.header("authorization", format!("Bearer {t}"));
    }
    // The stateless protocol repeats the method and its name in headers.
    if let Some(m) = body["method"].as_str() {
        req = req.header("mcp-method", m);
    }
    let params = &body["params"];
    if let Some(n) = params["name"].as_str().or(params["taskId"].as_str()) {
        req = req.header("mcp-name", n);
    }
    let req = req.body(Bytes::from(body.to_string())).unwrap();
    let resp = f.ingest.mcp_waiting(req, false, wait).await.unwrap();
    let status = resp.status().as_u16();
    let text = String::from_utf8_lossy(&resp.into_body().collect().await).into_owned();
    let message = text
        .lines()
        .filter_map(|l| l.strip_prefix("data:"))
        .rfind(|d| !d.trim().is_empty())
        .map(str::to_owned)
        .unwrap_or(text.clone());
    (
        status,
        serde_json::from_str(message.trim()).unwrap_or(json!(text)),
    )
}

async fn call(f: &Fixture, name: &str, args: Value, tasks: bool) -> Value {
    let body = request(
        "tools/call",
        json!({"name": name, "arguments": args}),
        tasks,
    );
    let (status, v) = post(f, &body, Some(TOKEN), Duration::ZERO).await;
    assert_eq!(status, 200, "{v}");
    v
}

async fn finish(f: &Fixture, id: &str, answer: &str) {
    let id = TaskId::parse(id).unwrap();
    f.store
        .update(&id, None, |t| {
            t.finish(TaskStatus::Succeeded);
            t.answer.result = Some(answer.to_owned());
            Ok(Some(Vec::new()))
        })
        .await
        .unwrap();
}

#[tokio::test]
async fn without_the_bearer_it_is_a_401_that_names_the_scheme() {
    let f = fixture();
    let body = request("tools/list", json!({}), false);
    for token in [None, Some("not-the-token-at-all")] {
        let req = http::Request::builder()
            .method("POST")
            .uri("/mcp")
            .header("content-type", "application/json");
        let req = match token {
            Some(t) => req.header("authorization", format!("Bearer {t}")),
            None => req,
        };
        let resp = f
            .ingest
            .handle(req.body(Bytes::from(body.to_string())).unwrap())
            .await;
        assert_eq!(resp.status(), 401);
        assert_eq!(resp.headers()["www-authenticate"], "Bearer");
    }
    assert!(f.store.active_tasks(10).await.unwrap().is_empty());
}

/// A browser's request from an origin not allowed is refused first: 403
/// with or without the bearer, and nothing is listed or created; the own
/// origin and a request without `Origin` are answered.
#[tokio::test]
async fn a_foreign_origin_is_refused_before_the_bearer() {
    let mut f = fixture();
    let own = crate::McpOrigins::new(Some("https://baton.example.com/prod"), &[]).unwrap();
    f.ingest = f.ingest.with_mcp_origins(own);
    let body = request("tools/list", json!({}), false);
    let send = |origin: Option<&'static str>, token: Option<&'static str>| {
        let mut req = http::Request::builder()
            .method("POST")
            .uri("/mcp")
            .header("content-type", "application/json")
            .header("accept", "application/json, text/event-stream")
            .header("mcp-protocol-version", "2026-07-28")
            .header("mcp-method", "tools/list");
        if let Some(o) = origin {
            req = req.header("origin", o);
        }
        if let Some(t) = token {
            req = req.header("authorization", format!("Bearer {t}"));
        }
        let req = req.body(Bytes::from(body.to_string())).unwrap();
        let ingest = f.ingest.clone();
        async move {
            let resp = ingest
                .mcp_waiting(req, false, Duration::ZERO)
                .await
                .unwrap();
            resp.status().as_u16()
        }
    };
    for token in [None, Some(TOKEN)] {
        assert_eq!(send(Some("https://evil.example"), token).await, 403);
        assert_eq!(send(Some("null"), token).await, 403);
    }
    assert_eq!(
        send(Some("https://baton.example.com"), Some(TOKEN)).await,
        200
    );
    assert_eq!(send(None, Some(TOKEN)).await, 200);
    assert_eq!(send(Some("https://baton.example.com"), None).await, 401);
}

#[tokio::test]
async fn only_agents_exposed_over_mcp_are_tools() {
    let f = fixture();
    let (status, v) = post(
        &f,
        &request("tools/list", json!({}), false),
        Some(TOKEN),
        Duration::ZERO,
    )
    .await;
    assert_eq!(status, 200, "{v}");
    let tools = v["result"]["tools"].as_array().unwrap();
    let names: Vec<&str> = tools.iter().map(|t| t["name"].as_str().unwrap()).collect();
    assert_eq!(names, ["helper", "get_task"]);
    assert_eq!(
        tools[0]["description"],
        "Answers questions about the weather."
    );
    assert_eq!(tools[0]["inputSchema"]["required"], json!(["input"]));

    // An agent not exposed is no tool, and creates no task.
    let v = call(&f, "shy", json!({"input": "hi"}), false).await;
    assert!(
        v["error"]["message"]
            .as_str()
            .unwrap()
            .contains("no tool `shy`"),
        "{v}"
    );
    assert!(f.store.active_tasks(10).await.unwrap().is_empty());
}

#[tokio::test]
async fn a_task_outliving_the_call_is_a_task_id_then_get_task_answers() {
    let f = fixture();
    let v = call(
        &f,
        "helper",
        json!({"input": "weather?", "thread": "t9"}),
        false,
    )
    .await;
    let result = &v["result"];
    assert_eq!(result["isError"], false, "{v}");
    let s = &result["structuredContent"];
    let id = s["task_id"].as_str().unwrap().to_owned();
    assert_eq!(
        (s["status"].as_str(), s["thread"].as_str()),
        (Some("queued"), Some("t9"))
    );
    assert!(result["content"][0]["text"]
        .as_str()
        .unwrap()
        .contains("get_task"));

    // The task is an HTTP-API task on the thread, as `POST /tasks` makes.
    let task = f
        .store
        .get(&TaskId::parse(&id).unwrap())
        .await
        .unwrap()
        .unwrap();
    assert_eq!(
        (task.agent.as_str(), task.conversation.thread.as_deref()),
        ("helper", Some("http:t9"))
    );
    assert_eq!(task.source.origin, baton_core::Origin::Http);

    let v = call(&f, "get_task", json!({"task_id": id}), false).await;
    assert_eq!(v["result"]["structuredContent"]["status"], "queued");
    finish(&f, &id, "sunny").await;
    let v = call(&f, "get_task", json!({"task_id": id}), false).await;
    assert_eq!(v["result"]["content"][0]["text"], "sunny", "{v}");
    assert_eq!(v["result"]["structuredContent"]["answer"], "sunny");
}

#[tokio::test]
async fn a_client_of_the_tasks_extension_gets_an_mcp_task() {
    let f = fixture();
    let v = call(&f, "helper", json!({"input": "weather?"}), true).await;
    let result = &v["result"];
    assert_eq!(result["resultType"], "task", "{v}");
    assert_eq!(result["status"], "working");
    let id = result["taskId"].as_str().unwrap().to_owned();

    let get = request("tasks/get", json!({"taskId": id}), true);
    let (_, v) = post(&f, &get, Some(TOKEN), Duration::ZERO).await;
    assert_eq!(v["result"]["status"], "working", "{v}");
    finish(&f, &id, "sunny").await;
    let (_, v) = post(&f, &get, Some(TOKEN), Duration::ZERO).await;
    assert_eq!(v["result"]["status"], "completed", "{v}");
    assert_eq!(v["result"]["result"]["content"][0]["text"], "sunny");
}

#[tokio::test]
async fn hostile_arguments_are_refused_and_create_nothing() {
    let f = fixture();
    for args in [
        json!({"input": "x", "thread": "slack:T1:C1:1"}),
        json!({"input": "   "}),
        json!({"input": "x", "agent": "default"}),
        json!({"prompt": "x"}),
    ] {
        let v = call(&f, "helper", args.clone(), false).await;
        let refused = v["result"]["isError"] == true || v.get("error").is_some();
        assert!(refused, "{args} -> {v}");
    }
    let v = call(&f, "get_task", json!({"task_id": "nope"}), false).await;
    assert!(v.get("error").is_some(), "{v}");
    assert!(f.store.active_tasks(10).await.unwrap().is_empty());
}

#[tokio::test]
async fn progress_carries_the_task_status_text() {
    let f = fixture();
    let mut body = request(
        "tools/call",
        json!({"name": "helper", "arguments": {"input": "weather?"}}),
        false,
    );
    body["params"]["_meta"]["progressToken"] = json!("p1");
    let req = http::Request::builder()
        .method("POST")
        .uri("/mcp")
        .header("content-type", "application/json")
        .header("accept", "application/json, text/event-stream")
        .header("mcp-protocol-version", "2026-07-28")
        .header("mcp-method", "tools/call")
        .header("mcp-name", "helper")
        .header("authorization", format!("Bearer {TOKEN}"))
        .body(Bytes::from(body.to_string()))
        .unwrap();
    // The task stays queued (no worker), so the call answers at the bound.
    let resp = f
        .ingest
        .mcp_waiting(req, true, Duration::from_millis(400))
        .await
        .unwrap();
    let text = String::from_utf8_lossy(&resp.into_body().collect().await).into_owned();
    let messages: Vec<Value> = text
        .lines()
        .filter_map(|l| l.strip_prefix("data:"))
        .filter_map(|d| serde_json::from_str(d.trim()).ok())
        .collect();
    let progress: Vec<&Value> = messages
        .iter()
        .filter(|m| m["method"] == "notifications/progress")
        .collect();
    assert_eq!(progress.len(), 1, "{text}");
    assert_eq!(progress[0]["params"]["progressToken"], "p1");
    assert_eq!(progress[0]["params"]["message"], "queued");
    let last = messages.last().unwrap();
    assert_eq!(
        last["result"]["structuredContent"]["status"], "queued",
        "{text}"
    );
}

#[test]
fn a_call_waits_within_what_the_caller_allows() {
    use super::wait_for;
    use crate::Delivery;
    assert_eq!(wait_for(Delivery::BUFFERED), Duration::from_secs(20));
    assert_eq!(
        wait_for(Delivery::streaming(Duration::from_secs(3600))),
        Duration::from_secs(50)
    );
    assert_eq!(
        wait_for(Delivery::streaming(Duration::from_secs(12))),
        Duration::from_secs(7)
    );
    assert_eq!(
        wait_for(Delivery::streaming(Duration::from_secs(2))),
        Duration::ZERO
    );
}

#[tokio::test]
async fn tasks_cancel_cancels_the_baton_task() {
    let f = fixture();
    let v = call(&f, "helper", json!({"input": "weather?"}), true).await;
    let id = v["result"]["taskId"].as_str().unwrap().to_owned();
    let cancel = request("tasks/cancel", json!({"taskId": id}), true);
    let (status, v) = post(&f, &cancel, Some(TOKEN), Duration::ZERO).await;
    assert_eq!(status, 200, "{v}");
    assert!(v.get("error").is_none(), "{v}");
    let task = f
        .store
        .get(&TaskId::parse(&id).unwrap())
        .await
        .unwrap()
        .unwrap();
    assert!(
        task.cancel_requested || task.status() == TaskStatus::Cancelled,
        "{task:?}"
    );
}

#[tokio::test]
async fn with_no_agent_exposed_there_are_no_tools() {
    let f = fixture_exposing(false);
    let list = request("tools/list", json!({}), false);
    let (status, v) = post(&f, &list, Some(TOKEN), Duration::ZERO).await;
    assert_eq!(status, 200, "{v}");
    assert_eq!(v["result"]["tools"], json!([]), "{v}");
    let v = call(&f, "get_task", json!({"task_id": "x"}), false).await;
    assert!(v.get("error").is_some(), "{v}");
}
