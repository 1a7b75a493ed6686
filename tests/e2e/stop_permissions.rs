//! Who may stop a task from Slack, end to end (the real `baton dev`, the
//! fake Slack, the mock LLM): its requester, its agent's approvers and the
//! deployment's admins (`BATON_ADMINS`). Anyone else's `stop` — or click on
//! the Cancel button — changes nothing and is answered with a note only
//! they see (`chat.postEphemeral`). Over HTTP the bearer token may stop any
//! task.

use crate::common::{Backend, Options, TestApp, TOKEN};
use serde_json::{json, Value};
use std::time::Duration;

const LONG: Duration = Duration::from_secs(60);
/// Long enough to be stopped midway: 30 steps, half a second each.
const SLOW: &str = "#steps=30 #sleep=500";
const TS: &str = "1700000200.000100";
const CHANNEL: &str = "C1";

fn callback(event_id: &str, event: Value) -> Vec<u8> {
    serde_json::to_vec(&json!({
        "type": "event_callback", "team_id": "T1", "api_app_id": "A1",
        "event_id": event_id, "event_time": 1_700_000_000, "event": event
    }))
    .unwrap()
}

/// `user` mentions the bot with `text`: at the top of the channel when
/// `thread_ts` is `None` (starting a thread), else in that thread.
fn mention(event_id: &str, user: &str, ts: &str, thread_ts: Option<&str>, text: &str) -> Vec<u8> {
    let mut event = json!({"type": "app_mention", "user": user, "text": format!("<@UBOT> {text}"),
                           "ts": ts, "channel": CHANNEL, "event_ts": ts});
    if let Some(t) = thread_ts {
        event["thread_ts"] = json!(t);
    }
    callback(event_id, event)
}

async fn send(app: &TestApp, body: &[u8]) -> Value {
    let r = app
        .slack_post("/slack/events", body, "application/json", &[])
        .await;
    assert_eq!(r.status(), 200, "log:\n{}", app.log());
    r.json().await.unwrap()
}

/// `user` clicks the Cancel button of task `id` in the thread.
async fn click_cancel(app: &TestApp, user: &str, id: &str) -> Value {
    let payload = json!({
        "type": "block_actions",
        "user": {"id": user, "team_id": "T1"},
        "team": {"id": "T1"},
        "channel": {"id": CHANNEL},
        "container": {"type": "message", "message_ts": "1700000200.000150",
                      "channel_id": CHANNEL, "thread_ts": TS},
        "actions": [{"action_id": "cancel_task", "value": id, "type": "button",
                     "block_id": "b"}]
    });
    let body = baton_slack::testing::interactivity_body(&payload);
    let r = app
        .slack_post(
            "/slack/interactivity",
            &body,
            "application/x-www-form-urlencoded",
            &[],
        )
        .await;
    assert_eq!(r.status(), 200, "log:\n{}", app.log());
    r.json().await.unwrap()
}

