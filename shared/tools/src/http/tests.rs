//! `http_request` against wiremock servers on loopback, which the tool can
//! reach only because each test allow-lists them.

use super::*;
use baton_core::TaskId;
use serde_json::json;
use wiremock::matchers::{body_string, header, method, path};
use wiremock::{Mock, MockServer, ResponseTemplate};

fn ctx() -> ToolContext {
    ToolContext::new(TaskId::generate(), 4, "call_7")
}

fn allowing(server: &MockServer) -> HttpRequestTool {
    HttpRequestTool::new(AllowList::parse(&server.address().to_string()).expect("allow list"))
}

#[tokio::test]
async fn get_sends_idempotency_key_and_shows_status_type_and_body() {
    let server = MockServer::start().await;
    let ctx = ctx();
    Mock::given(method("GET"))
        .and(path("/hello"))
        .and(header("idempotency-key", ctx.idempotency_key.as_str()))
        .and(header("accept", "text/plain"))
        .respond_with(ResponseTemplate::new(200).set_body_raw("hi there", "text/plain"))
        .expect(1)
        .mount(&server)
        .await;
    let out = allowing(&server)
        .call(
            json!({"url": format!("{}/hello", server.uri()), "headers": {"Accept": "text/plain"}}),
            &ctx,
        )
        .await;
    assert!(!out.is_error, "{}", out.content);
    assert!(
        out.content.starts_with("HTTP/1.1 200 OK\n"),
        "{}",
        out.content
    );
    assert!(
        out.content.contains("content-type: text/plain\n"),
        "{}",
        out.content
    );
    assert!(out.content.ends_with("\n\nhi there"), "{}", out.content);
}

