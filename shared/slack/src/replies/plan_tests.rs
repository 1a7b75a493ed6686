//! How a task's plan shows in Slack ([`SlackReplies`]'s `plan`), against
//! the fake Slack over real HTTP: in the streamed message as plan and task
//! chunks, else in the thread's status.

use super::*;
use crate::testing::{FakeSlack, StreamTask};
use baton_core::{AnswerStream, Limits, TaskId};
use serde_json::{json, Value};

/// A task of a conversation's thread in the app's DMs (so its answer may
/// stream, and the thread takes a status).
fn task() -> Task {
    Task::new(
        TaskId::generate(),
        "default",
        Origin::Slack {
            team_id: "T1".into(),
            channel: "D1".into(),
            thread_ts: "1.0".into(),
            user: "U1".into(),
            channel_type: None,
        },
        Some("slack:T1:D1:1.0".into()),
        Limits::default(),
        0,
    )
}

fn steps(titles: &[&str]) -> Vec<PlanStep> {
    titles
        .iter()
        .map(|t| PlanStep {
            title: (*t).to_owned(),
            done_when: "it is done".to_owned(),
        })
        .collect()
}

/// A sink whose statuses are never held back (the limiter is tested on
/// its own), and which posts no progress message (`progress_message`'s
/// own tests).
fn replies(fake: &FakeSlack) -> SlackReplies {
    let shown = crate::reactions::WorkShown {
        progress_after: Duration::MAX,
        ..Default::default()
    };
    SlackReplies::new(fake.client())
        .with_progress_interval(Duration::ZERO)
        .with_work_shown(Arc::new(move |_| shown.clone()))
}

/// The statuses set, in order.
fn statuses(fake: &FakeSlack) -> Vec<String> {
    fake.calls("assistant.threads.setStatus")
        .iter()
        .filter_map(|c| c["status"].as_str().map(str::to_owned))
        .collect()
}

/// The streamed plan's tasks as (id, title, status).
fn tasks(fake: &FakeSlack, m: &StreamedMessage) -> Vec<(String, String, String)> {
    let plan = fake.stream_plan(&m.channel, &m.ts).expect("a plan");
    plan.tasks
        .into_iter()
        .map(
            |StreamTask {
                 id, title, status, ..
             }| (id, title, status),
        )
        .collect()
}

fn row(id: &str, title: &str, status: &str) -> (String, String, String) {
    (id.into(), title.into(), status.into())
}

/// As the agent records the message it streams into.
fn record(task: &mut Task, m: &StreamedMessage) {
    task.answer.answer_stream = Some(AnswerStream {
        opened_at: baton_core::Instant(0),
        message: Some(m.clone()),
    });
}

