//! MCP servers as tools (`[mcp.NAME]`, docs/tools.md) through the real
//! binary, against servers nobody on the project wrote: a tracker on the
//! official Python SDK (sessions, or the stateless protocol) and the
//! reference `server-everything` (Node). Listed and called; a bearer
//! header that reaches the server and shows nowhere else; a read-only tool
//! run again after kill -9; a destructive tool that waits for approval and
//! runs once; a server that is down, and the task still ends.

use crate::common::mcp::{McpServer, TrackerOptions};
use crate::common::{Backend, Options, TestApp, TOKEN};
use serde_json::{json, Value};
use std::time::Duration;

const LONG: Duration = Duration::from_secs(90);
const SECRET: &str = "mcp-9fQ2xL7-very-secret-bearer";

fn agents_file(tracker: &str, everything: &str) -> String {
    format!(
        r#"
[mcp.tracker]
url = "{tracker}"
headers = {{ Authorization = "Bearer ${{TRACKER_TOKEN}}" }}
timeout = "20s"

[mcp.everything]
url = "{everything}"
tools = ["echo", "get-sum"]

[agents.default]
tools = ["mcp:tracker", "mcp:everything", "current_time"]
"#
    )
}

async fn spawn(backend: Backend, agents: String) -> TestApp {
    TestApp::spawn(Options {
        backend,
        extra_env: vec![
            ("BATON_AGENTS_TOML".into(), agents),
            ("TRACKER_TOKEN".into(), SECRET.into()),
        ],
        ..Options::default()
    })
    .await
}

