//! Memory never leaks into a shared place, end to end: a fact a user asks
//! the bot to remember in their direct messages is in the prompt of their
//! next direct message, and not in the prompt of their mention of the bot
//! in a channel (the real `baton dev`, the fake Slack, the mock LLM).

use crate::common::{Backend, Options, TestApp};
use serde_json::json;
use std::time::Duration;

const LONG: Duration = Duration::from_secs(60);
// No spaces: the scripted model reads `#args` up to the first space.
const SECRET_FACT: &str = "my-locker-code-is-4711";

/// A Slack event callback for a user message `event`.
fn callback(event_id: &str, event: serde_json::Value) -> Vec<u8> {
    serde_json::to_vec(&json!({
        "type": "event_callback",
        "team_id": "T1",
        "api_app_id": "A1",
        "event_id": event_id,
        "event_time": 1_700_000_000,
        "event": event
    }))
    .unwrap()
}

fn direct_message(event_id: &str, ts: &str, text: &str) -> Vec<u8> {
    callback(
        event_id,
        json!({"type": "message", "user": "U1", "text": text, "ts": ts,
               "channel": "D1", "channel_type": "im", "event_ts": ts}),
    )
}

fn mention(event_id: &str, ts: &str, text: &str) -> Vec<u8> {
    callback(
        event_id,
        json!({"type": "app_mention", "user": "U1", "text": format!("<@UBOT> {text}"),
               "ts": ts, "channel": "C1", "event_ts": ts}),
    )
}

async fn send(app: &TestApp, body: &[u8]) {
    let r = app
        .slack_post("/slack/events", body, "application/json", &[])
        .await;
    assert_eq!(r.status(), 200);
}

/// Waits for `n` posts in all; the last one.
async fn answered(app: &TestApp, n: usize) {
    let posts = app.slack.wait_for_posts(n, LONG).await;
    assert!(
        posts.len() >= n,
        "{n} answers expected: {posts:?}\n{}",
        app.log()
    );
}

/// The system prompt of the latest model request whose last user message
/// contains `asked`.
fn prompt_for(app: &TestApp, asked: &str) -> String {
    app.llm
        .received()
        .into_iter()
        .rev()
        .find(|r| format!("{:?}", r.messages.last()).contains(asked))
        .map(|r| r.system)
        .unwrap_or_else(|| panic!("no model request for `{asked}`"))
}

async fn user_facts_stay_in_direct_messages(backend: Backend) {
    let app = TestApp::spawn(Options {
        backend,
        ..Options::default()
    })
    .await;
    // In the DM: remember a personal fact (the scripted model calls the tool).
    let remember = format!(
        "#tool=remember #args={}",
        json!({"text": SECRET_FACT, "scope": "user"})
    );
    send(&app, &direct_message("Ev1", "100.1", &remember)).await;
    answered(&app, 1).await;
    assert!(
        app.slack.posted()[0].text.contains("user memory"),
        "{:?}",
        app.slack.posted()
    );

    // A mention in a channel, about the same thing: the fact stays out.
    send(&app, &mention("Ev2", "200.1", "what is my locker code?")).await;
    answered(&app, 2).await;
    let in_channel = prompt_for(&app, "what is my locker code?");
    assert!(
        !in_channel.contains("4711"),
        "leaked into a channel: {in_channel}"
    );

    // The same question in the DM: the fact is there (so the check above
    // can fail).
    send(&app, &direct_message("Ev3", "300.1", "and my locker code?")).await;
    answered(&app, 3).await;
    let in_dm = prompt_for(&app, "and my locker code?");
    assert!(
        in_dm.contains("4711"),
        "the fact is missing in the DM: {in_dm}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn user_facts_stay_in_direct_messages_embedded() {
    user_facts_stay_in_direct_messages(Backend::Embedded).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn user_facts_stay_in_direct_messages_aws() {
    user_facts_stay_in_direct_messages(Backend::Aws).await;
}
