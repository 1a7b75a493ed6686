//! Schedules end to end on the embedded backend: the embedded scheduler
//! fires, the worker creates and runs the task, heartbeats post only new
//! findings, and a doubly delivered firing makes one task.

use crate::harness::{Harness, Options};

use baton_agent::{Disposition, SegmentBudget};
use baton_core::{now_ms, Delivery, Instant, ScheduleFire, TaskStatus, WorkMessage, WorkQueue};
use baton_schedule::validate::{new_schedule, validate};
use baton_schedule::ScheduleState;
use baton_schedule::{Schedule, ScheduleKind, ScheduleTarget, Scheduler};
use std::time::Duration;

async fn rig() -> Harness {
    Harness::start(Options {
        slack_replies: true,
        schedules: Some(Duration::from_secs(3600)),
        ..Options::default()
    })
    .await
}

fn schedule(
    expression: &str,
    input: &str,
    kind: ScheduleKind,
    target: Option<ScheduleTarget>,
) -> Schedule {
    let now = Instant::now();
    let spec = validate(expression, Some("UTC"), now).expect("valid");
    new_schedule(
        baton_schedule::new_schedule_id(),
        &spec,
        input.into(),
        kind,
        target,
        "api".into(),
        "default".into(),
        now,
    )
}

fn firing(id: &str, scheduled_time: Option<&str>) -> String {
    WorkMessage::Schedule(ScheduleFire {
        schedule_id: id.into(),
        scheduled_time: scheduled_time.map(str::to_owned),
    })
    .to_body()
}

