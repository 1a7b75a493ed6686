//! Agents configured in a file: validated at start with errors that name
//! the field, and applied to the tasks.

use crate::common::{Options, TestApp};
use std::time::Duration;

#[test]
fn a_bad_agents_file_stops_start_up_naming_the_field() {
    let stderr = crate::common::refused_start("[agents.default.limits]\nmax_steps = 0\n", &[]);
    assert!(
        stderr.contains("agents.default.limits.max_steps"),
        "{stderr}"
    );
    // Said once, not once per level of the error's chain.
    let error = stderr
        .lines()
        .find(|l| l.starts_with("error: "))
        .unwrap_or_default();
    assert_eq!(
        error,
        "error: invalid configuration: agents file: BATON_AGENTS_TOML: \
         agents.default.limits.max_steps: must be at least 1",
        "{stderr}"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn agents_from_the_file_apply_to_tasks() {
    let app = TestApp::spawn(Options {
        extra_env: vec![(
            "BATON_AGENTS_TOML".into(),
            "[agents.default.limits]\nmax_steps = 2\n\n[agents.terse]\nsystem_prompt = \"Be terse.\"\n".into(),
        )],
        ..Options::default()
    })
    .await;
    let id = app.submit_ok("#steps=5").await;
    let task = app.wait_done(&id, Duration::from_secs(60)).await;
    assert_eq!(task["status"], "failed", "{task}");
    assert_eq!(task["steps"], 2);
    let r = app
        .http
        .post(format!("{}/tasks", app.url))
        .bearer_auth(crate::common::TOKEN)
        .json(&serde_json::json!({"input": "hello", "agent": "terse"}))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 202);
    let id: serde_json::Value = r.json().await.unwrap();
    let task = app
        .wait_done(id["task_id"].as_str().unwrap(), Duration::from_secs(60))
        .await;
    assert_eq!(task["status"], "succeeded");
    let sent = app.llm.received();
    assert_eq!(sent.last().unwrap().system, "Be terse.");
}
