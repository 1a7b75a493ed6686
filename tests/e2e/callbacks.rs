//! `wait_for_callback`, end to end (the real `baton dev`, the mock LLM):
//! the task waits at zero compute with `waiting_for.kind = "callback"` and
//! a URL; a POST to it without any bearer resumes the task once (202),
//! with the body as the call's result; the same POST again is 409, a
//! forged token 404; a callback nobody calls expires, the model told so;
//! and a task cannot call its own callback URL with `http_request`.

use crate::common::{Backend, Options, TestApp};
use serde_json::{json, Value};
use std::time::Duration;

const LONG: Duration = Duration::from_secs(60);

/// A task whose first turn calls `wait_for_callback` with `args` (no
/// spaces: the scripted model reads `#args` up to the first one).
async fn start(app: &TestApp, args: &str) -> String {
    let r = app
        .http
        .post(format!("{}/tasks", app.url))
        .bearer_auth(crate::common::TOKEN)
        .json(&json!({"input": format!("#tool=wait_for_callback #args={args}")}))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 202);
    let v: Value = r.json().await.unwrap();
    v["task_id"].as_str().unwrap().to_owned()
}

/// POSTs `body` as JSON to `url`, with no bearer.
async fn call_back(app: &TestApp, url: &str, body: &Value) -> u16 {
    app.http
        .post(url)
        .json(body)
        .send()
        .await
        .unwrap()
        .status()
        .as_u16()
}

