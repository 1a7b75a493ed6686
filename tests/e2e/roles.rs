//! Roles end to end (the real `baton dev`, the fake Slack, the scripted
//! model): a role from a Slack user group named in `approval.approvers`
//! lets the group's members decide approvals of tasks they did not ask
//! for; anyone else's click changes nothing; a role the agents file does
//! not declare, named in `approvers` or `BATON_ADMINS`, stops the start.

use crate::common::{Backend, Options, TestApp};
use serde_json::{json, Value};
use std::time::Duration;

const LONG: Duration = Duration::from_secs(60);
/// The on-call people's Slack user group.
const GROUP: &str = "S0ONCALL1";
const AGENTS: &str = "[roles.oncall]\nusergroups = [\"S0ONCALL1\"]\n\n\
                      [defaults.approval]\napprovers = [\"oncall\"]\n";

fn mention(event_id: &str, ts: &str, text: &str) -> Vec<u8> {
    serde_json::to_vec(&json!({
        "type": "event_callback", "team_id": "T1", "api_app_id": "A1",
        "event_id": event_id, "event_time": 1_700_000_000,
        "event": {"type": "app_mention", "user": "U1", "text": format!("<@UBOT> {text}"),
                  "ts": ts, "channel": "C1", "event_ts": ts}
    }))
    .unwrap()
}

/// `user` clicks `action` (`approve` or `deny`) on the approval message
/// `message_ts` whose buttons carry `value`; Slack's answer.
async fn click(app: &TestApp, user: &str, action: &str, message_ts: &str, value: &str) -> Value {
    let payload = json!({
        "type": "block_actions",
        "user": {"id": user, "team_id": "T1"},
        "team": {"id": "T1"},
        "channel": {"id": "C1"},
        "container": {"message_ts": message_ts, "channel_id": "C1"},
        "actions": [{"action_id": action, "block_id": "b", "value": value, "type": "button"}]
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

async fn a_user_group_role_may_approve(backend: Backend) {
    let server = wiremock::MockServer::start().await;
    wiremock::Mock::given(wiremock::matchers::method("DELETE"))
        .and(wiremock::matchers::path("/users/7"))
        .respond_with(wiremock::ResponseTemplate::new(200).set_body_string("user 7 deleted"))
        .mount(&server)
        .await;
    let addr = server.address().to_string();
    let app = TestApp::spawn(Options {
        backend,
        extra_env: vec![
            ("BATON_HTTP_ALLOW".into(), addr.clone()),
            ("BATON_AGENTS_TOML".into(), AGENTS.into()),
        ],
        ..Options::default()
    })
    .await;
    // U5 is on call this week; U2 is not.
    app.slack.set_usergroup(GROUP, &["U5", "U9"]);

    // U1 asks for a DELETE, which waits for approval.
    let text = format!(
        "#tool=http_request #args={{\"method\":\"DELETE\",\"url\":\"http://{addr}/users/7\"}}"
    );
    let r = app
        .slack_post(
            "/slack/events",
            &mention("EvRole", "1700000300.000100", &text),
            "application/json",
            &[],
        )
        .await;
    assert_eq!(r.status(), 200);
    let posts = app.slack.wait_for_posts(1, LONG).await;
    let request = &posts[0];
    let blocks = request.blocks.clone().expect("buttons");
    let value = blocks[1]["elements"][0]["value"]
        .as_str()
        .unwrap()
        .to_owned();
    assert_eq!(blocks[1]["elements"][0]["action_id"], "approve");
    let task_id = value.split(':').next().unwrap().to_owned();
    let waiting = app.wait_waiting(&task_id).await;

    // U2 is in no role: their click is ignored and nothing changes.
    let v = click(&app, "U2", "approve", &request.ts, &value).await;
    assert_eq!(
        v,
        json!({"ok": true, "ignored": "only the requester or a configured approver may decide"}),
        "log:\n{}",
        app.log()
    );
    let after = app.task(&task_id).await;
    assert_eq!(after["status"], "waiting", "{after}");
    assert_eq!(after["waiting_for"], waiting["waiting_for"], "{after}");
    assert!(server.received_requests().await.unwrap().is_empty());
    // The group was read from Slack to learn that.
    let lookups = app.slack.calls("usergroups.users.list");
    assert!(
        lookups.iter().all(|c| c["usergroup"] == GROUP) && !lookups.is_empty(),
        "{lookups:?}"
    );

    // U5 is in the group: they did not ask for the task, yet their
    // Approve is taken and the call runs.
    let v = click(&app, "U5", "approve", &request.ts, &value).await;
    assert_eq!(v, json!({"ok": true}), "log:\n{}", app.log());
    let task = app.wait_done(&task_id, LONG).await;
    assert_eq!(task["status"], "succeeded", "{task}\nlog:\n{}", app.log());
    let sent = server.received_requests().await.unwrap();
    assert_eq!(sent.len(), 1, "the DELETE ran once");
    let edited = app
        .slack
        .message("C1", &request.ts)
        .expect("request message");
    assert!(edited.text.contains("Approved by <@U5>"), "{}", edited.text);
}

on_both_backends!(a_user_group_role_may_approve);

#[test]
fn an_undeclared_role_in_approvers_stops_the_start_naming_it() {
    let stderr =
        crate::common::refused_start("[defaults.approval]\napprovers = [\"oncall\"]\n", &[]);
    assert!(
        stderr.contains(
            "defaults.approval.approvers[0]: `oncall` is neither a Slack user id \
             (like U024BE7LH) nor a declared role (declare it with `[roles.oncall]`)"
        ),
        "{stderr}"
    );
    // The same for BATON_ADMINS, where a declared role is accepted.
    let stderr = crate::common::refused_start(
        "[roles.oncall]\nusers = [\"U024BE7LH\"]\n",
        &[("BATON_ADMINS", "oncall,ops")],
    );
    assert!(
        stderr.contains("BATON_ADMINS") && stderr.contains("`ops`"),
        "{stderr}"
    );
    assert!(!stderr.contains("`oncall`"), "{stderr}");
}
