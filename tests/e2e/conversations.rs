//! A conversation outlives its tasks, end to end (the real `baton dev`,
//! the mock LLM, the fake Slack): the next task on a thread begins with the
//! earlier turns; top-level DMs are one conversation until `reset`; what
//! others say in a channel thread without mentioning the bot is context
//! for the next task and starts no run.

use crate::common::{Backend, Options, TestApp, TOKEN};
use baton_core::Message;
use serde_json::{json, Value};
use std::time::Duration;

const LONG: Duration = Duration::from_secs(60);

/// Everything the model was sent in its latest request, as text.
fn last_request(app: &TestApp) -> String {
    let requests = app.llm.received();
    format!("{:?}", requests.last().expect("a model request").messages)
}

async fn post_task(app: &TestApp, input: &str, thread: &str) -> String {
    let r = app
        .http
        .post(format!("{}/tasks", app.url))
        .bearer_auth(TOKEN)
        .json(&json!({"input": input, "thread": thread}))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 202);
    let v: Value = r.json().await.unwrap();
    v["task_id"].as_str().unwrap().to_owned()
}

async fn http_follow_up_sees_the_first_exchange(backend: Backend) {
    let app = TestApp::spawn(Options {
        backend,
        ..Options::default()
    })
    .await;
    let first = post_task(&app, "the-code-word-is-BLUE", "conv-1").await;
    let t = app.wait_done(&first, LONG).await;
    assert_eq!(t["status"], "succeeded", "{t}");
    // Its turns are recorded on the conversation just after it ends; a
    // follow-up sent at once (as here) waits for them in the ingest.
    let second = post_task(&app, "what-was-the-code-word?", "conv-1").await;
    assert_ne!(first, second, "a new task on the same conversation");
    let t = app.wait_done(&second, LONG).await;
    assert_eq!(t["status"], "succeeded", "{t}");
    let requests = app.llm.received();
    let last = &requests.last().unwrap().messages;
    // The earlier user message, the earlier answer, then the new input.
    let users: Vec<&str> = last
        .iter()
        .filter_map(|m| match m {
            Message::User { content } => Some(content.as_str()),
            _ => None,
        })
        .collect();
    assert!(
        users.iter().any(|u| u.contains("the-code-word-is-BLUE")),
        "{last:?}"
    );
    assert!(
        users.last().unwrap().contains("what-was-the-code-word?"),
        "{last:?}"
    );
    assert!(
        last.iter().any(|m| matches!(m, Message::Assistant { content, .. } if content.contains("the-code-word-is-BLUE"))),
        "the earlier answer (the scripted model echoes): {last:?}"
    );
    // Another conversation knows nothing of it.
    let other = post_task(&app, "hello", "conv-2").await;
    app.wait_done(&other, LONG).await;
    assert!(
        !last_request(&app).contains("BLUE"),
        "{}",
        last_request(&app)
    );
}

fn callback(event_id: &str, event: Value) -> Vec<u8> {
    serde_json::to_vec(&json!({
        "type": "event_callback", "team_id": "T1", "api_app_id": "A1",
        "event_id": event_id, "event_time": 1_700_000_000, "event": event
    }))
    .unwrap()
}

async fn send(app: &TestApp, body: &[u8]) -> Value {
    let r = app
        .slack_post("/slack/events", body, "application/json", &[])
        .await;
    assert_eq!(r.status(), 200);
    r.json().await.unwrap()
}

fn dm(event_id: &str, ts: &str, text: &str) -> Vec<u8> {
    callback(
        event_id,
        json!({"type": "message", "user": "U1", "text": text, "ts": ts,
               "channel": "D1", "channel_type": "im", "event_ts": ts}),
    )
}

async fn slack_dms_are_one_conversation_until_reset(backend: Backend) {
    let app = TestApp::spawn(Options {
        backend,
        ..Options::default()
    })
    .await;
    send(&app, &dm("Ev1", "1700000001.000100", "my-team-is-ORCA")).await;
    app.slack.wait_for_posts(1, LONG).await;
    wait_idle(&app, "slack:T1:D1").await;
    send(&app, &dm("Ev2", "1700000002.000100", "which-team-am-I-on?")).await;
    app.slack.wait_for_posts(2, LONG).await;
    let seen = last_request(&app);
    assert!(seen.contains("my-team-is-ORCA"), "{seen}");
    assert!(seen.contains("which-team-am-I-on?"), "{seen}");
    wait_idle(&app, "slack:T1:D1").await;
    let v = send(&app, &dm("Ev3", "1700000003.000100", "reset")).await;
    assert_eq!(v["conversation"], "reset", "{v}");
    let notes = app.slack.calls("chat.postEphemeral");
    assert!(
        notes
            .iter()
            .any(|n| n.to_string().contains("Starting a new conversation")),
        "the user is told: {notes:?}"
    );
    send(&app, &dm("Ev4", "1700000004.000100", "fresh-start?")).await;
    app.slack.wait_for_posts(3, LONG).await;
    let seen = last_request(&app);
    assert!(seen.contains("fresh-start?"), "{seen}");
    assert!(!seen.contains("ORCA"), "reset forgets: {seen}");
}

