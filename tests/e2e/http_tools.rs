//! Declared HTTP tools (`[http_tools.NAME]`, docs/tools.md) through the
//! real binary: a POST tool with a bearer `${SECRET}` header waits for
//! approval, is sent once with the header and the Idempotency-Key, and the
//! secret shows nowhere — not in the task, its events, its trace, what the
//! model saw, nor the log.

use crate::common::{Backend, Options, TestApp, TOKEN};
use serde_json::{json, Value};
use std::time::Duration;
use wiremock::{Mock, MockServer, Request, Respond, ResponseTemplate};

const LONG: Duration = Duration::from_secs(60);
const SECRET: &str = "trk-7Hq2ZpX9-very-secret-token";

/// Answers 201 quoting the Authorization header it got: a server that
/// echoes credentials, which the tool must scrub.
struct EchoAuth;

impl Respond for EchoAuth {
    fn respond(&self, req: &Request) -> ResponseTemplate {
        let auth = req
            .headers
            .get("authorization")
            .and_then(|v| v.to_str().ok())
            .unwrap_or("none")
            .to_owned();
        ResponseTemplate::new(201).set_body_string(format!("ticket 42 created for {auth}"))
    }
}

fn agents_file(addr: &str) -> String {
    format!(
        r#"
[http_tools.create_ticket]
description = "Open a ticket in the tracker"
method = "POST"
url = "http://{addr}/api/tickets"
headers = {{ Authorization = "Bearer ${{TRACKER_TOKEN}}" }}
parameters = {{ type = "object", properties = {{ title = {{ type = "string" }} }}, required = ["title"] }}

[agents.default]
tools = ["create_ticket", "current_time"]
"#
    )
}

