//! Files out (`send_file`), end to end on both backends: the real `baton
//! dev`, the mock LLM calling the tool (`#tool`, `#then_args`) and the
//! fake Slack playing the external upload.
//!
//! - an HTTP task's files are listed in its status and downloaded with the
//!   token (401 without, 404 for a name it did not send, the name made
//!   safe), text and binary alike; an oversized file is refused with a
//!   result that says so and nothing is kept;
//! - a Slack task's file is uploaded into its thread exactly once, though
//!   the worker is killed (`kill -9`) after the completion, before the
//!   step is written; or between the bytes and the completion.

use crate::common::{Backend, Options, TestApp, TOKEN};
use baton_slack::testing::UPLOAD_BYTES;
use serde_json::{json, Value};
use std::time::Duration;

const LONG: Duration = Duration::from_secs(60);

/// A 1×1 PNG.
const PNG_BASE64: &str = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+M9QDwADhgGAWjR9awAAAABJRU5ErkJggg==";

fn png() -> Vec<u8> {
    use base64::Engine;
    base64::engine::general_purpose::STANDARD
        .decode(PNG_BASE64)
        .unwrap()
}

async fn spawn(backend: Backend, env: &[(&str, &str)]) -> TestApp {
    TestApp::spawn(Options {
        backend,
        extra_env: env
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect(),
        ..Options::default()
    })
    .await
}

fn tool_results(events: &[Value]) -> Vec<(String, bool)> {
    events
        .iter()
        .filter(|e| e["type"] == "tool_result")
        .map(|e| {
            (
                e["content"].as_str().unwrap_or_default().to_owned(),
                e["is_error"].as_bool().unwrap_or(false),
            )
        })
        .collect()
}

async fn download(app: &TestApp, path: &str, token: Option<&str>) -> reqwest::Response {
    let mut req = app.http.get(format!("{}{path}", app.url));
    if let Some(t) = token {
        req = req.bearer_auth(t);
    }
    req.send().await.expect("GET a file")
}

