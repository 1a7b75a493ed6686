//! `ask_user` waits for a reply at zero compute, end to end (the real
//! `baton dev`, the mock LLM, the fake Slack): over HTTP the next
//! `POST /tasks` on the same `thread` answers it; in Slack the requester's
//! reply in the thread does, without a mention, while someone else's does
//! not. The reply is the call's result and the same task goes on.

use crate::common::{Backend, Options, TestApp, TOKEN};
use serde_json::{json, Value};
use std::time::Duration;

const LONG: Duration = Duration::from_secs(60);
// No spaces: the scripted model reads `#args` up to the first space.
const ASK: &str = r#"#tool=ask_user #args={"question":"Which-environment?"}"#;

async fn post_task(app: &TestApp, input: &str, thread: &str) -> Value {
    let r = app
        .http
        .post(format!("{}/tasks", app.url))
        .bearer_auth(TOKEN)
        .json(&json!({"input": input, "thread": thread}))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 202);
    r.json().await.unwrap()
}

async fn http_reply_answers_the_question(backend: Backend) {
    let app = TestApp::spawn(Options {
        backend,
        ..Options::default()
    })
    .await;
    let id = post_task(&app, ASK, "t-ask").await["task_id"]
        .as_str()
        .unwrap()
        .to_owned();
    let task = app.wait_waiting(&id).await;
    assert_eq!(
        task["waiting_for"]["kind"],
        "reply",
        "{task}\nlog:\n{}",
        app.log()
    );
    assert_eq!(task["waiting_for"]["question"], "Which-environment?");
    assert!(task["waiting_for"]["expires_at"].is_string(), "{task}");
    let calls_before = app.llm.received().len();
    // Waiting at zero compute: nothing runs, the model is not called.
    tokio::time::sleep(Duration::from_millis(1500)).await;
    assert_eq!(app.task(&id).await["status"], "waiting");
    assert_eq!(app.llm.received().len(), calls_before);

    let answer = post_task(&app, "staging", "t-ask").await;
    assert_eq!(answer["task_id"], id.as_str(), "the same task: {answer}");
    assert_eq!(answer["answered_question"], true, "{answer}");
    let task = app.wait_done(&id, LONG).await;
    assert_eq!(task["status"], "succeeded", "{task}\nlog:\n{}", app.log());
    assert_eq!(
        task["result"],
        "[scripted model] tool ask_user said: staging"
    );
    let events = serde_json::to_string(&app.events(&id).await).unwrap();
    assert!(events.contains("asked: Which-environment?"), "{events}");
    assert!(events.contains("reply received"), "{events}");
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

/// The task a thread runs, once there is one.
async fn task_of_thread(app: &TestApp, key: &str) -> String {
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

async fn slack_thread_reply_answers_without_a_mention(backend: Backend) {
    let app = TestApp::spawn(Options {
        backend,
        ..Options::default()
    })
    .await;
    let ts = "1700000100.000100";
    send(
        &app,
        &callback(
            "Ev1",
            json!({"type": "app_mention", "user": "U1", "text": format!("<@UBOT> {ASK}"),
                   "ts": ts, "channel": "C1", "event_ts": ts}),
        ),
    )
    .await;
    let id = task_of_thread(&app, &format!("slack:T1:C1:{ts}")).await;
    let task = app.wait_waiting(&id).await;
    assert_eq!(task["waiting_for"]["kind"], "reply", "{task}");
    // The question is posted in the thread.
    let posts = app.slack.wait_for_posts(1, LONG).await;
    assert!(
        posts
            .iter()
            .any(|p| p.text.contains("Which-environment?") && p.thread_ts.as_deref() == Some(ts)),
        "{posts:?}"
    );
    let reply = |event_id: &str, user: &str, reply_ts: &str, text: &str| {
        callback(
            event_id,
            json!({"type": "message", "user": user, "text": text, "ts": reply_ts,
                   "thread_ts": ts, "channel": "C1", "channel_type": "channel",
                   "event_ts": reply_ts}),
        )
    };
    // Someone else's reply, or the requester's top-level message, is not
    // the answer.
    let v = send(&app, &reply("Ev2", "U2", "1700000101.000100", "production")).await;
    assert_eq!(v["ignored"], "thread message without a mention", "{v}");
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert_eq!(app.task(&id).await["status"], "waiting");
    // The requester's reply in the thread, no mention.
    let v = send(&app, &reply("Ev3", "U1", "1700000102.000100", "staging")).await;
    assert_eq!(v["ok"], true, "{v}");
    assert!(v.get("ignored").is_none(), "{v}");
    // Slack's retry of the same event changes nothing.
    send(&app, &reply("Ev3", "U1", "1700000102.000100", "staging")).await;
    let task = app.wait_done(&id, LONG).await;
    assert_eq!(task["status"], "succeeded", "{task}\nlog:\n{}", app.log());
    assert_eq!(
        task["result"],
        "[scripted model] tool ask_user said: staging"
    );
}

/// Unanswered in time (`ask_user.expires_after`), the model is told and
/// the task goes on.
async fn an_unanswered_question_expires(backend: Backend) {
    let app = TestApp::spawn(Options {
        backend,
        extra_env: vec![(
            "BATON_AGENTS_TOML".into(),
            "[defaults.ask_user]\nexpires_after = \"2s\"\n".into(),
        )],
        ..Options::default()
    })
    .await;
    let id = post_task(&app, ASK, "t-late").await["task_id"]
        .as_str()
        .unwrap()
        .to_owned();
    app.wait_waiting(&id).await;
    let task = app.wait_done(&id, LONG).await;
    assert_eq!(task["status"], "succeeded", "{task}\nlog:\n{}", app.log());
    let result = task["result"].as_str().unwrap();
    assert!(
        result.starts_with("[scripted model] tool ask_user said: no reply: nobody answered by"),
        "{result}"
    );
    // A late reply starts a new task on the thread (the old one ended).
    let late = post_task(&app, "staging", "t-late").await;
    assert_ne!(late["task_id"], id.as_str(), "{late}");
}

mod embedded {
    use super::*;

    #[tokio::test(flavor = "multi_thread")]
    async fn an_unanswered_question_expires() {
        super::an_unanswered_question_expires(Backend::Embedded).await;
    }

    #[tokio::test(flavor = "multi_thread")]
    async fn http_reply_answers_the_question() {
        super::http_reply_answers_the_question(Backend::Embedded).await;
    }

    #[tokio::test(flavor = "multi_thread")]
    async fn slack_thread_reply_answers_without_a_mention() {
        super::slack_thread_reply_answers_without_a_mention(Backend::Embedded).await;
    }
}

mod aws {
    use super::*;

    #[tokio::test(flavor = "multi_thread")]
    async fn http_reply_answers_the_question() {
        super::http_reply_answers_the_question(Backend::Aws).await;
    }

    #[tokio::test(flavor = "multi_thread")]
    async fn slack_thread_reply_answers_without_a_mention() {
        super::slack_thread_reply_answers_without_a_mention(Backend::Aws).await;
    }
}