async fn drain(r: &Harness) {
    r.drain().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn one_time_schedule_fires_through_the_embedded_scheduler_and_its_task_completes() {
    let r = rig().await;
    let at = chrono::Utc::now() + chrono::TimeDelta::seconds(2);
    let expr = format!("at({})", at.format("%Y-%m-%dT%H:%M:%S"));
    let s = r
        .service
        .create(schedule(&expr, "say hello", ScheduleKind::Task, None))
        .await
        .unwrap();
    assert_eq!(s.state, ScheduleState::Active);
    assert!(r.scheduler.exists(&s.id).await.unwrap());
    let loop_scheduler = r.scheduler.clone();
    let driver = tokio::spawn(async move { loop_scheduler.run().await });

    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    let mut task_id = None;
    while task_id.is_none() && tokio::time::Instant::now() < deadline {
        drain(&r).await;
        task_id = r
            .service
            .store()
            .get(&s.id)
            .await
            .unwrap()
            .and_then(|s| s.last_task_id);
    }
    driver.abort();
    let task_id = task_id.expect("the schedule fired and made a task");
    let fired = r.service.store().get(&s.id).await.unwrap().unwrap();
    let fired_at = fired.last_fired_at.unwrap();
    let due = Instant(at.timestamp() * 1000);
    assert!(fired_at >= due, "not before its time: {fired_at}");
    assert!(
        fired_at < due + Duration::from_secs(3),
        "within seconds of its time: {fired_at}"
    );
    assert_eq!(fired.state, ScheduleState::Completed);
    assert_eq!(fired.next_fire_at, None);
    assert_eq!(
        fired.last_scheduled_time.as_deref(),
        Some(
            at.to_rfc3339_opts(chrono::SecondsFormat::Secs, true)
                .as_str()
        )
    );
    assert!(
        !r.scheduler.exists(&s.id).await.unwrap(),
        "one-time plan removed after firing"
    );
    let task = r.store.get(&task_id).await.unwrap().unwrap();
    assert_eq!(
        task.status(),
        TaskStatus::Succeeded,
        "{:?}",
        task.answer.error
    );
    assert!(task.answer.result.unwrap_or_default().contains("say hello"));
}

#[tokio::test(flavor = "multi_thread")]
async fn heartbeat_posts_nothing_when_ok_and_a_repeated_finding_once() {
    let r = rig().await;
    let target = Some(ScheduleTarget {
        slack_channel: "C42".into(),
        thread_ts: None,
    });
    let quiet = r
        .service
        .create(schedule(
            "rate(1 hour)",
            "check the queue\n#reply=HEARTBEAT_OK",
            ScheduleKind::Heartbeat,
            target.clone(),
        ))
        .await
        .unwrap();
    let noisy = r
        .service
        .create(schedule(
            "rate(1 hour)",
            "check the disks\n#reply=Disk full on host-1",
            ScheduleKind::Heartbeat,
            target,
        ))
        .await
        .unwrap();
    for t in [
        "2030-01-01T09:00:00Z",
        "2030-01-01T10:00:00Z",
        "2030-01-01T11:00:00Z",
    ] {
        r.backend
            .queue
            .send(&firing(&quiet.id, Some(t)), Duration::ZERO)
            .await
            .unwrap();
        r.backend
            .queue
            .send(&firing(&noisy.id, Some(t)), Duration::ZERO)
            .await
            .unwrap();
        drain(&r).await;
    }
    let posted = r.slack.posted();
    assert_eq!(posted.len(), 1, "one post in all: {posted:?}");
    assert_eq!(posted[0].channel, "C42");
    assert_eq!(posted[0].thread_ts, None, "a new top-level message");
    assert!(posted[0].text.contains("Disk full on host-1"));
    // Every firing ran its task to the end, quiet or not.
    for id in [&quiet.id, &noisy.id] {
        let s = r.service.store().get(id).await.unwrap().unwrap();
        assert_eq!(
            s.last_scheduled_time.as_deref(),
            Some("2030-01-01T11:00:00Z")
        );
        let task = r
            .store
            .get(s.last_task_id.as_ref().unwrap())
            .await
            .unwrap()
            .unwrap();
        assert_eq!(task.status(), TaskStatus::Succeeded);
    }
    let noisy = r.service.store().get(&noisy.id).await.unwrap().unwrap();
    assert_eq!(noisy.last_finding.as_deref(), Some("Disk full on host-1"));
    assert_eq!(noisy.recent_findings.len(), 1);
}

#[tokio::test(flavor = "multi_thread")]
async fn a_doubly_delivered_firing_creates_one_task() {
    let r = rig().await;
    let s = r
        .service
        .create(schedule(
            "rate(5 minutes)",
            "count",
            ScheduleKind::Task,
            None,
        ))
        .await
        .unwrap();
    // Drop the firing the plan made at creation; deliver one firing twice.
    r.scheduler.delete(&s.id).await.unwrap();
    let body = firing(&s.id, Some("2030-01-01T09:00:00Z"));
    let mut tasks = Vec::new();
    for n in 1..=2 {
        let d = Delivery {
            message_id: format!("m{n}"),
            receipt: format!("r{n}"),
            body: body.clone(),
            receive_count: 1,
        };
        assert_eq!(
            r.worker
                .handle(&d, SegmentBudget::new(Duration::from_secs(60)))
                .await,
            Disposition::Ack
        );
        tasks.push(
            r.service
                .store()
                .get(&s.id)
                .await
                .unwrap()
                .unwrap()
                .last_task_id
                .unwrap(),
        );
    }
    assert_eq!(tasks[0], tasks[1]);
    let active = r.store.active_tasks(100).await.unwrap();
    assert_eq!(active.len(), 1, "one task: {active:?}");
    // A firing without a scheduled time falls back to the minute: another task.
    let d = Delivery {
        message_id: "m3".into(),
        receipt: "r3".into(),
        body: firing(&s.id, None),
        receive_count: 1,
    };
    assert_eq!(
        r.worker
            .handle(&d, SegmentBudget::new(Duration::from_secs(60)))
            .await,
        Disposition::Ack
    );
    assert_eq!(r.store.active_tasks(100).await.unwrap().len(), 2);
}

#[tokio::test(flavor = "multi_thread")]
async fn firings_of_deleted_or_unknown_schedules_are_dropped() {
    let r = rig().await;
    let s = r
        .service
        .create(schedule("rate(5 minutes)", "x", ScheduleKind::Task, None))
        .await
        .unwrap();
    r.service
        .delete(&s.id, "someone-else", false)
        .await
        .expect_err("not the owner");
    r.service.delete(&s.id, "api", false).await.unwrap();
    assert!(!r.scheduler.exists(&s.id).await.unwrap());
    let d = Delivery {
        message_id: "m".into(),
        receipt: "r".into(),
        body: firing(&s.id, Some("2030-01-01T09:00:00Z")),
        receive_count: 1,
    };
    assert_eq!(
        r.worker
            .handle(&d, SegmentBudget::new(Duration::from_secs(60)))
            .await,
        Disposition::Ack
    );
    assert!(r.store.active_tasks(100).await.unwrap().is_empty());
    let bad = Delivery {
        body: firing("../etc", None),
        ..d
    };
    assert!(matches!(
        r.worker
            .handle(&bad, SegmentBudget::new(Duration::from_secs(60)))
            .await,
        Disposition::Poison { .. }
    ));
}

#[tokio::test(flavor = "multi_thread")]
async fn repair_rolls_back_pending_and_finishes_deleting_schedules() {
    let r = rig().await;
    let store = r.service.store();
    // A create that crashed after writing its plan, a minute and more ago.
    let mut pending = schedule("rate(5 minutes)", "x", ScheduleKind::Task, None);
    pending.created_at = pending.created_at - Duration::from_secs(120);
    assert!(store.create(&mut pending).await.unwrap());
    r.scheduler
        .upsert(&baton_schedule::plan_for(&pending))
        .await
        .unwrap();
    // A create still in flight: left alone.
    let mut young = schedule("rate(5 minutes)", "y", ScheduleKind::Task, None);
    assert!(store.create(&mut young).await.unwrap());
    // A delete that crashed after marking the record.
    let deleting = r
        .service
        .create(schedule("rate(5 minutes)", "z", ScheduleKind::Task, None))
        .await
        .unwrap();
    store
        .update(&deleting.id, |s| {
            s.state = ScheduleState::Deleting;
            true
        })
        .await
        .unwrap();

    assert_eq!(r.service.repair(Instant::now()).await.unwrap(), 2);
    assert!(store.get(&pending.id).await.unwrap().is_none());
    assert!(!r.scheduler.exists(&pending.id).await.unwrap());
    assert!(store.get(&deleting.id).await.unwrap().is_none());
    assert!(!r.scheduler.exists(&deleting.id).await.unwrap());
    assert_eq!(
        store.get(&young.id).await.unwrap().unwrap().state,
        ScheduleState::Pending
    );
    assert_eq!(r.service.repair(Instant::now()).await.unwrap(), 0);
}

#[tokio::test(flavor = "multi_thread")]
async fn tools_create_for_the_asking_user_and_only_the_owner_deletes() {
    use baton_core::{EntryKind, Limits, Origin, Task, TaskId, ToolContext};
    let r = rig().await;
    let tools =
        baton_tools::ScheduleTools::new(r.service.clone(), r.store.clone(), Vec::new()).tools();
    let tool = |name: &str| {
        tools
            .iter()
            .find(|t| t.spec().name == name)
            .unwrap()
            .clone()
    };
    let slack_task = |user: &str| {
        let origin = Origin::Slack {
            team_id: "T1".into(),
            channel: "C9".into(),
            thread_ts: "17.5".into(),
            user: user.into(),
            channel_type: None,
        };
        Task::new(
            TaskId::generate(),
            "default",
            origin,
            None,
            Limits::default(),
            now_ms(),
        )
    };
    let alice = slack_task("UALICE");
    let bob = slack_task("UBOB");
    for t in [&alice, &bob] {
        r.store
            .create(
                t,
                vec![EntryKind::UserMessage {
                    text: "hi".into(),
                    from: None,
                }],
                None,
            )
            .await
            .unwrap();
    }
    let args = serde_json::json!({"expression": "cron(0 9 ? * MON-FRI *)", "timezone": "Europe/Berlin",
        "instruction": "standup reminder", "kind": "heartbeat"});
    let ctx = ToolContext::new(alice.id.clone(), 1, "call_1");
    let out = tool("schedule_create").call(args.clone(), &ctx).await;
    assert!(!out.is_error, "{}", out.content);
    // A retried call (same idempotency key) makes no second schedule.
    let again = tool("schedule_create").call(args, &ctx).await;
    assert!(!again.is_error, "{}", again.content);
    let all = r.service.store().list().await.unwrap();
    assert_eq!(all.len(), 1);
    let s = &all[0];
    assert_eq!(s.owner, "slack:T1:UALICE");
    assert_eq!(s.kind, ScheduleKind::Heartbeat);
    assert_eq!(
        s.target,
        Some(ScheduleTarget {
            slack_channel: "C9".into(),
            thread_ts: Some("17.5".into())
        })
    );

    let bob_ctx = ToolContext::new(bob.id.clone(), 1, "call_1");
    let listed = tool("schedule_list")
        .call(serde_json::json!({}), &bob_ctx)
        .await;
    assert!(
        !listed.content.contains(&s.id),
        "bob does not see alice's schedules"
    );
    let refused = tool("schedule_delete")
        .call(serde_json::json!({"schedule_id": s.id}), &bob_ctx)
        .await;
    assert!(
        refused.is_error && refused.content.contains("only its owner"),
        "{}",
        refused.content
    );
    let bad = tool("schedule_create")
        .call(
            serde_json::json!({"expression": "rate(1 hours)", "instruction": "x"}),
            &bob_ctx,
        )
        .await;
    assert!(
        bad.is_error && bad.content.contains("invalid `expression`"),
        "{}",
        bad.content
    );

    let listed = tool("schedule_list")
        .call(serde_json::json!({}), &ctx)
        .await;
    assert!(listed.content.contains(&s.id));
    let deleted = tool("schedule_delete")
        .call(serde_json::json!({"schedule_id": s.id}), &ctx)
        .await;
    assert!(!deleted.is_error, "{}", deleted.content);
    assert!(r.service.store().list().await.unwrap().is_empty());
    assert!(!r.scheduler.exists(&s.id).await.unwrap());
}
