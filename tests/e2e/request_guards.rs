//! Requests that look like others are told apart (issue #28, item 5), end
//! to end on both backends: an Idempotency-Key reused for a different
//! request is a 422, not the first task; an HTTP `thread` cannot take the
//! name of a Slack conversation, and the listing never mixes the two; a
//! Slack click is checked against the workspace of the task it names, and
//! a vote needs an answer given in Slack; a decision made over HTTP shows
//! in Slack as "by the API".

use crate::common::{Backend, Options, TestApp, TOKEN};
use serde_json::{json, Value};
use std::time::Duration;

const LONG: Duration = Duration::from_secs(60);

async fn post_task(app: &TestApp, body: Value, key: &str) -> (u16, Value) {
    let r = app
        .http
        .post(format!("{}/tasks", app.url))
        .bearer_auth(TOKEN)
        .header("Idempotency-Key", key)
        .json(&body)
        .send()
        .await
        .unwrap();
    let status = r.status().as_u16();
    (status, r.json().await.unwrap_or_default())
}

async fn an_idempotency_key_reused_for_another_request_is_refused(backend: Backend) {
    let agents = "[agents.other]\nsystem_prompt = \"Be terse.\"\n";
    let app = TestApp::spawn(Options {
        backend,
        extra_env: vec![("BATON_AGENTS_TOML".into(), agents.into())],
        ..Options::default()
    })
    .await;
    let (status, first) = post_task(&app, json!({"input": "report A"}), "key-1").await;
    assert_eq!(status, 202, "{first}");
    // A retry of the same request is the same task.
    let (status, again) = post_task(&app, json!({"input": "report A"}), "key-1").await;
    assert_eq!((status, &again["task_id"]), (202, &first["task_id"]));
    // The same key with another input, or another agent: refused, naming
    // the conflict and the first task.
    for other in [
        json!({"input": "report B"}),
        json!({"input": "report A", "agent": "other"}),
        json!({"input": "report A", "thread": "t-9"}),
    ] {
        let (status, v) = post_task(&app, other.clone(), "key-1").await;
        assert_eq!(status, 422, "{other}: {v}");
        let error = v["error"].as_str().unwrap();
        assert!(error.contains("Idempotency-Key"), "{error}");
        assert!(
            error.contains(first["task_id"].as_str().unwrap()),
            "{error}"
        );
    }
    let (_, listed) = app.get("/tasks").await;
    assert_eq!(listed["tasks"].as_array().unwrap().len(), 1, "{listed}");
}