/// The task's trace, once it holds `needle`.
async fn trace_with(app: &TestApp, id: &str, needle: &str) -> Value {
    let started = std::time::Instant::now();
    loop {
        let (status, v) = app.get(&format!("/tasks/{id}/trace")).await;
        if status == 200 && v.to_string().contains(needle) {
            return v;
        }
        assert!(started.elapsed() < LONG, "no trace with {needle}: {v}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

async fn approve(app: &TestApp, id: &str, task: &Value) {
    let approval = task["waiting_for"]["approval_id"].as_str().unwrap();
    let r = app
        .http
        .post(format!("{}/tasks/{id}/approvals/{approval}", app.url))
        .bearer_auth(TOKEN)
        .json(&json!({"approve": true}))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 202);
}

/// Listed, called, approved, and the bearer secret nowhere but on the wire.
async fn servers_are_listed_called_and_keep_their_secret(backend: Backend, stateless: bool) {
    let tracker = McpServer::tracker_with(TrackerOptions {
        required_token: Some(SECRET.into()),
        stateless,
        ..TrackerOptions::default()
    });
    let everything = McpServer::everything();
    let app = spawn(backend, agents_file(&tracker.url, &everything.url)).await;

    // A read-only tool runs at once.
    let id = app
        .submit_ok(r#"#tool=tracker__search #args={"query":"printer-on-fire"}"#)
        .await;
    let task = app.wait_done(&id, LONG).await;
    assert_eq!(task["status"], "succeeded", "{task}\nlog:\n{}", app.log());
    assert_eq!(
        task["result"],
        "[scripted model] tool tracker__search said: 3 issues match printer-on-fire"
    );
    // The model was offered the servers' tools, named SERVER__TOOL, with
    // their descriptions and schemas, and only the allowed ones.
    let requests = app.llm.received();
    let offered: Vec<&str> = requests[0].tools.iter().map(|t| t.name.as_str()).collect();
    for name in [
        "tracker__search",
        "tracker__create_issue",
        "everything__echo",
        "everything__get-sum",
        "current_time",
    ] {
        assert!(offered.contains(&name), "{name} not in {offered:?}");
    }
    assert!(
        !offered.contains(&"everything__get-env"),
        "not in the allow-list: {offered:?}"
    );
    let search = requests[0]
        .tools
        .iter()
        .find(|t| t.name == "tracker__search")
        .unwrap();
    assert_eq!(search.input_schema["properties"]["query"]["type"], "string");

    // The reference server's tool.
    let id2 = app
        .submit_ok(r#"#tool=everything__get-sum #args={"a":2,"b":3}"#)
        .await;
    let task = app.wait_done(&id2, LONG).await;
    assert_eq!(task["status"], "succeeded", "{task}");
    assert!(
        task["result"]
            .as_str()
            .unwrap()
            .contains("The sum of 2 and 3 is 5"),
        "{task}"
    );

    // A destructive tool waits for approval, then runs exactly once.
    let id3 = app
        .submit_ok(r#"#tool=tracker__create_issue #args={"title":"Printer-on-fire"}"#)
        .await;
    let task = app.wait_waiting(&id3).await;
    assert_eq!(task["waiting_for"]["kind"], "approval", "{task}");
    assert_eq!(task["waiting_for"]["tool"], "tracker__create_issue");
    assert!(
        tracker.calls_to("create_issue").is_empty(),
        "not before approval"
    );
    approve(&app, &id3, &task).await;
    let task = app.wait_done(&id3, LONG).await;
    assert_eq!(task["status"], "succeeded", "{task}\nlog:\n{}", app.log());
    assert!(
        task["result"]
            .as_str()
            .unwrap()
            .contains("created issue #1: Printer-on-fire"),
        "{task}"
    );
    let created = tracker.calls_to("create_issue");
    assert_eq!(created.len(), 1, "called exactly once: {created:?}");

    // The bearer header reached the server on every call...
    let calls = tracker.calls();
    assert!(!calls.is_empty());
    for c in &calls {
        assert_eq!(c["authorization"], format!("Bearer {SECRET}"), "{c}");
        // The Python SDK offers the stateless protocol in both modes, and
        // Baton takes it.
        assert_eq!(c["protocol"], "2026-07-28", "{c}");
    }
    // ...and shows nowhere else.
    for id in [&id, &id3] {
        let events = serde_json::to_string(&app.events(id).await).unwrap();
        assert!(events.contains("tools_listed"), "{events}");
        assert!(!events.contains(SECRET), "events: {events}");
        let status = app.task(id).await.to_string();
        assert!(!status.contains(SECRET), "status: {status}");
        let trace = trace_with(&app, id, "tool_call").await.to_string();
        assert!(!trace.contains(SECRET), "trace: {trace}");
    }
    let seen_by_model = format!("{:?}", app.llm.received());
    assert!(!seen_by_model.contains(SECRET), "the model saw the secret");
    let log = app.log();
    assert!(!log.contains(SECRET), "log: {log}");
}

/// A read-only call cut short by kill -9 runs again after the restart.
async fn a_read_only_call_runs_again_after_a_crash(backend: Backend) {
    let tracker = McpServer::tracker_with(TrackerOptions {
        required_token: Some(SECRET.into()),
        slow: Some(Duration::from_secs(3)),
        ..TrackerOptions::default()
    });
    let everything = "http://127.0.0.1:9/mcp";
    let mut app = spawn(backend, agents_file(&tracker.url, everything)).await;
    let id = app
        .submit_ok(r#"#tool=tracker__search #args={"query":"slow-printer"}"#)
        .await;
    tracker.wait_for_calls(1, LONG).await;
    app.kill9();
    app.restart();
    let task = app.wait_done(&id, LONG).await;
    assert_eq!(task["status"], "succeeded", "{task}\nlog:\n{}", app.log());
    assert!(
        task["result"]
            .as_str()
            .unwrap()
            .contains("3 issues match slow-printer"),
        "{task}"
    );
    assert_eq!(
        tracker.calls_to("search").len(),
        2,
        "safe to repeat: run again after the crash"
    );
}

/// A server that is down: the model is told, the task ends.
async fn a_server_that_is_down_does_not_stop_the_task(backend: Backend) {
    let mut tracker = McpServer::tracker(None, false);
    let url = tracker.url.clone();
    tracker.kill();
    let app = spawn(backend, agents_file(&url, "http://127.0.0.1:9/mcp")).await;
    let id = app
        .submit_ok(r#"#tool=tracker__search #args={"query":"printer"}"#)
        .await;
    let task = app.wait_done(&id, LONG).await;
    assert_eq!(task["status"], "succeeded", "{task}\nlog:\n{}", app.log());
    let requests = app.llm.received();
    let seen = format!("{:?}", requests[0].messages);
    assert!(
        seen.contains("The tools of these MCP servers are unavailable for this task")
            && seen.contains("`tracker`")
            && seen.contains("`everything`"),
        "the model is told: {seen}"
    );
    let result = task["result"].as_str().unwrap();
    assert!(
        result.contains(
            "`tracker__search` cannot be called: its MCP server `tracker` was unavailable"
        ) && !result.contains("unknown tool"),
        "{task}"
    );
    assert!(
        app.log().contains("MCP server unavailable"),
        "{}",
        app.log()
    );
}

/// A server too slow to list its tools when the task starts: a later call
/// of one of its tools is answered that the server was unavailable, and
/// why, not that the tool is unknown. (Any endpoint that answers after
/// the timeout will do: nothing of MCP is reached.)
async fn a_tool_of_a_server_that_timed_out_says_why(backend: Backend) {
    let slow = wiremock::MockServer::start().await;
    wiremock::Mock::given(wiremock::matchers::any())
        .respond_with(wiremock::ResponseTemplate::new(200).set_delay(Duration::from_secs(30)))
        .mount(&slow)
        .await;
    let agents = format!(
        r#"
[mcp.tracker]
url = "{}/mcp"
timeout = "1s"

[agents.default]
tools = ["mcp:tracker", "current_time"]
"#,
        slow.uri()
    );
    let app = spawn(backend, agents).await;
    let id = app
        .submit_ok(r#"#tool=tracker__search #args={"query":"printer"}"#)
        .await;
    let task = app.wait_done(&id, LONG).await;
    assert_eq!(task["status"], "succeeded", "{task}\nlog:\n{}", app.log());
    let events = app.events(&id).await;
    let listed = events
        .iter()
        .find(|e| e["type"] == "tools_listed")
        .expect("a tools_listed entry");
    let reason = listed["listing"]["unavailable"][0]["reason"]
        .as_str()
        .unwrap_or_default()
        .to_owned();
    assert!(reason.contains("within 1 s"), "{listed}");
    let result = events
        .iter()
        .find(|e| e["type"] == "tool_result")
        .expect("a tool result");
    let text = result["content"].as_str().unwrap_or_default();
    assert_eq!(result["is_error"], true, "{result}");
    assert!(
        text.contains("its MCP server `tracker` was unavailable")
            && text.contains(&reason)
            && !text.contains("unknown tool"),
        "{result}"
    );
}

#[test]
fn bad_mcp_configuration_stops_start_up_naming_the_key() {
    let run = crate::common::refused_start;
    let file = agents_file("http://127.0.0.1:9/mcp", "http://127.0.0.1:9/mcp");
    let stderr = run(&file, &[]);
    assert!(
        stderr.contains("mcp.tracker.headers.Authorization: ${TRACKER_TOKEN} is not set"),
        "{stderr}"
    );
    let stderr = run(
        &file.replace("[\"mcp:tracker\", ", "[\"mcp:trackr\", "),
        &[("TRACKER_TOKEN", SECRET)],
    );
    assert!(
        stderr.contains(
            "agents.default.tools[0]: unknown MCP server `trackr`; declared: everything, tracker"
        ),
        "{stderr}"
    );
    let stderr = run(
        &file.replace(
            "url = \"http://127.0.0.1:9/mcp\"\nheaders",
            "url = \"tracker.local/mcp\"\nheaders",
        ),
        &[("TRACKER_TOKEN", SECRET)],
    );
    assert!(stderr.contains("mcp.tracker.url: not a URL"), "{stderr}");
    assert!(!stderr.contains(SECRET), "{stderr}");
}

mod embedded {
    use super::*;

    #[tokio::test(flavor = "multi_thread")]
    async fn servers_are_listed_called_and_keep_their_secret() {
        super::servers_are_listed_called_and_keep_their_secret(Backend::Embedded, false).await;
    }

    #[tokio::test(flavor = "multi_thread")]
    async fn the_stateless_protocol_works_too() {
        super::servers_are_listed_called_and_keep_their_secret(Backend::Embedded, true).await;
    }

    #[tokio::test(flavor = "multi_thread")]
    async fn a_read_only_call_runs_again_after_a_crash() {
        super::a_read_only_call_runs_again_after_a_crash(Backend::Embedded).await;
    }

    #[tokio::test(flavor = "multi_thread")]
    async fn a_server_that_is_down_does_not_stop_the_task() {
        super::a_server_that_is_down_does_not_stop_the_task(Backend::Embedded).await;
    }

    #[tokio::test(flavor = "multi_thread")]
    async fn a_tool_of_a_server_that_timed_out_says_why() {
        super::a_tool_of_a_server_that_timed_out_says_why(Backend::Embedded).await;
    }
}

mod aws {
    use super::*;

    #[tokio::test(flavor = "multi_thread")]
    async fn servers_are_listed_called_and_keep_their_secret() {
        super::servers_are_listed_called_and_keep_their_secret(Backend::Aws, false).await;
    }

    #[tokio::test(flavor = "multi_thread")]
    async fn a_read_only_call_runs_again_after_a_crash() {
        super::a_read_only_call_runs_again_after_a_crash(Backend::Aws).await;
    }

    #[tokio::test(flavor = "multi_thread")]
    async fn a_server_that_is_down_does_not_stop_the_task() {
        super::a_server_that_is_down_does_not_stop_the_task(Backend::Aws).await;
    }

    #[tokio::test(flavor = "multi_thread")]
    async fn a_tool_of_a_server_that_timed_out_says_why() {
        super::a_tool_of_a_server_that_timed_out_says_why(Backend::Aws).await;
    }
}
