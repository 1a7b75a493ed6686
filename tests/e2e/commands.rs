//! Commands without a task, end to end (the real `baton dev`, the fake
//! Slack, the mock LLM): `help`, `status`, `tasks`, `cancel` and `model`
//! sent to Baton as a message, or as `/baton WORD`, are answered by the
//! ingest itself — a note only the sender sees, or the slash command's
//! `response_url` — with no model call and no task. `/baton` followed by
//! anything else starts a task as a mention would. A slash command is
//! signed like an event: a bad signature or a stale timestamp is a 401 and
//! changes nothing.

use crate::common::{Backend, Options, TestApp, SIGNING_SECRET};
use serde_json::{json, Value};
use std::time::Duration;

const LONG: Duration = Duration::from_secs(60);
/// A task that waits for its requester's answer, at zero compute.
const ASK: &str = r#"#tool=ask_user #args={"question":"Which-environment?"}"#;
const TS: &str = "1700000300.000100";
const CHANNEL: &str = "C1";
const DM: &str = "D1";

fn callback(event_id: &str, event: Value) -> Vec<u8> {
    serde_json::to_vec(&json!({
        "type": "event_callback", "team_id": "T1", "api_app_id": "A1",
        "event_id": event_id, "event_time": 1_700_000_000, "event": event
    }))
    .unwrap()
}

/// `user` mentions the bot with `text` in the thread `TS` of `CHANNEL`
/// (starting it when `ts` is `TS`).
fn mention(user: &str, ts: &str, text: &str) -> Vec<u8> {
    let mut event = json!({"type": "app_mention", "user": user, "text": format!("<@UBOT> {text}"),
                           "ts": ts, "channel": CHANNEL, "event_ts": ts});
    if ts != TS {
        event["thread_ts"] = json!(TS);
    }
    callback(&format!("Ev{ts}"), event)
}

/// `user` writes `text` in their direct message with the app.
fn direct(user: &str, ts: &str, text: &str) -> Vec<u8> {
    callback(
        &format!("Ev{ts}"),
        json!({"type": "message", "user": user, "text": text, "ts": ts,
               "channel": DM, "channel_type": "im", "event_ts": ts}),
    )
}

async fn send(app: &TestApp, body: &[u8]) -> Value {
    let r = app
        .slack_post("/slack/events", body, "application/json", &[])
        .await;
    assert_eq!(r.status(), 200, "log:\n{}", app.log());
    r.json().await.unwrap()
}

/// The form of `/baton {text}` from `user` in `channel`, answered at the
/// fake's response URL `id`.
fn slash_form(app: &TestApp, user: &str, channel: &str, text: &str, id: &str) -> Vec<u8> {
    let channel_name = if channel.starts_with('D') {
        "directmessage"
    } else {
        "general"
    };
    let fields = [
        ("token", "deprecated-verification-token"),
        ("team_id", "T1"),
        ("team_domain", "example"),
        ("channel_id", channel),
        ("channel_name", channel_name),
        ("user_id", user),
        ("user_name", "someone"),
        ("command", "/baton"),
        ("text", text),
        ("api_app_id", "A1"),
        ("response_url", &app.slack.response_url(id)),
        ("trigger_id", &format!("trigger-{id}")),
    ];
    let encoded: Vec<String> = fields
        .iter()
        .map(|(k, v)| format!("{}={}", form_encode(k), form_encode(v)))
        .collect();
    encoded.join("&").into_bytes()
}

/// `application/x-www-form-urlencoded` encoding of one value.
fn form_encode(value: &str) -> String {
    let mut out = String::new();
    for b in value.bytes() {
        match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'*' => {
                out.push(b as char)
            }
            b' ' => out.push('+'),
            _ => out.push_str(&format!("%{b:02X}")),
        }
    }
    out
}

/// `/baton {text}`: the acknowledgment's status and body.
async fn slash(app: &TestApp, user: &str, channel: &str, text: &str, id: &str) -> (u16, String) {
    let body = slash_form(app, user, channel, text, id);
    let r = app
        .slack_post(
            "/slack/commands",
            &body,
            "application/x-www-form-urlencoded",
            &[],
        )
        .await;
    (r.status().as_u16(), r.text().await.unwrap())
}

