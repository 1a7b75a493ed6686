//! Cedar tool policies (`[policy]`, docs/policies.md) through the real
//! binary, against the MCP tracker: a `forbid` on `create_issue` when the
//! call's `priority` is `P0` refuses exactly those calls, naming the
//! policy; a `permit` with `@approval("required")` makes a read wait for
//! a human; a `forbid` on `"DELETE"` refuses an `http_request` written
//! `"delete"` (policies see the arguments the call runs with); a policy
//! that does not validate, names an unknown tool or one no call can
//! carry, stops start-up naming its `@id`.

use crate::common::mcp::McpServer;
use crate::common::{refused_start, Backend, Options, TestApp, TOKEN};
use serde_json::json;
use std::time::Duration;

const LONG: Duration = Duration::from_secs(90);

/// The tracker with no approval of its own (`require_approval = []`), so
/// only the policies decide, and `policy` as the `[policy]` text.
fn agents_file(tracker: &str, policy: &str) -> String {
    format!(
        r#"
[mcp.tracker]
url = "{tracker}"
require_approval = []

[agents.default]
tools = ["mcp:tracker", "current_time"]

# The API token's role: a parent of Baton::Api::"default" in the policies.
[roles.automation]
tokens = ["default"]

[policy]
text = '''
{policy}
'''
"#
    )
}

async fn spawn(backend: Backend, agents: String) -> TestApp {
    TestApp::spawn(Options {
        backend,
        extra_env: vec![("BATON_AGENTS_TOML".into(), agents)],
        ..Options::default()
    })
    .await
}

const NO_P0: &str = r#"
@id("everyone") permit(principal, action, resource);

@id("no-p0-issues")
forbid(principal, action == Baton::Action::"call_tool",
       resource == Baton::Tool::"mcp:tracker__create_issue")
when { context.args.priority == "P0" };
"#;

