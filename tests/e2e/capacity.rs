//! Per-person concurrency caps and budgets (issue #26, item 4), end to end
//! on both backends: with `per_user = 3` a person's fourth task waits in
//! the queue (`queued`, `waiting_for.kind == "capacity"`) while three run,
//! and starts when one ends, none lost; a person's own monthly token
//! budget, or their role's, lets them past the default per-user budget,
//! and so does their own monthly cost budget;
//! over `tasks_per_hour` a new task is refused with a 429 saying why, and
//! a Slack mention is told why in its thread, no task made.

use crate::common::{Backend, Options, TestApp};
use serde_json::{json, Value};
use std::time::Duration;

const LONG: Duration = Duration::from_secs(90);

/// Sends a mention from `user` starting a thread at `ts` (Slack-signed);
/// the response's JSON.
async fn post_mention(app: &TestApp, user: &str, ts: &str, text: &str) -> Value {
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
    r.json().await.unwrap_or(Value::Null)
}

/// Sends a mention from `user` starting a thread at `ts`; its task id.
async fn mention(app: &TestApp, user: &str, ts: &str, text: &str) -> String {
    post_mention(app, user, ts, text).await;
    let key = format!("slack:T1:C1:{ts}");
    let store = app.store().await;
    let started = std::time::Instant::now();
    loop {
        if let Some(id) = store
            .thread(&key)
            .await
            .unwrap()
            .and_then(|t| t.active_task)
        {
            return id.to_string();
        }
        assert!(started.elapsed() < LONG, "no task for {ts}: {}", app.log());
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

async fn a_persons_fourth_task_waits_for_one_of_three_to_end(backend: Backend) {
    let agents = "[limits.concurrency]\nper_user = 3\n";
    let app = TestApp::spawn(Options {
        backend,
        extra_env: vec![("BATON_AGENTS_TOML".into(), agents.into())],
        ..Options::default()
    })
    .await;
    // Each answer takes 4 s: three tasks are still running when the
    // fourth is looked at.
    let mut ids = Vec::new();
    for i in 1..=4 {
        let ts = format!("17000002{i:02}.000100");
        ids.push(mention(&app, "U1", &ts, &format!("#sleep=4000 task-{i}")).await);
    }
    // Watch until one task is seen held back while three run.
    let started = std::time::Instant::now();
    let held = loop {
        let mut tasks: Vec<Value> = Vec::new();
        for id in &ids {
            tasks.push(app.task(id).await);
        }
        let running = tasks.iter().filter(|t| t["status"] == "running").count();
        assert!(running <= 3, "more than three running: {tasks:?}");
        let waiting: Vec<&Value> = tasks
            .iter()
            .filter(|t| t["waiting_for"]["kind"] == "capacity")
            .collect();
        if running == 3 && waiting.len() == 1 {
            let w = waiting[0];
            assert_eq!(w["status"], "queued", "{w}");
            assert_eq!(w["waiting_for"]["scope"], "user", "{w}");
            assert_eq!(w["waiting_for"]["limit"], 3, "{w}");
            break w["task_id"].as_str().unwrap().to_owned();
        }
        assert!(
            started.elapsed() < LONG,
            "never three running and one waiting: {tasks:?}\n{}",
            app.log()
        );
        tokio::time::sleep(Duration::from_millis(25)).await;
    };
    // All four succeed: the held one after a slot freed.
    for id in &ids {
        let done = app.wait_done(id, LONG).await;
        assert_eq!(done["status"], "succeeded", "{done}");
    }
    let held = app.task(&held).await;
    assert!(held["waiting_for"].is_null(), "{held}");
    // The held task started only once another had ended.
    let store = app.store().await;
    let ended_at = |t: &baton_core::Task| t.updated_at;
    let mut others_ended = Vec::new();
    let mut held_started = None;
    for id in &ids {
        let tid = baton_core::TaskId::parse(id).unwrap();
        let task = store.get(&tid).await.unwrap().unwrap();
        let transcript = store.transcript(&tid).await.unwrap();
        if id.as_str() == held["task_id"].as_str().unwrap() {
            held_started = transcript.iter().find_map(|e| match &e.kind {
                baton_core::EntryKind::Status { detail, .. } if detail.starts_with("segment 1") => {
                    Some(e.at)
                }
                _ => None,
            });
            assert!(
                transcript.iter().any(|e| matches!(&e.kind,
                    baton_core::EntryKind::Status { detail, .. } if detail.starts_with("waiting for capacity"))),
                "{transcript:?}"
            );
        } else {
            others_ended.push(ended_at(&task));
        }
    }
    let held_started = held_started.expect("the held task started");
    assert!(
        others_ended.iter().any(|e| *e <= held_started),
        "started before any other ended: {held_started:?} vs {others_ended:?}"
    );
}

async fn a_persons_own_budget_beats_the_default(backend: Backend) {
    // The default per-user budget is one token: spent by anyone's first
    // call. U1's own budget is large.
    // U03HEAVY1's role has a large one too.
    let agents = "[budgets]\nuser_monthly_tokens = 1\n\n\
                  [budgets.users.U1]\nmonthly_tokens = 10000000\n\n\
                  [budgets.roles.heavy]\nmonthly_tokens = 10000000\n\n\
                  [roles.heavy]\nusers = [\"U03HEAVY1\"]\n";
    let app = TestApp::spawn(Options {
        backend,
        extra_env: vec![("BATON_AGENTS_TOML".into(), agents.into())],
        ..Options::default()
    })
    .await;
    for (user, n) in [
        ("U1", 1),
        ("U2", 2),
        ("U03HEAVY1", 3),
        ("U1", 4),
        ("U2", 5),
        ("U03HEAVY1", 6),
    ] {
        let ts = format!("17000003{n:02}.000100");
        let id = mention(&app, user, &ts, &format!("hello-{n}")).await;
        let done = app.wait_done(&id, LONG).await;
        if user != "U2" {
            assert_eq!(done["status"], "succeeded", "{user} #{n}: {done}");
        } else if n == 5 {
            // U2's first task spent the default budget (checked before
            // each call, so that one ran).
            assert_eq!(done["status"], "failed", "{user} #{n}: {done}");
            let error = done["error"].as_str().unwrap_or_default();
            assert!(
                error.contains("you have used your monthly budget of 1 tokens"),
                "{error}"
            );
        }
    }
}

async fn a_persons_own_cost_budget_beats_the_default(backend: Backend) {
    // A dollar a token: any call spends far past the default $0.01 per
    // person, but not U1's own budget.
    let agents =
        "[prices.\"gpt-4o-mini\"]\ninput_per_mtok = 1000000.0\noutput_per_mtok = 1000000.0\n\n\
                  [budgets]\nuser_monthly_cost_usd = 0.01\n\n\
                  [budgets.users.U1]\nmonthly_cost_usd = 1000000000\n";
    let app = TestApp::spawn(Options {
        backend,
        extra_env: vec![("BATON_AGENTS_TOML".into(), agents.into())],
        ..Options::default()
    })
    .await;
    for (user, n) in [("U1", 1), ("U2", 2), ("U1", 3), ("U2", 4)] {
        let ts = format!("17000004{n:02}.000100");
        let id = mention(&app, user, &ts, &format!("hello-{n}")).await;
        let done = app.wait_done(&id, LONG).await;
        if user == "U2" && n == 4 {
            // U2's first task spent past the default (checked before each
            // call, so that one ran); their second is refused.
            assert_eq!(done["status"], "failed", "{user} #{n}: {done}");
            let error = done["error"].as_str().unwrap_or_default();
            assert!(
                error.contains("you have used your monthly budget of $0.01; it resets on "),
                "{error}"
            );
        } else {
            assert_eq!(done["status"], "succeeded", "{user} #{n}: {done}");
            assert!(
                done["cost_usd"].as_f64().unwrap_or_default() > 1.0,
                "{done}"
            );
        }
    }
}

async fn over_the_hourly_rate_a_new_task_is_refused_with_a_message(backend: Backend) {
    let agents = "[limits]\ntasks_per_hour = 2\n";
    let app = TestApp::spawn(Options {
        backend,
        extra_env: vec![("BATON_AGENTS_TOML".into(), agents.into())],
        ..Options::default()
    })
    .await;
    for i in 0..2 {
        let id = app.submit_ok(&format!("hello-{i}")).await;
        app.wait_done(&id, LONG).await;
    }
    let (_, before) = app.get("/tasks").await;
    let r = app.submit("one-too-many", None).await;
    assert_eq!(r.status().as_u16(), 429);
    let body = r.text().await.unwrap();
    assert!(
        body.contains(
            "The HTTP API has started 2 tasks this hour, the limit (`limits.tasks_per_hour`)"
        ),
        "{body}"
    );
    // Nothing was created.
    let (_, after) = app.get("/tasks").await;
    assert_eq!(
        before["tasks"].as_array().map(Vec::len),
        after["tasks"].as_array().map(Vec::len),
        "{after}"
    );
}

async fn over_the_hourly_rate_a_slack_mention_is_refused_in_the_thread(backend: Backend) {
    let agents = "[limits]\ntasks_per_hour = 2\n";
    let app = TestApp::spawn(Options {
        backend,
        extra_env: vec![("BATON_AGENTS_TOML".into(), agents.into())],
        ..Options::default()
    })
    .await;
    for n in 1..=2 {
        let ts = format!("17000005{n:02}.000100");
        let id = mention(&app, "U1", &ts, &format!("hello-{n}")).await;
        app.wait_done(&id, LONG).await;
    }
    let ts = "1700000503.000100";
    let answer = post_mention(&app, "U1", ts, "one-too-many").await;
    assert_eq!(
        answer,
        json!({"ok": true, "ignored": "tasks_per_hour"}),
        "{}",
        app.log()
    );
    // Told, only them, in the thread they started.
    let notes = app.slack.calls("chat.postEphemeral");
    let note = notes
        .iter()
        .find(|n| {
            n["text"].as_str().is_some_and(|t| {
                t.contains(
                    "You have started 2 tasks this hour, the limit (`limits.tasks_per_hour`)",
                )
            })
        })
        .unwrap_or_else(|| panic!("no refusal told: {notes:?}"));
    assert_eq!(note["user"], "U1", "{note}");
    assert_eq!(note["channel"], "C1", "{note}");
    assert_eq!(note["thread_ts"], ts, "{note}");
    // No task for that thread.
    let store = app.store().await;
    let thread = store.thread(&format!("slack:T1:C1:{ts}")).await.unwrap();
    assert!(
        thread.and_then(|t| t.active_task).is_none(),
        "a task was made"
    );
    // Another person is not held by U1's rate.
    let id = mention(&app, "U2", "1700000504.000100", "hello-u2").await;
    assert_eq!(app.wait_done(&id, LONG).await["status"], "succeeded");
}

on_both_backends!(
    a_persons_fourth_task_waits_for_one_of_three_to_end,
    a_persons_own_budget_beats_the_default,
    a_persons_own_cost_budget_beats_the_default,
    over_the_hourly_rate_a_new_task_is_refused_with_a_message,
    over_the_hourly_rate_a_slack_mention_is_refused_in_the_thread
);
