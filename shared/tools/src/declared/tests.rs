//! Declared HTTP tools against wiremock servers on loopback (no allow list
//! needed: the operator declared the host).

use super::*;
use baton_core::TaskId;
use serde_json::json;
use wiremock::matchers::{body_json, header, method, path, query_param};
use wiremock::{Mock, MockServer, Request, Respond, ResponseTemplate};

const SECRET: &str = "s3cr3t-tracker-token-42";

fn ticket_schema() -> serde_json::Value {
    json!({
        "type": "object",
        "properties": {
            "title": {"type": "string"},
            "priority": {"type": "integer", "minimum": 1}
        },
        "required": ["title"],
        "additionalProperties": false
    })
}

fn def(method: HttpMethod, url: String) -> HttpToolDef {
    HttpToolDef {
        name: "create_ticket".into(),
        description: "Open a ticket in the tracker".into(),
        method,
        url: url.into(),
        url_template: "http://tracker/api/tickets".into(),
        headers: vec![("Authorization".into(), format!("Bearer {SECRET}").into())],
        parameters: ticket_schema(),
        timeout: Duration::from_secs(5),
        secrets: vec![SECRET.into()],
        oauth: None,
    }
}

fn tool(method: HttpMethod, server: &MockServer, p: &str) -> DeclaredHttpTool {
    DeclaredHttpTool::new(def(method, format!("{}{p}", server.uri()))).expect("tool")
}

fn ctx(call: &str) -> ToolContext {
    ToolContext::new(TaskId::generate(), 2, call)
}

/// Answers with the request's Authorization header and body: a server that
/// echoes what it got, secrets included.
struct Echo(u16);

impl Respond for Echo {
    fn respond(&self, req: &Request) -> ResponseTemplate {
        let auth = req
            .headers
            .get("authorization")
            .and_then(|v| v.to_str().ok())
            .unwrap_or("")
            .to_owned();
        ResponseTemplate::new(self.0).set_body_string(format!(
            "you sent {auth} and {}",
            String::from_utf8_lossy(&req.body)
        ))
    }
}

#[tokio::test]
async fn spec_is_the_declaration() {
    let server = MockServer::start().await;
    let t = tool(HttpMethod::Post, &server, "/t");
    let spec = t.spec();
    assert_eq!(spec.name, "create_ticket");
    assert_eq!(spec.description, "Open a ticket in the tracker");
    assert_eq!(spec.input_schema, ticket_schema());
    let shown = format!("{t:?}");
    assert!(!shown.contains(SECRET), "{shown}");
    assert!(shown.contains("authorization"), "{shown}");
}

#[tokio::test]
async fn post_sends_json_body_declared_headers_and_idempotency_key() {
    let server = MockServer::start().await;
    let c = ctx("call_1");
    Mock::given(method("POST"))
        .and(path("/api/tickets"))
        .and(header("authorization", format!("Bearer {SECRET}").as_str()))
        .and(header("idempotency-key", c.idempotency_key.as_str()))
        .and(header("content-type", "application/json"))
        .and(body_json(
            json!({"title": "Printer on fire", "priority": 1}),
        ))
        .respond_with(ResponseTemplate::new(201).set_body_raw("{\"id\":7}", "application/json"))
        .expect(1)
        .mount(&server)
        .await;
    let out = tool(HttpMethod::Post, &server, "/api/tickets")
        .call(json!({"title": "Printer on fire", "priority": 1}), &c)
        .await;
    assert!(!out.is_error, "{}", out.content);
    assert!(
        out.content.starts_with("HTTP 201 Created\n"),
        "{}",
        out.content
    );
    assert!(out.content.ends_with("{\"id\":7}"), "{}", out.content);
}

#[tokio::test]
async fn idempotency_key_is_the_same_for_a_retried_call_and_differs_between_calls() {
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .respond_with(ResponseTemplate::new(200))
        .mount(&server)
        .await;
    let t = tool(HttpMethod::Post, &server, "/t");
    let task = TaskId::generate();
    for c in [
        ToolContext::new(task.clone(), 3, "call_a"),
        // The same call again, as after a crash: same task, step and id.
        ToolContext::new(task.clone(), 3, "call_a"),
        ToolContext::new(task.clone(), 3, "call_b"),
    ] {
        assert!(!t.call(json!({"title": "x"}), &c).await.is_error);
    }
    let keys: Vec<String> = server
        .received_requests()
        .await
        .unwrap()
        .iter()
        .map(|r| r.headers["idempotency-key"].to_str().unwrap().to_owned())
        .collect();
    assert_eq!(keys.len(), 3);
    assert_eq!(keys[0], keys[1], "stable across retries of the same call");
    assert_ne!(keys[0], keys[2], "another call, another key");
    assert_eq!(keys[0], format!("{task}:3:call_a"));
}