async fn a_forbid_refuses_exactly_the_p0_issues(backend: Backend) {
    let tracker = McpServer::tracker(None, false);
    let app = spawn(backend, agents_file(&tracker.url, NO_P0)).await;

    let p0 = app
        .submit_ok(r#"#tool=tracker__create_issue #args={"title":"Site-down","priority":"P0"}"#)
        .await;
    let task = app.wait_done(&p0, LONG).await;
    assert_eq!(task["status"], "succeeded", "{task}\nlog:\n{}", app.log());
    let result = task["result"].as_str().unwrap_or_default();
    assert!(
        result.contains("refused by policy `no-p0-issues`"),
        "the model read the policy's id: {task}"
    );

    let p2 = app
        .submit_ok(r#"#tool=tracker__create_issue #args={"title":"Typo","priority":"P2"}"#)
        .await;
    let task = app.wait_done(&p2, LONG).await;
    assert_eq!(task["status"], "succeeded", "{task}");
    assert!(
        task["result"]
            .as_str()
            .unwrap_or_default()
            .contains("created issue #1: Typo"),
        "{task}"
    );
    // Without a priority the forbid cannot apply: it runs.
    let none = app
        .submit_ok(r#"#tool=tracker__create_issue #args={"title":"Docs"}"#)
        .await;
    let task = app.wait_done(&none, LONG).await;
    assert!(
        task["result"]
            .as_str()
            .unwrap_or_default()
            .contains("created issue #2: Docs"),
        "{task}"
    );
    let created: Vec<String> = tracker
        .calls_to("create_issue")
        .iter()
        .map(|c| c["args"]["title"].as_str().unwrap_or_default().to_owned())
        .collect();
    assert_eq!(
        created,
        ["Typo", "Docs"],
        "the P0 issue never reached the tracker"
    );
}

async fn a_permit_requiring_approval_waits_for_it(backend: Backend) {
    let tracker = McpServer::tracker(None, false);
    let policy = r#"
@id("searches-ask") @approval("required")
permit(principal in Baton::Role::"automation", action == Baton::Action::"call_tool",
       resource == Baton::Tool::"mcp:tracker__search");
@id("tasks") permit(principal, action == Baton::Action::"start_task", resource);
"#;
    let app = spawn(backend, agents_file(&tracker.url, policy)).await;
    let id = app
        .submit_ok(r#"#tool=tracker__search #args={"query":"printer"}"#)
        .await;
    let task = app.wait_waiting(&id).await;
    assert_eq!(task["waiting_for"]["kind"], "approval", "{task}");
    assert_eq!(task["waiting_for"]["tool"], "tracker__search");
    assert!(
        task["waiting_for"]["summary"]
            .as_str()
            .unwrap_or_default()
            .contains("policy `searches-ask` asks for approval"),
        "{task}"
    );
    assert!(tracker.calls_to("search").is_empty(), "not before approval");
    let approval = task["waiting_for"]["approval_id"]
        .as_str()
        .unwrap_or_default();
    let r = app
        .http
        .post(format!("{}/tasks/{id}/approvals/{approval}", app.url))
        .bearer_auth(TOKEN)
        .json(&json!({"approve": true}))
        .send()
        .await
        .expect("approve");
    assert_eq!(r.status(), 202);
    let task = app.wait_done(&id, LONG).await;
    assert_eq!(
        task["result"], "[scripted model] tool tracker__search said: 3 issues match printer",
        "{task}"
    );
    // Nothing permits `current_time`: refused, saying so.
    let id = app.submit_ok(r#"#tool=current_time #args={}"#).await;
    let task = app.wait_done(&id, LONG).await;
    assert!(
        task["result"]
            .as_str()
            .unwrap_or_default()
            .contains("no policy permits `current_time`"),
        "{task}"
    );
}

async fn a_task_start_a_policy_forbids_fails_naming_it(backend: Backend) {
    let tracker = McpServer::tracker(None, false);
    let policy = r#"
@id("everyone") permit(principal, action, resource);
@id("no-api-tasks") forbid(principal == Baton::Api::"default",
       action == Baton::Action::"start_task", resource == Baton::Agent::"default");
"#;
    let app = spawn(backend, agents_file(&tracker.url, policy)).await;
    let id = app.submit_ok("hello").await;
    let task = app.wait_done(&id, LONG).await;
    assert_eq!(task["status"], "failed", "{task}");
    assert!(
        task.to_string()
            .contains("refused by policy `no-api-tasks`"),
        "{task}"
    );
    assert!(app.llm.received().is_empty(), "the model was never asked");
}

/// The policies decide on the arguments the call runs with: the method
/// upper-cased, the URL parsed. A `"delete"` is the `"DELETE"` a forbid
/// names, and nothing is sent; a GET of the same URL goes through.
async fn a_forbid_on_delete_refuses_a_lowercase_delete(backend: Backend) {
    let api = wiremock::MockServer::start().await;
    wiremock::Mock::given(wiremock::matchers::any())
        .respond_with(wiremock::ResponseTemplate::new(200).set_body_string("the item"))
        .mount(&api)
        .await;
    let agents = r#"
[agents.default]
tools = ["http_request"]

[agents.default.approval]
require = []

[policy]
text = '''
@id("everyone") permit(principal, action, resource);
@id("no-deletes") forbid(principal, action == Baton::Action::"call_tool",
                         resource == Baton::Tool::"http_request")
when { context.args.method == "DELETE" };
'''
"#;
    let app = TestApp::spawn(Options {
        backend,
        extra_env: vec![
            ("BATON_AGENTS_TOML".into(), agents.into()),
            ("BATON_HTTP_ALLOW".into(), api.address().to_string()),
        ],
        ..Options::default()
    })
    .await;
    let port = api.address().port();
    let delete = app
        .submit_ok(&format!(
            r#"#tool=http_request #args={{"method":"delete","url":"HTTP://127.0.0.1:{port}/items/1"}}"#
        ))
        .await;
    let task = app.wait_done(&delete, LONG).await;
    let result = task["result"].as_str().unwrap_or_default();
    assert!(
        result.contains("refused by policy `no-deletes`"),
        "{task}\nlog:\n{}",
        app.log()
    );
    assert!(
        api.received_requests().await.unwrap_or_default().is_empty(),
        "nothing was sent"
    );
    let get = app
        .submit_ok(&format!(
            r#"#tool=http_request #args={{"method":"get","url":"http://127.0.0.1:{port}/items/1"}}"#
        ))
        .await;
    let task = app.wait_done(&get, LONG).await;
    assert!(
        task["result"]
            .as_str()
            .unwrap_or_default()
            .contains("the item"),
        "{task}"
    );
    let sent = api.received_requests().await.unwrap_or_default();
    assert_eq!(
        sent.iter()
            .map(|r| r.method.to_string())
            .collect::<Vec<_>>(),
        ["GET"]
    );
}

#[test]
fn an_invalid_policy_stops_start_up_naming_its_id() {
    let tracker = "http://127.0.0.1:9/mcp";
    let typo = r#"
@id("everyone") permit(principal, action, resource);
@id("quiet-hours") forbid(principal, action == Baton::Action::"call_tool", resource)
when { context.tme.hour >= 22 };
"#;
    let stderr = refused_start(&agents_file(tracker, typo), &[]);
    assert!(stderr.contains("policy `quiet-hours`"), "{stderr}");
    assert!(stderr.contains("does not validate"), "{stderr}");

    let unknown =
        r#"@id("tickets") permit(principal, action, resource == Baton::Tool::"http:tickets");"#;
    let stderr = refused_start(&agents_file(tracker, unknown), &[]);
    assert!(stderr.contains("policy `tickets`"), "{stderr}");
    assert!(stderr.contains("http_tools.tickets"), "{stderr}");

    // Names no call can carry: an MCP tool as the model never sees it
    // (`.` is shown as `_`), a tool no agent has.
    let dotted = r#"@id("issues") forbid(principal, action, resource == Baton::Tool::"mcp:tracker__get.issue");"#;
    let stderr = refused_start(&agents_file(tracker, dotted), &[]);
    assert!(
        stderr.contains("policy `issues` names a tool no call can carry")
            && stderr.contains("`mcp:tracker__get_issue`"),
        "{stderr}"
    );
    let unused =
        r#"@id("web") forbid(principal, action, resource == Baton::Tool::"http_request");"#;
    let stderr = refused_start(&agents_file(tracker, unused), &[]);
    assert!(
        stderr.contains("policy `web` names a tool no call can carry")
            && stderr.contains("no agent has it"),
        "{stderr}"
    );

    let unparsable = "permit(principal, action resource);";
    let stderr = refused_start(&agents_file(tracker, unparsable), &[]);
    assert!(stderr.contains("does not parse"), "{stderr}");
}

on_both_backends!(
    a_forbid_refuses_exactly_the_p0_issues,
    a_permit_requiring_approval_waits_for_it,
    a_task_start_a_policy_forbids_fails_naming_it,
    a_forbid_on_delete_refuses_a_lowercase_delete,
);
