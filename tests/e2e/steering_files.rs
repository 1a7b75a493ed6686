//! Files sent to a task that is already running reach it, right after the
//! message they came with: over HTTP (`POST /tasks` with the running
//! task's `thread`; the files wait in the blob store) and in Slack (a
//! `file_share` in the task's conversation; downloaded once by the worker).

use crate::common::{Backend, Options, TestApp, TOKEN};
use serde_json::{json, Value};
use std::time::Duration;

const LONG: Duration = Duration::from_secs(60);

fn b64(bytes: &[u8]) -> String {
    use base64::Engine;
    base64::engine::general_purpose::STANDARD.encode(bytes)
}

/// Waits until the task is running (its first model call is under way).
async fn wait_running(app: &TestApp, id: &str) {
    let started = std::time::Instant::now();
    while app.task(id).await["status"] != "running" {
        assert!(started.elapsed() < LONG, "never ran: {}", app.log());
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
}

/// The text of every request the model was sent, in order.
fn requests(app: &TestApp) -> Vec<String> {
    app.llm
        .received()
        .iter()
        .map(|r| format!("{:?}", r.messages))
        .collect()
}

async fn http_files_reach_a_running_task(backend: Backend) {
    let app = TestApp::spawn(Options {
        backend,
        ..Options::default()
    })
    .await;
    let post = |body: Value| {
        app.http
            .post(format!("{}/tasks", app.url))
            .bearer_auth(TOKEN)
            .json(&body)
            .send()
    };
    let r = post(json!({"input": "#sleep=1500 read what I send next", "thread": "files-1"}))
        .await
        .unwrap();
    assert_eq!(r.status().as_u16(), 202);
    let id = r.json::<Value>().await.unwrap()["task_id"]
        .as_str()
        .unwrap()
        .to_owned();
    wait_running(&app, &id).await;

    let r = post(json!({
        "input": "here is the file",
        "thread": "files-1",
        "attachments": [{"name": "notes.txt", "data_base64": b64(b"the widget count is 42")}],
    }))
    .await
    .unwrap();
    assert_eq!(r.status().as_u16(), 202);
    let v: Value = r.json().await.unwrap();
    assert_eq!(v["delivered_to_running_task"], true, "{v}");
    assert_eq!(v["task_id"], id.as_str());

    let done = app.wait_done(&id, LONG).await;
    assert_eq!(done["status"], "succeeded", "{done}\n{}", app.log());
    let last = requests(&app).pop().expect("an LLM call");
    let message = last.find("here is the file").expect("the message");
    let file = last
        .find("[file notes.txt]\\nthe widget count is 42")
        .unwrap_or_else(|| panic!("the file reached the model: {last}"));
    assert!(message < file, "the file follows its message: {last}");

    // In the transcript once, after the message; nothing left pending.
    let events = app.events(&id).await;
    let files: Vec<&Value> = events
        .iter()
        .filter(|e| e["type"] == "attachment")
        .collect();
    assert_eq!(files.len(), 1, "{events:?}");
    assert_eq!(files[0]["name"], "notes.txt");
    let task = app
        .store()
        .await
        .get(&baton_core::TaskId::parse(&id).unwrap())
        .await
        .unwrap()
        .unwrap();
    assert!(
        task.conversation.pending_files.is_empty(),
        "{:?}",
        task.conversation.pending_files
    );
}

async fn slack_files_reach_a_running_task(backend: Backend) {
    let app = TestApp::spawn(Options {
        backend,
        ..Options::default()
    })
    .await;
    let message = |event_id: &str, ts: &str, text: &str, files: Value| {
        let mut event = json!({
            "type": "message", "user": "U1", "text": text, "ts": ts,
            "channel": "D1", "channel_type": "im", "event_ts": ts,
        });
        if files.as_array().is_some_and(|f| !f.is_empty()) {
            event["subtype"] = json!("file_share");
            event["files"] = files;
        }
        serde_json::to_vec(&json!({
            "type": "event_callback", "team_id": "T1", "api_app_id": "A1",
            "event_id": event_id, "event_time": 1_700_000_000, "event": event,
        }))
        .unwrap()
    };
    let first = message(
        "EvRun1",
        "1700000001.000100",
        "#sleep=1500 read what I share next",
        json!([]),
    );
    let r = app
        .slack_post("/slack/events", &first, "application/json", &[])
        .await;
    assert_eq!(r.status(), 200);
    let store = app.store().await;
    let started = std::time::Instant::now();
    let id = loop {
        let thread = store.thread("slack:T1:D1").await.unwrap();
        if let Some(id) = thread.and_then(|t| t.active_task) {
            break id;
        }
        assert!(started.elapsed() < LONG, "no task: {}", app.log());
        tokio::time::sleep(Duration::from_millis(25)).await;
    };
    wait_running(&app, id.as_str()).await;

    let url = app
        .slack
        .add_file("notes.txt", b"the widget count is 42".to_vec());
    let shared = message(
        "EvShare1",
        "1700000002.000100",
        "here is the file",
        json!([{"id": "F1", "name": "notes.txt", "mimetype": "text/plain", "size": 22,
                "url_private_download": url, "mode": "hosted"}]),
    );
    let r = app
        .slack_post("/slack/events", &shared, "application/json", &[])
        .await;
    assert_eq!(r.status(), 200);
    // Slack retries an event it thinks was lost: the file is taken once.
    let r = app
        .slack_post("/slack/events", &shared, "application/json", &[])
        .await;
    assert_eq!(r.status(), 200);

    let done = app.wait_done(id.as_str(), LONG).await;
    assert_eq!(done["status"], "succeeded", "{done}\n{}", app.log());
    let last = requests(&app).pop().expect("an LLM call");
    assert!(
        last.contains("[file notes.txt]\\nthe widget count is 42"),
        "{last}"
    );
    assert_eq!(app.slack.downloads("notes.txt"), 1);
    let events = app.events(id.as_str()).await;
    let files = events.iter().filter(|e| e["type"] == "attachment").count();
    assert_eq!(files, 1, "{events:?}");
}

mod embedded {
    use super::*;

    #[tokio::test(flavor = "multi_thread")]
    async fn http_files_reach_a_running_task() {
        super::http_files_reach_a_running_task(Backend::Embedded).await;
    }

    #[tokio::test(flavor = "multi_thread")]
    async fn slack_files_reach_a_running_task() {
        super::slack_files_reach_a_running_task(Backend::Embedded).await;
    }
}

mod aws {
    use super::*;

    #[tokio::test(flavor = "multi_thread")]
    async fn http_files_reach_a_running_task() {
        super::http_files_reach_a_running_task(Backend::Aws).await;
    }

    #[tokio::test(flavor = "multi_thread")]
    async fn slack_files_reach_a_running_task() {
        super::slack_files_reach_a_running_task(Backend::Aws).await;
    }
}