async fn an_http_tasks_files_are_listed_and_served_with_the_token(backend: Backend) {
    let app = spawn(backend, &[]).await;
    let csv = json!({"name": "../out.csv", "content": "a,b\n1,2", "media_type": "text/csv"});
    let dot = json!({"name": "dot.png", "content_base64": PNG_BASE64, "media_type": "image/png"});
    let id = app
        .submit_ok(&format!("#tool=send_file #args={csv} #then_args={dot}"))
        .await;
    let task = app.wait_done(&id, LONG).await;
    assert_eq!(task["status"], "succeeded", "{task}\n{}", app.log());
    assert_eq!(
        task["files"],
        json!([
            {"name": "dot.png", "media_type": "image/png", "size": png().len(),
             "url": format!("/tasks/{id}/files/dot.png")},
            {"name": "out.csv", "media_type": "text/csv", "size": 7,
             "url": format!("/tasks/{id}/files/out.csv")},
        ]),
        "{task}"
    );
    let results = tool_results(&app.events(&id).await);
    assert_eq!(results.len(), 2, "{results:?}");
    assert!(!results[0].1, "{results:?}");
    assert!(
        results[0]
            .0
            .contains(r#"(named "out.csv": file names are made safe)"#),
        "{results:?}"
    );

    let r = download(&app, &format!("/tasks/{id}/files/out.csv"), Some(TOKEN)).await;
    assert_eq!(r.status(), 200);
    assert_eq!(r.headers()["content-type"], "text/csv");
    assert_eq!(
        r.headers()["content-disposition"],
        "attachment; filename=\"out.csv\""
    );
    assert_eq!(r.bytes().await.unwrap().as_ref(), b"a,b\n1,2");
    let r = download(&app, &format!("/tasks/{id}/files/dot.png"), Some(TOKEN)).await;
    assert_eq!(r.status(), 200);
    assert_eq!(r.headers()["content-type"], "image/png");
    assert_eq!(r.bytes().await.unwrap().as_ref(), png().as_slice());

    let path = format!("/tasks/{id}/files/out.csv");
    assert_eq!(download(&app, &path, None).await.status(), 401);
    assert_eq!(download(&app, &path, Some("wrong")).await.status(), 401);
    for unknown in [
        "nope.csv",
        "..%2Fout.csv",
        ".out.csv",
        "out.csv%00",
        "OUT.csv",
    ] {
        let r = download(&app, &format!("/tasks/{id}/files/{unknown}"), Some(TOKEN)).await;
        assert_eq!(r.status(), 404, "{unknown}");
    }
    // Another task's file is not this one's.
    let other = app.submit_ok("#reply=no files").await;
    app.wait_done(&other, LONG).await;
    let r = download(&app, &format!("/tasks/{other}/files/out.csv"), Some(TOKEN)).await;
    assert_eq!(r.status(), 404);
    assert_eq!(app.task(&other).await["files"], json!([]));
}

async fn an_oversized_file_is_refused_with_a_clear_result(backend: Backend) {
    let app = spawn(backend, &[("BATON_MAX_FILE_BYTES", "2000")]).await;
    let big = json!({"name": "big.txt", "content": "x".repeat(3000), "media_type": "text/plain"});
    let id = app.submit_ok(&format!("#tool=send_file #args={big}")).await;
    let task = app.wait_done(&id, LONG).await;
    assert_eq!(task["status"], "succeeded", "{task}");
    assert_eq!(task["files"], json!([]), "{task}");
    let results = tool_results(&app.events(&id).await);
    assert_eq!(results.len(), 1, "{results:?}");
    assert!(results[0].1, "an error result: {results:?}");
    assert!(
        results[0]
            .0
            .contains("the file is 3000 bytes, over the limit of 2000 bytes: nothing was sent"),
        "{results:?}"
    );
    let r = download(&app, &format!("/tasks/{id}/files/big.txt"), Some(TOKEN)).await;
    assert_eq!(r.status(), 404);
}

fn mention(event_id: &str, ts: &str, text: &str) -> Vec<u8> {
    serde_json::to_vec(&json!({
        "token": "ignored", "team_id": "T1", "api_app_id": "A1",
        "type": "event_callback", "event_id": event_id, "event_time": 1_700_000_000,
        "event": {"type": "app_mention", "user": "U1", "text": format!("<@UBOT> {text}"),
                  "ts": ts, "channel": "C1", "event_ts": ts}
    }))
    .unwrap()
}

/// Mentions the bot asking for a file, holds `held` at the fake until the
/// test has seen `reached`, kills the worker there and restarts it; the
/// task then ends with exactly one file in the thread.
async fn a_crash_mid_upload_leaves_one_file(
    backend: Backend,
    held: &str,
    ts: &str,
    reached: impl Fn(&TestApp) -> bool,
) -> TestApp {
    // Answers posted whole, so the test reads one message.
    let mut app = spawn(
        backend,
        &[("BATON_AGENTS_TOML", "[defaults]\nstream = false\n")],
    )
    .await;
    app.slack.hold_next(held, Duration::from_secs(30));
    // `#args` takes no spaces: the comment's are escaped.
    let args = r#"{"name":"report.csv","content":"a,b\n1,2","media_type":"text/csv","comment":"Here\u0020is\u0020the\u0020report"}"#;
    let body = mention(ts, ts, &format!("#tool=send_file #args={args}"));
    let r = app
        .slack_post("/slack/events", &body, "application/json", &[])
        .await;
    assert_eq!(r.status(), 200);
    let started = std::time::Instant::now();
    while !reached(&app) {
        assert!(started.elapsed() < LONG, "never reached:\n{}", app.log());
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    app.kill9();
    app.restart();
    // The answer quotes the tool's result once the step is done.
    let started = std::time::Instant::now();
    loop {
        let posts = app.slack.posted();
        if posts.iter().any(|p| p.text.contains("tool send_file said")) {
            break;
        }
        assert!(started.elapsed() < LONG, "no answer:\n{}", app.log());
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let files = app.slack.shared_files();
    assert_eq!(files.len(), 1, "exactly one file in the thread: {files:?}");
    let f = &files[0];
    assert_eq!(
        (f.name.as_str(), f.title.as_str(), f.bytes.as_slice()),
        ("report.csv", "report.csv", b"a,b\n1,2".as_slice())
    );
    assert_eq!(
        (f.channel.as_str(), f.thread_ts.as_deref()),
        ("C1", Some(ts))
    );
    assert_eq!(f.comment.as_deref(), Some("Here is the report"));
    assert_eq!(app.slack.calls("files.completeUploadExternal").len(), 1);
    let answer = app
        .slack
        .posted()
        .into_iter()
        .find(|p| p.text.contains("tool send_file said"))
        .map(|p| p.text)
        .unwrap_or_default();
    assert!(
        answer.contains("sent \"report.csv\" (7 bytes, text/csv) to the thread"),
        "{answer}"
    );
    app
}

async fn a_crash_after_the_completion_uploads_nothing_again(backend: Backend) {
    let app = a_crash_mid_upload_leaves_one_file(
        backend,
        "files.completeUploadExternal",
        "1700000000.000810",
        |app| !app.slack.shared_files().is_empty(),
    )
    .await;
    // The re-run asked Slack, found the file shared, and stopped there.
    assert_eq!(app.slack.uploads_started(), 1);
    assert_eq!(app.slack.calls("files.info").len(), 1);
}

async fn a_crash_between_the_bytes_and_the_completion_uploads_once(backend: Backend) {
    let app =
        a_crash_mid_upload_leaves_one_file(backend, UPLOAD_BYTES, "1700000000.000820", |app| {
            app.slack.uploads_started() == 1 && app.slack.upload_received(0)
        })
        .await;
    // The first upload never completed (Slack drops it unseen); the re-run
    // saw that and made the one that shows.
    assert_eq!(app.slack.uploads_started(), 2);
}

on_both_backends!(
    an_http_tasks_files_are_listed_and_served_with_the_token,
    an_oversized_file_is_refused_with_a_clear_result,
    a_crash_after_the_completion_uploads_nothing_again,
    a_crash_between_the_bytes_and_the_completion_uploads_once,
);