/// The task's trace, once the task span is written.
async fn trace(app: &TestApp, id: &str) -> Value {
    let started = std::time::Instant::now();
    loop {
        let (status, v) = app.get(&format!("/tasks/{id}/trace")).await;
        let text = v.to_string();
        if status == 200 && text.contains("create_ticket") {
            return v;
        }
        assert!(
            started.elapsed() < LONG,
            "no trace with the tool call: {status} {v}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

async fn declared_post_tool_waits_for_approval_runs_once_and_keeps_its_secret(backend: Backend) {
    let server = MockServer::start().await;
    Mock::given(wiremock::matchers::method("POST"))
        .and(wiremock::matchers::path("/api/tickets"))
        .respond_with(EchoAuth)
        .mount(&server)
        .await;
    let addr = server.address().to_string();
    let app = TestApp::spawn(Options {
        backend,
        extra_env: vec![
            ("BATON_AGENTS_TOML".into(), agents_file(&addr)),
            ("TRACKER_TOKEN".into(), SECRET.into()),
        ],
        ..Options::default()
    })
    .await;
    let id = app
        .submit_ok(r#"#tool=create_ticket #args={"title":"Printer-on-fire"}"#)
        .await;

    let task = app.wait_waiting(&id).await;
    let waiting = &task["waiting_for"];
    assert_eq!(waiting["kind"], "approval", "{task}");
    assert_eq!(waiting["tool"], "create_ticket", "{task}");
    assert!(
        server.received_requests().await.unwrap().is_empty(),
        "nothing sent before approval"
    );
    let approval = waiting["approval_id"].as_str().unwrap();
    let r = app
        .http
        .post(format!("{}/tasks/{id}/approvals/{approval}", app.url))
        .bearer_auth(TOKEN)
        .json(&json!({"approve": true}))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 202);

    let task = app.wait_done(&id, LONG).await;
    assert_eq!(task["status"], "succeeded", "{task}\nlog:\n{}", app.log());
    let result = task["result"].as_str().unwrap();
    assert!(
        result.contains("HTTP 201 Created")
            && result.contains("ticket 42 created for Bearer [redacted]"),
        "the model got the status and the scrubbed body: {result}"
    );

    // Called exactly once, with the header and the Idempotency-Key.
    let received = server.received_requests().await.unwrap();
    assert_eq!(received.len(), 1, "called exactly once");
    let req = &received[0];
    assert_eq!(
        req.headers["authorization"].to_str().unwrap(),
        format!("Bearer {SECRET}")
    );
    let key = req.headers["idempotency-key"].to_str().unwrap();
    assert!(key.starts_with(&format!("{id}:1:")), "{key}");
    let body: Value = serde_json::from_slice(&req.body).unwrap();
    assert_eq!(body, json!({"title": "Printer-on-fire"}));

    // The secret shows nowhere.
    let events = app.events(&id).await;
    assert!(
        events.iter().any(|e| e["type"] == "tool_result"),
        "{events:?}"
    );
    let events = serde_json::to_string(&events).unwrap();
    assert!(!events.contains(SECRET), "events: {events}");
    assert!(events.contains("[redacted]"), "events: {events}");
    let status = app.task(&id).await.to_string();
    assert!(!status.contains(SECRET), "status: {status}");
    let trace = trace(&app, &id).await.to_string();
    assert!(!trace.contains(SECRET), "trace: {trace}");
    let seen_by_model = format!("{:?}", app.llm.received());
    assert!(seen_by_model.contains("create_ticket"));
    assert!(!seen_by_model.contains(SECRET), "the model saw the secret");
    let log = app.log();
    assert!(log.contains("create_ticket"), "the call is logged: {log}");
    assert!(!log.contains(SECRET), "log: {log}");
}

/// A token with `/` and `+`, which JSON, URLs and base64 each write
/// their own way.
const ENCODED_SECRET: &str = "xk/9Qw+Lm2Zr7/Tp0-deploy-token";

/// Answers with the Authorization header it got in every encoding an API
/// or a log might use: JSON with `\/`, percent-encoded, base64 of the
/// header inside a longer base64 blob, base64url, hex.
struct EchoEncoded;

impl Respond for EchoEncoded {
    fn respond(&self, req: &Request) -> ResponseTemplate {
        use base64::Engine;
        let auth = req
            .headers
            .get("authorization")
            .and_then(|v| v.to_str().ok())
            .unwrap_or("none")
            .to_owned();
        let token = auth.strip_prefix("Bearer ").unwrap_or_default();
        let std = base64::engine::general_purpose::STANDARD;
        let url = base64::engine::general_purpose::URL_SAFE_NO_PAD;
        let body = [
            format!("json: {{\"token\":\"{}\"}}", token.replace('/', "\\/")),
            format!("query: ?access_token={}", form_encoded(token)),
            format!(
                "session: {}",
                std.encode(format!("{{\"user\":\"u1\",\"authorization\":\"{auth}\"}}"))
            ),
            format!("cookie: {}", url.encode(format!("v1.{token}.sig"))),
            format!("trace: {}", hex(token.as_bytes())),
        ]
        .join("\n");
        ResponseTemplate::new(200).set_body_string(body)
    }
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// As an HTML form (or a query string) writes a value.
fn form_encoded(text: &str) -> String {
    text.bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'.' | b'_' | b'*' => {
                char::from(b).to_string()
            }
            b' ' => "+".to_owned(),
            b => format!("%{b:02X}"),
        })
        .collect()
}

/// Every string in `v`, however deep.
fn strings(v: &Value, out: &mut Vec<String>) {
    match v {
        Value::String(s) => out.push(s.clone()),
        Value::Array(items) => items.iter().for_each(|i| strings(i, out)),
        Value::Object(map) => map.values().for_each(|i| strings(i, out)),
        _ => {}
    }
}

/// An API that echoes its credential encoded — JSON-escaped, percent-
/// encoded, base64 (inside a longer blob), base64url, hex — does not put
/// it in the task's result, its events, what the model saw, or the log.
async fn an_echoed_secret_is_redacted_in_every_encoding(backend: Backend) {
    use base64::Engine;
    let server = MockServer::start().await;
    Mock::given(wiremock::matchers::method("GET"))
        .and(wiremock::matchers::path("/whoami"))
        .respond_with(EchoEncoded)
        .mount(&server)
        .await;
    let agents = format!(
        r#"
[http_tools.whoami]
description = "Who the tracker thinks we are"
method = "GET"
url = "http://{}/whoami"
headers = {{ Authorization = "Bearer ${{DEPLOY_TOKEN}}" }}

[agents.default]
tools = ["whoami"]
"#,
        server.address()
    );
    let app = TestApp::spawn(Options {
        backend,
        extra_env: vec![
            ("BATON_AGENTS_TOML".into(), agents),
            ("DEPLOY_TOKEN".into(), ENCODED_SECRET.into()),
        ],
        ..Options::default()
    })
    .await;
    let id = app.submit_ok("#tool=whoami #args={}").await;
    let task = app.wait_done(&id, LONG).await;
    assert_eq!(task["status"], "succeeded", "{task}\nlog:\n{}", app.log());
    assert_eq!(server.received_requests().await.unwrap().len(), 1);

    let std = base64::engine::general_purpose::STANDARD;
    let url = base64::engine::general_purpose::URL_SAFE_NO_PAD;
    let forms = [
        ENCODED_SECRET.to_owned(),
        ENCODED_SECRET.replace('/', "\\/"),
        form_encoded(ENCODED_SECRET),
        hex(ENCODED_SECRET.as_bytes()),
        // Any 12 characters of the token's base64, at each offset.
        std.encode(ENCODED_SECRET)[4..16].to_owned(),
        std.encode(format!("x{ENCODED_SECRET}"))[4..16].to_owned(),
        std.encode(format!("xy{ENCODED_SECRET}"))[4..16].to_owned(),
        url.encode(ENCODED_SECRET)[4..16].to_owned(),
        url.encode(format!("x{ENCODED_SECRET}"))[4..16].to_owned(),
        url.encode(format!("xy{ENCODED_SECRET}"))[4..16].to_owned(),
    ];
    let events = app.events(&id).await;
    let result = events
        .iter()
        .find(|e| e["type"] == "tool_result")
        .and_then(|e| e["content"].as_str())
        .unwrap_or_default()
        .to_owned();
    for line in [
        "json: ",
        "query: ?access_token=",
        "session: ",
        "cookie: ",
        "trace: ",
    ] {
        assert!(
            result.contains(line),
            "the whole answer came back: {result}"
        );
    }
    assert_eq!(
        result.matches("[redacted]").count(),
        5,
        "one redaction per line: {result}"
    );
    let mut seen = Vec::new();
    strings(&Value::Array(events), &mut seen);
    strings(&app.task(&id).await, &mut seen);
    strings(
        &serde_json::to_value(app.llm.received()).unwrap(),
        &mut seen,
    );
    seen.push(app.log());
    for text in &seen {
        for form in &forms {
            assert!(!text.contains(form.as_str()), "{form} leaked in: {text}");
        }
    }
}

/// Approves the approval the task waits for.
async fn approve(app: &TestApp, id: &str) {
    let task = app.wait_waiting(id).await;
    assert_eq!(task["waiting_for"]["kind"], "approval", "{task}");
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

/// A person approves `POST /x` on one server, which answers with a 307 or
/// 308 to another: the approved call is not carried there. The model gets
/// the redirect (status and location) as the result, for `http_request`
/// and for a declared tool alike.
async fn an_approved_call_is_not_redirected(backend: Backend) {
    let approved = MockServer::start().await;
    let elsewhere = MockServer::start().await;
    let target = format!("{}/collect", elsewhere.uri());
    Mock::given(wiremock::matchers::method("POST"))
        .and(wiremock::matchers::path("/x"))
        .respond_with(ResponseTemplate::new(307).insert_header("location", target.as_str()))
        .mount(&approved)
        .await;
    Mock::given(wiremock::matchers::method("POST"))
        .and(wiremock::matchers::path("/api/tickets"))
        .respond_with(ResponseTemplate::new(308).insert_header("location", target.as_str()))
        .mount(&approved)
        .await;
    let allow = format!("{},{}", approved.address(), elsewhere.address());
    let app = TestApp::spawn(Options {
        backend,
        extra_env: vec![
            (
                "BATON_AGENTS_TOML".into(),
                agents_file(&approved.address().to_string()).replace(
                    r#"tools = ["create_ticket", "current_time"]"#,
                    r#"tools = ["create_ticket", "http_request"]"#,
                ),
            ),
            ("TRACKER_TOKEN".into(), SECRET.into()),
            ("BATON_HTTP_ALLOW".into(), allow),
        ],
        ..Options::default()
    })
    .await;
    let args = json!({
        "method": "POST",
        "url": format!("{}/x", approved.uri()),
        "headers": {"Content-Type": "application/json"},
        "body": "{\"amount\":100}",
    });
    let calls = [
        (
            "http_request",
            args.to_string(),
            "HTTP/1.1 307 Temporary Redirect",
        ),
        (
            "create_ticket",
            r#"{"title":"t"}"#.to_owned(),
            "HTTP 308 Permanent Redirect",
        ),
    ];
    for (tool, args, status) in calls {
        let id = app.submit_ok(&format!("#tool={tool} #args={args}")).await;
        approve(&app, &id).await;
        let task = app.wait_done(&id, LONG).await;
        assert_eq!(task["status"], "succeeded", "{task}\nlog:\n{}", app.log());
        let result = task["result"].as_str().unwrap();
        assert!(
            result.contains(status) && result.contains(&format!("location: {target}")),
            "{tool}: the model got the redirect: {result}"
        );
    }
    assert_eq!(approved.received_requests().await.unwrap().len(), 2);
    let carried = elsewhere.received_requests().await.unwrap();
    assert!(
        carried.is_empty(),
        "an approved call went elsewhere: {carried:?}"
    );
}

#[test]
fn bad_http_tool_configuration_stops_start_up_naming_the_key() {
    let run = crate::common::refused_start;
    let file = agents_file("127.0.0.1:9");
    let stderr = run(&file, &[]);
    assert!(
        stderr.contains(
            "http_tools.create_ticket.headers.Authorization: ${TRACKER_TOKEN} is not set"
        ),
        "{stderr}"
    );
    let stderr = run(
        &file.replace("\"POST\"", "\"SEND\""),
        &[("TRACKER_TOKEN", "x")],
    );
    assert!(
        stderr.contains("http_tools.create_ticket.method: unknown HTTP method `SEND`"),
        "{stderr}"
    );
    let stderr = run(
        &file.replace("[\"create_ticket\", ", "[\"open_ticket\", "),
        &[("TRACKER_TOKEN", SECRET)],
    );
    assert!(
        stderr.contains("agents.default.tools[0]: unknown tool `open_ticket`"),
        "{stderr}"
    );
    assert!(!stderr.contains(SECRET), "{stderr}");
}

mod embedded {
    use super::*;

    #[tokio::test(flavor = "multi_thread")]
    async fn declared_post_tool_waits_for_approval_runs_once_and_keeps_its_secret() {
        super::declared_post_tool_waits_for_approval_runs_once_and_keeps_its_secret(
            Backend::Embedded,
        )
        .await;
    }

    #[tokio::test(flavor = "multi_thread")]
    async fn an_approved_call_is_not_redirected() {
        super::an_approved_call_is_not_redirected(Backend::Embedded).await;
    }

    #[tokio::test(flavor = "multi_thread")]
    async fn an_echoed_secret_is_redacted_in_every_encoding() {
        super::an_echoed_secret_is_redacted_in_every_encoding(Backend::Embedded).await;
    }
}

mod aws {
    use super::*;

    #[tokio::test(flavor = "multi_thread")]
    async fn declared_post_tool_waits_for_approval_runs_once_and_keeps_its_secret() {
        super::declared_post_tool_waits_for_approval_runs_once_and_keeps_its_secret(Backend::Aws)
            .await;
    }

    #[tokio::test(flavor = "multi_thread")]
    async fn an_approved_call_is_not_redirected() {
        super::an_approved_call_is_not_redirected(Backend::Aws).await;
    }

    #[tokio::test(flavor = "multi_thread")]
    async fn an_echoed_secret_is_redacted_in_every_encoding() {
        super::an_echoed_secret_is_redacted_in_every_encoding(Backend::Aws).await;
    }
}
