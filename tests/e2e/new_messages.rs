//! What a new message does to a running task (`on_new_message`, issue
//! #27 item 5), through the real `baton dev` on both backends, the mock
//! LLM and the fake Slack: each mode with two messages on one
//! conversation — an HTTP `thread`, and Slack direct messages.

use crate::common::{Backend, Options, TestApp, TOKEN};
use serde_json::{json, Value};
use std::time::{Duration, Instant};

const LONG: Duration = Duration::from_secs(90);
const DM: &str = "slack:T1:D1";

async fn spawn(backend: Backend, mode: &str) -> TestApp {
    TestApp::spawn(Options {
        backend,
        extra_env: vec![(
            "BATON_AGENTS_TOML".into(),
            format!("[defaults]\non_new_message = \"{mode}\"\n"),
        )],
        ..Options::default()
    })
    .await
}

/// `POST /tasks` on `thread`: the status and the answer.
async fn post(app: &TestApp, input: &str, thread: &str, key: Option<&str>) -> (u16, Value) {
    let mut req = app
        .http
        .post(format!("{}/tasks", app.url))
        .bearer_auth(TOKEN)
        .json(&json!({"input": input, "thread": thread}));
    if let Some(k) = key {
        req = req.header("Idempotency-Key", k);
    }
    let r = req.send().await.unwrap();
    let status = r.status().as_u16();
    (status, r.json().await.unwrap_or(Value::Null))
}

fn dm(event_id: &str, ts: &str, text: &str) -> Vec<u8> {
    serde_json::to_vec(&json!({
        "type": "event_callback", "team_id": "T1", "api_app_id": "A1",
        "event_id": event_id, "event_time": 1_700_000_000,
        "event": {"type": "message", "user": "U1", "text": text, "ts": ts,
                  "channel": "D1", "channel_type": "im", "event_ts": ts}
    }))
    .unwrap()
}

async fn send(app: &TestApp, body: &[u8]) -> Value {
    let r = app
        .slack_post("/slack/events", body, "application/json", &[])
        .await;
    assert_eq!(r.status(), 200, "log:\n{}", app.log());
    r.json().await.unwrap()
}

/// The ids of every task, newest first.
async fn all_tasks(app: &TestApp) -> Vec<String> {
    let (status, v) = app.get("/tasks?limit=100").await;
    assert_eq!(status, 200, "{v}");
    v["tasks"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["task_id"].as_str().unwrap().to_owned())
        .collect()
}

