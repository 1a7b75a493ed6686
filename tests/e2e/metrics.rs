//! Metrics through the real binary: with `BATON_METRICS=emf`, `baton dev`
//! prints CloudWatch embedded-metric lines on stdout, as the Lambda
//! functions do. A task that succeeds, one that fails and one whose tool
//! call fails, on two agents: every line is a whole EMF document, and the
//! counts per agent are those of the events. Without the variable,
//! `baton dev` prints none.

use crate::common::{Options, TestApp, TOKEN};
use serde_json::{json, Value};
use std::time::{Duration, Instant};

const LONG: Duration = Duration::from_secs(60);
const NAMESPACE: &str = "Baton/e2e";

const AGENTS: &str = r#"
[agents.default]
tools = ["current_time"]

[agents.researcher]
tools = ["current_time"]
"#;

/// The EMF documents printed so far, each checked against the format:
/// one JSON object a line, a timestamp, the namespace, every dimension of
/// every set present, every declared metric with a numeric value.
fn documents(app: &TestApp) -> Vec<Value> {
    app.stdout()
        .iter()
        .map(|line| {
            let doc: Value = serde_json::from_str(line)
                .unwrap_or_else(|e| panic!("stdout line is not JSON ({e}): {line}"));
            let aws = &doc["_aws"];
            assert!(
                aws["Timestamp"]
                    .as_i64()
                    .is_some_and(|t| t > 1_600_000_000_000),
                "{line}"
            );
            let d = &aws["CloudWatchMetrics"][0];
            assert_eq!(d["Namespace"], NAMESPACE, "{line}");
            for set in d["Dimensions"].as_array().expect("dimension sets") {
                for key in set.as_array().expect("a set") {
                    let key = key.as_str().expect("a dimension name");
                    assert!(doc[key].is_string(), "dimension {key} missing: {line}");
                    assert_ne!(key, "task_id", "a task id is never a dimension");
                }
            }
            for m in d["Metrics"].as_array().expect("metrics") {
                let name = m["Name"].as_str().expect("a metric name");
                assert!(doc[name].is_number(), "{name} has no value: {line}");
            }
            doc
        })
        .collect()
}

/// The sum of `metric` over the documents from `service` (for `agent`).
fn sum(docs: &[Value], service: &str, metric: &str, agent: Option<&str>) -> f64 {
    docs.iter()
        .filter(|d| d["Service"] == service)
        .filter(|d| agent.is_none_or(|a| d["Agent"] == a))
        .filter_map(|d| d[metric].as_f64())
        .sum()
}

