//! A long conversation remembered as a summary (the real `baton dev`, the
//! mock LLM, both backends): the turns that no longer fit its recap are
//! summarised by a model call after the answer is delivered, the summary
//! carries a fact from the conversation's start into later tasks (the
//! fold, which keeps each turn's first 200 characters, loses it), the
//! call's tokens are the task's, a failing call falls back to the fold,
//! and a worker killed while summarising loses no turn.

use crate::common::{Backend, Options, TestApp, TOKEN};
use baton_core::recap::{Recap, MAX_TURNS, SUMMARISER_PROMPT};
use baton_core::{CompletionRequest, EntryKind, Message, TaskId, TaskStatus, Usage};
use serde_json::{json, Value};
use std::time::{Duration, Instant, SystemTime};

const LONG: Duration = Duration::from_secs(60);
/// 30 messages and their answers: 60 turns.
const MESSAGES: usize = 30;
/// The fact, in the first message (turn 1) and its echo (turn 2), past
/// what the fold keeps of a turn.
const FACT: &str = "#remember the launch code is ZX-4471";
/// The message whose task's end first overflows the recap.
const FIRST_OVERFLOW: usize = MAX_TURNS / 2 + 1;

/// Message `i` of conversation `thread`, which names it.
fn text(thread: &str, i: usize, extra: &str) -> String {
    if i == 1 {
        let padding = "lorem ipsum dolor sit amet ".repeat(12);
        format!("{thread} message 001 {extra}\n{padding}\n{FACT}")
    } else {
        format!("{thread} message {i:03}")
    }
}

/// Sends message `i` on `thread`; its task, once it has ended and been
/// recorded on the conversation.
async fn send(app: &TestApp, thread: &str, input: &str) -> TaskId {
    let r = app
        .http
        .post(format!("{}/tasks", app.url))
        .bearer_auth(TOKEN)
        .json(&json!({"input": input, "thread": thread}))
        .send()
        .await
        .unwrap();
    let status = r.status();
    let v: Value = r.json().await.unwrap_or_default();
    assert_eq!(status, 202, "{input}: {v}\nlog:\n{}", app.log());
    let id = v["task_id"].as_str().unwrap().to_owned();
    let t = app.wait_done(&id, LONG).await;
    assert_eq!(t["status"], "succeeded", "{t}");
    let id = TaskId::parse(&id).unwrap();
    wait_recap(app, thread, |r| r.recorded.contains(&id)).await;
    id
}

