//! Answers stream as the model writes them (issue "Slack-native"), end to
//! end: the real `baton dev`, the mock LLM streaming in each wire format,
//! the fake Slack's streaming methods. The streamed chunks concatenate to
//! the committed answer; a stream Slack closed is finished in place by
//! `chat.update`; a crash mid-stream leaves one message; HTTP clients read
//! the text as `answer_delta` events; an agent can turn it all off.

use crate::common::{Backend, Options, TestApp, Wire};
use serde_json::{json, Value};
use std::time::Duration;

const LONG: Duration = Duration::from_secs(60);

/// An answer long enough for several chunks (the mock streams 20
/// characters an event).
fn long_answer() -> String {
    (1..=40)
        .map(|i| format!("Sentence number {i} of the streamed answer."))
        .collect::<Vec<_>>()
        .join(" ")
}

fn dm(event_id: &str, ts: &str, text: &str) -> Vec<u8> {
    serde_json::to_vec(&json!({
        "type": "event_callback", "team_id": "T1", "api_app_id": "A1",
        "event_id": event_id, "event_time": 1_700_000_000,
        "event": {"type": "message", "user": "U1", "text": text, "ts": ts,
                  "channel": "D1", "channel_type": "im", "event_ts": ts},
    }))
    .unwrap()
}

async fn send_dm(app: &TestApp, event_id: &str, ts: &str, text: &str) {
    let r = app
        .slack_post(
            "/slack/events",
            &dm(event_id, ts, text),
            "application/json",
            &[],
        )
        .await;
    assert_eq!(r.status(), 200);
}

