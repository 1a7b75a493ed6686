//! Every wait is kept (#38): a task whose wait is over but whose wake was
//! lost is woken by the reaper, through the real `baton dev`, for each
//! kind of wait a task can be left in with only a wake to end it: a
//! timer, an approval, an `ask_user` reply, a callback and a connection.
//! Each waits with its expiry an hour or a day away (its wake armed for
//! then); the test moves the expiry an hour into the past in the store,
//! as if that time had come and its wake been lost. Nothing but the
//! reaper's sweep can then wake it, and the agent goes on without what
//! it waited for.

use crate::common::{Backend, Options, TestApp};
use baton_core::{Instant, Task, WaitingFor};
use serde_json::json;
use std::time::Duration;

const LONG: Duration = Duration::from_secs(90);

/// A provider and a tool that needs a person's connection to it; nothing
/// listens at its addresses: nobody connects.
const AGENTS: &str = r#"
[oauth.idp]
authorize_url = "http://127.0.0.1:9/authorize"
token_url = "http://127.0.0.1:9/token"
client_id = "baton"
scopes = ["read"]

[http_tools.me]
description = "Who the person is at the identity provider"
method = "GET"
url = "http://127.0.0.1:9/api/me"
auth = { oauth = "idp" }

[connection]
api_may_name_user = true

[agents.default]
tools = ["me", "sleep", "ask_user", "wait_for_callback", "current_time"]

[agents.default.approval]
require = ["current_time"]
"#;

/// Moves the task's wait's expiry to `at`, on the wait and on the record
/// of what it waits for.
fn expire(t: &mut Task, at: Instant) {
    let mut w = t.waiting_for().cloned();
    match &mut w {
        Some(WaitingFor::Timer(timer)) => timer.until = at,
        Some(WaitingFor::Approval(_)) => {
            t.waits.approvals.iter_mut().for_each(|a| a.expires_at = at)
        }
        Some(WaitingFor::Reply(reply)) => {
            reply.expires_at = at;
            t.waits.questions.iter_mut().for_each(|q| q.expires_at = at);
        }
        Some(WaitingFor::Callback(callback)) => {
            callback.expires_at = at;
            t.waits.callbacks.iter_mut().for_each(|c| c.expires_at = at);
        }
        Some(WaitingFor::Connection(connection)) => {
            connection.expires_at = at;
            t.waits
                .connections
                .iter_mut()
                .for_each(|c| c.expires_at = at);
        }
        // Not ended by a time: the reaper's unit tests cover them (a
        // queued task's wake, a child's lost report).
        Some(WaitingFor::Children(_) | WaitingFor::Capacity(_) | WaitingFor::Turn(_)) | None => {
            panic!("no expiry to move: {:?}", t.waiting_for())
        }
    }
    if let Some(w) = w {
        t.wait(w);
    }
}

async fn every_lost_wake_is_found_by_the_reaper(backend: Backend) {
    let app = TestApp::spawn(Options {
        backend,
        extra_env: vec![("BATON_AGENTS_TOML".into(), AGENTS.into())],
        ..Options::default()
    })
    .await;
    // No spaces in `#args`: the scripted model reads it up to the first.
    let waits = [
        (
            "timer",
            r#"#tool=sleep #args={"seconds":3600}"#,
            "tool sleep said",
        ),
        ("approval", "#tool=current_time #args={}", "nobody approved"),
        (
            "reply",
            r#"#tool=ask_user #args={"question":"Which?"}"#,
            "no reply",
        ),
        (
            "callback",
            r#"#tool=wait_for_callback #args={"description":"CI","expires_after":"2h"}"#,
            "nobody called",
        ),
        ("connection", "#tool=me #args={}", "did not connect"),
    ];
    let mut ids = Vec::new();
    for (kind, input, _) in &waits {
        let (status, v) = app
            .post_json("/tasks", &json!({"input": input, "user": "carol"}))
            .await;
        assert_eq!(status, 202, "{v}\nlog:\n{}", app.log());
        let id = v["task_id"].as_str().unwrap().to_owned();
        let task = app.wait_waiting(&id).await;
        assert_eq!(task["waiting_for"]["kind"], *kind, "{task}");
        ids.push(id);
    }
    let calls_before = app.llm.received().len();

    let store = app.store().await;
    let an_hour_ago = Instant::now() - Duration::from_secs(3600);
    for id in &ids {
        store
            .update(&baton_core::TaskId::parse(id).unwrap(), None, |t| {
                expire(t, an_hour_ago);
                Ok(Some(Vec::new()))
            })
            .await
            .unwrap();
    }

    for ((kind, _, told), id) in waits.iter().zip(&ids) {
        let task = app.wait_done(id, LONG).await;
        assert_eq!(
            task["status"],
            "succeeded",
            "the {kind} wait: {task}\nlog:\n{}",
            app.log()
        );
        let result = task["result"].as_str().unwrap_or_default();
        assert!(result.contains(told), "the {kind} wait: {result}");
    }
    assert!(app.llm.received().len() > calls_before);
    assert!(
        app.log().contains("re-sending a lost wake"),
        "the reaper woke them:\n{}",
        app.log()
    );
}

on_both_backends!(every_lost_wake_is_found_by_the_reaper);
