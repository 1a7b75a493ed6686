//! How a task's tool calls show in Slack ([`SlackReplies`]'s `tool_call`),
//! against the fake Slack over real HTTP: as task chunks of the streamed
//! answer, else not at all (`false`: the worker says it in the status).

use super::*;
use crate::testing::FakeSlack;
use baton_core::{AnswerStream, Limits, TaskId, ToolCallState};
use serde_json::json;

fn task() -> Task {
    Task::new(
        TaskId::generate(),
        "default",
        Origin::Slack {
            team_id: "T1".into(),
            channel: "C1".into(),
            thread_ts: "1.0".into(),
            user: "U1".into(),
            channel_type: None,
        },
        Some("slack:T1:C1:1.0".into()),
        Limits::default(),
        0,
    )
}

fn call(state: ToolCallState) -> ToolCallShown<'static> {
    ToolCallShown {
        id: "call_1",
        name: "web_search",
        state,
    }
}

/// A task whose answer streams into a message opened in the fake.
async fn streaming(r: &SlackReplies) -> (Task, StreamedMessage) {
    let mut t = task();
    let m = r.stream_open(&t, "Let me look").await.expect("opened");
    t.answer.answer_stream = Some(AnswerStream {
        opened_at: baton_core::Instant(0),
        message: Some(m.clone()),
    });
    (t, m)
}

fn tasks(fake: &FakeSlack, m: &StreamedMessage) -> Vec<(String, String, String)> {
    fake.stream_plan(&m.channel, &m.ts)
        .expect("task chunks")
        .tasks
        .into_iter()
        .map(|t| (t.id, t.title, t.status))
        .collect()
}

#[tokio::test]
async fn a_call_is_one_task_of_the_stream_in_progress_then_complete() {
    let fake = FakeSlack::start().await;
    let r = SlackReplies::new(fake.client()).without_progress();
    let (t, m) = streaming(&r).await;

    assert!(r.tool_call(&t, call(ToolCallState::Running)).await);
    assert_eq!(
        tasks(&fake, &m),
        vec![(
            "tool-call_1".into(),
            "Running web_search".into(),
            "in_progress".into()
        )]
    );
    // Sent again (a retried segment), it updates the same task.
    assert!(r.tool_call(&t, call(ToolCallState::Running)).await);
    assert!(r.tool_call(&t, call(ToolCallState::Done)).await);
    assert_eq!(
        tasks(&fake, &m),
        vec![(
            "tool-call_1".into(),
            "Ran web_search".into(),
            "complete".into()
        )]
    );
    let sent = &fake.calls("chat.appendStream")[0]["chunks"][0];
    assert_eq!(
        sent,
        &json!({"type": "task_update", "id": "tool-call_1", "title": "Running web_search", "status": "in_progress"}),
        "the name only: no details, no output"
    );
}

#[tokio::test]
async fn without_a_stream_or_chunks_the_call_is_not_shown() {
    let fake = FakeSlack::start().await;
    let r = SlackReplies::new(fake.client()).without_progress();
    assert!(!r.tool_call(&task(), call(ToolCallState::Running)).await);
    assert!(fake.calls("chat.appendStream").is_empty());

    let (t, _) = streaming(&r).await;
    fake.fail_always("chat.appendStream", "invalid_arguments");
    assert!(!r.tool_call(&t, call(ToolCallState::Running)).await);
    fake.stop_failing("chat.appendStream");
    // Refused once, chunks are off: not tried again until restart.
    let tried = fake.calls("chat.appendStream").len();
    assert!(!r.tool_call(&t, call(ToolCallState::Done)).await);
    assert_eq!(fake.calls("chat.appendStream").len(), tried);
}

#[tokio::test]
async fn a_closed_stream_takes_no_call_and_chunks_stay_on() {
    let fake = FakeSlack::start().await;
    let r = SlackReplies::new(fake.client()).without_progress();
    let (t, _) = streaming(&r).await;
    fake.set_stream_expiry(Duration::from_millis(1));
    tokio::time::sleep(Duration::from_millis(20)).await;
    assert!(!r.tool_call(&t, call(ToolCallState::Running)).await);
    assert!(!r.chunks_off.load(Ordering::Relaxed));
}

/// The fake refuses task chunks Slack would: a status it does not know,
/// no title, output that is not text.
#[tokio::test]
async fn the_fake_refuses_malformed_task_chunks() {
    let fake = FakeSlack::start().await;
    let r = SlackReplies::new(fake.client()).without_progress();
    let (_, m) = streaming(&r).await;
    let c = fake.client();
    for bad in [
        json!({"type": "task_update", "id": "tool-1", "title": "Ran x", "status": "done"}),
        json!({"type": "task_update", "id": "tool-1", "status": "complete"}),
        json!({"type": "task_update", "id": "tool-1", "title": "Ran x", "status": "complete", "output": 3}),
        json!({"type": "task_update", "title": "Ran x", "status": "complete"}),
        json!({"type": "task_update", "id": "tool-1", "title": "Ran x", "status": "complete", "sources": "x"}),
    ] {
        let body = json!({"channel": m.channel, "ts": m.ts, "chunks": [bad]});
        assert!(c.call("chat.appendStream", &body).await.is_err(), "{bad}");
    }
    let good = json!({"type": "task_update", "id": "tool-1", "title": "Ran x", "status": "error"});
    let body = json!({"channel": m.channel, "ts": m.ts, "chunks": [good]});
    assert!(c.call("chat.appendStream", &body).await.is_ok());
}
