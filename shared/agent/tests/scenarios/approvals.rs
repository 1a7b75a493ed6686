//! Human approval end to end on the embedded backend: the task waits with
//! no worker running, Slack gets Approve / Deny buttons, and every way a
//! wait can end — approve, deny, expiry, a decision racing the wait, a
//! cancel — ends it right and tells people.

use crate::harness::{self as support, Harness, Options};
use baton_core::wait;

use async_trait::async_trait;
use baton_agent::{Worker, WorkerSettings};
use baton_core::approval::{self, ApprovalPrompts};
use baton_core::ReplyError;
use baton_core::{
    Approval, EntryKind, PostedMessage, Task, TaskId, TaskStatus, TaskStore, Tool, ToolContext,
    ToolOutput, ToolSpec, Verdict, WaitingFor,
};
use baton_embedded::{EmbeddedBackend, QueueConfig};
use baton_llm::ScriptedProvider;
use baton_settings::ApprovalRule;
use baton_settings::{AgentConfig, Agents};
use baton_slack::testing::FakeSlack;
use baton_slack::SlackApprovals;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::Arc;
use std::time::Duration;

/// A tool with a side effect worth approving: it counts its runs.
struct Deploy(Arc<AtomicU32>);

#[async_trait]
impl Tool for Deploy {
    fn spec(&self) -> ToolSpec {
        ToolSpec {
            name: "deploy".into(),
            description: "deploys".into(),
            input_schema: serde_json::json!({"type": "object"}),
        }
    }
    async fn call(&self, _args: serde_json::Value, _ctx: &ToolContext) -> ToolOutput {
        self.0.fetch_add(1, Ordering::SeqCst);
        ToolOutput::ok("deployed")
    }
}

fn agent(expires_after: Duration) -> AgentConfig {
    let mut a = AgentConfig::new("default", "scripted");
    a.approval.require = Some(vec![ApprovalRule::parse("deploy").unwrap()]);
    a.approval.approvers = vec!["U_BOSS".into()];
    a.approval.expires_after = expires_after;
    a
}

/// A harness whose approval requests are shown by `prompts` (given the
/// store and the fake Slack), and the count of deploys that ran.
async fn rig_with(
    expires_after: Duration,
    prompts: impl FnOnce(&TaskStore, &FakeSlack) -> Arc<dyn ApprovalPrompts> + 'static,
) -> (Harness, Arc<AtomicU32>) {
    let deploys = Arc::new(AtomicU32::new(0));
    let h = Harness::start(Options {
        tools: vec![Arc::new(Deploy(deploys.clone()))],
        agents: Agents::new(agent(expires_after), Vec::new()),
        slack_replies: true,
        prompts: Some(Box::new(prompts)),
        ..Options::default()
    })
    .await;
    (h, deploys)
}

fn slack_buttons(_: &TaskStore, slack: &FakeSlack) -> Arc<dyn ApprovalPrompts> {
    Arc::new(SlackApprovals::new(slack.client()))
}

async fn rig() -> (Harness, Arc<AtomicU32>) {
    rig_with(Duration::from_secs(3600), slack_buttons).await
}

const INPUT: &str = r#"#tool=deploy #args={"env":"prod"}"#;

async fn submit(r: &Harness) -> TaskId {
    r.submit(support::slack_origin("U_REQ"), INPUT).await
}

async fn wake(r: &Harness, id: &TaskId) {
    r.wake(id).await;
}

async fn drain(r: &Harness) {
    r.drain().await;
}

async fn task(r: &Harness, id: &TaskId) -> Task {
    r.store.get(id).await.unwrap().unwrap()
}

/// What ingest does on a click or an HTTP decision.
async fn decide(r: &Harness, id: &TaskId, approval_id: &str, verdict: Verdict, by: &str) {
    let (t, _) = r
        .store
        .update(id, None, |t| {
            Ok(approval::decide(
                t,
                approval_id,
                verdict,
                Some(by),
                baton_core::Instant::now(),
            )
            .ok()
            .map(|(e, _)| e))
        })
        .await
        .unwrap();
    if t.status() == TaskStatus::Queued {
        wake(r, id).await;
    }
}