/// Polls until `done` holds over the documents (the last metrics of a
/// task are emitted just after its end is visible).
async fn wait_for(app: &TestApp, what: &str, done: impl Fn(&[Value]) -> bool) -> Vec<Value> {
    let started = Instant::now();
    loop {
        let docs = documents(app);
        if done(&docs) {
            return docs;
        }
        assert!(
            started.elapsed() < LONG,
            "{what}; metrics so far:\n{}\nlog:\n{}",
            app.stdout().join("\n"),
            app.log()
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

async fn submit(app: &TestApp, agent: &str, input: &str) -> String {
    let r = app
        .http
        .post(format!("{}/tasks", app.url))
        .bearer_auth(TOKEN)
        .json(&json!({"input": input, "agent": agent}))
        .send()
        .await
        .expect("POST /tasks");
    assert_eq!(r.status(), 202);
    let v: Value = r.json().await.expect("JSON");
    v["task_id"].as_str().expect("task_id").to_owned()
}

#[tokio::test(flavor = "multi_thread")]
async fn tasks_model_calls_and_tool_errors_are_counted_per_agent() {
    let app = TestApp::spawn(Options {
        extra_env: vec![
            ("BATON_AGENTS_TOML".into(), AGENTS.into()),
            ("BATON_METRICS".into(), "emf".into()),
            ("BATON_METRICS_NAMESPACE".into(), NAMESPACE.into()),
        ],
        ..Options::default()
    })
    .await;
    // Two model calls and a tool call that works.
    let ok = submit(&app, "default", "#steps=2").await;
    // The provider refuses every call: the task fails.
    let failed = submit(&app, "default", "#reject_first=50 hello").await;
    // A tool call that fails (no such time zone), then the answer.
    let tool_error = submit(
        &app,
        "researcher",
        "#tool=current_time #args={\"timezone\":\"Mars/Olympus_Mons\"}",
    )
    .await;
    for (id, want) in [
        (&ok, "succeeded"),
        (&failed, "failed"),
        (&tool_error, "succeeded"),
    ] {
        let t = app.wait_done(id, LONG).await;
        assert_eq!(t["status"], want, "{t}");
    }
    let docs = wait_for(&app, "every task's end and segments counted", |d| {
        let ended =
            sum(d, "worker", "TasksSucceeded", None) + sum(d, "worker", "TasksFailed", None);
        ended >= 3.0 && sum(d, "worker", "Segments", None) >= 3.0
    })
    .await;
    let count = |service, metric, agent| sum(&docs, service, metric, Some(agent));

    // Created by ingest, once each.
    assert_eq!(count("ingest", "TasksCreated", "default"), 2.0);
    assert_eq!(count("ingest", "TasksCreated", "researcher"), 1.0);
    // Ended by the worker, once each, as what they ended as.
    assert_eq!(count("worker", "TasksSucceeded", "default"), 1.0);
    assert_eq!(count("worker", "TasksFailed", "default"), 1.0);
    assert_eq!(count("worker", "TasksSucceeded", "researcher"), 1.0);
    assert_eq!(count("worker", "TasksFailed", "researcher"), 0.0);
    assert_eq!(sum(&docs, "worker", "TasksCancelled", None), 0.0);
    // The tool error is the researcher's; the working tool call is none.
    assert_eq!(count("worker", "ToolErrors", "researcher"), 1.0);
    assert_eq!(count("worker", "ToolErrors", "default"), 0.0);
    // Model calls: two answered for each succeeding task, one failed for
    // good (after the provider's retries) for the failing one.
    let calls = |agent: &str| {
        docs.iter()
            .filter(|d| d["Agent"] == agent && d.get("LlmLatency").is_some())
            .count()
    };
    assert_eq!(calls("default"), 2);
    assert_eq!(calls("researcher"), 2);
    assert_eq!(count("worker", "LlmErrors", "default"), 1.0);
    assert!(count("worker", "InputTokens", "default") > 0.0);
    assert!(count("worker", "OutputTokens", "researcher") > 0.0);
    for d in docs.iter().filter(|d| d.get("LlmLatency").is_some()) {
        assert!(d["LlmLatency"].as_f64().is_some_and(|ms| ms >= 0.0), "{d}");
        assert_eq!(
            d["_aws"]["CloudWatchMetrics"][0]["Metrics"][0]["Unit"],
            "Milliseconds"
        );
        assert!(d["CostUsd"].is_number(), "{d}");
    }
    assert!(sum(&docs, "worker", "Segments", None) >= 3.0);
    // The per-service total (what the alarms read) and the split per agent.
    for d in &docs {
        let sets = &d["_aws"]["CloudWatchMetrics"][0]["Dimensions"];
        assert_eq!(*sets, json!([["Service", "Agent"], ["Service"]]), "{d}");
    }
    // Each task is named, as a property.
    for id in [&ok, &failed, &tool_error] {
        assert!(docs.iter().any(|d| d["task_id"] == id.as_str()), "{id}");
    }
    // Nothing secret, nothing the user wrote.
    let all = app.stdout().join("\n");
    for secret in [TOKEN, "sk-test-openai", "Mars/Olympus_Mons", "#steps"] {
        assert!(!all.contains(secret), "{secret} in the metrics");
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn baton_dev_prints_no_metrics_unless_asked() {
    let app = TestApp::spawn(Options::default()).await;
    let id = app.submit_ok("#steps=1").await;
    let t = app.wait_done(&id, LONG).await;
    assert_eq!(t["status"], "succeeded", "{t}");
    // The segment's end comes just after the task's.
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(app.stdout(), Vec::<String>::new());
}