/// U1 asks for a slow task in a new thread; its id.
async fn slow_task(app: &TestApp) -> String {
    let v = send(app, &mention("Ev1", "U1", TS, None, SLOW)).await;
    assert!(v.get("ignored").is_none(), "{v}");
    let key = format!("slack:T1:{CHANNEL}:{TS}");
    let store = app.store().await;
    let started = std::time::Instant::now();
    loop {
        if let Some(id) = store
            .thread(&key)
            .await
            .unwrap()
            .and_then(|t| t.active_task)
        {
            return id.to_string();
        }
        assert!(started.elapsed() < LONG, "no task on {key}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// Asserts the task was left alone: no cancel asked, not ended.
async fn untouched(app: &TestApp, id: &str) {
    let store = app.store().await;
    let task = store
        .get(&baton_core::TaskId::parse(id).unwrap())
        .await
        .unwrap()
        .expect("the task");
    assert!(!task.cancel_requested, "{task:?}");
    assert!(
        !task.status().is_terminal(),
        "{task:?}\nlog:\n{}",
        app.log()
    );
}

/// The notes posted with `chat.postEphemeral`.
fn notes(app: &TestApp) -> Vec<Value> {
    app.slack.calls("chat.postEphemeral")
}

async fn only_the_requester_may_stop(backend: Backend) {
    let app = TestApp::spawn(Options {
        backend,
        ..Options::default()
    })
    .await;
    let id = slow_task(&app).await;

    // U2 did not ask for it: their stop changes nothing, and they are told.
    let v = send(
        &app,
        &mention("Ev2", "U2", "1700000201.000100", Some(TS), "stop"),
    )
    .await;
    assert_eq!(v, json!({"ok": true, "ignored": "not allowed to stop"}));
    let notes = notes(&app);
    assert_eq!(notes.len(), 1, "{notes:?}");
    assert_eq!(notes[0]["channel"], CHANNEL);
    assert_eq!(notes[0]["user"], "U2");
    assert_eq!(notes[0]["thread_ts"], TS);
    assert!(
        notes[0]["text"].as_str().unwrap().contains("<@U1>"),
        "{notes:?}"
    );
    // Slack's retry of the same event is refused again, not counted.
    let v = send(
        &app,
        &mention("Ev2", "U2", "1700000201.000100", Some(TS), "stop"),
    )
    .await;
    assert_eq!(v["ignored"], "not allowed to stop", "{v}");
    untouched(&app, &id).await;
    // No one but U2 sees the refusal: nothing is posted in the thread.
    assert!(
        app.slack
            .posted()
            .iter()
            .all(|p| !p.text.contains("can stop this task")),
        "{:?}",
        app.slack.posted()
    );

    // The requester's stop ends it.
    let v = send(
        &app,
        &mention("Ev3", "U1", "1700000202.000100", Some(TS), "stop"),
    )
    .await;
    assert_eq!(v, json!({"ok": true}));
    let task = app.wait_done(&id, LONG).await;
    assert_eq!(task["status"], "cancelled", "{task}\nlog:\n{}", app.log());
    assert_eq!(self::notes(&app).len(), 2, "no note for the requester");
}

async fn an_admin_may_stop_and_the_cancel_button_follows_the_rule(backend: Backend) {
    let app = TestApp::spawn(Options {
        backend,
        extra_env: vec![("BATON_ADMINS".into(), "U3".into())],
        ..Options::default()
    })
    .await;
    let id = slow_task(&app).await;

    // U2's click on Cancel is refused like their `stop`.
    let v = click_cancel(&app, "U2", &id).await;
    assert_eq!(v, json!({"ok": true, "ignored": "not allowed to stop"}));
    let notes = notes(&app);
    assert_eq!(notes.len(), 1, "{notes:?}");
    assert_eq!(
        (
            &notes[0]["channel"],
            &notes[0]["user"],
            &notes[0]["thread_ts"]
        ),
        (&json!(CHANNEL), &json!("U2"), &json!(TS))
    );
    untouched(&app, &id).await;

    // U3 is an admin: their stop ends it, though they did not ask for it.
    let v = send(
        &app,
        &mention("Ev2", "U3", "1700000201.000100", Some(TS), "stop"),
    )
    .await;
    assert_eq!(v, json!({"ok": true}));
    let task = app.wait_done(&id, LONG).await;
    assert_eq!(task["status"], "cancelled", "{task}\nlog:\n{}", app.log());
    assert_eq!(self::notes(&app).len(), 1);
}

async fn the_api_may_stop_any_task(backend: Backend) {
    let app = TestApp::spawn(Options {
        backend,
        ..Options::default()
    })
    .await;
    let id = slow_task(&app).await;
    let r = app
        .http
        .post(format!("{}/tasks/{id}/cancel", app.url))
        .bearer_auth(TOKEN)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 202);
    let task = app.wait_done(&id, LONG).await;
    assert_eq!(task["status"], "cancelled", "{task}\nlog:\n{}", app.log());
    assert!(notes(&app).is_empty());
}

mod embedded {
    use super::*;

    #[tokio::test(flavor = "multi_thread")]
    async fn only_the_requester_may_stop() {
        super::only_the_requester_may_stop(Backend::Embedded).await;
    }

    #[tokio::test(flavor = "multi_thread")]
    async fn an_admin_may_stop_and_the_cancel_button_follows_the_rule() {
        super::an_admin_may_stop_and_the_cancel_button_follows_the_rule(Backend::Embedded).await;
    }

    #[tokio::test(flavor = "multi_thread")]
    async fn the_api_may_stop_any_task() {
        super::the_api_may_stop_any_task(Backend::Embedded).await;
    }
}

mod aws {
    use super::*;

    #[tokio::test(flavor = "multi_thread")]
    async fn only_the_requester_may_stop() {
        super::only_the_requester_may_stop(Backend::Aws).await;
    }

    #[tokio::test(flavor = "multi_thread")]
    async fn an_admin_may_stop_and_the_cancel_button_follows_the_rule() {
        super::an_admin_may_stop_and_the_cancel_button_follows_the_rule(Backend::Aws).await;
    }
}