fn approval_of(t: &Task) -> String {
    match &t.waiting_for() {
        Some(WaitingFor::Approval(wait::Approval {
            approval_id,
            tool,
            summary,
        })) => {
            assert_eq!(tool, "deploy");
            assert!(summary.contains("prod"), "{summary}");
            approval_id.clone()
        }
        other => panic!("expected to wait for an approval, got {other:?}"),
    }
}

#[tokio::test]
async fn the_task_waits_at_zero_compute_then_runs_the_approved_call() {
    let (r, deploys) = rig().await;
    let id = submit(&r).await;
    drain(&r).await;

    let t = task(&r, &id).await;
    assert_eq!(t.status(), TaskStatus::Waiting);
    assert!(t.lease().is_free(), "no worker holds a waiting task");
    let approval_id = approval_of(&t);
    assert_eq!(deploys.load(Ordering::SeqCst), 0, "not run before approval");
    // Slack shows the request with both buttons, in the thread.
    let asked = r.slack.posted();
    assert_eq!(asked.len(), 1);
    assert_eq!(asked[0].thread_ts.as_deref(), Some("100.1"));
    let blocks = asked[0].blocks.clone().unwrap();
    let buttons = blocks[1]["elements"].as_array().unwrap();
    assert_eq!(
        buttons[0]["action_id"],
        baton_slack::approvals::APPROVE_ACTION
    );
    assert_eq!(buttons[1]["action_id"], baton_slack::approvals::DENY_ACTION);
    assert_eq!(
        buttons[0]["value"],
        format!("{id}:{approval_id}"),
        "the button names the task and the approval"
    );

    decide(&r, &id, &approval_id, Verdict::Approved, "U_REQ").await;
    drain(&r).await;
    let t = task(&r, &id).await;
    assert_eq!(t.status(), TaskStatus::Succeeded, "{:?}", t.answer.error);
    assert_eq!(deploys.load(Ordering::SeqCst), 1);
    assert!(t.answer.result.unwrap().contains("deployed"));
    // The request message now says who approved, with no buttons left.
    let ts: Vec<_> = r
        .slack
        .calls("chat.update")
        .into_iter()
        .filter(|c| c["ts"] == asked[0].ts.as_str())
        .collect();
    assert_eq!(ts.len(), 1, "the request is updated once");
    assert!(ts[0]["text"]
        .as_str()
        .unwrap()
        .contains("Approved by <@U_REQ>"));
}

#[tokio::test]
async fn a_denied_call_is_not_run_and_the_model_is_told() {
    let (r, deploys) = rig().await;
    let id = submit(&r).await;
    drain(&r).await;
    let approval_id = approval_of(&task(&r, &id).await);

    decide(&r, &id, &approval_id, Verdict::Denied, "U_BOSS").await;
    drain(&r).await;
    let t = task(&r, &id).await;
    assert_eq!(t.status(), TaskStatus::Succeeded);
    assert_eq!(deploys.load(Ordering::SeqCst), 0);
    let answer = t.answer.result.unwrap();
    assert!(answer.contains("denied"), "{answer}");
    let update = &r.slack.calls("chat.update")[0];
    assert!(update["text"]
        .as_str()
        .unwrap()
        .contains("Denied by <@U_BOSS>"));
}

#[tokio::test]
async fn an_approval_nobody_decides_expires_as_a_denial_the_user_is_told_of() {
    let (r, deploys) = rig_with(Duration::from_millis(300), slack_buttons).await;
    let id = submit(&r).await;
    drain(&r).await;
    // The expiry wake was queued with a delay; the drain above may already
    // have handled it. Keep draining until the task settles.
    for _ in 0..20 {
        if task(&r, &id).await.status().is_terminal() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
        drain(&r).await;
    }
    let t = task(&r, &id).await;
    assert_eq!(t.status(), TaskStatus::Succeeded);
    assert_eq!(deploys.load(Ordering::SeqCst), 0);
    assert_eq!(
        t.waits.approvals[0].decision.as_ref().unwrap().verdict,
        Verdict::Expired
    );
    assert!(t.answer.result.unwrap().contains("expired"));
    // Told in the thread, not only in the (edited) request message.
    let thread: Vec<_> = r
        .slack
        .posted()
        .into_iter()
        .filter(|m| m.text.contains("Expired"))
        .collect();
    assert_eq!(thread.len(), 1, "{:?}", r.slack.posted());
}