#[tokio::test]
async fn get_sends_the_arguments_as_the_query_string() {
    let server = MockServer::start().await;
    Mock::given(method("GET"))
        .and(path("/search"))
        .and(query_param("title", "a b"))
        .and(query_param("priority", "2"))
        .respond_with(ResponseTemplate::new(200).set_body_string("found"))
        .expect(1)
        .mount(&server)
        .await;
    let out = tool(HttpMethod::Get, &server, "/search")
        .call(json!({"title": "a b", "priority": 2}), &ctx("c"))
        .await;
    assert!(!out.is_error, "{}", out.content);
    let req = &server.received_requests().await.unwrap()[0];
    assert!(req.body.is_empty(), "no body for GET");
}

#[tokio::test]
async fn invalid_arguments_are_an_error_naming_the_field_and_send_nothing() {
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .respond_with(ResponseTemplate::new(200))
        .expect(0)
        .mount(&server)
        .await;
    let t = tool(HttpMethod::Post, &server, "/t");
    let out = t.call(json!({"priority": 1}), &ctx("c")).await;
    assert!(out.is_error);
    assert!(out.content.contains("nothing was sent"), "{}", out.content);
    assert!(
        out.content.contains("\"title\" is a required property"),
        "{}",
        out.content
    );

    let out = t
        .call(json!({"title": "x", "priority": "high"}), &ctx("c"))
        .await;
    assert!(out.is_error);
    assert!(out.content.contains("at `/priority`"), "{}", out.content);
    assert!(out.content.contains("integer"), "{}", out.content);

    let out = t
        .call(json!({"title": "x", "extra": true}), &ctx("c"))
        .await;
    assert!(out.is_error, "{}", out.content);
    assert!(out.content.contains("extra"), "{}", out.content);

    let out = t.call(json!("just a string"), &ctx("c")).await;
    assert!(out.is_error, "{}", out.content);
    assert!(out.content.contains("object"), "{}", out.content);
}

#[tokio::test]
async fn secrets_are_scrubbed_from_results_and_errors() {
    let server = MockServer::start().await;
    Mock::given(path("/ok"))
        .respond_with(Echo(200))
        .mount(&server)
        .await;
    Mock::given(path("/bad"))
        .respond_with(Echo(403))
        .mount(&server)
        .await;
    let out = tool(HttpMethod::Post, &server, "/ok")
        .call(json!({"title": "hello"}), &ctx("c"))
        .await;
    assert!(!out.is_error, "{}", out.content);
    assert!(!out.content.contains(SECRET), "{}", out.content);
    assert!(
        out.content.contains("you sent Bearer [redacted] and"),
        "{}",
        out.content
    );

    // A 4xx is an error with the status and the (scrubbed) body.
    let out = tool(HttpMethod::Post, &server, "/bad")
        .call(json!({"title": format!("echo {SECRET}")}), &ctx("c"))
        .await;
    assert!(out.is_error);
    assert!(
        out.content.starts_with("HTTP 403 Forbidden\n"),
        "{}",
        out.content
    );
    assert!(!out.content.contains(SECRET), "{}", out.content);

    // Percent-encoded in a URL too.
    let t = tool(HttpMethod::Post, &server, "/ok");
    let encoded: String = url::form_urlencoded::byte_serialize(b"a b&c").collect();
    let mut d = def(HttpMethod::Post, format!("{}/ok", server.uri()));
    d.secrets = vec!["a b&c".into()];
    let t2 = DeclaredHttpTool::new(d).unwrap();
    assert_eq!(
        t2.scrub(&format!("x {encoded} y a b&c")),
        "x [redacted] y [redacted]"
    );
    assert_eq!(t.scrub("nothing secret"), "nothing secret");
}

/// A redirect is the result, whatever the method: the declared
/// credentials, and an approved call's body, go to the declared URL only.
#[tokio::test]
async fn redirects_are_shown_not_followed() {
    let declared = MockServer::start().await;
    let elsewhere = MockServer::start().await;
    Mock::given(wiremock::matchers::any())
        .respond_with(ResponseTemplate::new(200))
        .expect(0)
        .mount(&elsewhere)
        .await;
    let target = format!("{}/steal", elsewhere.uri());
    for (verb, status) in [
        (HttpMethod::Post, 307),
        (HttpMethod::Post, 308),
        (HttpMethod::Put, 303),
        (HttpMethod::Get, 302),
    ] {
        declared.reset().await;
        Mock::given(method(verb.as_str()))
            .and(path("/api/tickets"))
            .respond_with(ResponseTemplate::new(status).insert_header("location", target.as_str()))
            .expect(1)
            .mount(&declared)
            .await;
        let out = tool(verb, &declared, "/api/tickets")
            .call(json!({"title": "t"}), &ctx("call_r"))
            .await;
        assert!(!out.is_error, "{verb} {status}: {}", out.content);
        assert!(
            out.content.starts_with(&format!("HTTP {status} "))
                && out.content.contains(&format!("location: {target}\n")),
            "{verb} {status}: {}",
            out.content
        );
        declared.verify().await;
    }
    let sent = elsewhere.received_requests().await.unwrap_or_default();
    assert!(sent.is_empty(), "a redirect was followed: {sent:?}");
}