#[tokio::test]
async fn post_sends_body_and_error_statuses_are_plain_answers() {
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .and(path("/items"))
        .and(body_string(r#"{"a":1}"#))
        .and(header("content-type", "application/json"))
        .respond_with(
            ResponseTemplate::new(422).set_body_raw(r#"{"error":"bad"}"#, "application/json"),
        )
        .expect(1)
        .mount(&server)
        .await;
    let out = allowing(&server)
        .call(
            json!({
                "method": "POST",
                "url": format!("{}/items", server.uri()),
                "headers": {"Content-Type": "application/json"},
                "body": r#"{"a":1}"#
            }),
            &ctx(),
        )
        .await;
    assert!(
        !out.is_error,
        "an HTTP status is an answer, not a tool failure"
    );
    assert!(
        out.content.starts_with("HTTP/1.1 422 Unprocessable Entity"),
        "{}",
        out.content
    );
    assert!(
        out.content.contains(r#"{"error":"bad"}"#),
        "{}",
        out.content
    );
}

#[tokio::test]
async fn head_shows_headers_only() {
    let server = MockServer::start().await;
    Mock::given(method("HEAD"))
        .respond_with(ResponseTemplate::new(200).insert_header("content-type", "text/html"))
        .expect(1)
        .mount(&server)
        .await;
    let out = allowing(&server)
        .call(json!({"method": "head", "url": server.uri()}), &ctx())
        .await;
    assert!(!out.is_error, "{}", out.content);
    assert!(
        out.content.contains("content-type: text/html"),
        "{}",
        out.content
    );
    assert!(out.content.ends_with("\n\n"), "{:?}", out.content);
}

#[tokio::test]
async fn loopback_server_is_refused_without_allow_list_entry() {
    let server = MockServer::start().await;
    Mock::given(method("GET"))
        .respond_with(ResponseTemplate::new(200))
        .expect(0)
        .mount(&server)
        .await;
    let port = server.address().port();
    let tool = HttpRequestTool::new(AllowList::new());
    for url in [
        format!("http://127.0.0.1:{port}/"),
        format!("http://localhost:{port}/"),
        format!("http://[::1]:{port}/"),
        format!("http://[::ffff:127.0.0.1]:{port}/"),
        format!("http://2130706433:{port}/"),
        format!("http://0x7f.1:{port}/"),
        format!("http://0.0.0.0:{port}/"),
        "http://169.254.169.254/latest/meta-data/".to_owned(),
        "http://[fe80::1]/".to_owned(),
        "http://10.0.0.1/".to_owned(),
        "http://192.168.1.1/".to_owned(),
        "http://100.64.0.1/".to_owned(),
        "http://[fd00::1]/".to_owned(),
    ] {
        let out = tool.call(json!({ "url": url }), &ctx()).await;
        assert!(out.is_error, "{url} was not refused: {}", out.content);
        assert!(out.content.contains("refused"), "{url}: {}", out.content);
    }
    // Allowing the address does not allow other names for it.
    let out = allowing(&server)
        .call(
            json!({ "url": format!("http://localhost:{port}/") }),
            &ctx(),
        )
        .await;
    assert!(
        out.is_error && out.content.contains("loopback"),
        "{}",
        out.content
    );
}

#[tokio::test]
async fn other_schemes_are_refused() {
    let tool = HttpRequestTool::default();
    for url in [
        "file:///etc/passwd",
        "ftp://example.com/x",
        "gopher://example.com/",
        "data:text/plain,hi",
    ] {
        let out = tool.call(json!({ "url": url }), &ctx()).await;
        assert!(out.is_error, "{url}");
        assert!(
            out.content.contains("only http and https"),
            "{url}: {}",
            out.content
        );
    }
    let out = tool.call(json!({"url": "not a url"}), &ctx()).await;
    assert!(
        out.is_error && out.content.contains("invalid url"),
        "{}",
        out.content
    );
}

#[tokio::test]
async fn large_body_is_cut_with_marker() {
    let server = MockServer::start().await;
    Mock::given(method("GET"))
        .respond_with(ResponseTemplate::new(200).set_body_raw("a".repeat(300 * 1024), "text/plain"))
        .mount(&server)
        .await;
    let out = allowing(&server)
        .call(json!({ "url": server.uri() }), &ctx())
        .await;
    assert!(!out.is_error, "{}", &out.content[..200]);
    assert!(out
        .content
        .ends_with("\n[truncated: response exceeded 262144 bytes]"));
    let body = out
        .content
        .split_once("\n\n")
        .map(|(_, body)| body)
        .and_then(|b| b.strip_suffix("\n[truncated: response exceeded 262144 bytes]"))
        .unwrap_or_default();
    assert_eq!(body, "a".repeat(256 * 1024));

    // Exactly at the limit is not truncated.
    let tool = HttpRequestTool::with_config(HttpConfig {
        max_body_bytes: 300 * 1024,
        ..allowing(&server).config().clone()
    });
    let out = tool.call(json!({ "url": server.uri() }), &ctx()).await;
    assert!(!out.content.contains("[truncated"));
}

#[tokio::test]
async fn redirects_are_followed_and_keep_the_idempotency_key() {
    let server = MockServer::start().await;
    let ctx = ctx();
    Mock::given(path("/start"))
        .respond_with(ResponseTemplate::new(302).insert_header("location", "/end"))
        .expect(1)
        .mount(&server)
        .await;
    Mock::given(method("GET"))
        .and(path("/end"))
        .and(header("idempotency-key", ctx.idempotency_key.as_str()))
        .respond_with(ResponseTemplate::new(200).set_body_string("done"))
        .expect(1)
        .mount(&server)
        .await;
    let out = allowing(&server)
        .call(json!({ "url": format!("{}/start", server.uri()) }), &ctx)
        .await;
    assert!(!out.is_error, "{}", out.content);
    assert!(
        out.content
            .contains(&format!("final-url: {}/end", server.uri())),
        "{}",
        out.content
    );
    assert!(out.content.ends_with("done"));
}

/// An approved call must not be carried anywhere else: a redirect answering
/// any method but GET and HEAD is the result, and nothing is sent to where
/// it points (a 307/308 would resend the method and body, a 303 would turn
/// it into a GET nobody asked for).
#[tokio::test]
async fn calls_that_change_something_do_not_follow_redirects() {
    let approved = MockServer::start().await;
    let elsewhere = MockServer::start().await;
    Mock::given(method("GET"))
        .respond_with(ResponseTemplate::new(200).set_body_string("should not be reached"))
        .expect(0)
        .mount(&elsewhere)
        .await;
    Mock::given(wiremock::matchers::any())
        .respond_with(ResponseTemplate::new(500))
        .expect(0)
        .named("anything but a GET")
        .mount(&elsewhere)
        .await;
    let target = format!("{}/collect", elsewhere.uri());
    for (status, verb) in [
        (307, "POST"),
        (308, "POST"),
        (307, "PUT"),
        (308, "PATCH"),
        (307, "DELETE"),
        (303, "POST"),
        (302, "POST"),
        (301, "PUT"),
    ] {
        approved.reset().await;
        Mock::given(method(verb))
            .and(path("/x"))
            .respond_with(ResponseTemplate::new(status).insert_header("location", target.as_str()))
            .expect(1)
            .mount(&approved)
            .await;
        let allow = AllowList::parse(&format!("{},{}", approved.address(), elsewhere.address()))
            .expect("allow");
        let out = HttpRequestTool::new(allow)
            .call(
                json!({
                    "method": verb,
                    "url": format!("{}/x", approved.uri()),
                    "headers": {"Content-Type": "application/json"},
                    "body": r#"{"transfer":100}"#
                }),
                &ctx(),
            )
            .await;
        assert!(!out.is_error, "{verb} {status}: {}", out.content);
        assert!(
            out.content.starts_with(&format!("HTTP/1.1 {status} ")),
            "{verb} {status}: {}",
            out.content
        );
        assert!(
            out.content.contains(&format!("location: {target}\n")),
            "{verb} {status}: {}",
            out.content
        );
        assert!(
            !out.content.contains("final-url"),
            "{verb} {status}: {}",
            out.content
        );
        approved.verify().await;
    }
    let sent = elsewhere.received_requests().await.unwrap_or_default();
    assert!(sent.is_empty(), "a redirect carried a call: {sent:?}");
}

#[tokio::test]
async fn get_and_head_follow_temporary_and_permanent_redirects() {
    let server = MockServer::start().await;
    for (status, from) in [(307, "/t"), (308, "/p")] {
        Mock::given(path(from))
            .respond_with(ResponseTemplate::new(status).insert_header("location", "/end"))
            .mount(&server)
            .await;
    }
    Mock::given(path("/end"))
        .respond_with(ResponseTemplate::new(200).set_body_string("landed"))
        .mount(&server)
        .await;
    for verb in ["GET", "HEAD"] {
        for from in ["/t", "/p"] {
            let out = allowing(&server)
                .call(
                    json!({"method": verb, "url": format!("{}{from}", server.uri())}),
                    &ctx(),
                )
                .await;
            assert!(
                out.content.starts_with("HTTP/1.1 200 OK\n")
                    && out
                        .content
                        .contains(&format!("final-url: {}/end", server.uri())),
                "{verb} {from}: {}",
                out.content
            );
        }
    }
}

#[tokio::test]
async fn redirect_to_forbidden_address_is_refused() {
    let server = MockServer::start().await;
    Mock::given(path("/go"))
        .respond_with(
            ResponseTemplate::new(302)
                .insert_header("location", "http://169.254.169.254/latest/meta-data/iam"),
        )
        .mount(&server)
        .await;
    let out = allowing(&server)
        .call(json!({ "url": format!("{}/go", server.uri()) }), &ctx())
        .await;
    assert!(out.is_error);
    assert!(
        out.content
            .starts_with("redirect to http://169.254.169.254/"),
        "{}",
        out.content
    );
    assert!(out.content.contains("link-local"), "{}", out.content);
}

#[tokio::test]
async fn redirect_loops_stop_after_five() {
    let server = MockServer::start().await;
    Mock::given(path("/loop"))
        .respond_with(ResponseTemplate::new(307).insert_header("location", "/loop"))
        .expect(6)
        .mount(&server)
        .await;
    let out = allowing(&server)
        .call(json!({ "url": format!("{}/loop", server.uri()) }), &ctx())
        .await;
    assert!(out.is_error);
    assert!(
        out.content.contains("too many redirects (more than 5)"),
        "{}",
        out.content
    );
}

#[tokio::test]
async fn cross_origin_redirect_drops_credentials() {
    let first = MockServer::start().await;
    let second = MockServer::start().await;
    Mock::given(path("/a"))
        .and(header("authorization", "Bearer sekrit-token"))
        .respond_with(
            ResponseTemplate::new(307).insert_header("location", format!("{}/b", second.uri())),
        )
        .expect(1)
        .mount(&first)
        .await;
    Mock::given(path("/b"))
        .respond_with(ResponseTemplate::new(200).set_body_string("landed"))
        .expect(1)
        .mount(&second)
        .await;
    let allow =
        AllowList::parse(&format!("{},{}", first.address(), second.address())).expect("allow");
    let out = HttpRequestTool::new(allow)
        .call(
            json!({
                "url": format!("{}/a", first.uri()),
                "headers": {"Authorization": "Bearer sekrit-token", "X-Trace": "t1"}
            }),
            &ctx(),
        )
        .await;
    assert!(out.content.ends_with("landed"), "{}", out.content);
    assert!(!out.content.contains("sekrit"));
    let received = second.received_requests().await.unwrap_or_default();
    assert_eq!(received.len(), 1);
    assert!(received[0].headers.get("authorization").is_none());
    assert_eq!(
        received[0].headers.get("x-trace").map(|v| v.as_bytes()),
        Some(&b"t1"[..])
    );
    assert!(received[0].headers.get("idempotency-key").is_some());
}

#[tokio::test]
async fn timeout_is_reported() {
    let server = MockServer::start().await;
    Mock::given(method("GET"))
        .respond_with(ResponseTemplate::new(200).set_delay(Duration::from_secs(5)))
        .mount(&server)
        .await;
    let tool = HttpRequestTool::with_config(HttpConfig {
        timeout: Duration::from_millis(300),
        ..allowing(&server).config().clone()
    });
    let started = std::time::Instant::now();
    let out = tool.call(json!({ "url": server.uri() }), &ctx()).await;
    assert!(out.is_error);
    assert!(out.content.contains("timed out"), "{}", out.content);
    assert!(started.elapsed() < Duration::from_secs(3));
}

#[tokio::test]
async fn connection_is_pinned_to_the_vetted_address() {
    // The name does not resolve anywhere; reaching the server proves the
    // client used the vetted address instead of asking DNS again.
    let server = MockServer::start().await;
    Mock::given(method("GET"))
        .and(header(
            "host",
            format!("pinned.invalid:{}", server.address().port()).as_str(),
        ))
        .respond_with(ResponseTemplate::new(200).set_body_string("pinned"))
        .expect(1)
        .mount(&server)
        .await;
    let tool = HttpRequestTool::default();
    let vetted = Vetted {
        domain: Some("pinned.invalid".into()),
        addrs: vec![*server.address()],
    };
    let client = tool.client_for(&vetted).expect("client");
    let url = format!("http://pinned.invalid:{}/", server.address().port());
    let body = client
        .get(url.as_str())
        .send()
        .await
        .expect("pinned request")
        .text()
        .await
        .expect("body");
    assert_eq!(body, "pinned");
    // And the tool itself refuses the name, because it does not resolve.
    let out = tool.call(json!({ "url": url }), &ctx()).await;
    assert!(
        out.is_error && out.content.contains("could not resolve"),
        "{}",
        out.content
    );
}

#[tokio::test]
async fn credentials_are_not_echoed() {
    let tool = HttpRequestTool::default();
    let args = json!({
        "url": "http://user:pw-secret@127.0.0.1/?api_key=qs-secret",
        "headers": {"Authorization": "Bearer hdr-secret", "X-Api-Key": "key-secret"}
    });
    let out = tool.call(args.clone(), &ctx()).await;
    assert!(out.is_error);
    for secret in ["pw-secret", "qs-secret", "hdr-secret", "key-secret"] {
        assert!(
            !out.content.contains(secret),
            "{secret} leaked: {}",
            out.content
        );
    }
    let parsed: HttpRequestArgs = serde_json::from_value(args).expect("args");
    let debug = format!("{parsed:?}");
    for secret in ["pw-secret", "qs-secret", "hdr-secret", "key-secret"] {
        assert!(!debug.contains(secret), "{secret} leaked: {debug}");
    }
    // A bad header value is reported by name only.
    let out = tool
        .call(
            json!({"url": "https://example.com/", "headers": {"X-Token": "bad\nvalue-secret"}}),
            &ctx(),
        )
        .await;
    assert!(
        out.is_error && out.content.contains("X-Token"),
        "{}",
        out.content
    );
    assert!(!out.content.contains("value-secret"));
}

#[tokio::test]
async fn invalid_arguments_name_the_field() {
    let tool = HttpRequestTool::default();
    let cases = [
        (
            json!({"method": "FETCH", "url": "https://example.com"}),
            "`method`",
        ),
        (json!({"url": 5}), "`url`"),
        (
            json!({"url": "https://example.com", "headers": {"X-Count": 3}}),
            "`headers.X-Count`",
        ),
        (
            json!({"url": "https://example.com", "body": {"a": 1}}),
            "`body`",
        ),
        (json!({"method": "GET"}), "missing field `url`"),
        (
            json!({"url": "https://example.com", "header": {}}),
            "unknown field `header`",
        ),
        (
            json!({"url": "https://example.com", "headers": {"Host": "evil"}}),
            "Host",
        ),
        (
            json!({"url": "https://example.com", "headers": {"bad name": "x"}}),
            "bad name",
        ),
    ];
    for (args, expected) in cases {
        let out = tool.call(args.clone(), &ctx()).await;
        assert!(out.is_error, "{args}");
        assert!(out.content.contains(expected), "{args}: {}", out.content);
    }
}

/// What the policies check is what is sent: the method upper-cased, the
/// URL as the client reads it; a second pass changes nothing; arguments
/// the tool refuses are left for it to refuse.
#[test]
fn arguments_are_normalised_as_the_request_is_made() {
    let tool = HttpRequestTool::default();
    let n = tool.normalise(json!({
        "method": "delete",
        "url": "HTTPS://API.Example.COM:443/a/./b/../c?q=1#f",
        "headers": {"X-A": "1"},
    }));
    assert_eq!(
        n,
        json!({
            "method": "DELETE",
            "url": "https://api.example.com/a/c?q=1#f",
            "headers": {"X-A": "1"},
        })
    );
    assert_eq!(tool.normalise(n.clone()), n);
    // GET when none; a port that is not the default is kept.
    assert_eq!(
        tool.normalise(json!({"url": "http://Host:8080"})),
        json!({"method": "GET", "url": "http://host:8080/"})
    );
    assert_eq!(
        tool.normalise(json!({"url": "http://host:80/x"}))["url"],
        "http://host/x"
    );
    // Refused as they are: a method it does not know, an unknown field, a
    // URL that does not parse (kept as written: the call fails on it).
    for bad in [
        json!({"url": "https://x", "method": "Delete"}),
        json!({"url": "https://x", "verb": "GET"}),
        json!({"url": 7}),
    ] {
        assert_eq!(tool.normalise(bad.clone()), bad);
    }
    assert_eq!(
        tool.normalise(json!({"url": "not a url", "method": "post"})),
        json!({"method": "POST", "url": "not a url"})
    );
}

#[test]
fn only_get_and_head_are_idempotent() {
    let tool = HttpRequestTool::default();
    assert!(tool.idempotent(&json!({"url": "https://x"})));
    assert!(tool.idempotent(&json!({"url": "https://x", "method": null})));
    assert!(tool.idempotent(&json!({"url": "https://x", "method": "GET"})));
    assert!(tool.idempotent(&json!({"url": "https://x", "method": "head"})));
    for m in ["POST", "PUT", "PATCH", "DELETE", "delete", "BOGUS"] {
        assert!(
            !tool.idempotent(&json!({"url": "https://x", "method": m})),
            "{m}"
        );
    }
    assert!(!tool.idempotent(&json!({"url": "https://x", "method": 1})));
}

#[test]
fn anything_but_get_and_head_asks_for_approval() {
    let tool = HttpRequestTool::default();
    assert!(!tool.needs_approval(&json!({"url": "https://x"})));
    assert!(!tool.needs_approval(&json!({"url": "https://x", "method": "HEAD"})));
    for m in ["POST", "put", "PATCH", "DELETE", "BOGUS"] {
        assert!(
            tool.needs_approval(&json!({"url": "https://x", "method": m})),
            "{m}"
        );
    }
    // Malformed is never let through unseen.
    assert!(tool.needs_approval(&json!({"url": "https://x", "method": 1})));
}

#[test]
fn schema_is_derived_with_all_fields() {
    let spec = HttpRequestTool::default().spec();
    assert_eq!(spec.name, "http_request");
    let schema = &spec.input_schema;
    assert_eq!(schema["type"], "object");
    for field in ["method", "url", "headers", "body"] {
        assert!(
            schema["properties"][field].is_object(),
            "{field} missing: {schema}"
        );
    }
    assert_eq!(schema["required"], json!(["url"]));
    assert_eq!(schema["additionalProperties"], json!(false));
    let methods = &schema["properties"]["method"]["enum"];
    assert_eq!(
        methods,
        &json!(["GET", "HEAD", "POST", "PUT", "PATCH", "DELETE"]),
        "{schema}"
    );
    assert!(
        schema.get("$defs").is_none(),
        "method enum is inlined: {schema}"
    );
    assert!(spec.description.contains("256 KiB"));
}

#[test]
fn binary_bodies_are_summarised() {
    assert_eq!(body_text(b"plain", None), "plain");
    assert_eq!(
        body_text("é".as_bytes().get(..1).unwrap_or_default(), None),
        ""
    );
    assert_eq!(body_text(b"", None), "(empty body)");
    assert!(body_text(&[0xff, 0xfe, 0x00, 0x01], Some("image/png"))
        .starts_with("[binary body of 4 bytes (image/png)"));
    assert_eq!(
        body_text(b"caf\xe9 ok", Some("text/html; charset=latin1")),
        "caf\u{fffd} ok"
    );
}

/// The agent's `http_request.allow_hosts` holds every hop: a host outside
/// it is refused before anything is sent, and so is a redirect to one.
#[tokio::test]
async fn allowed_hosts_hold_the_first_hop_and_every_redirect() {
    use baton_core::egress::{AllowedHosts, HostPattern};
    let first = MockServer::start().await;
    let second = MockServer::start().await;
    let elsewhere = format!("http://localhost:{}/b", second.address().port());
    Mock::given(path("/a"))
        .respond_with(ResponseTemplate::new(302).insert_header("location", elsewhere.as_str()))
        .expect(1)
        .mount(&first)
        .await;
    Mock::given(path("/b"))
        .respond_with(ResponseTemplate::new(200).set_body_string("exfiltrated"))
        .expect(0)
        .mount(&second)
        .await;
    let allow =
        AllowList::parse(&format!("{},{}", first.address(), second.address())).expect("allow");
    let tool = HttpRequestTool::new(allow);
    let only = |p: &str| Some(AllowedHosts(vec![HostPattern::parse(p).unwrap()]));
    let out = tool
        .call(
            json!({"url": format!("{}/a", first.uri())}),
            &ctx().with_allowed_hosts(only("127.0.0.1")),
        )
        .await;
    assert!(out.is_error, "{}", out.content);
    assert!(out.content.contains("redirect"), "{}", out.content);
    assert!(out.content.contains("`localhost`"), "{}", out.content);
    assert!(
        out.content.contains("http_request.allow_hosts"),
        "{}",
        out.content
    );
    // The first hop too: nothing reaches a host the agent may not.
    let out = tool
        .call(
            json!({"url": format!("{}/a", first.uri())}),
            &ctx().with_allowed_hosts(only("api.example.com")),
        )
        .await;
    assert!(
        out.is_error && out.content.contains("`127.0.0.1`"),
        "{}",
        out.content
    );
    assert_eq!(first.received_requests().await.unwrap().len(), 1);
}
