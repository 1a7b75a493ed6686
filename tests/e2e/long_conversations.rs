//! A conversation answers every message, however long it grows (the real
//! `baton dev`, the mock LLM, the fake Slack): 60 messages on one HTTP
//! `thread`, 30 direct messages in one DM conversation and 30 mentions in
//! one channel thread, each sent once the previous one is answered. (Until
//! the conversation's earlier turns were carried as one entry, accepting
//! the 13th message overflowed the store's transaction and it was never
//! answered.)

use crate::common::{Backend, Options, TestApp, TOKEN};
use baton_core::{TaskId, TaskStatus};
use serde_json::{json, Value};
use std::time::{Duration, Instant};

const LONG: Duration = Duration::from_secs(60);
const HTTP_MESSAGES: usize = 60;
const SLACK_MESSAGES: usize = 30;

fn callback(event_id: &str, event: Value) -> Vec<u8> {
    serde_json::to_vec(&json!({
        "type": "event_callback", "team_id": "T1", "api_app_id": "A1",
        "event_id": event_id, "event_time": 1_700_000_000, "event": event
    }))
    .unwrap()
}

/// Waits until the conversation's task for message `marker` has ended and
/// been recorded on the conversation; asserts it answered that message.
async fn wait_answered(app: &TestApp, key: &str, marker: &str) {
    let store = app.store().await;
    let started = Instant::now();
    loop {
        if let Some(thread) = store.thread(key).await.unwrap() {
            if let Some(id) = thread.active_task.clone() {
                let task = store.get(&id).await.unwrap().unwrap();
                let answered = task
                    .answer
                    .result
                    .as_deref()
                    .is_some_and(|r| r.contains(marker));
                if task.status().is_terminal() && answered && thread.recap.recorded.contains(&id) {
                    assert_eq!(task.status(), TaskStatus::Succeeded, "{task:?}");
                    return;
                }
            }
        }
        assert!(
            started.elapsed() < LONG,
            "{key}: `{marker}` was never answered\nlog:\n{}",
            app.log()
        );
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
}

/// The newest task of a conversation starts with its earlier turns in one
/// `recap` event, then its input.
async fn assert_carried(app: &TestApp, key: &str, marker: &str) {
    let thread = app.store().await.thread(key).await.unwrap().unwrap();
    let id: TaskId = thread.active_task.unwrap();
    let events = app.events(id.as_str()).await;
    assert_eq!(events[0]["type"], "recap", "{events:?}");
    assert!(
        events[0]["turns"].as_array().is_some_and(|t| !t.is_empty()),
        "{events:?}"
    );
    assert_eq!(events[1]["type"], "user_message", "{events:?}");
    assert!(events[1]["text"].as_str().unwrap().contains(marker));
}

async fn http_thread(app: &TestApp) {
    let thread = "long-http";
    for i in 1..=HTTP_MESSAGES {
        let marker = format!("http-message-{i:03}");
        let r = app
            .http
            .post(format!("{}/tasks", app.url))
            .bearer_auth(TOKEN)
            .json(&json!({"input": marker, "thread": thread}))
            .send()
            .await
            .unwrap();
        let status = r.status();
        let v: Value = r.json().await.unwrap_or_default();
        assert_eq!(status, 202, "message {i}: {v}\nlog:\n{}", app.log());
        let t = app.wait_done(v["task_id"].as_str().unwrap(), LONG).await;
        assert_eq!(t["status"], "succeeded", "message {i}: {t}");
        assert!(t["result"].as_str().unwrap().contains(&marker), "{t}");
        wait_answered(app, &format!("http:{thread}"), &marker).await;
    }
    assert_carried(
        app,
        "http:long-http",
        &format!("http-message-{HTTP_MESSAGES:03}"),
    )
    .await;
}

async fn dm_conversation(app: &TestApp) {
    for i in 1..=SLACK_MESSAGES {
        let marker = format!("dm-message-{i:03}");
        let ts = format!("1700001{i:03}.000100");
        let body = callback(
            &format!("EvDm{i}"),
            json!({"type": "message", "user": "U1", "text": marker, "ts": ts,
                   "channel": "D1", "channel_type": "im", "event_ts": ts}),
        );
        let r = app
            .slack_post("/slack/events", &body, "application/json", &[])
            .await;
        assert_eq!(r.status(), 200, "DM {i}");
        let v: Value = r.json().await.unwrap();
        assert_eq!(v, json!({"ok": true}), "DM {i}");
        wait_answered(app, "slack:T1:D1", &marker).await;
    }
    assert_carried(
        app,
        "slack:T1:D1",
        &format!("dm-message-{SLACK_MESSAGES:03}"),
    )
    .await;
}

async fn channel_thread(app: &TestApp) {
    let root = "1700002000.000100";
    let key = format!("slack:T1:C1:{root}");
    for i in 1..=SLACK_MESSAGES {
        let marker = format!("mention-{i:03}");
        let ts = if i == 1 {
            root.to_owned()
        } else {
            format!("1700002{i:03}.000200")
        };
        let body = callback(
            &format!("EvMention{i}"),
            json!({"type": "app_mention", "user": "U2", "text": format!("<@UBOT> {marker}"),
                   "ts": ts, "thread_ts": root, "channel": "C1", "event_ts": ts}),
        );
        let r = app
            .slack_post("/slack/events", &body, "application/json", &[])
            .await;
        assert_eq!(r.status(), 200, "mention {i}");
        let v: Value = r.json().await.unwrap();
        assert_eq!(v, json!({"ok": true}), "mention {i}");
        wait_answered(app, &key, &marker).await;
    }
    assert_carried(app, &key, &format!("mention-{SLACK_MESSAGES:03}")).await;
}

async fn every_message_of_a_long_conversation_is_answered(backend: Backend) {
    let app = TestApp::spawn(Options {
        backend,
        ..Options::default()
    })
    .await;
    // Three conversations at once: each is sequential, they are not.
    tokio::join!(
        http_thread(&app),
        dm_conversation(&app),
        channel_thread(&app)
    );
    // Every Slack message got its answer in Slack: one message each.
    let posted = app.slack.posted();
    let in_channel = |c: &str| posted.iter().filter(|m| m.channel == c).count();
    assert_eq!(in_channel("D1"), SLACK_MESSAGES, "{posted:?}");
    assert_eq!(in_channel("C1"), SLACK_MESSAGES, "{posted:?}");
    assert!(!app.log().contains("invalid transaction"), "{}", app.log());
}

mod embedded {
    use super::*;

    #[tokio::test(flavor = "multi_thread")]
    async fn every_message_of_a_long_conversation_is_answered() {
        super::every_message_of_a_long_conversation_is_answered(Backend::Embedded).await;
    }
}

mod aws {
    use super::*;

    #[tokio::test(flavor = "multi_thread")]
    async fn every_message_of_a_long_conversation_is_answered() {
        super::every_message_of_a_long_conversation_is_answered(Backend::Aws).await;
    }
}
