//! Slack's agent surfaces end to end (the real `baton dev`, the fake Slack,
//! the mock LLM): agent sessions follow the task and their Stop button
//! stops it under the `stop` rule; new assistant threads get the agent's
//! suggested prompts and a title; answers carry feedback buttons whose
//! clicks are recorded once on the task.

use crate::common::{Options, TestApp};
use serde_json::{json, Value};
use std::time::{Duration, Instant};

const LONG: Duration = Duration::from_secs(60);
/// Long enough to be stopped midway.
const SLOW: &str = "#steps=30 #sleep=500";
const TS: &str = "1700000300.000100";
pub(crate) const CHANNEL: &str = "C1";

fn callback(event_id: &str, event: Value) -> Vec<u8> {
    serde_json::to_vec(&json!({
        "type": "event_callback", "team_id": "T1", "api_app_id": "A1",
        "event_id": event_id, "event_time": 1_700_000_000, "event": event
    }))
    .unwrap()
}

pub(crate) fn mention(event_id: &str, user: &str, ts: &str, text: &str) -> Vec<u8> {
    callback(
        event_id,
        json!({"type": "app_mention", "user": user, "text": format!("<@UBOT> {text}"),
               "ts": ts, "channel": CHANNEL, "event_ts": ts}),
    )
}

/// Slack's `agent_session_stopped` for the thread `TS` of `CHANNEL`.
fn stop_click(event_id: &str, user: &str) -> Vec<u8> {
    callback(
        event_id,
        json!({"type": "agent_session_stopped", "channel": CHANNEL, "thread_ts": TS,
               "user": user, "streaming_message_ts": [], "event_ts": "1700000400.000100"}),
    )
}

pub(crate) async fn send(app: &TestApp, body: &[u8]) -> Value {
    let r = app
        .slack_post("/slack/events", body, "application/json", &[])
        .await;
    assert_eq!(r.status(), 200, "log:\n{}", app.log());
    r.json().await.unwrap()
}