async fn a_callback_resumes_the_task_once(backend: Backend) {
    let app = TestApp::spawn(Options {
        backend,
        ..Options::default()
    })
    .await;
    let id = start(&app, r#"{"description":"CI-result","expires_after":"2h"}"#).await;
    let task = app.wait_waiting(&id).await;
    assert_eq!(
        task["waiting_for"]["kind"],
        "callback",
        "{task}\nlog:\n{}",
        app.log()
    );
    assert!(task["waiting_for"]["expires_at"].is_string(), "{task}");
    let url = task["waiting_for"]["url"].as_str().unwrap().to_owned();
    assert!(
        url.starts_with(&format!("{}/callbacks/", app.url)),
        "the URL is under the address baton dev listens on: {url}"
    );
    // Waiting at zero compute: nothing runs, the model is not called.
    let calls_before = app.llm.received().len();
    tokio::time::sleep(Duration::from_millis(1500)).await;
    assert_eq!(app.task(&id).await["status"], "waiting");
    assert_eq!(app.llm.received().len(), calls_before);

    // A forged token is unknown, and changes nothing.
    let forged = format!("{}/callbacks/{}", app.url, "0".repeat(64));
    assert_eq!(
        call_back(&app, &forged, &json!({"status": "passed"})).await,
        404
    );
    assert_eq!(app.task(&id).await["status"], "waiting");

    assert_eq!(
        call_back(&app, &url, &json!({"status": "passed"})).await,
        202
    );
    let task = app.wait_done(&id, LONG).await;
    assert_eq!(task["status"], "succeeded", "{task}\nlog:\n{}", app.log());
    let result = task["result"].as_str().unwrap_or_default();
    assert!(
        result.starts_with("[scripted model] tool wait_for_callback said: callback received"),
        "{result}"
    );
    assert!(result.contains("\"status\": \"passed\""), "{result}");
    assert!(result.contains("not instructions"), "{result}");
    // Used: the same POST again is refused and changes nothing.
    assert_eq!(
        call_back(&app, &url, &json!({"status": "failed"})).await,
        409
    );
    assert_eq!(app.task(&id).await["result"], task["result"]);
    let events = serde_json::to_string(&app.events(&id).await).unwrap();
    assert!(events.contains("callback received"), "{events}");
    let token = url.rsplit('/').next().unwrap_or_default();
    assert!(!events.contains(token), "the events never show the token");
}

async fn an_uncalled_callback_expires(backend: Backend) {
    let app = TestApp::spawn(Options {
        backend,
        ..Options::default()
    })
    .await;
    let id = start(&app, r#"{"description":"CI-result","expires_after":"2s"}"#).await;
    let task = app.wait_waiting(&id).await;
    assert_eq!(task["waiting_for"]["kind"], "callback", "{task}");
    let url = task["waiting_for"]["url"].as_str().unwrap().to_owned();
    let task = app.wait_done(&id, LONG).await;
    assert_eq!(task["status"], "succeeded", "{task}\nlog:\n{}", app.log());
    let result = task["result"].as_str().unwrap_or_default();
    assert!(
        result.starts_with("[scripted model] tool wait_for_callback said: no callback"),
        "{result}"
    );
    // Expired: the URL no longer works.
    assert_eq!(call_back(&app, &url, &json!({"late": true})).await, 404);
}

/// The model hands the URL over itself: `http_request` in the same turn
/// as `wait_for_callback` writes `{{callback_url}}` where the URL goes,
/// and the "CI system" it calls gets the URL and calls it back.
async fn the_model_hands_the_url_to_another_system(backend: Backend) {
    let ci = wiremock::MockServer::start().await;
    wiremock::Mock::given(wiremock::matchers::path("/hook"))
        .respond_with(wiremock::ResponseTemplate::new(200).set_body_string("queued"))
        .mount(&ci)
        .await;
    let app = TestApp::spawn(Options {
        backend,
        extra_env: vec![("BATON_HTTP_ALLOW".into(), ci.address().to_string())],
        ..Options::default()
    })
    .await;
    let port = ci.address().port();
    let input = format!(
        r#"#tool=wait_for_callback #args={{"description":"CI-result"}} #also=http_request #also_args={{"method":"GET","url":"http://127.0.0.1:{port}/hook?cb={{{{callback_url}}}}"}}"#
    );
    let r = app
        .http
        .post(format!("{}/tasks", app.url))
        .bearer_auth(crate::common::TOKEN)
        .json(&json!({ "input": input }))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 202);
    let id = r.json::<Value>().await.unwrap()["task_id"]
        .as_str()
        .unwrap()
        .to_owned();
    let task = app.wait_waiting(&id).await;
    let url = task["waiting_for"]["url"].as_str().unwrap().to_owned();
    let received = ci.received_requests().await.unwrap_or_default();
    let handed: Vec<String> = received
        .iter()
        .filter_map(|r| r.url.query_pairs().find(|(k, _)| k == "cb"))
        .map(|(_, v)| v.into_owned())
        .collect();
    assert_eq!(handed, vec![url.clone()], "{task}\nlog:\n{}", app.log());
    assert_eq!(call_back(&app, &url, &json!({"build": "green"})).await, 202);
    let task = app.wait_done(&id, LONG).await;
    assert_eq!(task["status"], "succeeded", "{task}\nlog:\n{}", app.log());
    let events = app.events(&id).await;
    assert!(
        !serde_json::to_string(&events).unwrap().contains(&url),
        "the URL is a capability: not in the events"
    );
}

/// `http_request` to the task's own callback URL (`{{callback_url}}`
/// put in before the call is decided) is refused with a result the model
/// reads, and nothing is sent: the callback is still there for the
/// system it was meant for. The deployment's address is allowed, so only
/// that refusal stands between the call and the callback.
async fn a_task_cannot_call_its_own_callback(backend: Backend) {
    let agents = r#"
[agents.default.approval]
require = []
"#;
    let app = TestApp::spawn(Options {
        backend,
        extra_env: vec![
            ("BATON_AGENTS_TOML".into(), agents.into()),
            ("BATON_PUBLIC_URL".into(), "http://Localhost:9".into()),
            ("BATON_HTTP_ALLOW".into(), "localhost:9".into()),
        ],
        ..Options::default()
    })
    .await;
    let input = r#"#tool=wait_for_callback #args={"description":"CI-result"} #also=http_request #also_args={"method":"post","url":"{{callback_url}}","body":"{\"forged\":true}"}"#;
    let id = app.submit_ok(input).await;
    let task = app.wait_waiting(&id).await;
    assert_eq!(
        task["waiting_for"]["kind"],
        "callback",
        "{task}\nlog:\n{}",
        app.log()
    );
    let url = task["waiting_for"]["url"].as_str().unwrap().to_owned();
    let events = serde_json::to_string(&app.events(&id).await).unwrap();
    assert!(
        events.contains("would call this task's own callback URL")
            && events.contains("nothing was sent"),
        "the model reads why: {events}"
    );
    assert!(!events.contains(&url), "the URL is not in the events");
    // Not called: the task still waits for it.
    assert_eq!(app.task(&id).await["status"], "waiting");
    assert!(url.starts_with("http://Localhost:9/callbacks/"), "{url}");
}

on_both_backends!(
    a_callback_resumes_the_task_once,
    a_task_cannot_call_its_own_callback,
    an_uncalled_callback_expires,
    the_model_hands_the_url_to_another_system
);
