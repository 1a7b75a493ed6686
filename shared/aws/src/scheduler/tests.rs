//! Against moto. moto's EventBridge Scheduler (5.x) stores schedules and
//! answers Create/Get/Update/Delete/List with the documented errors
//! (`ConflictException` for an existing name, `ResourceNotFoundException`
//! for a missing one), but it never fires a schedule, does not validate
//! expressions, time zones or ARNs, and drops `ActionAfterCompletion` on
//! update. These tests check what we send; firing is covered by the
//! embedded scheduler's tests.

use super::*;
use crate::testing::MotoServer;
use crate::ResourceNames;
use aws_sdk_scheduler::types::FlexibleTimeWindowMode;

const ROLE: &str = "arn:aws:iam::123456789012:role/baton-scheduler";

async fn setup() -> (MotoServer, EventBridgeScheduler, Client) {
    let moto = MotoServer::start().expect("moto must be installed");
    let cfg = moto.sdk_config().await;
    let env = crate::bootstrap(&cfg, &ResourceNames::for_stack("stest"), 5, 30)
        .await
        .expect("bootstrap");
    let client = crate::scheduler_client(&cfg);
    let s = EventBridgeScheduler::new(client.clone(), env.schedule_group, env.queue_arn, ROLE);
    (moto, s, client)
}

fn plan(name: &str, expression: &str, one_time: bool) -> SchedulePlan {
    SchedulePlan {
        name: name.into(),
        expression: expression.into(),
        timezone: "Europe/Berlin".into(),
        body: format!(r#"{{"kind":"schedule","schedule_id":"{name}"}}"#),
        one_time,
    }
}

#[tokio::test]
async fn creates_updates_and_deletes_schedules_in_the_group() {
    let (_moto, s, client) = setup().await;
    s.upsert(&plan("s1", "cron(0 9 ? * MON-FRI *)", false))
        .await
        .unwrap();
    let got = client
        .get_schedule()
        .name("s1")
        .group_name(s.group())
        .send()
        .await
        .unwrap();
    assert_eq!(got.schedule_expression(), Some("cron(0 9 ? * MON-FRI *)"));
    assert_eq!(got.schedule_expression_timezone(), Some("Europe/Berlin"));
    assert_eq!(
        got.flexible_time_window().map(|w| w.mode().clone()),
        Some(FlexibleTimeWindowMode::Off)
    );
    assert_eq!(got.action_after_completion(), None);
    let target = got.target().expect("target");
    assert!(target.arn().ends_with(":stest-work"), "{}", target.arn());
    assert_eq!(target.role_arn(), ROLE);
    let input: serde_json::Value =
        serde_json::from_str(target.input().unwrap_or_default()).unwrap();
    assert_eq!(input["schedule_id"], "s1");
    assert_eq!(input["scheduled_time"], SCHEDULED_TIME_PLACEHOLDER);

    // Upsert of an existing name updates it.
    s.upsert(&plan("s1", "rate(5 minutes)", false))
        .await
        .unwrap();
    let got = client
        .get_schedule()
        .name("s1")
        .group_name(s.group())
        .send()
        .await
        .unwrap();
    assert_eq!(got.schedule_expression(), Some("rate(5 minutes)"));

    s.delete("s1").await.unwrap();
    s.delete("s1").await.unwrap(); // a missing schedule is fine
    let gone = client
        .get_schedule()
        .name("s1")
        .group_name(s.group())
        .send()
        .await;
    assert!(gone.is_err());
}

#[tokio::test]
async fn one_time_schedules_delete_themselves_after_completion() {
    let (_moto, s, client) = setup().await;
    s.upsert(&plan("once", "at(2030-01-01T09:00:00)", true))
        .await
        .unwrap();
    let got = client
        .get_schedule()
        .name("once")
        .group_name(s.group())
        .send()
        .await
        .unwrap();
    assert_eq!(
        got.action_after_completion(),
        Some(&ActionAfterCompletion::Delete)
    );
}

#[tokio::test]
async fn other_bodies_are_sent_unchanged() {
    let wake = r#"{"task_id":"0190c0de-0000-7000-8000-000000000000"}"#;
    assert_eq!(target_input(wake), wake);
    assert_eq!(target_input("not json"), "not json");
}

#[tokio::test]
async fn a_missing_group_is_an_error_not_a_silent_success() {
    let (_moto, s, client) = setup().await;
    let other = EventBridgeScheduler::new(
        client,
        "no-such-group",
        "arn:aws:sqs:us-east-1:123456789012:q",
        ROLE,
    );
    let _ = s;
    assert!(other
        .upsert(&plan("x", "rate(1 hour)", false))
        .await
        .is_err());
}