/// The plan comes before any text: the thread's status shows it, and the
/// answer's stream opens with it (a plan block above the text); done marks
/// then update its tasks in the open stream, the text streaming on.
#[tokio::test]
async fn a_plan_opens_the_stream_and_follows_the_done_marks() {
    let fake = FakeSlack::start().await;
    let r = replies(&fake);
    let mut t = task();
    let plan = steps(&["Look it up", "Compare", "Answer"]);

    r.plan(&t, &plan, &[false; 3]).await;
    r.progress(&t, "is thinking…").await;
    assert_eq!(
        statuses(&fake),
        [
            "is working on a plan: ☐ Look it up ☐ Compare ☐ Answer",
            "is thinking… · plan: 0 of 3 steps done",
        ]
    );
    assert!(fake.calls("chat.appendStream").is_empty(), "no stream yet");

    let m = r.stream_open(&t, "Looking").await.expect("opened");
    record(&mut t, &m);
    let start = &fake.calls("chat.startStream")[0];
    assert_eq!(start["task_display_mode"], "plan");
    assert_eq!(
        start["chunks"],
        json!([
            {"type": "plan_update", "title": "Plan: 0 of 3 steps done"},
            {"type": "task_update", "id": "step-1", "title": "Look it up", "status": "in_progress"},
            {"type": "task_update", "id": "step-2", "title": "Compare", "status": "pending"},
            {"type": "task_update", "id": "step-3", "title": "Answer", "status": "pending"},
            {"type": "markdown_text", "text": "Looking"},
        ])
    );
    // The plan is in the message: statuses say no more about it.
    r.progress(&t, "is running web_search…").await;
    assert_eq!(statuses(&fake).last().unwrap(), "is running web_search…");

    // Supervision marks the first step done.
    r.plan(&t, &plan, &[true, false, false]).await;
    let append = fake.calls("chat.appendStream").pop().expect("appended");
    assert_eq!(append["ts"], m.ts.as_str());
    assert!(append.get("markdown_text").is_none());
    assert_eq!(
        append["chunks"][0],
        json!({"type": "plan_update", "title": "Plan: 1 of 3 steps done"})
    );
    assert_eq!(
        tasks(&fake, &m),
        [
            row("step-1", "Look it up", "complete"),
            row("step-2", "Compare", "in_progress"),
            row("step-3", "Answer", "pending"),
        ]
    );
    assert_eq!(statuses(&fake).len(), 3, "no status for it");

    // The text streams on after the plan's update.
    let shown = "Looking it up now";
    let added = r.stream_append(&t, &m, shown, "Looking".len()).await;
    assert_eq!(added.expect("appended"), Appended::Added);
    assert_eq!(fake.message("D1", &m.ts).unwrap().text, shown);

    // All done; the finished answer then replaces the message.
    r.plan(&t, &plan, &[true; 3]).await;
    let p = fake.stream_plan("D1", &m.ts).unwrap();
    assert_eq!(p.title.as_deref(), Some("Plan: all 3 steps done"));
    assert!(p.tasks.iter().all(|t| t.status == "complete"), "{p:?}");
    let key = PostKey {
        key: format!("{}:answer:1", t.id),
        maybe_posted: false,
    };
    r.answer(&t, "The answer", &key).await.expect("answered");
    assert_eq!(fake.posted().len(), 1, "one message");
    assert_eq!(fake.message("D1", &m.ts).unwrap().text, "The answer");
}

/// A plan revised to fewer steps cannot take the extra tasks away: they
/// are marked dropped.
#[tokio::test]
async fn a_revised_plan_marks_the_steps_it_dropped() {
    let fake = FakeSlack::start().await;
    let r = replies(&fake);
    let mut t = task();
    r.plan(&t, &steps(&["a", "b", "c"]), &[true, false, false])
        .await;
    let m = r.stream_open(&t, "Hi").await.unwrap();
    record(&mut t, &m);
    r.plan(&t, &steps(&["b again"]), &[false]).await;
    assert_eq!(
        tasks(&fake, &m),
        [
            row("step-1", "b again", "in_progress"),
            row("step-2", "Step 2 (dropped)", "error"),
            row("step-3", "Step 3 (dropped)", "error"),
        ]
    );
}

/// A plan written while the answer already streams goes into that stream
/// (a later segment, or a replan): the message need not have opened with
/// it. Titles are plain text whatever the model wrote.
#[tokio::test]
async fn a_plan_joins_a_stream_opened_without_it() {
    let fake = FakeSlack::start().await;
    let r = replies(&fake);
    let mut t = task();
    let m = r.stream_open(&t, "Hi").await.unwrap();
    record(&mut t, &m);
    assert!(fake.calls("chat.startStream")[0].get("chunks").is_none());
    r.plan(
        &t,
        &steps(&["Ping <!channel> about <https://x.io|it>"]),
        &[],
    )
    .await;
    assert_eq!(
        tasks(&fake, &m),
        [row("step-1", "Ping channel about it", "in_progress")]
    );
    assert!(statuses(&fake).is_empty());
}

/// Slack closed the stream (idle, or the user's Stop): the plan's update
/// goes to the status instead, and later statuses carry its progress.
#[tokio::test]
async fn a_closed_stream_leaves_the_plan_to_the_status() {
    let fake = FakeSlack::start().await;
    fake.set_stream_expiry(Duration::from_millis(50));
    let r = replies(&fake);
    let mut t = task();
    let plan = steps(&["One", "Two"]);
    r.plan(&t, &plan, &[false, false]).await;
    let m = r.stream_open(&t, "Hi").await.unwrap();
    record(&mut t, &m);
    tokio::time::sleep(Duration::from_millis(100)).await;
    r.plan(&t, &plan, &[true, false]).await;
    r.progress(&t, "is thinking…").await;
    let shown = statuses(&fake);
    assert_eq!(
        &shown[shown.len() - 2..],
        [
            "is working on a plan: ☑ One ☐ Two",
            "is thinking… · plan: 1 of 2 steps done",
        ]
    );
    // Chunks are still on: the next stream opens with the plan.
    let mut next = task();
    r.plan(&next, &plan, &[false, false]).await;
    let m2 = r.stream_open(&next, "Hi").await.unwrap();
    record(&mut next, &m2);
    assert_eq!(tasks(&fake, &m2).len(), 2);
}