/// Instead of showing the request, changes the task the moment it would be
/// shown — while the worker still holds the task, before the wait is
/// recorded: what a very fast click, or a cancel, racing the wait does.
struct OnAsk {
    store: TaskStore,
    change: fn(&mut Task, &str) -> Option<Vec<EntryKind>>,
}

#[async_trait]
impl ApprovalPrompts for OnAsk {
    async fn ask(
        &self,
        task: &Task,
        a: &Approval,
        _: &baton_core::PostKey,
    ) -> Result<Option<PostedMessage>, ReplyError> {
        self.store
            .update(&task.id, None, |t| Ok((self.change)(t, &a.approval_id)))
            .await
            .map_err(|e| ReplyError(e.to_string()))?;
        Ok(None)
    }
    async fn decided(&self, _: &Task, _: &Approval) -> Result<(), ReplyError> {
        Ok(())
    }
}

fn on_ask(
    change: fn(&mut Task, &str) -> Option<Vec<EntryKind>>,
) -> impl FnOnce(&TaskStore, &FakeSlack) -> Arc<dyn ApprovalPrompts> {
    move |store, _| {
        Arc::new(OnAsk {
            store: store.clone(),
            change,
        })
    }
}

#[tokio::test]
async fn a_decision_that_beats_the_wait_is_not_lost() {
    let approve = |t: &mut Task, id: &str| {
        approval::decide(
            t,
            id,
            Verdict::Approved,
            Some("U_REQ"),
            baton_core::Instant::now(),
        )
        .ok()
        .map(|(e, _)| e)
    };
    let (r, deploys) = rig_with(Duration::from_secs(3600), on_ask(approve)).await;
    let id = submit(&r).await;
    drain(&r).await;
    let t = task(&r, &id).await;
    assert_eq!(t.status(), TaskStatus::Succeeded, "{:?}", t.waiting_for());
    assert_eq!(deploys.load(Ordering::SeqCst), 1);
    assert!(
        !r.store
            .transcript(&id)
            .await
            .unwrap()
            .iter()
            .any(|e| matches!(
                &e.kind,
                EntryKind::Status {
                    status: TaskStatus::Waiting,
                    ..
                }
            )),
        "the task never waited: the decision was already there"
    );
}

#[tokio::test]
async fn cancelling_a_waiting_task_ends_it_and_tells_the_user() {
    let (r, deploys) = rig().await;
    let id = submit(&r).await;
    drain(&r).await;
    assert_eq!(task(&r, &id).await.status(), TaskStatus::Waiting);

    r.store
        .update(&id, None, |t| {
            t.cancel_requested = true;
            Ok(Some(Vec::new()))
        })
        .await
        .unwrap();
    wake(&r, &id).await;
    drain(&r).await;
    let t = task(&r, &id).await;
    assert_eq!(t.status(), TaskStatus::Cancelled);
    assert_eq!(deploys.load(Ordering::SeqCst), 0);
    assert!(r
        .slack
        .posted()
        .iter()
        .any(|m| m.text.contains("cancelled")));
}

#[tokio::test]
async fn an_early_wake_leaves_the_wait_alone() {
    let (r, _deploys) = rig().await;
    let id = submit(&r).await;
    drain(&r).await;
    let before = task(&r, &id).await;
    wake(&r, &id).await; // a duplicate, or a 15-minute hop towards expiry
    drain(&r).await;
    let after = task(&r, &id).await;
    assert_eq!(after.status(), TaskStatus::Waiting);
    assert_eq!(after.waiting_for(), before.waiting_for());
    assert_eq!(r.slack.posted().len(), 1, "the request is not posted twice");
}

#[tokio::test]
async fn a_cancel_that_beats_the_wait_ends_the_task() {
    // A cancel lands while the worker is between recording the approval and
    // waiting: the task must end, not wait with nobody left to wake it.
    let cancel = |t: &mut Task, _: &str| {
        t.cancel_requested = true;
        Some(Vec::new())
    };
    let (r, deploys) = rig_with(Duration::from_secs(3600), on_ask(cancel)).await;
    let id = submit(&r).await;
    drain(&r).await;
    let t = task(&r, &id).await;
    assert_eq!(t.status(), TaskStatus::Cancelled, "{:?}", t.waiting_for());
    assert_eq!(deploys.load(Ordering::SeqCst), 0);
}