/// The task on the conversation `key`, once there is one.
pub(crate) async fn task_on(app: &TestApp, key: &str) -> String {
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

/// Polls until `check` holds (a minute at most).
async fn eventually(app: &TestApp, what: &str, check: impl Fn() -> bool) {
    let started = Instant::now();
    while !check() {
        assert!(started.elapsed() < LONG, "{what}; log:\n{}", app.log());
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn the_stop_button_of_an_agent_session_stops_its_task_under_the_stop_rule() {
    let app = TestApp::spawn(Options {
        extra_env: vec![("SLACK_AGENT_SESSIONS".into(), "true".into())],
        ..Options::default()
    })
    .await;
    send(&app, &mention("Ev1", "U1", TS, SLOW)).await;
    let id = task_on(&app, &format!("slack:T1:{CHANNEL}:{TS}")).await;
    eventually(&app, "the session is processing", || {
        app.slack.session(CHANNEL, TS).as_deref() == Some("processing")
    })
    .await;
    let created = &app.slack.calls("agents.sessions.setStatus")[0];
    assert_eq!(created["initiator_user_id"], "U1");
    assert_eq!(created["title"], SLOW, "{created}");

    // U2 did not ask for it: their click changes nothing, and they are told.
    let v = send(&app, &stop_click("EvStop1", "U2")).await;
    assert_eq!(v, json!({"ok": true, "ignored": "not allowed to stop"}));
    let notes = app.slack.calls("chat.postEphemeral");
    assert_eq!(notes.len(), 1, "{notes:?}");
    assert_eq!(
        (&notes[0]["user"], &notes[0]["thread_ts"]),
        (&json!("U2"), &json!(TS))
    );
    let task = app.task(&id).await;
    assert!(
        !matches!(
            task["status"].as_str(),
            Some("cancelled" | "failed" | "succeeded")
        ),
        "{task}"
    );
    let store = app.store().await;
    let stored = store
        .get(&baton_core::TaskId::parse(&id).unwrap())
        .await
        .unwrap()
        .unwrap();
    assert!(!stored.cancel_requested);

    // The requester's click stops it; Slack's redelivery of it is a duplicate.
    let v = send(&app, &stop_click("EvStop2", "U1")).await;
    assert_eq!(v, json!({"ok": true}));
    // (Or, when the task already ended, a stop with nothing to stop.)
    let v = send(&app, &stop_click("EvStop2", "U1")).await;
    assert!(
        v == json!({"ok": true, "duplicate": true}) || v == json!({"ok": true}),
        "{v}"
    );
    assert_eq!(app.slack.calls("chat.postEphemeral").len(), 1);
    let task = app.wait_done(&id, LONG).await;
    assert_eq!(task["status"], "cancelled", "{task}\nlog:\n{}", app.log());
    eventually(&app, "the session is closed", || {
        app.slack.session(CHANNEL, TS).as_deref() == Some("closed")
    })
    .await;
    // No task on a thread: nothing to stop.
    let other = callback(
        "EvStop3",
        json!({"type": "agent_session_stopped", "channel": "C9", "thread_ts": "1.0",
               "user": "U1", "event_ts": "1.1"}),
    );
    let v = send(&app, &other).await;
    assert_eq!(v["ignored"], "no task runs in this thread", "{v}");
    // Without sessions' channel and thread the event is refused.
    let bad = callback(
        "EvBad",
        json!({"type": "agent_session_stopped", "user": "U1"}),
    );
    let r = app
        .slack_post("/slack/events", &bad, "application/json", &[])
        .await;
    assert_eq!(r.status(), 400);
}

const AGENTS: &str = r#"
[defaults.slack]
prompts_title = "Try asking"
suggested_prompts = [
  { title = "Deploy status", message = "What is the status of the deploy?" },
  { title = "Incidents", message = "Summarise yesterday's incidents" },
]
"#;

#[tokio::test(flavor = "multi_thread")]
async fn an_assistant_thread_gets_prompts_and_its_title_once() {
    let app = TestApp::spawn(Options {
        extra_env: vec![
            ("BATON_AGENTS_TOML".into(), AGENTS.into()),
            // Several segments: the title is still set once.
            ("BATON_SEGMENT_BUDGET_MS".into(), "1".into()),
        ],
        ..Options::default()
    })
    .await;
    let thread_ts = "1700000500.000100";
    let started = callback(
        "EvThread",
        json!({"type": "assistant_thread_started",
               "assistant_thread": {"user_id": "U1", "channel_id": "D1", "thread_ts": thread_ts,
                                    "context": {"channel_id": "C1", "team_id": "T1"}},
               "event_ts": "1700000500.000200"}),
    );
    assert_eq!(send(&app, &started).await, json!({"ok": true}));
    let calls = app.slack.calls("assistant.threads.setSuggestedPrompts");
    assert_eq!(calls.len(), 1, "{calls:?}");
    assert_eq!(calls[0]["channel_id"], "D1");
    assert_eq!(calls[0]["thread_ts"], thread_ts);
    assert_eq!(calls[0]["title"], "Try asking");
    assert_eq!(
        calls[0]["prompts"][1],
        json!({"title": "Incidents", "message": "Summarise yesterday's incidents"})
    );

    // The first message in the thread titles it.
    let text = "Compare <https://example.com/a|the runbook> &amp; today's deploy #steps=3";
    let message = callback(
        "EvMsg",
        json!({"type": "message", "channel_type": "im", "channel": "D1", "user": "U1",
               "text": text, "ts": "1700000501.000100", "thread_ts": thread_ts,
               "event_ts": "1700000501.000100"}),
    );
    send(&app, &message).await;
    let id = task_on(&app, "slack:T1:D1").await;
    let task = app.wait_done(&id, LONG).await;
    assert_eq!(task["status"], "succeeded", "{task}\nlog:\n{}", app.log());
    assert!(task["segments"].as_u64().unwrap() > 1, "{task}");
    let titles = app.slack.calls("assistant.threads.setTitle");
    assert_eq!(titles.len(), 1, "{titles:?}");
    assert_eq!(titles[0]["thread_ts"], thread_ts);
    assert_eq!(
        titles[0]["title"],
        "Compare the runbook & today's deploy #steps=3"
    );
    // Not an agent app: no sessions.
    assert!(app.slack.calls("agents.sessions.setStatus").is_empty());
}

/// `user` clicks `rating` on the feedback buttons of the answer `message`.
pub(crate) fn feedback_click(
    user: &str,
    message: &baton_slack::testing::PostedMessage,
    rating: &str,
    action_ts: &str,
) -> Vec<u8> {
    let blocks = message.blocks.as_ref().expect("blocks");
    let buttons = blocks
        .as_array()
        .unwrap()
        .iter()
        .find(|b| b["type"] == "context_actions")
        .expect("the feedback block");
    let element = &buttons["elements"][0];
    let value = element[format!("{rating}_button")]["value"].clone();
    let payload = json!({
        "type": "block_actions",
        "user": {"id": user, "team_id": "T1"},
        "team": {"id": "T1"},
        "channel": {"id": message.channel},
        "container": {"type": "message", "message_ts": message.ts,
                      "channel_id": message.channel, "thread_ts": message.thread_ts},
        "actions": [{"type": "feedback_buttons", "action_id": element["action_id"],
                     "block_id": buttons["block_id"], "value": value,
                     "text": {"type": "plain_text", "text": "👍"}, "action_ts": action_ts}]
    });
    baton_slack::testing::interactivity_body(&payload)
}

pub(crate) async fn click(app: &TestApp, body: &[u8]) -> Value {
    let r = app
        .slack_post(
            "/slack/interactivity",
            body,
            "application/x-www-form-urlencoded",
            &[],
        )
        .await;
    assert_eq!(r.status(), 200, "log:\n{}", app.log());
    r.json().await.unwrap()
}

#[tokio::test(flavor = "multi_thread")]
async fn a_feedback_click_is_recorded_once() {
    let app = TestApp::spawn(Options::default()).await;
    send(&app, &mention("Ev1", "U1", TS, "#reply=Deployed.")).await;
    let id = task_on(&app, &format!("slack:T1:{CHANNEL}:{TS}")).await;
    let task = app.wait_done(&id, LONG).await;
    assert_eq!(task["status"], "succeeded", "{task}");
    assert!(task.get("feedback").is_none(), "{task}");
    let posted = app.slack.wait_for_posts(1, LONG).await;
    // The answer streamed into its message, which then shows the
    // committed answer with the buttons.
    let started = std::time::Instant::now();
    let answer = loop {
        let shown = posted
            .iter()
            .find_map(|p| app.slack.message(&p.channel, &p.ts))
            .filter(|m| m.text == "Deployed." && m.blocks.is_some());
        if let Some(m) = shown {
            break m;
        }
        assert!(
            started.elapsed() < LONG,
            "no answer with buttons: {posted:?}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    let blocks = answer.blocks.clone().expect("buttons under the answer");
    assert_eq!(blocks[0]["text"]["text"], "Deployed.");

    // Slack delivers the click twice: one vote, one event.
    let up = feedback_click("U2", &answer, "positive", "1700000600.000100");
    assert_eq!(click(&app, &up).await, json!({"ok": true}));
    let again = click(&app, &up).await;
    assert_eq!(again["ignored"], "this vote is already recorded", "{again}");
    let task = app.task(&id).await;
    let votes = task["feedback"].as_array().expect("feedback").clone();
    assert_eq!(votes.len(), 1, "{task}");
    assert_eq!(
        (&votes[0]["user"], &votes[0]["value"]),
        (&json!("U2"), &json!("positive"))
    );
    assert!(votes[0]["at"].is_string());
    let events = app.events(&id).await;
    let recorded: Vec<&Value> = events.iter().filter(|e| e["type"] == "feedback").collect();
    assert_eq!(recorded.len(), 1, "{events:?}");
    assert_eq!(
        (&recorded[0]["user"], &recorded[0]["rating"]),
        (&json!("U2"), &json!("positive"))
    );

    // A changed mind replaces the vote; a late redelivery of the first
    // click does not undo it.
    let down = feedback_click("U2", &answer, "negative", "1700000601.000100");
    assert_eq!(click(&app, &down).await, json!({"ok": true}));
    let late = click(&app, &up).await;
    assert_eq!(
        late["ignored"], "a newer vote is already recorded",
        "{late}"
    );
    let task = app.task(&id).await;
    assert_eq!(task["feedback"][0]["value"], "negative", "{task}");
    assert_eq!(task["feedback"].as_array().unwrap().len(), 1);

    // Hostile values change nothing.
    let mut bad = answer.clone();
    bad.blocks = Some(
        json!([{"type": "context_actions", "block_id": "x", "elements": [{
        "action_id": "feedback",
        "positive_button": {"value": "positive:not-a-task"}}]}]),
    );
    let body = feedback_click("U3", &bad, "positive", "1700000602.000100");
    let r = app
        .slack_post(
            "/slack/interactivity",
            &body,
            "application/x-www-form-urlencoded",
            &[],
        )
        .await;
    assert_eq!(r.status(), 400);
    let task = app.task(&id).await;
    assert_eq!(task["feedback"].as_array().unwrap().len(), 1);
}