/// A Slack that refuses the chunks: the stream opens without them (the
/// answer still streams), and plans go to the status from then on.
#[tokio::test]
async fn refused_chunks_never_cost_the_answer_its_stream() {
    let fake = FakeSlack::start().await;
    let r = replies(&fake);
    let mut t = task();
    let plan = steps(&["One"]);
    r.plan(&t, &plan, &[false]).await;
    fake.fail_next("chat.startStream", "invalid_arguments");
    let m = r.stream_open(&t, "Hello").await.expect("opened anyway");
    record(&mut t, &m);
    assert_eq!(fake.message("D1", &m.ts).unwrap().text, "Hello");
    let start: Vec<Value> = fake.calls("chat.startStream");
    assert_eq!(start.len(), 1);
    assert_eq!(start[0]["markdown_text"], "Hello");
    assert!(start[0].get("chunks").is_none());

    r.plan(&t, &plan, &[true]).await;
    assert!(fake.calls("chat.appendStream").is_empty(), "chunks are off");
    assert_eq!(
        statuses(&fake).last().unwrap(),
        "is working on a plan: ☑ One"
    );
}

/// An append refused for what it carries turns chunks off too; a failure
/// of the status itself changes nothing for the task (best effort).
#[tokio::test]
async fn a_refused_plan_update_falls_back_to_the_status() {
    let fake = FakeSlack::start().await;
    let r = replies(&fake);
    let mut t = task();
    let m = r.stream_open(&t, "Hi").await.unwrap();
    record(&mut t, &m);
    fake.fail_next("chat.appendStream", "invalid_arguments");
    r.plan(&t, &steps(&["One"]), &[false]).await;
    assert_eq!(statuses(&fake), ["is working on a plan: ☐ One"]);
    fake.fail_always("assistant.threads.setStatus", "ratelimited");
    r.plan(&t, &steps(&["One"]), &[true]).await;
    assert!(fake.calls("chat.appendStream").is_empty());
}

/// Without a stream — an agent that does not stream, a thread its answer
/// cannot stream into — the plan is the status: the checklist when it
/// fits, else how far it is and what is next.
#[tokio::test]
async fn without_a_stream_the_plan_is_the_status() {
    let fake = FakeSlack::start().await;
    let r = replies(&fake);
    let mut t = task();
    t.conversation.thread = None;
    let titles: Vec<String> = (1..=8)
        .map(|i| format!("Check source number {i}"))
        .collect();
    let refs: Vec<&str> = titles.iter().map(String::as_str).collect();
    r.plan(&t, &steps(&refs), &[true, true, false]).await;
    assert_eq!(
        statuses(&fake),
        ["is working on a plan (2 of 8 steps done), next: Check source number 3"]
    );
    assert!(fake.calls("chat.startStream").is_empty());
    assert!(fake.posted().is_empty(), "no message of its own");
    // Once the task closed, its statuses no longer mention the plan.
    r.phase(&t, TaskPhase::Closed).await;
    r.progress(&t, "is thinking…").await;
    assert_eq!(statuses(&fake).last().unwrap(), "is thinking…");
}

/// A sub-agent's plan is not shown (the thread shows its parent's), nor
/// are empty plans, nor plans of tasks from elsewhere.
#[tokio::test]
async fn plans_that_are_not_the_threads_are_not_shown() {
    let fake = FakeSlack::start().await;
    let r = replies(&fake);
    let mut child = task();
    child.source.parent = Some(baton_core::task::ParentLink {
        task_id: TaskId::generate(),
        call_id: "c".into(),
        root_task_id: None,
        actor: None,
    });
    r.plan(&child, &steps(&["Mine"]), &[]).await;
    r.plan(&task(), &[], &[]).await;
    let mut http = task();
    http.source.origin = Origin::Http;
    r.plan(&http, &steps(&["Mine"]), &[]).await;
    assert!(statuses(&fake).is_empty());
    assert!(fake.calls("chat.startStream").is_empty());
}
