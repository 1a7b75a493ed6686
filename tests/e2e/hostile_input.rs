//! Every input is hostile until verified: each kind of bad request gets a
//! clear 4xx with a JSON error, and nothing is written, queued or answered.

use crate::common::{Backend, Options, TestApp, SIGNING_SECRET, TOKEN};
use serde_json::{json, Value};

/// The signature with its last hex digit changed.
fn tamper(sig: &str) -> String {
    let last = if sig.ends_with('0') { '1' } else { '0' };
    format!("{}{last}", &sig[..sig.len() - 1])
}

async fn expect_error(resp: reqwest::Response, status: u16, what: &str) {
    assert_eq!(resp.status().as_u16(), status, "{what}");
    let body: Value = resp.json().await.unwrap_or(Value::Null);
    assert!(
        body["error"].as_str().is_some_and(|e| !e.is_empty()),
        "{what}: JSON error expected, got {body}"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn bad_requests_are_refused_and_change_nothing_embedded() {
    bad_requests_are_refused_and_change_nothing(Backend::Embedded).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn bad_requests_are_refused_and_change_nothing_aws() {
    bad_requests_are_refused_and_change_nothing(Backend::Aws).await;
}

async fn bad_requests_are_refused_and_change_nothing(backend: Backend) {
    let mut app = TestApp::spawn(Options {
        backend,
        ..Options::default()
    })
    .await;
    let url = app.url.clone();
    let http = app.http.clone();
    let tasks = format!("{url}/tasks");
    let good = json!({"input": "hi"});

    expect_error(
        http.post(&tasks).json(&good).send().await.unwrap(),
        401,
        "no token",
    )
    .await;
    expect_error(
        http.post(&tasks)
            .bearer_auth("wrong-token-wrong-token")
            .json(&good)
            .send()
            .await
            .unwrap(),
        401,
        "wrong token",
    )
    .await;
    expect_error(
        http.post(&tasks)
            .bearer_auth(TOKEN)
            .header("content-type", "text/plain")
            .body("hi")
            .send()
            .await
            .unwrap(),
        415,
        "wrong content type",
    )
    .await;
    expect_error(
        http.post(&tasks)
            .bearer_auth(TOKEN)
            .header("content-type", "application/json")
            .body("{\"input\": ")
            .send()
            .await
            .unwrap(),
        400,
        "malformed JSON",
    )
    .await;
    expect_error(
        http.post(&tasks)
            .bearer_auth(TOKEN)
            .json(&json!({"input": "hi", "inptu": 1}))
            .send()
            .await
            .unwrap(),
        400,
        "unknown field",
    )
    .await;
    expect_error(
        http.post(&tasks)
            .bearer_auth(TOKEN)
            .json(&json!({"input": "   "}))
            .send()
            .await
            .unwrap(),
        400,
        "empty input",
    )
    .await;
    expect_error(
        http.post(&tasks)
            .bearer_auth(TOKEN)
            .json(&json!({"input": 5}))
            .send()
            .await
            .unwrap(),
        400,
        "wrong type",
    )
    .await;
    expect_error(
        http.post(&tasks)
            .bearer_auth(TOKEN)
            .json(&json!({"input": "hi", "agent": "nope"}))
            .send()
            .await
            .unwrap(),
        400,
        "unknown agent",
    )
    .await;
    // POST /tasks takes up to 15 MiB (files); beyond that, refused.
    let huge = json!({"input": "x".repeat(16 * 1024 * 1024)});
    // Its own connection: the server answers 413 before reading the whole
    // body and closes the connection, which a pooled client might reuse.
    expect_error(
        reqwest::Client::new()
            .post(&tasks)
            .header("connection", "close")
            .bearer_auth(TOKEN)
            .json(&huge)
            .send()
            .await
            .unwrap(),
        413,
        "oversized body",
    )
    .await;
    expect_error(
        http.post(&tasks)
            .bearer_auth(TOKEN)
            .header("idempotency-key", "k".repeat(300))
            .json(&good)
            .send()
            .await
            .unwrap(),
        400,
        "oversized idempotency key",
    )
    .await;
    expect_error(
        http.get(format!("{url}/tasks/not-a-task"))
            .bearer_auth(TOKEN)
            .send()
            .await
            .unwrap(),
        400,
        "bad id",
    )
    .await;
    expect_error(
        http.get(format!("{url}/tasks/0190a0c4-1111-7000-8000-000000000000"))
            .bearer_auth(TOKEN)
            .send()
            .await
            .unwrap(),
        404,
        "unknown task",
    )
    .await;
    expect_error(
        http.get(format!(
            "{url}/tasks/0190a0c4-1111-7000-8000-000000000000/events?after=abc"
        ))
        .bearer_auth(TOKEN)
        .send()
        .await
        .unwrap(),
        400,
        "bad query",
    )
    .await;
    expect_error(
        http.get(format!("{url}/nope")).send().await.unwrap(),
        404,
        "unknown route",
    )
    .await;
    expect_error(
        http.delete(&tasks).bearer_auth(TOKEN).send().await.unwrap(),
        405,
        "wrong method",
    )
    .await;

    // Slack: unsigned, badly signed, stale (a replay), unreadable.
    let event = serde_json::to_vec(&json!({
        "team_id": "T1", "api_app_id": "A1", "type": "event_callback", "event_id": "EvBad", "event_time": 1,
        "event": {"type": "app_mention", "user": "U1", "text": "<@UBOT> hi", "ts": "1.1", "channel": "C1"}
    }))
    .unwrap();
    let slack = format!("{url}/slack/events");
    expect_error(
        http.post(&slack).body(event.clone()).send().await.unwrap(),
        401,
        "unsigned Slack event",
    )
    .await;
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs() as i64;
    let secret = baton_slack::signature::SigningSecret::new(SIGNING_SECRET);
    let sig = baton_slack::signature::sign(&secret, now, &event);
    expect_error(
        http.post(&slack)
            .header("x-slack-request-timestamp", now.to_string())
            .header("x-slack-signature", tamper(&sig))
            .body(event.clone())
            .send()
            .await
            .unwrap(),
        401,
        "bad signature",
    )
    .await;
    let old = now - 6 * 60;
    expect_error(
        http.post(&slack)
            .header("x-slack-request-timestamp", old.to_string())
            .header(
                "x-slack-signature",
                baton_slack::signature::sign(&secret, old, &event),
            )
            .body(event.clone())
            .send()
            .await
            .unwrap(),
        401,
        "stale timestamp (replay)",
    )
    .await;
    let tampered = String::from_utf8(event.clone())
        .unwrap()
        .replace("hi", "rm -rf");
    expect_error(
        http.post(&slack)
            .header("x-slack-request-timestamp", now.to_string())
            .header("x-slack-signature", sig.clone())
            .body(tampered)
            .send()
            .await
            .unwrap(),
        401,
        "tampered body",
    )
    .await;
    expect_error(
        app.slack_post("/slack/events", b"{not json", "application/json", &[])
            .await,
        400,
        "malformed Slack JSON",
    )
    .await;
    expect_error(
        app.slack_post(
            "/slack/interactivity",
            b"payload=%7Bnope",
            "application/x-www-form-urlencoded",
            &[],
        )
        .await,
        400,
        "malformed interaction",
    )
    .await;

    // Nothing was answered, called, or stored.
    assert_eq!(app.llm.request_count(), 0, "no model call");
    assert!(app.slack.posted().is_empty(), "no Slack post");
    app.kill9();
    let store = app.store().await;
    assert!(
        store.active_tasks(100).await.unwrap().is_empty(),
        "no task written"
    );
    assert!(
        store.thread("slack:T1:C1:1.1").await.unwrap().is_none(),
        "no thread written"
    );
    if backend == Backend::Embedded {
        let b = baton_embedded::EmbeddedBackend::open(app.data_dir(), Default::default()).unwrap();
        assert_eq!(b.queue.len().await.unwrap(), 0, "nothing queued");
    }
}