/// A `reset` sent while a task runs holds: what that task says after it
/// is not carried into the new conversation.
async fn a_reset_while_a_task_runs_holds(backend: Backend) {
    let app = TestApp::spawn(Options {
        backend,
        ..Options::default()
    })
    .await;
    send(
        &app,
        &dm("Ev1", "1700000011.000100", "my-team-is-ORCA #sleep=1500"),
    )
    .await;
    let store = app.store().await;
    let started = std::time::Instant::now();
    while app.llm.received().is_empty() {
        assert!(started.elapsed() < LONG, "the task never called the model");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let v = send(&app, &dm("Ev2", "1700000012.000100", "reset")).await;
    assert_eq!(v["conversation"], "reset", "{v}");
    // The running task finishes after the reset…
    let id = store
        .thread("slack:T1:D1")
        .await
        .unwrap()
        .unwrap()
        .active_task
        .unwrap();
    let t = app.wait_done(id.as_str(), LONG).await;
    assert_eq!(t["status"], "succeeded", "{t}");
    app.slack.wait_for_posts(1, LONG).await;
    // …and the next message starts afresh all the same.
    send(&app, &dm("Ev3", "1700000013.000100", "fresh-start?")).await;
    app.slack.wait_for_posts(2, LONG).await;
    let seen = last_request(&app);
    assert!(seen.contains("fresh-start?"), "{seen}");
    assert!(!seen.contains("ORCA"), "the reset held: {seen}");
}

/// Waits until the conversation's task has ended and been recorded.
async fn wait_idle(app: &TestApp, key: &str) {
    let store = app.store().await;
    let started = std::time::Instant::now();
    loop {
        let thread = store.thread(key).await.unwrap();
        if let Some(t) = &thread {
            if let Some(id) = &t.active_task {
                if t.recap.recorded.contains(id) {
                    return;
                }
            }
        }
        assert!(started.elapsed() < LONG, "{key} still busy: {thread:?}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

async fn channel_thread_keeps_others_words_as_context(backend: Backend) {
    let app = TestApp::spawn(Options {
        backend,
        ..Options::default()
    })
    .await;
    let ts = "1700000100.000100";
    let mention = |event_id: &str, msg_ts: &str, text: &str| {
        callback(
            event_id,
            json!({"type": "app_mention", "user": "U1", "text": format!("<@UBOT> {text}"),
                   "ts": msg_ts, "thread_ts": ts, "channel": "C1", "event_ts": msg_ts}),
        )
    };
    send(&app, &mention("Ev1", ts, "deploy-status-please")).await;
    app.slack.wait_for_posts(1, LONG).await;
    let key = format!("slack:T1:C1:{ts}");
    wait_idle(&app, &key).await;
    // Someone else, no mention: no run, but context.
    let calls = app.llm.received().len();
    let v = send(
        &app,
        &callback(
            "Ev2",
            json!({"type": "message", "user": "U2", "text": "FYI-the-db-is-down",
                   "ts": "1700000101.000100", "thread_ts": ts, "channel": "C1",
                   "channel_type": "channel", "event_ts": "1700000101.000100"}),
        ),
    )
    .await;
    assert_eq!(v["ignored"], "thread message without a mention", "{v}");
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert_eq!(app.llm.received().len(), calls, "no run");
    // The follow-up mention sees the first exchange and U2's words.
    send(&app, &mention("Ev3", "1700000102.000100", "any-news?")).await;
    app.slack.wait_for_posts(2, LONG).await;
    let seen = last_request(&app);
    assert!(seen.contains("deploy-status-please"), "{seen}");
    assert!(seen.contains("[from <@U2>] FYI-the-db-is-down"), "{seen}");
    assert!(seen.contains("any-news?"), "{seen}");
}

/// A second person's message in a running task's thread is their own
/// turn: it never reaches the running task (nor switches whom it acts
/// for); it waits behind it, then runs acting for its author, with the
/// conversation so far.
async fn a_second_persons_message_is_their_own_turn(backend: Backend) {
    let app = TestApp::spawn(Options {
        backend,
        ..Options::default()
    })
    .await;
    let ts = "1700000200.000100";
    let mention = |event_id: &str, user: &str, msg_ts: &str, text: &str| {
        callback(
            event_id,
            json!({"type": "app_mention", "user": user, "text": format!("<@UBOT> {text}"),
                   "ts": msg_ts, "thread_ts": ts, "channel": "C1", "event_ts": msg_ts}),
        )
    };
    app.slack.set_user_name("U1", "Alice");
    app.slack.set_user_name("U2", "Bob");
    send(&app, &mention("Ev1", "U1", ts, "#steps=4 #sleep=600")).await;
    let key = format!("slack:T1:C1:{ts}");
    let store = app.store().await;
    let started = std::time::Instant::now();
    while app.llm.received().is_empty() {
        assert!(started.elapsed() < LONG, "the task never called the model");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let first = store
        .thread(&key)
        .await
        .unwrap()
        .unwrap()
        .active_task
        .unwrap();
    send(
        &app,
        &mention("Ev2", "U2", "1700000201.000100", "also-check-the-db"),
    )
    .await;
    let t = app.wait_done(first.as_str(), LONG).await;
    assert_eq!(t["status"], "succeeded", "{t}");
    // The second turn: a task of its own on the conversation.
    let started = std::time::Instant::now();
    let second = loop {
        let thread = store.thread(&key).await.unwrap().unwrap();
        match thread.active_task {
            Some(id) if id != first => break id,
            _ => {}
        }
        assert!(started.elapsed() < LONG, "the second turn never started");
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    let t = app.wait_done(second.as_str(), LONG).await;
    assert_eq!(t["status"], "succeeded", "{t}");
    let first_task = store.get(&first).await.unwrap().unwrap();
    let second_task = store.get(&second).await.unwrap().unwrap();
    assert_eq!(
        first_task.acting_for(),
        Some(baton_core::connection::PersonKey::new("T1", "U1"))
    );
    assert_eq!(
        second_task.acting_for(),
        Some(baton_core::connection::PersonKey::new("T1", "U2"))
    );
    let requests = app.llm.received();
    // The first task never saw it.
    let of_first: Vec<_> = requests
        .iter()
        .filter(|r| !format!("{:?}", r.messages).contains("also-check-the-db"))
        .collect();
    assert!(!of_first.is_empty());
    // The second sees the first exchange, and knows who asks.
    let last = requests.last().unwrap();
    let seen = format!("{:?}", last.messages);
    assert!(seen.contains("also-check-the-db"), "{seen}");
    assert!(seen.contains("#steps=4"), "the earlier turn: {seen}");
    assert!(
        last.system
            .contains("<@U2> is Bob, who asked for this task"),
        "{}",
        last.system
    );
    assert!(last.system.contains("<@U1> is Alice"), "{}", last.system);
}

mod embedded {
    use super::*;

    #[tokio::test(flavor = "multi_thread")]
    async fn a_reset_while_a_task_runs_holds() {
        super::a_reset_while_a_task_runs_holds(Backend::Embedded).await;
    }

    #[tokio::test(flavor = "multi_thread")]
    async fn a_second_persons_message_is_their_own_turn() {
        super::a_second_persons_message_is_their_own_turn(Backend::Embedded).await;
    }

    #[tokio::test(flavor = "multi_thread")]
    async fn http_follow_up_sees_the_first_exchange() {
        super::http_follow_up_sees_the_first_exchange(Backend::Embedded).await;
    }

    #[tokio::test(flavor = "multi_thread")]
    async fn slack_dms_are_one_conversation_until_reset() {
        super::slack_dms_are_one_conversation_until_reset(Backend::Embedded).await;
    }

    #[tokio::test(flavor = "multi_thread")]
    async fn channel_thread_keeps_others_words_as_context() {
        super::channel_thread_keeps_others_words_as_context(Backend::Embedded).await;
    }
}

mod aws {
    use super::*;

    #[tokio::test(flavor = "multi_thread")]
    async fn a_reset_while_a_task_runs_holds() {
        super::a_reset_while_a_task_runs_holds(Backend::Aws).await;
    }

    #[tokio::test(flavor = "multi_thread")]
    async fn http_follow_up_sees_the_first_exchange() {
        super::http_follow_up_sees_the_first_exchange(Backend::Aws).await;
    }

    #[tokio::test(flavor = "multi_thread")]
    async fn slack_dms_are_one_conversation_until_reset() {
        super::slack_dms_are_one_conversation_until_reset(Backend::Aws).await;
    }

    #[tokio::test(flavor = "multi_thread")]
    async fn channel_thread_keeps_others_words_as_context() {
        super::channel_thread_keeps_others_words_as_context(Backend::Aws).await;
    }
}