/// Waits until the conversation's recap is as `done` says; the recap.
async fn wait_recap(app: &TestApp, thread: &str, done: impl Fn(&Recap) -> bool) -> Recap {
    let store = app.store().await;
    let started = Instant::now();
    loop {
        if let Some(t) = store.thread(&format!("http:{thread}")).await.unwrap() {
            if done(&t.recap) {
                return t.recap;
            }
        }
        assert!(
            started.elapsed() < LONG,
            "{thread}: the recap never got there\nlog:\n{}",
            app.log()
        );
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
}

fn is_summary(r: &CompletionRequest) -> bool {
    r.system == SUMMARISER_PROMPT
}

fn first_user(r: &CompletionRequest) -> &str {
    baton_llm::script::first_user_message(r).unwrap_or_default()
}

fn last_user(r: &CompletionRequest) -> &str {
    r.messages
        .iter()
        .rev()
        .find_map(|m| match m {
            Message::User { content } => Some(content.as_str()),
            _ => None,
        })
        .unwrap_or_default()
}

/// The model requests of the task answering `marker` (not the summaries).
fn requests_for(app: &TestApp, marker: &str) -> Vec<CompletionRequest> {
    app.llm
        .received()
        .into_iter()
        .filter(|r| !is_summary(r) && last_user(r).contains(marker))
        .collect()
}

/// The summary requests whose input holds `needle`, with when each arrived.
fn summaries_with(app: &TestApp, needle: &str) -> Vec<(CompletionRequest, SystemTime)> {
    app.llm
        .received()
        .into_iter()
        .zip(app.llm.arrived())
        .filter(|(r, _)| is_summary(r) && last_user(r).contains(needle))
        .collect()
}

/// The task's own model calls' usage (its steps), from its transcript.
async fn steps_usage(app: &TestApp, id: &TaskId) -> Usage {
    let mut total = Usage::default();
    for e in app.store().await.transcript(id).await.unwrap() {
        if let EntryKind::AssistantMessage { usage, .. } = e.kind {
            total.add(usage);
        }
    }
    total
}

/// When the task's success was committed.
async fn succeeded_at(app: &TestApp, id: &TaskId) -> SystemTime {
    let at = app
        .store()
        .await
        .transcript(id)
        .await
        .unwrap()
        .into_iter()
        .find_map(|e| match e.kind {
            EntryKind::Status {
                status: TaskStatus::Succeeded,
                ..
            } => Some(e.at),
            _ => None,
        })
        .expect("a succeeded status entry");
    SystemTime::UNIX_EPOCH + Duration::from_millis(u64::try_from(at.0).unwrap())
}

async fn usage_of(app: &TestApp, id: &TaskId) -> Usage {
    let t = app.store().await.get(id).await.unwrap().unwrap();
    t.budget.usage
}

/// 60 turns; the next task is given the model's summary, holding the fact.
async fn remembered(app: &TestApp) {
    let thread = "remembered";
    let mut ids = Vec::new();
    for i in 1..=MESSAGES {
        ids.push(send(app, thread, &text(thread, i, "")).await);
        if i == FIRST_OVERFLOW {
            first_summary(app, thread, &ids[i - 1]).await;
        }
    }
    let recap = wait_recap(app, thread, |r| r.overflow.is_empty()).await;
    let summary = recap.summary.unwrap_or_default();
    assert!(summary.contains("ZX-4471"), "{summary}");

    send(app, thread, "remembered message 031: the launch code?").await;
    let next = requests_for(app, "remembered message 031");
    assert!(!next.is_empty());
    let carried = first_user(&next[0]);
    assert!(
        carried
            .starts_with("[Earlier in this conversation, in short:]\n[scripted model] summary of "),
        "the model's summary opens the next task: {carried}"
    );
    assert!(carried.contains(FACT), "the fact from turn 2: {carried}");
}

/// The first summary: asked for after the answer was committed, of the two
/// oldest turns, its tokens added to the task that ended.
async fn first_summary(app: &TestApp, thread: &str, id: &TaskId) {
    let recap = wait_recap(app, thread, |r| {
        r.overflow.is_empty() && r.summary.is_some()
    })
    .await;
    assert_eq!(
        recap.summary.as_deref(),
        Some(format!("[scripted model] summary of 2 turns\n{FACT}").as_str())
    );
    let asked = summaries_with(app, "remembered message 001 \n");
    assert_eq!(asked.len(), 1, "one summary of the overflowing turns");
    let (request, arrived) = &asked[0];
    assert!(
        succeeded_at(app, id).await <= *arrived,
        "the answer is delivered before the summary is asked for"
    );
    let spent = baton_llm::script::respond(request).completion.usage;
    let mut expected = steps_usage(app, id).await;
    expected.add(spent);
    let started = Instant::now();
    while usage_of(app, id).await != expected {
        assert!(
            started.elapsed() < LONG,
            "the summary's tokens are the task's: {:?} != {expected:?}",
            usage_of(app, id).await
        );
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
}

/// The summarising call fails: the oldest turns are folded as before, and
/// the next task gets the fold.
async fn folded(app: &TestApp) {
    let thread = "folded";
    let mut ids = Vec::new();
    for i in 1..=FIRST_OVERFLOW {
        ids.push(send(app, thread, &text(thread, i, "#recap_fail")).await);
    }
    let recap = wait_recap(app, thread, |r| {
        r.overflow.is_empty() && r.summary.is_some()
    })
    .await;
    let summary = recap.summary.unwrap_or_default();
    assert!(
        summary.starts_with("user: folded message 001 #recap_fail\nlorem ipsum"),
        "{summary}"
    );
    assert!(
        !summary.contains("ZX-4471"),
        "cut as the fold cuts: {summary}"
    );
    assert_eq!(
        summaries_with(app, "folded message 001 #recap_fail").len(),
        1,
        "the summary was asked for, and failed"
    );
    let last = ids.last().unwrap();
    assert_eq!(
        usage_of(app, last).await,
        steps_usage(app, last).await,
        "a failed call adds nothing"
    );

    let input = format!("folded message {:03}", FIRST_OVERFLOW + 1);
    send(app, thread, &input).await;
    let next = requests_for(app, &input);
    assert!(!next.is_empty());
    let carried = first_user(&next[0]);
    assert!(
        carried.starts_with("[Earlier in this conversation, in short:]\nuser: folded message 001"),
        "{carried}"
    );
}

async fn a_long_conversation_is_remembered_as_a_summary(backend: Backend) {
    let app = TestApp::spawn(Options {
        backend,
        ..Options::default()
    })
    .await;
    // Two conversations at once: their summaries are their own.
    tokio::join!(remembered(&app), folded(&app));
    for (r, _) in summaries_with(&app, "message") {
        let input = last_user(&r);
        assert!(
            input.contains("remembered message") != input.contains("folded message"),
            "a summary is of one conversation: {input}"
        );
    }
}

/// The worker dies while the summary is asked for, after the answer was
/// delivered: the turns wait whole, the next task is given them folded,
/// and its end summarises them with its own.
async fn a_crash_while_summarising_loses_nothing(backend: Backend) {
    let mut app = TestApp::spawn(Options {
        backend,
        ..Options::default()
    })
    .await;
    let thread = "crashed";
    for i in 1..FIRST_OVERFLOW {
        send(&app, thread, &text(thread, i, "")).await;
    }
    app.llm.hold_next(
        Some(baton_llm::script::recap::HOLD),
        Duration::from_secs(300),
    );
    send(&app, thread, &text(thread, FIRST_OVERFLOW, "")).await;
    let started = Instant::now();
    while summaries_with(&app, "crashed message 001").is_empty() {
        assert!(started.elapsed() < LONG, "the summary was never asked for");
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
    app.restart();
    let recap = wait_recap(&app, thread, |_| true).await;
    assert_eq!(recap.overflow.len(), 2, "the turns wait whole");
    assert_eq!(recap.summary, None);

    let input = format!("crashed message {:03}", FIRST_OVERFLOW + 1);
    send(&app, thread, &input).await;
    let next = requests_for(&app, &input);
    assert!(!next.is_empty());
    let carried = first_user(&next[0]);
    assert!(
        carried.starts_with("[Earlier in this conversation, in short:]\nuser: crashed message 001"),
        "the next task is given them folded: {carried}"
    );
    let recap = wait_recap(&app, thread, |r| r.overflow.is_empty()).await;
    assert_eq!(
        recap.summary.as_deref(),
        Some(format!("[scripted model] summary of 4 turns\n{FACT}").as_str()),
        "summarised at the next task's end, with its own"
    );
}

mod embedded {
    use super::*;

    #[tokio::test(flavor = "multi_thread")]
    async fn a_long_conversation_is_remembered_as_a_summary() {
        super::a_long_conversation_is_remembered_as_a_summary(Backend::Embedded).await;
    }

    #[tokio::test(flavor = "multi_thread")]
    async fn a_crash_while_summarising_loses_nothing() {
        super::a_crash_while_summarising_loses_nothing(Backend::Embedded).await;
    }
}

mod aws {
    use super::*;

    #[tokio::test(flavor = "multi_thread")]
    async fn a_long_conversation_is_remembered_as_a_summary() {
        super::a_long_conversation_is_remembered_as_a_summary(Backend::Aws).await;
    }

    #[tokio::test(flavor = "multi_thread")]
    async fn a_crash_while_summarising_loses_nothing() {
        super::a_crash_while_summarising_loses_nothing(Backend::Aws).await;
    }
}