#[tokio::test]
async fn server_errors_and_unreachable_hosts_are_errors_without_secrets() {
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .respond_with(ResponseTemplate::new(503).set_body_string("down for maintenance"))
        .mount(&server)
        .await;
    let out = tool(HttpMethod::Post, &server, "/t")
        .call(json!({"title": "x"}), &ctx("c"))
        .await;
    assert!(out.is_error);
    assert!(out.content.contains("503"), "{}", out.content);
    assert!(
        out.content.contains("down for maintenance"),
        "{}",
        out.content
    );

    // The secret in the URL's query; nothing listens on port 9.
    let mut d = def(
        HttpMethod::Get,
        format!("http://127.0.0.1:9/x?key={SECRET}"),
    );
    d.timeout = Duration::from_secs(2);
    let out = DeclaredHttpTool::new(d)
        .unwrap()
        .call(json!({"title": "x"}), &ctx("c"))
        .await;
    assert!(out.is_error);
    assert!(!out.content.contains(SECRET), "{}", out.content);
}

#[tokio::test]
async fn long_bodies_are_cut_with_a_marker() {
    let server = MockServer::start().await;
    let big = "x".repeat(DeclaredHttpTool::MAX_BODY_BYTES + 10);
    Mock::given(method("GET"))
        .respond_with(ResponseTemplate::new(200).set_body_string(big))
        .mount(&server)
        .await;
    let out = tool(HttpMethod::Get, &server, "/big")
        .call(json!({"title": "x"}), &ctx("c"))
        .await;
    assert!(!out.is_error);
    assert!(
        out.content
            .ends_with("[truncated: response exceeded 262144 bytes]"),
        "{}",
        &out.content[out.content.len() - 100..]
    );
}

#[tokio::test]
async fn a_slow_server_times_out() {
    let server = MockServer::start().await;
    Mock::given(method("GET"))
        .respond_with(ResponseTemplate::new(200).set_delay(Duration::from_secs(5)))
        .mount(&server)
        .await;
    let mut d = def(HttpMethod::Get, format!("{}/slow", server.uri()));
    d.timeout = Duration::from_millis(300);
    let out = DeclaredHttpTool::new(d)
        .unwrap()
        .call(json!({"title": "x"}), &ctx("c"))
        .await;
    assert!(out.is_error);
    assert!(out.content.contains("timed out"), "{}", out.content);
}

#[test]
fn only_get_and_head_are_safe_to_repeat_and_free_of_approval() {
    for (m, safe) in [
        (HttpMethod::Get, true),
        (HttpMethod::Head, true),
        (HttpMethod::Post, false),
        (HttpMethod::Put, false),
        (HttpMethod::Patch, false),
        (HttpMethod::Delete, false),
    ] {
        let t = DeclaredHttpTool::new(def(m, "https://tracker.example.com/api".into())).unwrap();
        assert_eq!(t.idempotent(&json!({})), safe, "{m}");
        assert_eq!(t.needs_approval(&json!({})), !safe, "{m}");
    }
}

#[test]
fn bad_declarations_name_the_field() {
    let mut d = def(HttpMethod::Get, "https://x.example/".into());
    d.parameters = json!({"type": "object", "properties": {"a": {"type": "nonsense"}}});
    let err = DeclaredHttpTool::new(d).unwrap_err();
    assert_eq!(err.field, "parameters", "{err}");
    assert!(err.message.contains("not a valid JSON Schema"), "{err}");

    let d = def(HttpMethod::Get, format!("ftp://{SECRET}/"));
    let err = DeclaredHttpTool::new(d).unwrap_err();
    assert_eq!(err.field, "url");
    assert!(!err.to_string().contains(SECRET), "{err}");

    let mut d = def(HttpMethod::Get, "https://x.example/".into());
    d.headers = vec![("X-Key".into(), format!("{SECRET}\n").into())];
    // Trailing whitespace is trimmed; an inner newline is not a header value.
    d.headers[0].1 = format!("a\nb{SECRET}").into();
    let err = DeclaredHttpTool::new(d).unwrap_err();
    assert_eq!(err.field, "headers.X-Key");
    assert!(!err.to_string().contains(SECRET), "{err}");
}
