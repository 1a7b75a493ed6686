//! "Always in this thread" (issue #26, item 3), end to end on both
//! backends (the real `baton dev`, the fake Slack, the mock LLM): the
//! approval message's third button approves the call and lets later calls
//! of the same kind (for `http_request`, the same method and host) run
//! unasked in that thread only — their approval records name the rule —
//! `status` lists the rule, `forget approvals` removes it, and a click by
//! someone who may not approve changes nothing.

use crate::common::{Backend, Options, TestApp};
use serde_json::{json, Value};
use std::time::Duration;
use wiremock::{Mock, MockServer, ResponseTemplate};

const LONG: Duration = Duration::from_secs(60);
const CHANNEL: &str = "C1";
const THREAD_A: &str = "1700000300.000100";
const THREAD_B: &str = "1700000400.000100";

/// Every GET waits for approval; U0BOSS1 may approve besides the requester.
/// The same GET repeated is what this tests, not a loop to stop.
const AGENTS: &str = r#"
[agents.default.limits]
max_identical_calls = 20

[agents.default.approval]
require = ["http_request:GET"]
approvers = ["U0BOSS1"]
"#;

fn mention(event_id: &str, user: &str, ts: &str, thread_ts: Option<&str>, text: &str) -> Vec<u8> {
    let mut event = json!({"type": "app_mention", "user": user, "text": format!("<@UBOT> {text}"),
                           "ts": ts, "channel": CHANNEL, "event_ts": ts});
    if let Some(t) = thread_ts {
        event["thread_ts"] = json!(t);
    }
    serde_json::to_vec(&json!({
        "type": "event_callback", "team_id": "T1", "api_app_id": "A1",
        "event_id": event_id, "event_time": 1_700_000_000, "event": event
    }))
    .unwrap()
}

async fn send(app: &TestApp, body: &[u8]) -> Value {
    let r = app
        .slack_post("/slack/events", body, "application/json", &[])
        .await;
    assert_eq!(r.status(), 200, "log:\n{}", app.log());
    r.json().await.unwrap()
}

/// The scripted model's input: GET `path` on `server`, `times` turns in a
/// row. The model reads its script from the conversation's first message
/// and counts the turns of the whole conversation (each earlier task adds
/// one): so the Nth task of a thread starts at turn N.
fn gets(server: &MockServer, path: &str, times: u32) -> String {
    format!(
        r#"#tool=http_request #args={{"method":"GET","url":"http://{}/{path}"}} #repeat={times}"#,
        server.address()
    )
}