/// `/baton {text}` answered at its response URL: the answer's text.
async fn slash_answer(app: &TestApp, user: &str, channel: &str, text: &str, id: &str) -> String {
    let (status, ack) = slash(app, user, channel, text, id).await;
    assert_eq!((status, ack.as_str()), (200, ""), "log:\n{}", app.log());
    let responses: Vec<_> = app
        .slack
        .responses()
        .into_iter()
        .filter(|r| r.id == id)
        .collect();
    assert_eq!(responses.len(), 1, "{responses:?}");
    assert_eq!(responses[0].body["response_type"], "ephemeral");
    responses[0].body["text"].as_str().unwrap().to_owned()
}

/// The notes posted with `chat.postEphemeral`.
fn notes(app: &TestApp) -> Vec<Value> {
    app.slack.calls("chat.postEphemeral")
}

/// The task of conversation `key`, once one is there.
async fn task_of(app: &TestApp, key: &str) -> String {
    let store = app.store().await;
    let started = std::time::Instant::now();
    loop {
        if let Some(id) = store.thread(key).await.unwrap().and_then(|t| t.active_task) {
            return id.to_string();
        }
        assert!(started.elapsed() < LONG, "no task on {key}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// How many tasks the listing holds.
async fn task_count(app: &TestApp) -> usize {
    let (status, v) = app.get("/tasks?limit=100").await;
    assert_eq!(status, 200, "{v}");
    v["tasks"].as_array().unwrap().len()
}

/// `user` sends the word `text` in the thread (the `n`th such message):
/// answered to them alone, in the thread; the answer's text.
async fn ask_in_thread(app: &TestApp, n: u32, user: &str, text: &str) -> String {
    let ts = format!("1700000301.{n:06}");
    let v = send(app, &mention(user, &ts, text)).await;
    let word = text.trim().trim_end_matches('?').to_lowercase();
    assert_eq!(v, json!({"ok": true, "command": word}), "{text}");
    let notes = notes(app);
    let note = notes.last().expect("answered").clone();
    assert_eq!(
        (&note["channel"], &note["user"], &note["thread_ts"]),
        (&json!(CHANNEL), &json!(user), &json!(TS)),
        "{note}"
    );
    note["text"].as_str().unwrap().to_owned()
}

async fn message_words_are_answered_without_a_model(backend: Backend) {
    let app = TestApp::spawn(Options {
        backend,
        ..Options::default()
    })
    .await;
    let v = send(&app, &mention("U1", TS, ASK)).await;
    assert_eq!(v, json!({"ok": true}));
    let id = task_of(&app, &format!("slack:T1:{CHANNEL}:{TS}")).await;
    app.wait_waiting(&id).await;
    let model_calls = app.llm.request_count();
    let posts = app.slack.posted().len();

    let mut n = 0;
    let mut ask = |user: &'static str, text: &'static str| {
        n += 1;
        ask_in_thread(&app, n, user, text)
    };
    let help = ask("U2", "help").await;
    for word in ["help", "status", "tasks", "cancel", "model"] {
        assert!(help.contains(&format!("`{word}`")), "{help}");
    }
    let status = ask("U1", " STATUS? ").await;
    assert!(status.contains(&id), "{status}");
    assert!(
        status.contains("waiting for its requester's answer to: Which-environment?"),
        "{status}"
    );
    let tasks = ask("U1", "tasks").await;
    assert!(tasks.contains(&id) && tasks.contains("<#C1>"), "{tasks}");
    // People are told apart: U2 asked for nothing.
    let theirs = ask("U2", "Tasks").await;
    assert_eq!(theirs, "You have no running or waiting tasks.");
    let model = ask("U2", "model").await;
    assert!(model.contains("*default*"), "{model}");
    // Slack redelivers the `model` message (same event, as after a slow
    // ack): acknowledged, not answered again.
    let answered = notes(&app).len();
    let again = send(&app, &mention("U2", "1700000301.000005", "model")).await;
    assert_eq!(again["duplicate"], json!(true), "{again}");
    assert_eq!(notes(&app).len(), answered);
    // U2 may not stop U1's task: told so, and nothing changes.
    let refused = ask("U2", "cancel").await;
    assert!(refused.contains("Only <@U1>"), "{refused}");
    assert_eq!(app.task(&id).await["status"], "waiting");

    // None of it called the model, started a task or posted in the thread.
    assert_eq!(app.llm.request_count(), model_calls);
    assert_eq!(task_count(&app).await, 1);
    assert_eq!(app.slack.posted().len(), posts, "{:?}", app.slack.posted());

    // The requester's cancel stops it.
    let stopping = ask("U1", "cancel").await;
    assert!(
        stopping.contains(&format!("Stopping task `{id}`")),
        "{stopping}"
    );
    let task = app.wait_done(&id, LONG).await;
    assert_eq!(task["status"], "cancelled", "{task}\nlog:\n{}", app.log());
    let after = ask("U1", "status").await;
    assert_eq!(after, "No task is running in this thread.");
    assert_eq!(app.llm.request_count(), model_calls);
}

async fn slash_words_are_answered_at_the_response_url(backend: Backend) {
    let app = TestApp::spawn(Options {
        backend,
        ..Options::default()
    })
    .await;
    // U1's task in their direct message with the app waits for them.
    let v = send(&app, &direct("U1", "1700000400.000100", ASK)).await;
    assert_eq!(v, json!({"ok": true}));
    let id = task_of(&app, &format!("slack:T1:{DM}")).await;
    app.wait_waiting(&id).await;
    let model_calls = app.llm.request_count();
    let posts = app.slack.posted().len();

    let help = slash_answer(&app, "U1", DM, "help", "r1").await;
    for word in ["help", "status", "tasks", "cancel", "model"] {
        assert!(help.contains(&format!("`{word}`")), "{help}");
    }
    // `/baton` alone is `help`.
    assert_eq!(slash_answer(&app, "U1", DM, "", "r2").await, help);
    let status = slash_answer(&app, "U1", DM, "Status", "r3").await;
    assert!(
        status.contains(&id) && status.contains("Which-environment?"),
        "{status}"
    );
    let tasks = slash_answer(&app, "U1", CHANNEL, "tasks", "r4").await;
    assert!(tasks.contains(&id), "{tasks}");
    let theirs = slash_answer(&app, "U2", CHANNEL, "tasks", "r5").await;
    assert_eq!(theirs, "You have no running or waiting tasks.");
    let model = slash_answer(&app, "U1", CHANNEL, "MODEL", "r6").await;
    assert!(model.contains("*default*"), "{model}");
    // In a channel, a slash command names no thread: said so, nothing done.
    let no_thread = slash_answer(&app, "U1", CHANNEL, "cancel", "r7").await;
    assert!(
        no_thread.contains("mention me in the task's thread"),
        "{no_thread}"
    );
    assert_eq!(app.task(&id).await["status"], "waiting");

    assert_eq!(app.llm.request_count(), model_calls, "no model call");
    assert_eq!(task_count(&app).await, 1, "no task");
    assert_eq!(app.slack.posted().len(), posts, "nothing posted");
    assert!(notes(&app).is_empty(), "answers went to the response URLs");

    let stopping = slash_answer(&app, "U1", DM, "cancel", "r8").await;
    assert!(
        stopping.contains(&format!("Stopping task `{id}`")),
        "{stopping}"
    );
    let task = app.wait_done(&id, LONG).await;
    assert_eq!(task["status"], "cancelled", "{task}\nlog:\n{}", app.log());
    assert_eq!(app.llm.request_count(), model_calls);
}

async fn slash_anything_else_starts_a_task(backend: Backend) {
    let app = TestApp::spawn(Options {
        backend,
        ..Options::default()
    })
    .await;
    let (status, ack) = slash(&app, "U1", CHANNEL, "write a haiku <!channel>", "t1").await;
    assert_eq!((status, ack.as_str()), (200, ""), "log:\n{}", app.log());
    // Baton posts the request (defused) and answers in its thread.
    let posted = app.slack.wait_for_posts(1, LONG).await;
    let first = &posted[0];
    assert_eq!(first.channel, CHANNEL);
    assert_eq!(first.text, "<@U1> asked: write a haiku &lt;!channel&gt;");
    let id = task_of(&app, &format!("slack:T1:{CHANNEL}:{}", first.ts)).await;
    let task = app.wait_done(&id, LONG).await;
    assert_eq!(task["status"], "succeeded", "{task}\nlog:\n{}", app.log());
    assert!(app.llm.request_count() >= 1);
    let posted = app.slack.wait_for_posts(2, LONG).await;
    assert!(
        posted
            .iter()
            .any(|p| p.thread_ts.as_deref() == Some(first.ts.as_str())),
        "the answer goes in the thread: {posted:?}"
    );
    assert!(app.slack.responses().is_empty());
}

async fn a_badly_signed_slash_command_is_refused(backend: Backend) {
    let app = TestApp::spawn(Options {
        backend,
        ..Options::default()
    })
    .await;
    let body = slash_form(&app, "U1", CHANNEL, "write a haiku", "bad");
    let url = format!("{}/slack/commands", app.url);
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs() as i64;
    let secret = baton_slack::signature::SigningSecret::new(SIGNING_SECRET);
    let wrong = baton_slack::signature::SigningSecret::new("not-the-secret");
    let old = now - 6 * 60;
    for (ts, signature, why) in [
        (now, None, "unsigned"),
        (
            now,
            Some(baton_slack::signature::sign(&wrong, now, &body)),
            "bad signature",
        ),
        (
            old,
            Some(baton_slack::signature::sign(&secret, old, &body)),
            "stale timestamp",
        ),
    ] {
        let mut req = app
            .http
            .post(&url)
            .header("content-type", "application/x-www-form-urlencoded")
            .header("x-slack-request-timestamp", ts.to_string())
            .body(body.clone());
        if let Some(s) = signature {
            req = req.header("x-slack-signature", s);
        }
        let r = req.send().await.unwrap();
        assert_eq!(r.status(), 401, "{why}");
    }
    // A signed but tampered body is refused too.
    let sig = baton_slack::signature::sign(&secret, now, &body);
    let tampered = String::from_utf8(body.clone())
        .unwrap()
        .replace("haiku", "virus");
    let r = app
        .http
        .post(&url)
        .header("content-type", "application/x-www-form-urlencoded")
        .header("x-slack-request-timestamp", now.to_string())
        .header("x-slack-signature", sig)
        .body(tampered)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 401, "tampered");
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(task_count(&app).await, 0);
    assert!(app.slack.posted().is_empty());
    assert!(app.slack.responses().is_empty());
    assert_eq!(app.llm.request_count(), 0);
}

mod embedded {
    use super::*;

    #[tokio::test(flavor = "multi_thread")]
    async fn message_words_are_answered_without_a_model() {
        super::message_words_are_answered_without_a_model(Backend::Embedded).await;
    }

    #[tokio::test(flavor = "multi_thread")]
    async fn slash_words_are_answered_at_the_response_url() {
        super::slash_words_are_answered_at_the_response_url(Backend::Embedded).await;
    }

    #[tokio::test(flavor = "multi_thread")]
    async fn slash_anything_else_starts_a_task() {
        super::slash_anything_else_starts_a_task(Backend::Embedded).await;
    }

    #[tokio::test(flavor = "multi_thread")]
    async fn a_badly_signed_slash_command_is_refused() {
        super::a_badly_signed_slash_command_is_refused(Backend::Embedded).await;
    }
}

mod aws {
    use super::*;

    #[tokio::test(flavor = "multi_thread")]
    async fn message_words_are_answered_without_a_model() {
        super::message_words_are_answered_without_a_model(Backend::Aws).await;
    }

    #[tokio::test(flavor = "multi_thread")]
    async fn slash_words_are_answered_at_the_response_url() {
        super::slash_words_are_answered_at_the_response_url(Backend::Aws).await;
    }

    #[tokio::test(flavor = "multi_thread")]
    async fn slash_anything_else_starts_a_task() {
        super::slash_anything_else_starts_a_task(Backend::Aws).await;
    }

    #[tokio::test(flavor = "multi_thread")]
    async fn a_badly_signed_slash_command_is_refused() {
        super::a_badly_signed_slash_command_is_refused(Backend::Aws).await;
    }
}
