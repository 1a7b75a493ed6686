//! End to end on one machine: the real `baton dev` binary over the
//! embedded backend, a mock LLM speaking all three wire formats, a fake Slack.

use crate::common::{assert_clean_transcript, Backend, Options, TestApp, Wire, TOKEN};
use serde_json::{json, Value};
use std::time::Duration;

const LONG: Duration = Duration::from_secs(60);

async fn multi_segment_task(backend: Backend, wire: Wire) {
    let app = TestApp::spawn(Options {
        backend,
        wire,
        segment_budget_ms: Some(1),
        ..Options::default()
    })
    .await;
    let id = app.submit_ok("#steps=6").await;
    let task = app.wait_done(&id, LONG).await;
    assert_eq!(task["status"], "succeeded", "{task}");
    assert_eq!(task["steps"], 6);
    assert!(
        task["segments"].as_u64().unwrap() >= 5,
        "expected at least 5 segments: {task}"
    );
    assert_eq!(task["result"], "[scripted model] done after 6 steps");
    assert!(task["usage"]["input_tokens"].as_u64().unwrap() > 0);
    let events = app.events(&id).await;
    assert_clean_transcript(&events, 6);
    let handovers = events
        .iter()
        .filter(|e| {
            e["detail"]
                .as_str()
                .is_some_and(|d| d.ends_with("handed over"))
        })
        .count();
    assert!(handovers >= 4, "segments hand over: {handovers}");
    // The trace has the task, its segments, and every call. The last
    // segment writes its span just after the task ends: wait for it.
    let segments = task["segments"].as_u64().unwrap();
    let started = std::time::Instant::now();
    let spans = loop {
        let (status, trace) = app.get(&format!("/tasks/{id}/trace")).await;
        assert_eq!(status, 200);
        let spans = trace["spans"].as_array().cloned().unwrap_or_default();
        let written = spans.iter().filter(|s| s["name"] == "segment").count() as u64;
        if written >= segments || started.elapsed() > LONG {
            break spans;
        }
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    };
    let count = |name: &str| spans.iter().filter(|s| s["name"] == name).count();
    assert_eq!(count("task"), 1);
    assert_eq!(count("segment") as u64, segments);
    assert_eq!(count("llm_call"), 6);
    assert_eq!(count("tool_call"), 5);
}

async fn task_spans_many_segments_openai_wire(backend: Backend) {
    multi_segment_task(backend, Wire::OpenAi).await;
}

async fn task_spans_many_segments_anthropic_wire(backend: Backend) {
    multi_segment_task(backend, Wire::Anthropic).await;
}

async fn task_spans_many_segments_bedrock_wire(backend: Backend) {
    multi_segment_task(backend, Wire::Bedrock).await;
}

async fn idempotency_key_gives_one_task(backend: Backend) {
    let app = TestApp::spawn(Options {
        backend,
        ..Options::default()
    })
    .await;
    let a: Value = app
        .submit("hello there", Some("key-1"))
        .await
        .json()
        .await
        .unwrap();
    let b: Value = app
        .submit("hello there", Some("key-1"))
        .await
        .json()
        .await
        .unwrap();
    assert_eq!(a["task_id"], b["task_id"]);
    let task = app.wait_done(a["task_id"].as_str().unwrap(), LONG).await;
    assert_eq!(task["result"], "[scripted model] You said: hello there");
    assert_eq!(app.llm.request_count(), 1, "one task, one model call");
}

fn mention_event(event_id: &str, ts: &str, text: &str) -> Vec<u8> {
    serde_json::to_vec(&json!({
        "token": "ignored",
        "team_id": "T1",
        "api_app_id": "A1",
        "type": "event_callback",
        "event_id": event_id,
        "event_time": 1_700_000_000,
        "event": {
            "type": "app_mention",
            "user": "U1",
            "text": format!("<@UBOT> {text}"),
            "ts": ts,
            "channel": "C1",
            "event_ts": ts
        }
    }))
    .unwrap()
}

