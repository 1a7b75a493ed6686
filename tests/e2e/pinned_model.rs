//! `POST /tasks` with a `model`: every step of the task asks exactly that
//! model (what `baton eval run --model` and forks rely on), end to end on
//! both backends against the mock LLM server.

use crate::common::{Backend, Options, TestApp};
use serde_json::json;
use std::time::Duration;

async fn a_task_asks_the_model_it_names(backend: Backend) {
    let app = TestApp::spawn(Options {
        backend,
        ..Options::default()
    })
    .await;
    let (status, v) = app
        .post_json(
            "/tasks",
            &json!({"input": "#steps=3 count", "model": "eval-model-b"}),
        )
        .await;
    assert_eq!(status, 202, "{v}");
    let id = v["task_id"].as_str().expect("task_id").to_owned();
    let task = app.wait_done(&id, Duration::from_secs(60)).await;
    assert_eq!(task["status"], "succeeded", "{task}\n{}", app.log());
    assert_eq!(task["model"], "eval-model-b");
    let asked: Vec<String> = app.llm.received().into_iter().map(|r| r.model).collect();
    assert!(asked.len() >= 3, "{asked:?}");
    assert!(asked.iter().all(|m| m == "eval-model-b"), "{asked:?}");

    // A task naming none asks the agent's, and its status says nothing.
    let plain = app.submit_ok("hello").await;
    let task = app.wait_done(&plain, Duration::from_secs(60)).await;
    assert!(task.get("model").is_none(), "{task}");
    let last = app.llm.received().pop().expect("a call");
    assert_ne!(last.model, "eval-model-b");

    for bad in [
        json!(""),
        json!("two words"),
        json!("x".repeat(201)),
        json!(7),
    ] {
        let (status, v) = app
            .post_json("/tasks", &json!({"input": "hi", "model": bad}))
            .await;
        assert_eq!(status, 400, "{bad}: {v}");
    }
}

on_both_backends!(a_task_asks_the_model_it_names);
