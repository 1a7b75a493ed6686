//! People in Slack cannot flood schedules (issue #28, item 2), end to end
//! on both backends: a schedule asked for in Slack waits for approval by
//! default (not over the HTTP API); with approvals lifted by the agent's
//! rules, one person may own `schedules.max_per_user` (10 by default), a
//! workspace `schedules.max_per_team`, and nothing may fire more often
//! than `schedules.min_interval` (15 minutes by default).

use crate::common::{Backend, Options, TestApp};
use serde_json::{json, Value};
use std::time::Duration;

const LONG: Duration = Duration::from_secs(60);
/// Weekly: it does not fire while the test runs.
const WEEKLY: &str = "cron(0 9 ? * MON *)";

/// The scripted model's directive to call `schedule_create` (its
/// arguments may hold no space: JSON escapes them).
fn create(expression: &str) -> String {
    let args =
        json!({"expression": expression, "instruction": "check-the-deploys", "post_to": "none"});
    format!(
        "#tool=schedule_create #args={}",
        args.to_string().replace(' ', "\\u0020")
    )
}

/// Sends a mention from `user` starting a thread at `ts`; its task, once
/// it ended or waits.
async fn mention(app: &TestApp, user: &str, ts: &str, text: &str, wait: bool) -> Value {
    let body = serde_json::to_vec(&json!({
        "type": "event_callback", "team_id": "T1", "api_app_id": "A1",
        "event_id": format!("Ev{user}{ts}"), "event_time": 1_700_000_000,
        "event": {"type": "app_mention", "user": user, "text": format!("<@UBOT> {text}"),
                  "ts": ts, "channel": "C1", "event_ts": ts},
    }))
    .unwrap();
    let r = app
        .slack_post("/slack/events", &body, "application/json", &[])
        .await;
    assert_eq!(r.status(), 200);
    let key = format!("slack:T1:C1:{ts}");
    let store = app.store().await;
    let started = std::time::Instant::now();
    let id = loop {
        if let Some(id) = store
            .thread(&key)
            .await
            .unwrap()
            .and_then(|t| t.active_task)
        {
            break id.to_string();
        }
        assert!(started.elapsed() < LONG, "no task for {ts}: {}", app.log());
        tokio::time::sleep(Duration::from_millis(20)).await;
    };
    if wait {
        app.wait_waiting(&id).await
    } else {
        app.wait_done(&id, LONG).await
    }
}

async fn a_schedule_from_slack_waits_for_approval(backend: Backend) {
    let app = TestApp::spawn(Options {
        backend,
        ..Options::default()
    })
    .await;
    let task = mention(&app, "U1", "1700000001.000100", &create(WEEKLY), true).await;
    assert_eq!(task["waiting_for"]["kind"], "approval", "{task}");
    assert_eq!(task["waiting_for"]["tool"], "schedule_create", "{task}");
    let (_, listed) = app.get("/schedules").await;
    assert!(
        listed["schedules"].as_array().unwrap().is_empty(),
        "{listed}"
    );
    // Over the HTTP API nobody is asked.
    let id = app.submit_ok(&create(WEEKLY)).await;
    let done = app.wait_done(&id, LONG).await;
    assert!(
        done["result"]
            .as_str()
            .unwrap()
            .contains("Created schedule"),
        "{done}"
    );
}

async fn people_are_held_to_the_schedule_limits(backend: Backend) {
    let agents = "[defaults.approval]\nrequire = []\n\n[schedules]\nmax_per_team = 12\n";
    let app = TestApp::spawn(Options {
        backend,
        extra_env: vec![("BATON_AGENTS_TOML".into(), agents.into())],
        ..Options::default()
    })
    .await;
    // Fifteen requests from one person: ten schedules.
    for i in 1..=15 {
        let done = mention(
            &app,
            "U1",
            &format!("17000001{i:02}.000100"),
            &create(WEEKLY),
            false,
        )
        .await;
        let said = done["result"].as_str().unwrap();
        if i <= 10 {
            assert!(said.contains("Created schedule"), "request {i}: {said}");
        } else {
            assert!(
                said.contains("schedules.max_per_user"),
                "request {i}: {said}"
            );
        }
    }
    // Every minute: refused, saying why.
    let done = mention(
        &app,
        "U2",
        "1700000200.000100",
        &create("rate(1 minute)"),
        false,
    )
    .await;
    let said = done["result"].as_str().unwrap();
    assert!(
        said.contains("every 1 minute") && said.contains("schedules.min_interval"),
        "{said}"
    );
    // Another person: two more, then the workspace is full.
    for (i, expect) in [
        (1, "Created schedule"),
        (2, "Created schedule"),
        (3, "schedules.max_per_team"),
    ] {
        let done = mention(
            &app,
            "U2",
            &format!("17000003{i:02}.000100"),
            &create(WEEKLY),
            false,
        )
        .await;
        let said = done["result"].as_str().unwrap();
        assert!(said.contains(expect), "U2 request {i}: {said}");
    }
    let (_, listed) = app.get("/schedules").await;
    assert_eq!(
        listed["schedules"].as_array().unwrap().len(),
        12,
        "{listed}"
    );
    // Operators are not limited: the HTTP API still creates one.
    let r = app
        .http
        .post(format!("{}/schedules", app.url))
        .bearer_auth(crate::common::TOKEN)
        .json(&json!({"expression": "rate(1 minute)", "input": "ping"}))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 201, "{}", r.text().await.unwrap());
}

mod embedded {
    use super::*;

    #[tokio::test(flavor = "multi_thread")]
    async fn a_schedule_from_slack_waits_for_approval() {
        super::a_schedule_from_slack_waits_for_approval(Backend::Embedded).await;
    }

    #[tokio::test(flavor = "multi_thread")]
    async fn people_are_held_to_the_schedule_limits() {
        super::people_are_held_to_the_schedule_limits(Backend::Embedded).await;
    }
}

mod aws {
    use super::*;

    #[tokio::test(flavor = "multi_thread")]
    async fn a_schedule_from_slack_waits_for_approval() {
        super::a_schedule_from_slack_waits_for_approval(Backend::Aws).await;
    }

    #[tokio::test(flavor = "multi_thread")]
    async fn people_are_held_to_the_schedule_limits() {
        super::people_are_held_to_the_schedule_limits(Backend::Aws).await;
    }
}