#[tokio::test]
async fn rules_cover_the_built_in_waits_too() {
    // `require = ["sleep"]`: even a pause needs a human's yes.
    let dir = tempfile::tempdir().unwrap();
    let backend = EmbeddedBackend::open(dir.path(), QueueConfig::default()).unwrap();
    let store = TaskStore::new(backend.table.clone(), backend.blobs.clone());
    let mut agent = AgentConfig::new("default", "scripted");
    agent.approval.require = Some(vec![ApprovalRule::parse("sleep").unwrap()]);
    let worker = Worker::new(
        store.clone(),
        backend.queue.clone(),
        Arc::new(ScriptedProvider::new()),
        Vec::new(),
        Agents::new(agent, Vec::new()),
        Arc::new(baton_core::NoReplies),
        WorkerSettings::default(),
    );
    let queue = backend.queue.as_ref();
    let id = support::submit(
        &store,
        queue,
        baton_core::Origin::Http,
        r#"#tool=sleep #args={"seconds":5}"#,
    )
    .await;
    support::drain(&worker, queue).await;
    let t = store.get(&id).await.unwrap().unwrap();
    match &t.waiting_for() {
        Some(WaitingFor::Approval(wait::Approval { tool, .. })) => assert_eq!(tool, "sleep"),
        other => panic!("expected an approval wait, got {other:?}"),
    }
}

/// A task of conversation `key` asking to deploy, woken.
async fn submit_in(r: &Harness, key: &str) -> TaskId {
    let mut t = Task::new(
        TaskId::generate(),
        "default",
        support::slack_origin("U_REQ"),
        None,
        baton_core::Limits::default(),
        baton_core::now_ms(),
    );
    t.conversation.thread = Some(key.into());
    r.store
        .create(
            &t,
            vec![EntryKind::UserMessage {
                text: INPUT.into(),
                from: None,
            }],
            None,
        )
        .await
        .unwrap();
    wake(r, &t.id).await;
    t.id
}

#[tokio::test]
async fn a_rule_of_the_conversation_decides_unasked_and_only_there() {
    use baton_core::always::{Allowed, AlwaysRule};
    let (r, deploys) = rig().await;
    let rule = AlwaysRule {
        allowed: Allowed::Tool {
            tool: "deploy".into(),
        },
        by: "U_BOSS".into(),
        at: baton_core::Instant(0),
    };
    let thread = |key: &str, always: Vec<AlwaysRule>| baton_core::store::Thread {
        key: key.into(),
        active_task: None,
        recap: Default::default(),
        seen_ts: None,
        always,
        waiting: Vec::new(),
        version: 0,
    };
    assert!(r
        .store
        .put_thread(&thread("slack:T1:C1:1.0", vec![rule]))
        .await
        .unwrap());
    assert!(r
        .store
        .put_thread(&thread("slack:T1:C1:2.0", Vec::new()))
        .await
        .unwrap());

    let id = submit_in(&r, "slack:T1:C1:1.0").await;
    drain(&r).await;
    let t = task(&r, &id).await;
    assert_eq!(t.status(), TaskStatus::Succeeded, "{t:?}");
    assert_eq!(deploys.load(Ordering::SeqCst), 1);
    let d = t.waits.approvals[0].decision.clone().expect("decided");
    assert_eq!(d.verdict, Verdict::Approved);
    assert_eq!(d.by.as_deref(), Some("U_BOSS"));
    assert_eq!(
        d.rule.as_deref(),
        Some("always in this thread: deploy, by U_BOSS")
    );
    assert!(r.slack.posted().iter().all(
        |p| p.blocks.is_none() || !p.blocks.as_ref().unwrap().to_string().contains("approval:")
    ));

    // Another conversation asks, with the third button offered.
    let other = submit_in(&r, "slack:T1:C1:2.0").await;
    drain(&r).await;
    let t = task(&r, &other).await;
    assert_eq!(t.status(), TaskStatus::Waiting, "{t:?}");
    assert_eq!(deploys.load(Ordering::SeqCst), 1);
    let asked = r.slack.posted();
    let request = asked
        .iter()
        .find_map(|p| {
            p.blocks
                .clone()
                .filter(|b| b.to_string().contains("approval:"))
        })
        .expect("a request");
    assert_eq!(
        request[1]["elements"][2]["action_id"],
        baton_slack::approvals::ALWAYS_ACTION
    );
}