/// The task conversation `key` runs, once it has one.
async fn task_of(app: &TestApp, key: &str) -> String {
    let store = app.store().await;
    let started = Instant::now();
    loop {
        if let Some(id) = store.thread(key).await.unwrap().and_then(|t| t.active_task) {
            return id.to_string();
        }
        assert!(started.elapsed() < LONG, "no task on {key}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// Polls until task `id` has made `steps` model calls.
async fn wait_steps(app: &TestApp, id: &str, steps: u64) {
    let started = Instant::now();
    loop {
        let t = app.task(id).await;
        if t["steps"].as_u64().unwrap_or(0) >= steps {
            return;
        }
        assert!(
            started.elapsed() < LONG && t["status"] != "succeeded",
            "{t}\nlog:\n{}",
            app.log()
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// The task's events as one text, to look for what they hold.
async fn events_text(app: &TestApp, id: &str) -> String {
    serde_json::to_string(&app.events(id).await).unwrap()
}

async fn steer_gives_the_message_to_the_running_task(backend: Backend) {
    let app = spawn(backend, "steer").await;
    let (status, first) = post(&app, "#sleep=1500 #reply=one", "chat", None).await;
    assert_eq!(status, 202, "{first}");
    let a = first["task_id"].as_str().unwrap();
    let (status, second) = post(&app, "and-also-this", "chat", None).await;
    assert_eq!(status, 202, "{second}");
    assert_eq!(second["task_id"], a, "{second}");
    assert_eq!(second["delivered_to_running_task"], true, "{second}");
    let done = app.wait_done(a, LONG).await;
    assert_eq!(done["status"], "succeeded", "{done}");
    assert!(events_text(&app, a).await.contains("and-also-this"));
    assert_eq!(all_tasks(&app).await, [a]);
}

async fn queue_runs_the_message_as_the_next_task(backend: Backend) {
    let app = spawn(backend, "queue").await;
    let (_, first) = post(&app, "#sleep=1500 #reply=answer-ORCA", "chat", None).await;
    let a = first["task_id"].as_str().unwrap().to_owned();
    let (status, second) = post(&app, "second-message", "chat", Some("q-2")).await;
    assert_eq!(status, 202, "{second}");
    assert_eq!(second["queued_behind"], a.as_str(), "{second}");
    assert_eq!(second["status"], "queued", "{second}");
    let b = second["task_id"].as_str().unwrap().to_owned();
    assert_ne!(a, b);
    // The same request again: the same task, not a third.
    let (_, again) = post(&app, "second-message", "chat", Some("q-2")).await;
    assert_eq!(again["task_id"], b.as_str(), "{again}");
    let waiting = app.task(&b).await;
    if waiting["status"] == "queued" {
        assert_eq!(
            waiting["waiting_for"],
            json!({"kind": "turn", "behind": a}),
            "{waiting}"
        );
    }
    let done = app.wait_done(&a, LONG).await;
    assert_eq!(done["status"], "succeeded", "{done}");
    let done = app.wait_done(&b, LONG).await;
    assert_eq!(done["status"], "succeeded", "{done}\n{}", app.log());
    // It started after the first ended: its conversation holds the
    // first's answer, then its own message.
    let seen = events_text(&app, &b).await;
    assert!(seen.contains("\"type\":\"recap\""), "{seen}");
    assert!(seen.contains("answer-ORCA"), "{seen}");
    assert!(seen.contains("second-message"), "{seen}");
    assert!(
        !events_text(&app, &a).await.contains("second-message"),
        "not steered into the first"
    );
    assert_eq!(all_tasks(&app).await.len(), 2);

    // Slack: a DM while one runs waits its turn; delivered twice, once.
    send(
        &app,
        &dm("Ev1", "1700000001.000100", "#sleep=1500 #reply=dm-one"),
    )
    .await;
    let c = task_of(&app, DM).await;
    let ev2 = dm("Ev2", "1700000002.000100", "dm-two");
    send(&app, &ev2).await;
    let v = send(&app, &ev2).await;
    assert_eq!(v["ok"], true, "{v}");
    let done = app.wait_done(&c, LONG).await;
    assert_eq!(done["status"], "succeeded", "{done}");
    let tasks = all_tasks(&app).await;
    assert_eq!(tasks.len(), 4, "one task per message: {tasks:?}");
    let d = &tasks[0];
    let done = app.wait_done(d, LONG).await;
    assert_eq!(done["status"], "succeeded", "{done}");
    let seen = events_text(&app, d).await;
    assert!(seen.contains("dm-one") && seen.contains("dm-two"), "{seen}");
}

async fn interrupt_cancels_the_running_task_and_carries_its_exchange(backend: Backend) {
    let app = spawn(backend, "interrupt").await;
    let (_, first) = post(&app, "#steps=12 #sleep=300 long-job", "chat", None).await;
    let a = first["task_id"].as_str().unwrap().to_owned();
    wait_steps(&app, &a, 1).await;
    let (status, second) = post(&app, "do-this-instead", "chat", None).await;
    assert_eq!(status, 202, "{second}");
    assert_eq!(second["queued_behind"], a.as_str(), "{second}");
    let b = second["task_id"].as_str().unwrap().to_owned();
    let done = app.wait_done(&a, LONG).await;
    assert_eq!(done["status"], "cancelled", "{done}");
    assert!(
        done["error"]
            .as_str()
            .unwrap_or_default()
            .contains("interrupted"),
        "{done}"
    );
    assert!(
        events_text(&app, &a)
            .await
            .contains("interrupted by a new message"),
        "recorded on the task"
    );
    let done = app.wait_done(&b, LONG).await;
    assert_eq!(done["status"], "succeeded", "{done}\n{}", app.log());
    // The interrupted exchange: its input, and how far it got.
    let seen = events_text(&app, &b).await;
    assert!(seen.contains("long-job"), "{seen}");
    assert!(seen.contains("Cancelled before it finished"), "{seen}");
    assert!(seen.contains("current_time"), "its tools: {seen}");
    assert!(seen.contains("do-this-instead"), "{seen}");
    assert_eq!(all_tasks(&app).await.len(), 2);
}

async fn reject_refuses_while_a_task_runs(backend: Backend) {
    let app = spawn(backend, "reject").await;
    let (_, first) = post(&app, "#sleep=2000 #reply=one", "chat", None).await;
    let a = first["task_id"].as_str().unwrap().to_owned();
    let (status, refused) = post(&app, "second", "chat", None).await;
    assert_eq!(status, 409, "{refused}");
    assert_eq!(refused["running_task"], a.as_str(), "{refused}");
    assert!(
        refused["error"].as_str().unwrap().contains("running"),
        "{refused}"
    );
    let done = app.wait_done(&a, LONG).await;
    assert_eq!(done["status"], "succeeded", "{done}");
    assert!(!events_text(&app, &a).await.contains("\"second\""));
    assert_eq!(all_tasks(&app).await, [a.as_str()]);

    // Slack: an ephemeral note to the sender, and no second task.
    send(
        &app,
        &dm("Ev1", "1700000001.000100", "#sleep=2000 #reply=dm"),
    )
    .await;
    let c = task_of(&app, DM).await;
    let v = send(&app, &dm("Ev2", "1700000002.000100", "dm-two")).await;
    assert_eq!(v["ignored"], "task_running", "{v}");
    let notes = app.slack.calls("chat.postEphemeral");
    assert!(
        notes
            .iter()
            .any(|n| n.to_string().contains("still working on the task")),
        "{notes:?}"
    );
    let done = app.wait_done(&c, LONG).await;
    assert_eq!(done["status"], "succeeded", "{done}");
    assert_eq!(all_tasks(&app).await.len(), 2);
    // Once it ended, a message starts a task again.
    let (status, later) = post(&app, "later", "chat", None).await;
    assert_eq!(status, 202, "{later}");
}

on_both_backends!(
    steer_gives_the_message_to_the_running_task,
    queue_runs_the_message_as_the_next_task,
    interrupt_cancels_the_running_task_and_carries_its_exchange,
    reject_refuses_while_a_task_runs,
);