/// The task of the DM conversation, once it exists.
async fn dm_task(app: &TestApp) -> String {
    let store = app.store().await;
    let started = std::time::Instant::now();
    loop {
        let thread = store.thread("slack:T1:D1").await.unwrap();
        if let Some(id) = thread.and_then(|t| t.active_task) {
            return id.to_string();
        }
        assert!(started.elapsed() < LONG, "no task: {}", app.log());
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
}

/// The text the stream calls carried, in order.
fn streamed_text(app: &TestApp) -> String {
    ["chat.startStream", "chat.appendStream", "chat.stopStream"]
        .iter()
        .flat_map(|m| app.slack.calls(m))
        .filter_map(|c| c["markdown_text"].as_str().map(str::to_owned))
        .collect()
}

async fn a_slack_answer_streams(wire: Wire) {
    let app = TestApp::spawn(Options {
        wire,
        ..Options::default()
    })
    .await;
    let answer = long_answer();
    send_dm(
        &app,
        "EvS1",
        "1700000001.000100",
        &format!("#chunk_ms=25 #reply={answer}"),
    )
    .await;
    let id = dm_task(&app).await;
    let done = app.wait_done(&id, LONG).await;
    assert_eq!(done["status"], "succeeded", "{done}\n{}", app.log());
    assert_eq!(done["result"], answer.as_str());
    assert!(
        app.llm.streamed().iter().all(|s| *s),
        "the model was asked to stream"
    );

    // One message, opened once, grown in several chunks that concatenate to
    // the committed answer, then shown as exactly that answer.
    assert_eq!(app.slack.calls("chat.startStream").len(), 1);
    assert!(
        !app.slack.calls("chat.appendStream").is_empty(),
        "more than one chunk"
    );
    assert_eq!(streamed_text(&app), answer);
    let posted = app.slack.posted();
    assert_eq!(posted.len(), 1, "{posted:?}");
    let shown = app.slack.message("D1", &posted[0].ts).unwrap();
    assert_eq!(shown.text, answer);
    assert!(!shown.streaming);
}

#[tokio::test(flavor = "multi_thread")]
async fn a_slack_answer_streams_openai() {
    a_slack_answer_streams(Wire::OpenAi).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn a_slack_answer_streams_anthropic() {
    a_slack_answer_streams(Wire::Anthropic).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn a_slack_answer_streams_bedrock() {
    a_slack_answer_streams(Wire::Bedrock).await;
}

/// Slack closes a stream that sits idle: the answer goes on in the same
/// message, through `chat.update` of its `ts`.
#[tokio::test(flavor = "multi_thread")]
async fn an_expired_stream_is_finished_by_updating_the_same_message() {
    let app = TestApp::spawn(Options::default()).await;
    app.slack.set_stream_expiry(Duration::from_millis(300));
    let answer = long_answer();
    send_dm(
        &app,
        "EvX1",
        "1700000002.000100",
        &format!("#chunk_ms=60 #reply={answer}"),
    )
    .await;
    let id = dm_task(&app).await;
    let done = app.wait_done(&id, LONG).await;
    assert_eq!(done["status"], "succeeded", "{done}\n{}", app.log());

    let starts = app.slack.calls("chat.startStream");
    assert_eq!(starts.len(), 1);
    let posted = app.slack.posted();
    assert_eq!(posted.len(), 1, "one message: {posted:?}");
    let ts = posted[0].ts.clone();
    let updates = app.slack.calls("chat.update");
    assert!(!updates.is_empty(), "the closed stream was updated");
    assert!(
        updates.iter().all(|u| u["ts"] == ts.as_str()),
        "{updates:?}"
    );
    assert_eq!(app.slack.message("D1", &ts).unwrap().text, answer);
}

/// An answer quoting Slack markup — a model talked into it, or a tool
/// result it repeats — streams as text: the chunks Slack gets hold no
/// `<` (so no `<!everyone>`, `<@U…>` or `<url|label>`) and no link to
/// anything but a web or mail address, wherever a chunk ends, and add up
/// to the answer made safe; the finished message is escaped mrkdwn.
async fn streamed_markup_reaches_slack_as_text(backend: Backend) {
    let app = TestApp::spawn(Options {
        backend,
        ..Options::default()
    })
    .await;
    let hostile = "Alert <!everyone> and <!here|here>, ping <@U0ADMIN>, open \
                   <https://evil.example|https://intranet.example> or [this](!channel:x) \
                   but [the docs](https://docs.example/a) are fine.";
    // Long enough for several chunks, each copy starting elsewhere in one.
    let answer: String = (1..=6)
        .map(|i| format!("{} {hostile}", "x".repeat(i * 7)))
        .collect::<Vec<_>>()
        .join(" ");
    send_dm(
        &app,
        "EvM1",
        "1700000006.000100",
        &format!("#chunk_ms=25 #reply={answer}"),
    )
    .await;
    let id = dm_task(&app).await;
    let done = app.wait_done(&id, LONG).await;
    assert_eq!(done["status"], "succeeded", "{done}\n{}", app.log());
    assert_eq!(done["result"], answer.as_str());

    assert!(
        !app.slack.calls("chat.appendStream").is_empty(),
        "more than one chunk"
    );
    let chunks: Vec<String> = ["chat.startStream", "chat.appendStream"]
        .iter()
        .flat_map(|m| app.slack.calls(m))
        .filter_map(|c| c["markdown_text"].as_str().map(str::to_owned))
        .collect();
    for chunk in &chunks {
        assert!(!chunk.contains('<'), "raw markup streamed: {chunk:?}");
    }
    let streamed = streamed_text(&app);
    assert!(!streamed.contains("<!everyone>"), "{streamed}");
    assert!(!streamed.contains("[this](!channel"), "{streamed}");
    assert!(streamed.contains("[this\\](!channel:x)"), "{streamed}");
    assert!(streamed.contains("[the docs](https://docs.example/a)"));
    assert_eq!(streamed, baton_slack::safe_markdown::escape(&answer));

    let posted = app.slack.posted();
    assert_eq!(posted.len(), 1, "{posted:?}");
    let shown = app.slack.message("D1", &posted[0].ts).unwrap();
    assert_eq!(shown.text, baton_slack::mrkdwn::from_markdown(&answer));
    assert!(!shown.text.contains("<!"), "{}", shown.text);
    assert!(!shown.text.contains("<@"), "{}", shown.text);
    assert!(shown.text.contains("this (!channel:x)"), "{}", shown.text);
}

#[tokio::test(flavor = "multi_thread")]
async fn streamed_markup_reaches_slack_as_text_embedded() {
    streamed_markup_reaches_slack_as_text(Backend::Embedded).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn streamed_markup_reaches_slack_as_text_aws() {
    streamed_markup_reaches_slack_as_text(Backend::Aws).await;
}

/// Killed mid-stream and restarted: the retry writes into the message the
/// first attempt opened, and the thread holds exactly one answer.
async fn a_crash_mid_stream_leaves_one_message(backend: Backend) {
    let mut app = TestApp::spawn(Options {
        backend,
        ..Options::default()
    })
    .await;
    let answer = long_answer();
    send_dm(
        &app,
        "EvK1",
        "1700000003.000100",
        &format!("#chunk_ms=150 #reply={answer}"),
    )
    .await;
    let started = std::time::Instant::now();
    while app.slack.calls("chat.appendStream").is_empty() {
        assert!(started.elapsed() < LONG, "never streamed: {}", app.log());
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    app.kill9();
    app.restart();
    let id = dm_task(&app).await;
    let done = app.wait_done(&id, LONG).await;
    assert_eq!(done["status"], "succeeded", "{done}\n{}", app.log());
    // Give a second message every chance to show up.
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert_eq!(
        app.slack.calls("chat.startStream").len(),
        1,
        "{}",
        app.log()
    );
    assert_eq!(app.slack.calls("chat.postMessage").len(), 0);
    let posted = app.slack.posted();
    assert_eq!(posted.len(), 1, "{posted:?}");
    assert_eq!(app.slack.message("D1", &posted[0].ts).unwrap().text, answer);
}

#[tokio::test(flavor = "multi_thread")]
async fn a_crash_mid_stream_leaves_one_message_embedded() {
    a_crash_mid_stream_leaves_one_message(Backend::Embedded).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn a_crash_mid_stream_leaves_one_message_aws() {
    a_crash_mid_stream_leaves_one_message(Backend::Aws).await;
}

/// Killed after Slack opened the message but before Baton recorded it:
/// the retry finds that message (by this app's bot, since the attempt
/// began, without a post key) and writes into it.
async fn a_crash_while_opening_the_stream_leaves_one_message(backend: Backend) {
    let mut app = TestApp::spawn(Options {
        backend,
        ..Options::default()
    })
    .await;
    app.slack
        .hold_next("chat.startStream", Duration::from_secs(5));
    let answer = long_answer();
    send_dm(
        &app,
        "EvW1",
        "1700000005.000100",
        &format!("#chunk_ms=40 #reply={answer}"),
    )
    .await;
    let started = std::time::Instant::now();
    while app.slack.calls("chat.startStream").is_empty() {
        assert!(started.elapsed() < LONG, "never streamed: {}", app.log());
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    // Slack has the message; its answer (the ts) is held back: die now.
    app.kill9();
    app.restart();
    let id = dm_task(&app).await;
    let done = app.wait_done(&id, LONG).await;
    assert_eq!(done["status"], "succeeded", "{done}\n{}", app.log());
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert_eq!(
        app.slack.calls("chat.startStream").len(),
        1,
        "{}",
        app.log()
    );
    assert_eq!(app.slack.calls("auth.test").len(), 1, "the retry looked");
    let posted = app.slack.posted();
    assert_eq!(posted.len(), 1, "{posted:?}");
    assert_eq!(app.slack.message("D1", &posted[0].ts).unwrap().text, answer);
}

#[tokio::test(flavor = "multi_thread")]
async fn a_crash_while_opening_the_stream_leaves_one_message_embedded() {
    a_crash_while_opening_the_stream_leaves_one_message(Backend::Embedded).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn a_crash_while_opening_the_stream_leaves_one_message_aws() {
    a_crash_while_opening_the_stream_leaves_one_message(Backend::Aws).await;
}

/// HTTP clients follow the text as `answer_delta` events.
#[tokio::test(flavor = "multi_thread")]
async fn http_clients_read_the_answer_as_it_is_written() {
    let app = TestApp::spawn(Options {
        wire: Wire::Anthropic,
        ..Options::default()
    })
    .await;
    let answer = long_answer();
    let id = app
        .submit_ok(&format!("#chunk_ms=30 #reply={answer}"))
        .await;
    let done = app.wait_done(&id, LONG).await;
    assert_eq!(done["status"], "succeeded", "{done}\n{}", app.log());
    let events = app.events(&id).await;
    let deltas: Vec<&Value> = events
        .iter()
        .filter(|e| e["type"] == "answer_delta")
        .collect();
    assert!(deltas.len() >= 2, "in chunks: {deltas:?}");
    assert!(deltas.iter().all(|d| d["step"] == 1));
    let text: String = deltas
        .iter()
        .map(|d| d["text"].as_str().unwrap_or_default())
        .collect();
    assert_eq!(text, answer);
    // The deltas come before the answer they make up.
    let last_delta = events.iter().rposition(|e| e["type"] == "answer_delta");
    let answered = events.iter().position(|e| e["type"] == "assistant_message");
    assert!(last_delta < answered, "{events:?}");
}

/// An agent with `stream = false` posts its answer whole, and writes no
/// deltas.
#[tokio::test(flavor = "multi_thread")]
async fn an_agent_can_turn_streaming_off() {
    let app = TestApp::spawn(Options {
        extra_env: vec![(
            "BATON_AGENTS_TOML".into(),
            "[defaults]\nstream = false\n".into(),
        )],
        ..Options::default()
    })
    .await;
    send_dm(&app, "EvO1", "1700000004.000100", "#reply=whole").await;
    let id = dm_task(&app).await;
    let done = app.wait_done(&id, LONG).await;
    assert_eq!(done["status"], "succeeded", "{done}\n{}", app.log());
    assert!(app.slack.calls("chat.startStream").is_empty());
    let posted = app.slack.wait_for_posts(1, LONG).await;
    assert_eq!(posted[0].text, "whole");
    let http = app.submit_ok("#reply=also whole").await;
    app.wait_done(&http, LONG).await;
    let events = app.events(&http).await;
    assert!(
        events.iter().all(|e| e["type"] != "answer_delta"),
        "{events:?}"
    );
    assert!(app.llm.streamed().iter().all(|s| !*s));
}

/// A follow-up steered into a task while its answer streams gets a message
/// of its own: the first answer keeps the message it streamed into.
async fn a_follow_up_while_streaming_keeps_the_first_answer(backend: Backend) {
    let app = TestApp::spawn(Options {
        backend,
        ..Options::default()
    })
    .await;
    let root = "1700000300.000100";
    let mention = |event_id: &str, ts: &str, text: &str| {
        serde_json::to_vec(&json!({
            "type": "event_callback", "team_id": "T1", "api_app_id": "A1",
            "event_id": event_id, "event_time": 1_700_000_000,
            "event": {"type": "app_mention", "user": "U1", "text": format!("<@UBOT> {text}"),
                      "ts": ts, "thread_ts": root, "channel": "C1", "event_ts": ts},
        }))
        .unwrap()
    };
    let padding = "and some words to make the answer stream for a while ".repeat(12);
    let first = format!("#chunk_ms=40 first-question {padding}");
    let r = app
        .slack_post(
            "/slack/events",
            &mention("EvF1", root, &first),
            "application/json",
            &[],
        )
        .await;
    assert_eq!(r.status(), 200);
    let started = std::time::Instant::now();
    while app.slack.calls("chat.startStream").is_empty() {
        assert!(
            started.elapsed() < LONG,
            "the answer never streamed: {}",
            app.log()
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let r = app
        .slack_post(
            "/slack/events",
            &mention("EvF2", "1700000301.000100", "follow-up-two"),
            "application/json",
            &[],
        )
        .await;
    assert_eq!(r.status(), 200);
    let key = format!("slack:T1:C1:{root}");
    let store = app.store().await;
    let id = store
        .thread(&key)
        .await
        .unwrap()
        .unwrap()
        .active_task
        .unwrap();
    let done = app.wait_done(id.as_str(), LONG).await;
    assert_eq!(done["status"], "succeeded", "{done}\n{}", app.log());
    // One task answered both; each answer in its own message.
    let posted = app.slack.posted();
    assert_eq!(posted.len(), 2, "{posted:?}");
    let shown: Vec<String> = posted
        .iter()
        .map(|p| app.slack.message("C1", &p.ts).unwrap().text)
        .collect();
    assert!(shown[0].contains("first-question"), "{shown:?}");
    assert!(!shown[0].contains("follow-up-two"), "{shown:?}");
    assert!(shown[1].contains("follow-up-two"), "{shown:?}");
    assert!(!shown[1].contains("first-question"), "{shown:?}");
}

mod follow_up_while_streaming {
    use super::*;

    #[tokio::test(flavor = "multi_thread")]
    async fn embedded() {
        super::a_follow_up_while_streaming_keeps_the_first_answer(Backend::Embedded).await;
    }

    #[tokio::test(flavor = "multi_thread")]
    async fn aws() {
        super::a_follow_up_while_streaming_keeps_the_first_answer(Backend::Aws).await;
    }
}

/// A two-step plan for the scripted model (`#plan=`).
const PLAN: &str = r#"{"steps": [{"title": "Ask the clock", "done_when": "the time is known"}, {"title": "Answer", "done_when": "the answer is given"}]}"#;

/// The statuses the thread was given, in order.
fn statuses(app: &TestApp) -> Vec<String> {
    app.slack
        .calls("assistant.threads.setStatus")
        .iter()
        .filter_map(|c| c["status"].as_str().map(str::to_owned))
        .collect()
}

/// A task's plan (issue #22) in Slack: the thread's status shows it while
/// no message does; the answer's stream opens with it as a plan block
/// (Slack's `plan_update` and `task_update` chunks, `task_display_mode`
/// `plan`), the steps supervision marked done complete; the text streams
/// below it and the finished answer replaces the message as always.
async fn a_plan_shows_in_the_streamed_answer(backend: Backend) {
    let app = TestApp::spawn(Options {
        backend,
        extra_env: vec![(
            "BATON_AGENTS_TOML".into(),
            // A fast tier: supervision (which marks steps done) needs one.
            "[models]\nfast = \"mock-fast\"\n\n\
             [defaults]\nplan = \"always\"\nsupervise = { every_steps = 1 }\n"
                .into(),
        )],
        ..Options::default()
    })
    .await;
    let answer = long_answer();
    let done_first = r#"{"action": "continue", "done": [0]}"#;
    send_dm(
        &app,
        "EvP1",
        "1700000400.000100",
        &format!("#steps=3 #chunk_ms=25 #plan={PLAN} #supervise={done_first} #reply={answer}"),
    )
    .await;
    let id = dm_task(&app).await;
    let done = app.wait_done(&id, LONG).await;
    assert_eq!(done["status"], "succeeded", "{done}\n{}", app.log());
    assert_eq!(done["result"], answer.as_str());

    // Written before the first step, when no message shows it.
    assert_eq!(
        statuses(&app).first().map(String::as_str),
        Some("is working on a plan: ☐ Ask the clock ☐ Answer"),
        "{}",
        app.log()
    );
    // The tool steps wrote no text: the stream opened with the answer,
    // the plan first, step 1 done by then (supervised after step 1).
    let starts = app.slack.calls("chat.startStream");
    assert_eq!(starts.len(), 1, "{starts:?}");
    assert_eq!(starts[0]["task_display_mode"], "plan");
    let chunks = starts[0]["chunks"].as_array().expect("chunks").clone();
    assert_eq!(
        chunks[..3],
        [
            json!({"type": "plan_update", "title": "Plan: 1 of 2 steps done"}),
            json!({"type": "task_update", "id": "step-1", "title": "Ask the clock", "status": "complete"}),
            json!({"type": "task_update", "id": "step-2", "title": "Answer", "status": "in_progress"}),
        ]
    );
    assert!(chunks[3..].iter().all(|c| c["type"] == "markdown_text"));
    let first_text: String = chunks[3..]
        .iter()
        .filter_map(|c| c["text"].as_str())
        .collect();
    assert_eq!(format!("{first_text}{}", streamed_text(&app)), answer);

    let posted = app.slack.posted();
    assert_eq!(posted.len(), 1, "one message: {posted:?}");
    let plan = app.slack.stream_plan("D1", &posted[0].ts).expect("a plan");
    let steps: Vec<(&str, &str)> = plan
        .tasks
        .iter()
        .map(|t| (t.title.as_str(), t.status.as_str()))
        .collect();
    assert_eq!(
        steps,
        [("Ask the clock", "complete"), ("Answer", "in_progress")]
    );
    let shown = app.slack.message("D1", &posted[0].ts).unwrap();
    assert_eq!(shown.text, answer);
    assert!(!shown.streaming);
}

mod plan_in_the_stream {
    use super::*;

    #[tokio::test(flavor = "multi_thread")]
    async fn embedded() {
        super::a_plan_shows_in_the_streamed_answer(Backend::Embedded).await;
    }

    #[tokio::test(flavor = "multi_thread")]
    async fn aws() {
        super::a_plan_shows_in_the_streamed_answer(Backend::Aws).await;
    }
}

/// An agent that does not stream shows its plan in the thread's status
/// (the checklist), and posts nothing more than its answer.
#[tokio::test(flavor = "multi_thread")]
async fn without_streaming_the_plan_is_the_status() {
    let app = TestApp::spawn(Options {
        extra_env: vec![(
            "BATON_AGENTS_TOML".into(),
            "[defaults]\nstream = false\nplan = \"always\"\n".into(),
        )],
        ..Options::default()
    })
    .await;
    send_dm(
        &app,
        "EvP2",
        "1700000401.000100",
        &format!("#plan={PLAN} #reply=whole"),
    )
    .await;
    let id = dm_task(&app).await;
    let done = app.wait_done(&id, LONG).await;
    assert_eq!(done["status"], "succeeded", "{done}\n{}", app.log());
    assert_eq!(
        statuses(&app).first().map(String::as_str),
        Some("is working on a plan: ☐ Ask the clock ☐ Answer"),
        "{}",
        app.log()
    );
    assert!(app.slack.calls("chat.startStream").is_empty());
    assert!(app.slack.calls("chat.appendStream").is_empty());
    let posted = app.slack.wait_for_posts(1, LONG).await;
    assert_eq!(posted.len(), 1, "the answer only: {posted:?}");
    assert_eq!(posted[0].text, "whole");
}

/// Tool calls while the answer streams (issue #23): the model says what it
/// will do (the narration streams, opening the message), then calls a
/// tool; the call is a task of the stream (`task_update`, its id from the
/// call id, its name only), in progress and then complete, and the finished
/// answer still replaces the text.
async fn a_tool_call_shows_in_the_streamed_answer(backend: Backend) {
    let app = TestApp::spawn(Options {
        backend,
        // A fast tier: the judgment sends a narration back to the model.
        extra_env: vec![(
            "BATON_AGENTS_TOML".into(),
            "[models]\nfast = \"mock-fast\"\n".into(),
        )],
        ..Options::default()
    })
    .await;
    send_dm(
        &app,
        "EvT1",
        "1700000500.000100",
        "#narrate=1 #steps=2 #chunk_ms=5",
    )
    .await;
    let id = dm_task(&app).await;
    let done = app.wait_done(&id, LONG).await;
    assert_eq!(done["status"], "succeeded", "{done}\n{}", app.log());

    let posted = app.slack.posted();
    assert_eq!(posted.len(), 1, "one message: {posted:?}");
    let tools: Vec<Value> = app
        .slack
        .calls("chat.appendStream")
        .iter()
        .flat_map(|c| c["chunks"].as_array().cloned().unwrap_or_default())
        .filter(|c| c["type"] == "task_update")
        .collect();
    assert_eq!(tools.len(), 2, "{tools:?}\n{}", app.log());
    let call_id = tools[0]["id"].as_str().expect("an id").to_owned();
    assert!(call_id.starts_with("tool-"), "{call_id}");
    assert_eq!(
        tools,
        [
            json!({"type": "task_update", "id": call_id, "title": "Running current_time", "status": "in_progress"}),
            json!({"type": "task_update", "id": call_id, "title": "Ran current_time", "status": "complete"}),
        ]
    );
    let plan = app.slack.stream_plan("D1", &posted[0].ts).expect("tasks");
    let shown: Vec<(&str, &str)> = plan
        .tasks
        .iter()
        .map(|t| (t.title.as_str(), t.status.as_str()))
        .collect();
    assert_eq!(shown, [("Ran current_time", "complete")]);
    // Shown in the stream, the call is not also the thread's status.
    assert!(
        !statuses(&app).iter().any(|s| s.contains("current_time")),
        "{:?}",
        statuses(&app)
    );
    let message = app.slack.message("D1", &posted[0].ts).unwrap();
    assert_eq!(message.text, done["result"].as_str().unwrap_or_default());
    assert!(!message.streaming);
}

mod tool_calls_in_the_stream {
    use super::*;

    #[tokio::test(flavor = "multi_thread")]
    async fn embedded() {
        super::a_tool_call_shows_in_the_streamed_answer(Backend::Embedded).await;
    }

    #[tokio::test(flavor = "multi_thread")]
    async fn aws() {
        super::a_tool_call_shows_in_the_streamed_answer(Backend::Aws).await;
    }
}