/// The task running on thread `ts` other than `not`, once there is one.
async fn task_on(app: &TestApp, ts: &str, not: Option<&str>) -> String {
    let key = format!("slack:T1:{CHANNEL}:{ts}");
    let store = app.store().await;
    let started = std::time::Instant::now();
    loop {
        if let Some(id) = store
            .thread(&key)
            .await
            .unwrap()
            .and_then(|t| t.active_task)
            .map(|id| id.to_string())
            .filter(|id| Some(id.as_str()) != not)
        {
            return id;
        }
        assert!(started.elapsed() < LONG, "no task on {key}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// `user` clicks button `action_id` of the approval task `id` waits for.
async fn click(app: &TestApp, user: &str, action_id: &str, id: &str, approval: &str) -> Value {
    let payload = json!({
        "type": "block_actions",
        "user": {"id": user, "team_id": "T1"},
        "team": {"id": "T1"},
        "channel": {"id": CHANNEL},
        "container": {"type": "message", "message_ts": "1700000300.000150",
                      "channel_id": CHANNEL, "thread_ts": THREAD_A},
        "actions": [{"action_id": action_id, "value": format!("{id}:{approval}"),
                     "type": "button", "block_id": format!("approval:{approval}")}]
    });
    let body = baton_slack::testing::interactivity_body(&payload);
    let r = app
        .slack_post(
            "/slack/interactivity",
            &body,
            "application/x-www-form-urlencoded",
            &[],
        )
        .await;
    assert_eq!(r.status(), 200, "log:\n{}", app.log());
    r.json().await.unwrap()
}

/// The approval task `id` waits for, after checking its request message
/// offers the three buttons.
async fn awaited_approval(app: &TestApp, id: &str) -> String {
    let t = app.wait_waiting(id).await;
    assert_eq!(t["waiting_for"]["kind"], "approval", "{t}");
    let approval = t["waiting_for"]["approval_id"].as_str().unwrap().to_owned();
    let started = std::time::Instant::now();
    loop {
        let request = app.slack.posted().into_iter().find(|p| {
            p.blocks
                .as_ref()
                .is_some_and(|b| b.to_string().contains(&approval))
        });
        if let Some(request) = request {
            let blocks = request.blocks.unwrap();
            let labels: Vec<&str> = blocks[1]["elements"]
                .as_array()
                .unwrap()
                .iter()
                .map(|b| b["text"]["text"].as_str().unwrap())
                .collect();
            assert_eq!(labels, ["Approve", "Deny", "Always in this thread"]);
            return approval;
        }
        assert!(started.elapsed() < LONG, "no approval message posted");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

async fn paths(server: &MockServer) -> Vec<String> {
    server
        .received_requests()
        .await
        .unwrap()
        .iter()
        .map(|r| r.url.path().to_owned())
        .collect()
}

/// The notes only their sender sees, newest last.
fn notes(app: &TestApp) -> Vec<String> {
    app.slack
        .calls("chat.postEphemeral")
        .iter()
        .map(|n| n["text"].as_str().unwrap_or_default().to_owned())
        .collect()
}

async fn always_in_this_thread(backend: Backend) {
    let server = MockServer::start().await;
    Mock::given(wiremock::matchers::any())
        .respond_with(ResponseTemplate::new(200).set_body_string("fine"))
        .mount(&server)
        .await;
    let app = TestApp::spawn(Options {
        backend,
        extra_env: vec![
            ("BATON_HTTP_ALLOW".into(), server.address().to_string()),
            ("BATON_AGENTS_TOML".into(), AGENTS.into()),
        ],
        ..Options::default()
    })
    .await;
    let host = server.address().ip().to_string();

    // Thread A: U1's task GETs the same URL three times; the first waits.
    send(
        &app,
        &mention("Ev1", "U1", THREAD_A, None, &gets(&server, "a", 3)),
    )
    .await;
    let first = task_on(&app, THREAD_A, None).await;
    let approval = awaited_approval(&app, &first).await;

    // U2 is neither the requester nor an approver: the click changes
    // nothing, and no rule is kept.
    let v = click(&app, "U2", "always", &first, &approval).await;
    assert_eq!(
        v["ignored"], "only the requester or a configured approver may decide",
        "{v}"
    );
    let t = app.task(&first).await;
    assert_eq!(t["status"], "waiting", "{t}");
    assert!(t["approvals"][0].get("decision").is_none(), "{t}");
    let key = format!("slack:T1:{CHANNEL}:{THREAD_A}");
    let thread = app.store().await.thread(&key).await.unwrap().unwrap();
    assert!(thread.always.is_empty(), "{thread:?}");
    assert!(paths(&server).await.is_empty(), "nothing ran");

    // U1 chooses "Always in this thread": the first GET runs, and the
    // next ones, to the same host, run without asking.
    let v = click(&app, "U1", "always", &first, &approval).await;
    assert_eq!(v, json!({"ok": true}));
    let t = app.wait_done(&first, LONG).await;
    assert_eq!(t["status"], "succeeded", "{t}\nlog:\n{}", app.log());
    assert_eq!(paths(&server).await, ["/a", "/a", "/a"], "{t}");
    let approvals = t["approvals"].as_array().unwrap();
    assert_eq!(approvals.len(), 3, "{t}");
    assert_eq!(approvals[0]["by"], "U1", "{t}");
    assert!(approvals[0].get("rule").is_none(), "a person decided: {t}");
    let rule = format!("always in this thread: http_request GET {host}, by U1");
    for later in &approvals[1..] {
        assert_eq!(later["decision"], "approved", "{t}");
        assert_eq!(later["rule"], json!(rule), "{t}");
    }
    // Only the first was asked in Slack.
    let asked = app
        .slack
        .posted()
        .iter()
        .filter(|p| p.text.contains("Approval needed"))
        .count();
    assert_eq!(asked, 1);
    let events = json!(app.events(&first).await).to_string();
    assert!(
        events.contains(&format!("approved without asking: {rule}")),
        "{events}"
    );

    // `status` in thread A lists the rule.
    send(
        &app,
        &mention("Ev2", "U1", "1700000301.000100", Some(THREAD_A), "status"),
    )
    .await;
    let said = notes(&app).pop().unwrap_or_default();
    assert!(
        said.contains(&format!(
            "Always allowed in this thread: `http_request GET {host}` (by <@U1>)"
        )),
        "{said}"
    );

    // Another thread asks again for the same kind of call.
    send(
        &app,
        &mention("Ev3", "U1", THREAD_B, None, &gets(&server, "a", 1)),
    )
    .await;
    let other = task_on(&app, THREAD_B, None).await;
    awaited_approval(&app, &other).await;
    assert_eq!(paths(&server).await.len(), 3, "thread B waits");

    // A later task in thread A (its turns 2 and 3) runs unasked...
    send(
        &app,
        &mention("Ev4", "U1", "1700000302.000100", Some(THREAD_A), "again"),
    )
    .await;
    let later = task_on(&app, THREAD_A, Some(&first)).await;
    let t = app.wait_done(&later, LONG).await;
    assert_eq!(t["status"], "succeeded", "{t}\nlog:\n{}", app.log());
    assert_eq!(t["approvals"][0]["rule"], json!(rule), "{t}");
    let ran = paths(&server).await.len();
    assert!(ran > 3, "{ran}");

    // ...until `forget approvals`: then it asks again.
    send(
        &app,
        &mention(
            "Ev5",
            "U1",
            "1700000303.000100",
            Some(THREAD_A),
            "forget approvals",
        ),
    )
    .await;
    let said = notes(&app).pop().unwrap_or_default();
    assert!(said.starts_with("Forgot 1 kept approval"), "{said}");
    let thread = app.store().await.thread(&key).await.unwrap().unwrap();
    assert!(thread.always.is_empty(), "{thread:?}");
    send(
        &app,
        &mention(
            "Ev6",
            "U1",
            "1700000304.000100",
            Some(THREAD_A),
            "once more",
        ),
    )
    .await;
    let last = task_on(&app, THREAD_A, Some(&later)).await;
    awaited_approval(&app, &last).await;
    assert_eq!(paths(&server).await.len(), ran, "asked, not run");
}

mod embedded {
    use super::*;

    #[tokio::test(flavor = "multi_thread")]
    async fn always_in_this_thread() {
        super::always_in_this_thread(Backend::Embedded).await;
    }
}

mod aws {
    use super::*;

    #[tokio::test(flavor = "multi_thread")]
    async fn always_in_this_thread() {
        super::always_in_this_thread(Backend::Aws).await;
    }
}