async fn slack_event_delivered_four_times_gives_one_answer(backend: Backend) {
    let app = TestApp::spawn(Options {
        backend,
        ..Options::default()
    })
    .await;
    let body = mention_event(
        "Ev1",
        "1700000000.000100",
        "say **hello**  #reply=**hello** from Baton",
    );
    for retry in 0..4 {
        let retry_num = retry.to_string();
        let extra: Vec<(&str, &str)> = if retry == 0 {
            vec![]
        } else {
            vec![
                ("x-slack-retry-num", &retry_num),
                ("x-slack-retry-reason", "http_timeout"),
            ]
        };
        let r = app
            .slack_post("/slack/events", &body, "application/json", &extra)
            .await;
        assert_eq!(r.status(), 200);
    }
    let posts = app.slack.wait_for_posts(1, LONG).await;
    assert_eq!(posts.len(), 1);
    assert_eq!(posts[0].channel, "C1");
    assert_eq!(
        posts[0].thread_ts.as_deref(),
        Some("1700000000.000100"),
        "answered in the mention's thread"
    );
    // The answer streamed (Markdown) and then shows as the committed
    // answer, converted to mrkdwn.
    let started = std::time::Instant::now();
    loop {
        let shown = app.slack.message("C1", &posts[0].ts).expect("the message");
        if !shown.streaming && shown.text == "*hello* from Baton" {
            break;
        }
        assert!(
            started.elapsed() < LONG,
            "Markdown converted to mrkdwn: {shown:?}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    // Give duplicates every chance to show up before counting.
    let more = app.slack.wait_for_posts(2, Duration::from_secs(3)).await;
    assert_eq!(more.len(), 1, "duplicates must not answer again");
    assert_eq!(app.llm.request_count(), 1);
}

async fn slack_url_verification_and_ignored_events(backend: Backend) {
    let app = TestApp::spawn(Options {
        backend,
        ..Options::default()
    })
    .await;
    let body = serde_json::to_vec(
        &json!({"token": "x", "challenge": "abc123", "type": "url_verification"}),
    )
    .unwrap();
    let r = app
        .slack_post("/slack/events", &body, "application/json", &[])
        .await;
    assert_eq!(r.status(), 200);
    assert_eq!(r.json::<Value>().await.unwrap()["challenge"], "abc123");
    let bot = serde_json::to_vec(&json!({
        "team_id": "T1", "api_app_id": "A1", "type": "event_callback", "event_id": "Ev2", "event_time": 1,
        "event": {"type": "message", "subtype": "bot_message", "bot_id": "B1", "text": "hi", "ts": "1.2", "channel": "D1", "channel_type": "im"}
    }))
    .unwrap();
    let r = app
        .slack_post("/slack/events", &bot, "application/json", &[])
        .await;
    assert_eq!(r.status(), 200);
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert_eq!(app.llm.request_count(), 0, "bot messages are not answered");
}

async fn kill_nine_while_ten_tasks_run_loses_nothing(backend: Backend) {
    let mut app = TestApp::spawn(Options {
        backend,
        segment_budget_ms: Some(1),
        visibility_ms: 1500,
        ..Options::default()
    })
    .await;
    let mut ids = Vec::new();
    for i in 0..10 {
        ids.push(
            app.submit_ok(&format!("#steps=5 #sleep=150 task {i}"))
                .await,
        );
    }
    // Let them get going, then crash in the middle.
    let started = std::time::Instant::now();
    loop {
        let mut progressed = 0;
        let mut midway = 0;
        for id in &ids {
            let steps = app.task(id).await["steps"].as_u64().unwrap_or(0);
            progressed += usize::from(steps >= 1);
            midway += usize::from((1..5).contains(&steps));
        }
        if progressed >= 3 && midway >= 1 {
            break;
        }
        assert!(
            started.elapsed() < LONG,
            "tasks never started:\n{}",
            app.log()
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    app.kill9();
    app.restart();
    for id in &ids {
        let task = app.wait_done(id, Duration::from_secs(120)).await;
        assert_eq!(task["status"], "succeeded", "{task}\n{}", app.log());
        assert_eq!(
            task["steps"],
            5,
            "{task}\n{}",
            app.log()
                .lines()
                .filter(|l| l.contains("WARN") || l.contains("ERROR"))
                .collect::<Vec<_>>()
                .join("\n")
        );
        assert_clean_transcript(&app.events(id).await, 5);
    }
}

async fn cancel_ends_a_running_task(backend: Backend) {
    let app = TestApp::spawn(Options {
        backend,
        ..Options::default()
    })
    .await;
    let id = app.submit_ok("#steps=40 #sleep=100").await;
    let r = app
        .http
        .post(format!("{}/tasks/{id}/cancel", app.url))
        .bearer_auth(TOKEN)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 202);
    let task = app.wait_done(&id, LONG).await;
    assert_eq!(task["status"], "cancelled");
    assert!(task["steps"].as_u64().unwrap() < 40);
    let r = app
        .http
        .post(format!("{}/tasks/{id}/cancel", app.url))
        .bearer_auth(TOKEN)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 202, "cancelling a cancelled task is idempotent");
}

async fn step_limit_fails_the_task_with_a_reason(backend: Backend) {
    let app = TestApp::spawn(Options {
        backend,
        extra_env: vec![("BATON_MAX_STEPS".into(), "3".into())],
        ..Options::default()
    })
    .await;
    let id = app.submit_ok("#steps=10").await;
    let task = app.wait_done(&id, LONG).await;
    assert_eq!(task["status"], "failed");
    assert_eq!(task["steps"], 3);
    assert!(
        task["error"].as_str().unwrap().contains("step limit"),
        "{task}"
    );
}

/// `baton dev` on `backend` with `server` (a loopback HTTP server) allowed
/// to `http_request`, and the server's address.
async fn spawn_allowing(backend: Backend, server: &wiremock::MockServer) -> (TestApp, String) {
    let addr = server.address().to_string();
    let app = TestApp::spawn(Options {
        backend,
        extra_env: vec![("BATON_HTTP_ALLOW".into(), addr.clone())],
        ..Options::default()
    })
    .await;
    (app, addr)
}

async fn http_request_tool_reaches_an_allowed_server_with_idempotency_key(backend: Backend) {
    let server = wiremock::MockServer::start().await;
    wiremock::Mock::given(wiremock::matchers::method("GET"))
        .and(wiremock::matchers::path("/status"))
        .and(wiremock::matchers::header_exists("idempotency-key"))
        .respond_with(wiremock::ResponseTemplate::new(200).set_body_string("all systems nominal"))
        .expect(1)
        .mount(&server)
        .await;
    let (app, addr) = spawn_allowing(backend, &server).await;
    let id = app
        .submit_ok(&format!(
            "#tool=http_request #args={{\"url\":\"http://{addr}/status\"}}"
        ))
        .await;
    let task = app.wait_done(&id, LONG).await;
    assert_eq!(task["status"], "succeeded", "{task}");
    assert!(
        task["result"]
            .as_str()
            .unwrap()
            .contains("all systems nominal"),
        "{task}"
    );
    let key = &server.received_requests().await.unwrap()[0].headers["idempotency-key"];
    assert!(
        key.to_str().unwrap().starts_with(&format!("{id}:1:")),
        "key is task_id:step:call_id"
    );
}

/// A POST (a side effect) waits for a human: nothing is sent until the
/// approvals route approves it, then it is sent once.
async fn a_post_waits_for_approval_then_runs_once(backend: Backend) {
    let server = wiremock::MockServer::start().await;
    wiremock::Mock::given(wiremock::matchers::method("POST"))
        .and(wiremock::matchers::path("/refunds"))
        .respond_with(wiremock::ResponseTemplate::new(201).set_body_string("refund created"))
        .mount(&server)
        .await;
    let (app, addr) = spawn_allowing(backend, &server).await;
    let id = app
        .submit_ok(&format!(
            "#tool=http_request #args={{\"method\":\"POST\",\"url\":\"http://{addr}/refunds\",\"body\":\"{{}}\"}}"
        ))
        .await;
    let task = app.wait_waiting(&id).await;
    let waiting = &task["waiting_for"];
    assert_eq!(waiting["kind"], "approval", "{task}");
    assert_eq!(waiting["tool"], "http_request");
    assert_eq!(
        waiting["summary"],
        format!("POST http://{addr}/refunds body (2 bytes): {{}}"),
        "what will be sent, for the human to judge"
    );
    assert!(
        server.received_requests().await.unwrap().is_empty(),
        "nothing sent before approval"
    );

    let approval = waiting["approval_id"].as_str().unwrap();
    let decide = |approval: String, approve: bool| {
        let app = &app;
        let id = id.clone();
        async move {
            let r = app
                .http
                .post(format!("{}/tasks/{id}/approvals/{approval}", app.url))
                .bearer_auth(TOKEN)
                .json(&json!({"approve": approve}))
                .send()
                .await
                .unwrap();
            r.status().as_u16()
        }
    };
    assert_eq!(decide("ap-9-nope".into(), true).await, 404);
    assert_eq!(decide(approval.to_owned(), true).await, 202);
    let task = app.wait_done(&id, LONG).await;
    assert_eq!(task["status"], "succeeded", "{task}");
    assert!(
        task["result"].as_str().unwrap().contains("refund created"),
        "{task}"
    );
    assert_eq!(server.received_requests().await.unwrap().len(), 1);
    assert_eq!(
        decide(approval.to_owned(), false).await,
        409,
        "decided once"
    );
}

/// The same from Slack: the mention's thread gets Approve / Deny buttons;
/// a stranger's click changes nothing; the requester's Deny is final, the
/// call is not made, the request message shows the decision and the thread
/// gets the answer.
async fn slack_buttons_decide_an_approval(backend: Backend) {
    let server = wiremock::MockServer::start().await;
    let (app, addr) = spawn_allowing(backend, &server).await;
    let text = format!(
        "#tool=http_request #args={{\"method\":\"DELETE\",\"url\":\"http://{addr}/users/7\"}}"
    );
    let body = mention_event("EvApprove", "1700000100.000100", &text);
    let r = app
        .slack_post("/slack/events", &body, "application/json", &[])
        .await;
    assert_eq!(r.status(), 200);
    let posts = app.slack.wait_for_posts(1, LONG).await;
    let request = &posts[0];
    assert_eq!(request.thread_ts.as_deref(), Some("1700000100.000100"));
    let blocks = request.blocks.clone().expect("buttons");
    let value = blocks[1]["elements"][1]["value"]
        .as_str()
        .unwrap()
        .to_owned();
    assert_eq!(blocks[1]["elements"][1]["action_id"], "deny");
    let task_id = value.split(':').next().unwrap().to_owned();
    // The request is posted just before the task records that it waits.
    app.wait_waiting(&task_id).await;

    let click = |user: &str, action: &str| {
        let payload = json!({
            "type": "block_actions",
            "user": {"id": user, "team_id": "T1"},
            "team": {"id": "T1"},
            "channel": {"id": "C1"},
            "container": {"message_ts": request.ts, "channel_id": "C1"},
            "actions": [{"action_id": action, "block_id": "b", "value": value, "type": "button"}]
        });
        baton_slack::testing::interactivity_body(&payload)
    };
    let form = "application/x-www-form-urlencoded";
    let r = app
        .slack_post(
            "/slack/interactivity",
            &click("U_STRANGER", "approve"),
            form,
            &[],
        )
        .await;
    assert_eq!(r.status(), 200);
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(
        app.task(&task_id).await["status"],
        "waiting",
        "a stranger cannot decide"
    );

    let r = app
        .slack_post("/slack/interactivity", &click("U1", "deny"), form, &[])
        .await;
    assert_eq!(r.status(), 200);
    let task = app.wait_done(&task_id, LONG).await;
    assert_eq!(task["status"], "succeeded", "{task}");
    assert!(
        task["result"].as_str().unwrap().contains("denied"),
        "{task}"
    );
    assert!(
        server.received_requests().await.unwrap().is_empty(),
        "the DELETE was never sent"
    );
    let edited = app
        .slack
        .message("C1", &request.ts)
        .expect("request message");
    assert!(edited.text.contains("Denied by <@U1>"), "{}", edited.text);
}

/// The monthly token budget of a workspace, counted in the store: once
/// used up, the next task ends at once with a message saying so.
async fn a_used_up_monthly_budget_stops_the_next_task(backend: Backend) {
    let agents = "[budgets]\nworkspace_monthly_tokens = 10\n";
    let app = TestApp::spawn(Options {
        backend,
        extra_env: vec![("BATON_AGENTS_TOML".into(), agents.into())],
        ..Options::default()
    })
    .await;
    // The first task starts under budget (0 used) and spends far more.
    let first = app.submit_ok("hello").await;
    let task = app.wait_done(&first, LONG).await;
    assert_eq!(task["status"], "succeeded", "{task}");
    let second = app.submit_ok("hello again").await;
    let task = app.wait_done(&second, LONG).await;
    assert_eq!(task["status"], "failed", "{task}");
    let error = task["error"].as_str().unwrap();
    assert!(error.contains("monthly"), "{error}");
    assert_eq!(task["steps"], 0, "no model call was made: {task}");
}

/// `delegate` through the real binary: an agents file names a researcher;
/// the default agent hands it work and reports its answer.
async fn delegate_runs_a_child_task_and_returns_its_answer(backend: Backend) {
    let agents = r#"
[agents.default]
delegates = ["researcher"]

[agents.researcher]
description = "finds facts"
tools = ["current_time"]
"#;
    let app = TestApp::spawn(Options {
        backend,
        extra_env: vec![("BATON_AGENTS_TOML".into(), agents.into())],
        ..Options::default()
    })
    .await;
    let id = app
        .submit_ok(
            r#"#tool=delegate #args={"agent":"researcher","input":"what-is-the-capital-of-France"}"#,
        )
        .await;
    let task = app.wait_done(&id, LONG).await;
    assert_eq!(task["status"], "succeeded", "{task}");
    assert!(
        task.get("children").is_some(),
        "{task}\n{:#?}",
        app.events(&id).await
    );
    let children = task["children"].as_array().expect("children");
    assert_eq!(children.len(), 1, "{task}");
    assert_eq!(children[0]["agent"], "researcher");
    assert_eq!(children[0]["status"], "succeeded");
    let child = app.task(children[0]["task_id"].as_str().unwrap()).await;
    assert_eq!(child["parent_task_id"], id.as_str());
    // The scripted child echoes its input; the parent quotes its tool result.
    let child_answer = child["result"].as_str().unwrap();
    assert!(
        child_answer.contains("what-is-the-capital-of-France"),
        "{child}"
    );
    assert!(
        task["result"].as_str().unwrap().contains(child_answer),
        "the parent got the child's answer: {task}"
    );
}

/// A reply that can never be delivered (Slack unreachable) makes every
/// segment fail; after maxReceiveCount the wake is dead-lettered, and the
/// task is marked failed with the reason.
async fn poison_message_ends_in_the_dlq_and_fails_its_task(backend: Backend) {
    let app = TestApp::spawn(Options {
        backend,
        visibility_ms: 1000,
        extra_env: vec![
            ("BATON_MAX_RECEIVE_COUNT".into(), "2".into()),
            ("SLACK_API_URL".into(), "http://127.0.0.1:9/api".into()),
        ],
        ..Options::default()
    })
    .await;
    let body = mention_event("EvPoison", "1700000001.000100", "hello");
    assert_eq!(
        app.slack_post("/slack/events", &body, "application/json", &[])
            .await
            .status(),
        200
    );
    // The event's thread names its task.
    let store = app.store().await;
    let started = std::time::Instant::now();
    let id = loop {
        if let Some(t) = store.thread("slack:T1:C1:1700000001.000100").await.unwrap() {
            break t.active_task.expect("task on thread");
        }
        assert!(started.elapsed() < LONG, "no task created:\n{}", app.log());
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    let task = app.wait_done(id.as_str(), LONG).await;
    assert_eq!(task["status"], "failed", "{task}");
    let error = task["error"].as_str().unwrap();
    assert!(
        error.contains("gave up after")
            && error.contains("a message to the user could not be delivered"),
        "{error}"
    );
}

/// `sleep` puts the task in `waiting` with no worker, and a timer wakes it.
async fn sleep_waits_at_zero_compute_then_continues(backend: Backend) {
    let app = TestApp::spawn(Options {
        backend,
        ..Options::default()
    })
    .await;
    let id = app.submit_ok(r#"#tool=sleep #args={"seconds":2}"#).await;
    let started = std::time::Instant::now();
    let waiting = loop {
        let t = app.task(&id).await;
        if t["status"] == "waiting" {
            break t;
        }
        assert!(started.elapsed() < LONG, "never waited: {t}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    assert_eq!(waiting["waiting_for"]["kind"], "timer", "{waiting}");
    let task = app.wait_done(&id, LONG).await;
    assert_eq!(task["status"], "succeeded", "{task}");
    assert!(
        task["result"].as_str().unwrap().contains("waited until"),
        "{task}"
    );
    assert_eq!(app.llm.request_count(), 2, "no model call while waiting");
}

/// A transcript far larger than one DynamoDB item, with a single entry
/// larger than the offload threshold.
async fn task_larger_than_one_item_completes(backend: Backend) {
    let app = TestApp::spawn(Options {
        backend,
        ..Options::default()
    })
    .await;
    let big = "lorem ipsum ".repeat(8_000); // ~96 KB: offloaded to the blob store
    let id = app.submit_ok(&format!("#steps=8 {big}")).await;
    let task = app.wait_done(&id, LONG).await;
    assert_eq!(task["status"], "succeeded", "{task}");
    let events = app.events(&id).await;
    assert_clean_transcript(&events, 8);
    let first = events.iter().find(|e| e["type"] == "user_message").unwrap();
    assert_eq!(
        first["text"].as_str().unwrap().len(),
        big.len() + "#steps=8 ".len(),
        "offloaded entry read back whole"
    );
    let input_tokens = task["usage"]["input_tokens"].as_u64().unwrap();
    assert!(
        input_tokens > 8 * 20_000,
        "every step saw the big input: {input_tokens}"
    );
}

mod embedded {
    use super::*;

    #[tokio::test(flavor = "multi_thread")]
    async fn sleep_waits_at_zero_compute_then_continues() {
        super::sleep_waits_at_zero_compute_then_continues(Backend::Embedded).await;
    }

    #[tokio::test(flavor = "multi_thread")]
    async fn task_spans_many_segments_openai_wire() {
        super::task_spans_many_segments_openai_wire(Backend::Embedded).await;
    }

    #[tokio::test(flavor = "multi_thread")]
    async fn task_spans_many_segments_anthropic_wire() {
        super::task_spans_many_segments_anthropic_wire(Backend::Embedded).await;
    }

    #[tokio::test(flavor = "multi_thread")]
    async fn task_spans_many_segments_bedrock_wire() {
        super::task_spans_many_segments_bedrock_wire(Backend::Embedded).await;
    }

    #[tokio::test(flavor = "multi_thread")]
    async fn idempotency_key_gives_one_task() {
        super::idempotency_key_gives_one_task(Backend::Embedded).await;
    }

    #[tokio::test(flavor = "multi_thread")]
    async fn slack_event_delivered_four_times_gives_one_answer() {
        super::slack_event_delivered_four_times_gives_one_answer(Backend::Embedded).await;
    }

    #[tokio::test(flavor = "multi_thread")]
    async fn slack_url_verification_and_ignored_events() {
        super::slack_url_verification_and_ignored_events(Backend::Embedded).await;
    }

    #[tokio::test(flavor = "multi_thread")]
    async fn kill_nine_while_ten_tasks_run_loses_nothing() {
        super::kill_nine_while_ten_tasks_run_loses_nothing(Backend::Embedded).await;
    }

    #[tokio::test(flavor = "multi_thread")]
    async fn cancel_ends_a_running_task() {
        super::cancel_ends_a_running_task(Backend::Embedded).await;
    }

    #[tokio::test(flavor = "multi_thread")]
    async fn step_limit_fails_the_task_with_a_reason() {
        super::step_limit_fails_the_task_with_a_reason(Backend::Embedded).await;
    }

    #[tokio::test(flavor = "multi_thread")]
    async fn http_request_tool_reaches_an_allowed_server_with_idempotency_key() {
        super::http_request_tool_reaches_an_allowed_server_with_idempotency_key(Backend::Embedded)
            .await;
    }

    #[tokio::test(flavor = "multi_thread")]
    async fn a_post_waits_for_approval_then_runs_once() {
        super::a_post_waits_for_approval_then_runs_once(Backend::Embedded).await;
    }

    #[tokio::test(flavor = "multi_thread")]
    async fn slack_buttons_decide_an_approval() {
        super::slack_buttons_decide_an_approval(Backend::Embedded).await;
    }

    #[tokio::test(flavor = "multi_thread")]
    async fn delegate_runs_a_child_task_and_returns_its_answer() {
        super::delegate_runs_a_child_task_and_returns_its_answer(Backend::Embedded).await;
    }

    #[tokio::test(flavor = "multi_thread")]
    async fn a_used_up_monthly_budget_stops_the_next_task() {
        super::a_used_up_monthly_budget_stops_the_next_task(Backend::Embedded).await;
    }

    #[tokio::test(flavor = "multi_thread")]
    async fn task_larger_than_one_item_completes() {
        super::task_larger_than_one_item_completes(Backend::Embedded).await;
    }

    #[tokio::test(flavor = "multi_thread")]
    async fn poison_message_ends_in_the_dlq_and_fails_its_task() {
        super::poison_message_ends_in_the_dlq_and_fails_its_task(Backend::Embedded).await;
    }
}

mod aws {
    use super::*;

    #[tokio::test(flavor = "multi_thread")]
    async fn sleep_waits_at_zero_compute_then_continues() {
        super::sleep_waits_at_zero_compute_then_continues(Backend::Aws).await;
    }

    #[tokio::test(flavor = "multi_thread")]
    async fn task_spans_many_segments_openai_wire() {
        super::task_spans_many_segments_openai_wire(Backend::Aws).await;
    }

    #[tokio::test(flavor = "multi_thread")]
    async fn task_spans_many_segments_anthropic_wire() {
        super::task_spans_many_segments_anthropic_wire(Backend::Aws).await;
    }

    #[tokio::test(flavor = "multi_thread")]
    async fn task_spans_many_segments_bedrock_wire() {
        super::task_spans_many_segments_bedrock_wire(Backend::Aws).await;
    }

    #[tokio::test(flavor = "multi_thread")]
    async fn idempotency_key_gives_one_task() {
        super::idempotency_key_gives_one_task(Backend::Aws).await;
    }

    #[tokio::test(flavor = "multi_thread")]
    async fn slack_event_delivered_four_times_gives_one_answer() {
        super::slack_event_delivered_four_times_gives_one_answer(Backend::Aws).await;
    }

    #[tokio::test(flavor = "multi_thread")]
    async fn slack_url_verification_and_ignored_events() {
        super::slack_url_verification_and_ignored_events(Backend::Aws).await;
    }

    #[tokio::test(flavor = "multi_thread")]
    async fn kill_nine_while_ten_tasks_run_loses_nothing() {
        super::kill_nine_while_ten_tasks_run_loses_nothing(Backend::Aws).await;
    }

    #[tokio::test(flavor = "multi_thread")]
    async fn cancel_ends_a_running_task() {
        super::cancel_ends_a_running_task(Backend::Aws).await;
    }

    #[tokio::test(flavor = "multi_thread")]
    async fn step_limit_fails_the_task_with_a_reason() {
        super::step_limit_fails_the_task_with_a_reason(Backend::Aws).await;
    }

    #[tokio::test(flavor = "multi_thread")]
    async fn http_request_tool_reaches_an_allowed_server_with_idempotency_key() {
        super::http_request_tool_reaches_an_allowed_server_with_idempotency_key(Backend::Aws).await;
    }

    #[tokio::test(flavor = "multi_thread")]
    async fn a_post_waits_for_approval_then_runs_once() {
        super::a_post_waits_for_approval_then_runs_once(Backend::Aws).await;
    }

    #[tokio::test(flavor = "multi_thread")]
    async fn delegate_runs_a_child_task_and_returns_its_answer() {
        super::delegate_runs_a_child_task_and_returns_its_answer(Backend::Aws).await;
    }

    #[tokio::test(flavor = "multi_thread")]
    async fn a_used_up_monthly_budget_stops_the_next_task() {
        super::a_used_up_monthly_budget_stops_the_next_task(Backend::Aws).await;
    }

    #[tokio::test(flavor = "multi_thread")]
    async fn task_larger_than_one_item_completes() {
        super::task_larger_than_one_item_completes(Backend::Aws).await;
    }

    #[tokio::test(flavor = "multi_thread")]
    async fn poison_message_ends_in_the_dlq_and_fails_its_task() {
        super::poison_message_ends_in_the_dlq_and_fails_its_task(Backend::Aws).await;
    }
}