async fn http_threads_cannot_pose_as_slack_conversations(backend: Backend) {
    let app = TestApp::spawn(Options {
        backend,
        ..Options::default()
    })
    .await;
    let (status, v) = post_task(
        &app,
        json!({"input": "hi", "thread": "slack:T1:D1"}),
        "key-slack",
    )
    .await;
    assert_eq!(status, 400, "{v}");
    assert!(v["error"].as_str().unwrap().contains("slack:"), "{v}");
    // A Slack DM conversation and an HTTP thread: each filter finds one.
    let dm = serde_json::to_vec(&json!({
        "type": "event_callback", "team_id": "T1", "api_app_id": "A1",
        "event_id": "EvG1", "event_time": 1_700_000_000,
        "event": {"type": "message", "user": "U1", "text": "hello", "ts": "1700000001.000100",
                  "channel": "D1", "channel_type": "im", "event_ts": "1700000001.000100"},
    }))
    .unwrap();
    let r = app
        .slack_post("/slack/events", &dm, "application/json", &[])
        .await;
    assert_eq!(r.status(), 200);
    let (status, http) = post_task(&app, json!({"input": "hi", "thread": "T1:D1"}), "k2").await;
    assert_eq!(status, 202, "{http}");
    let started = std::time::Instant::now();
    loop {
        let (_, slack) = app.get("/tasks?thread=slack%3AT1%3AD1").await;
        let (_, by_http) = app.get("/tasks?thread=T1%3AD1").await;
        let ids = |v: &Value| -> Vec<String> {
            v["tasks"]
                .as_array()
                .unwrap()
                .iter()
                .map(|t| t["task_id"].as_str().unwrap().to_owned())
                .collect()
        };
        if ids(&slack).len() == 1 {
            assert!(!ids(&slack).contains(&http["task_id"].as_str().unwrap().to_owned()));
            assert_eq!(ids(&by_http), vec![http["task_id"].as_str().unwrap()]);
            break;
        }
        assert!(started.elapsed() < LONG, "{slack}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

fn feedback_click(team: &str, user: &str, value: &str) -> Vec<u8> {
    let payload = json!({
        "type": "block_actions",
        "user": {"id": user, "team_id": team},
        "team": {"id": team},
        "channel": {"id": "D1"},
        "container": {"type": "message", "message_ts": "1700000002.000200", "channel_id": "D1"},
        "actions": [{"type": "feedback_buttons", "action_id": "feedback",
                     "block_id": "b", "value": value, "action_ts": "1700000009.000100"}]
    });
    baton_slack::testing::interactivity_body(&payload)
}

async fn click(app: &TestApp, body: &[u8]) -> Value {
    let r = app
        .slack_post(
            "/slack/interactivity",
            body,
            "application/x-www-form-urlencoded",
            &[],
        )
        .await;
    assert_eq!(r.status(), 200);
    r.json().await.unwrap()
}

/// The task a Slack DM in `channel` started, once it ended.
async fn dm_task(app: &TestApp, channel: &str, event_id: &str, ts: &str, text: &str) -> Value {
    let dm = serde_json::to_vec(&json!({
        "type": "event_callback", "team_id": "T1", "api_app_id": "A1",
        "event_id": event_id, "event_time": 1_700_000_000,
        "event": {"type": "message", "user": "U1", "text": text, "ts": ts,
                  "channel": channel, "channel_type": "im", "event_ts": ts},
    }))
    .unwrap();
    let key = format!("slack:T1:{channel}");
    let before = app.store().await.thread(&key).await.unwrap();
    let before = before.and_then(|t| t.active_task);
    let r = app
        .slack_post("/slack/events", &dm, "application/json", &[])
        .await;
    assert_eq!(r.status(), 200);
    let started = std::time::Instant::now();
    loop {
        let thread = app.store().await.thread(&key).await.unwrap();
        if let Some(id) = thread
            .and_then(|t| t.active_task)
            .filter(|id| Some(id) != before.as_ref())
        {
            return app.wait_done(id.as_str(), LONG).await;
        }
        assert!(started.elapsed() < LONG, "no task");
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
}

async fn slack_clicks_need_the_tasks_workspace_and_an_answer(backend: Backend) {
    let app = TestApp::spawn(Options {
        backend,
        ..Options::default()
    })
    .await;
    let answered = dm_task(&app, "D1", "EvK1", "1700000002.000100", "#reply=Deployed.").await;
    let id = answered["task_id"].as_str().unwrap();
    let up = format!("positive:{id}");
    // Another workspace names the task: nothing is recorded.
    let v = click(&app, &feedback_click("T2", "U9", &up)).await;
    assert_eq!(v["ignored"], "the task belongs to another workspace", "{v}");
    assert!(app.task(id).await.get("feedback").is_none());
    // Its own workspace: recorded.
    let v = click(&app, &feedback_click("T1", "U1", &up)).await;
    assert!(v.get("ignored").is_none(), "{v}");
    assert_eq!(app.task(id).await["feedback"].as_array().unwrap().len(), 1);
    // A task that stayed silent gave nothing to rate (another DM: the
    // scripted model reads its directives from a conversation's start).
    let silent = dm_task(&app, "D2", "EvK2", "1700000003.000100", "#reply=NO_REPLY").await;
    let sid = silent["task_id"].as_str().unwrap();
    let v = click(
        &app,
        &feedback_click("T1", "U1", &format!("positive:{sid}")),
    )
    .await;
    assert_eq!(
        v["ignored"], "the task has no answer in Slack to rate",
        "{v}"
    );
    // An HTTP task is no Slack workspace's.
    let http = app.submit_ok("hello").await;
    app.wait_done(&http, LONG).await;
    let v = click(
        &app,
        &feedback_click("T1", "U1", &format!("negative:{http}")),
    )
    .await;
    assert_eq!(v["ignored"], "the task belongs to another workspace", "{v}");
    assert!(app.task(&http).await.get("feedback").is_none());
}

async fn an_approval_over_http_shows_in_slack_as_by_the_api(backend: Backend) {
    let server = wiremock::MockServer::start().await;
    let addr = server.address().to_string();
    let app = TestApp::spawn(Options {
        backend,
        extra_env: vec![("BATON_HTTP_ALLOW".into(), addr.clone())],
        ..Options::default()
    })
    .await;
    let text = format!(
        "<@UBOT> #tool=http_request #args={{\"method\":\"DELETE\",\"url\":\"http://{addr}/users/7\"}}"
    );
    let mention = serde_json::to_vec(&json!({
        "type": "event_callback", "team_id": "T1", "api_app_id": "A1",
        "event_id": "EvA1", "event_time": 1_700_000_000,
        "event": {"type": "app_mention", "user": "U1", "text": text, "ts": "1700000100.000100",
                  "channel": "C1", "event_ts": "1700000100.000100"},
    }))
    .unwrap();
    let r = app
        .slack_post("/slack/events", &mention, "application/json", &[])
        .await;
    assert_eq!(r.status(), 200);
    let posts = app.slack.wait_for_posts(1, LONG).await;
    let request = posts[0].clone();
    let value = request.blocks.clone().expect("buttons")[1]["elements"][0]["value"]
        .as_str()
        .unwrap()
        .to_owned();
    let (task_id, approval_id) = value.split_once(':').unwrap();
    app.wait_waiting(task_id).await;
    let r = app
        .http
        .post(format!(
            "{}/tasks/{task_id}/approvals/{approval_id}",
            app.url
        ))
        .bearer_auth(TOKEN)
        .json(&json!({"approve": true}))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 202);
    app.wait_done(task_id, LONG).await;
    let edited = app.slack.message("C1", &request.ts).unwrap();
    assert!(
        edited.text.contains("Approved by the API"),
        "{}",
        edited.text
    );
    assert!(!edited.text.contains("<@api>"), "{}", edited.text);
}

mod embedded {
    use super::*;

    #[tokio::test(flavor = "multi_thread")]
    async fn an_idempotency_key_reused_for_another_request_is_refused() {
        super::an_idempotency_key_reused_for_another_request_is_refused(Backend::Embedded).await;
    }

    #[tokio::test(flavor = "multi_thread")]
    async fn http_threads_cannot_pose_as_slack_conversations() {
        super::http_threads_cannot_pose_as_slack_conversations(Backend::Embedded).await;
    }

    #[tokio::test(flavor = "multi_thread")]
    async fn slack_clicks_need_the_tasks_workspace_and_an_answer() {
        super::slack_clicks_need_the_tasks_workspace_and_an_answer(Backend::Embedded).await;
    }

    #[tokio::test(flavor = "multi_thread")]
    async fn an_approval_over_http_shows_in_slack_as_by_the_api() {
        super::an_approval_over_http_shows_in_slack_as_by_the_api(Backend::Embedded).await;
    }
}

mod aws {
    use super::*;

    #[tokio::test(flavor = "multi_thread")]
    async fn an_idempotency_key_reused_for_another_request_is_refused() {
        super::an_idempotency_key_reused_for_another_request_is_refused(Backend::Aws).await;
    }

    #[tokio::test(flavor = "multi_thread")]
    async fn http_threads_cannot_pose_as_slack_conversations() {
        super::http_threads_cannot_pose_as_slack_conversations(Backend::Aws).await;
    }

    #[tokio::test(flavor = "multi_thread")]
    async fn slack_clicks_need_the_tasks_workspace_and_an_answer() {
        super::slack_clicks_need_the_tasks_workspace_and_an_answer(Backend::Aws).await;
    }

    #[tokio::test(flavor = "multi_thread")]
    async fn an_approval_over_http_shows_in_slack_as_by_the_api() {
        super::an_approval_over_http_shows_in_slack_as_by_the_api(Backend::Aws).await;
    }
}
