//! What the worker measures ([`baton_core::metric`]): each event once, for
//! the task's agent, however often its message is delivered again.

use crate::harness::{drain, submit, wake};
use baton_agent::{Worker, WorkerSettings};
use baton_core::metric::{self, Measurement, RecordedMetrics};
use baton_core::{Origin, TaskStore, Tool, ToolContext, ToolOutput, ToolSpec, Wake};
use baton_embedded::{EmbeddedBackend, QueueConfig};
use baton_llm::ScriptedProvider;
use baton_settings::{AgentConfig, Agents};
use std::sync::Arc;

/// A tool that always fails.
struct Broken;

#[async_trait::async_trait]
impl Tool for Broken {
    fn spec(&self) -> ToolSpec {
        ToolSpec {
            name: "broken".into(),
            description: "always fails".into(),
            input_schema: serde_json::json!({"type": "object"}),
        }
    }

    async fn call(&self, _: serde_json::Value, _: &ToolContext) -> ToolOutput {
        ToolOutput::error("it broke")
    }
}

struct Rig {
    _dir: tempfile::TempDir,
    backend: EmbeddedBackend,
    store: TaskStore,
    worker: Worker,
    metrics: Arc<RecordedMetrics>,
}

fn rig() -> Rig {
    let dir = tempfile::tempdir().unwrap();
    let backend = EmbeddedBackend::open(dir.path(), QueueConfig::default()).unwrap();
    let store = TaskStore::new(backend.table.clone(), backend.blobs.clone());
    let metrics = Arc::new(RecordedMetrics::default());
    let worker = Worker::new(
        store.clone(),
        backend.queue.clone(),
        Arc::new(ScriptedProvider::new()),
        vec![Arc::new(Broken) as Arc<dyn Tool>],
        Agents::new(AgentConfig::new("default", "scripted"), Vec::new()),
        Arc::new(baton_core::NoReplies),
        WorkerSettings::default(),
    )
    .with_metrics(metrics.clone());
    Rig {
        _dir: dir,
        backend,
        store,
        worker,
        metrics,
    }
}

fn sums(m: &RecordedMetrics) -> Vec<(&'static str, f64)> {
    metric::ALL
        .iter()
        .map(|k| (k.name, m.sum(*k, Some("default"))))
        .collect()
}

#[tokio::test]
async fn a_task_its_model_calls_and_its_tool_errors_count_once() {
    let r = rig();
    let queue = r.backend.queue.as_ref();
    let id = submit(&r.store, queue, Origin::Http, "#tool=broken #args={}").await;
    drain(&r.worker, queue).await;
    let m = &r.metrics;
    assert_eq!(m.sum(metric::TASKS_SUCCEEDED, Some("default")), 1.0);
    assert_eq!(m.sum(metric::TASKS_FAILED, None), 0.0);
    assert_eq!(m.sum(metric::TOOL_ERRORS, Some("default")), 1.0);
    assert_eq!(m.sum(metric::SEGMENTS, Some("default")), 1.0);
    let calls: Vec<Measurement> = m
        .all()
        .into_iter()
        .filter(|x| x.values().iter().any(|(k, _)| *k == metric::LLM_LATENCY))
        .collect();
    assert_eq!(calls.len(), 2, "the call, then the answer");
    for c in &calls {
        let names: Vec<&str> = c.values().iter().map(|(k, _)| k.name).collect();
        assert_eq!(
            names,
            ["LlmLatency", "InputTokens", "OutputTokens", "CostUsd"]
        );
    }
    for x in m.all() {
        assert_eq!(x.agent(), Some("default"));
        let task_id = x.properties().iter().find(|(k, _)| *k == "task_id");
        assert_eq!(task_id.map(|(_, v)| v.as_str()), Some(id.as_str()));
    }
    // The same wake again: the task has ended, nothing more is counted.
    let before = sums(m);
    wake(queue, &id).await;
    drain(&r.worker, queue).await;
    assert_eq!(sums(m), before);
}

#[tokio::test]
async fn a_cancelled_task_counts_as_cancelled() {
    let r = rig();
    let queue = r.backend.queue.as_ref();
    let id = submit(&r.store, queue, Origin::Http, "hello").await;
    r.store
        .update(&id, None, |t| {
            t.cancel_requested = true;
            Ok(Some(Vec::new()))
        })
        .await
        .unwrap();
    drain(&r.worker, queue).await;
    assert_eq!(r.metrics.sum(metric::TASKS_CANCELLED, Some("default")), 1.0);
    assert_eq!(r.metrics.sum(metric::TASKS_SUCCEEDED, None), 0.0);
    assert_eq!(r.metrics.sum(metric::LLM_LATENCY, None), 0.0);
}

#[tokio::test]
async fn a_dead_letter_fails_its_task_once() {
    let r = rig();
    let id = submit(&r.store, r.backend.queue.as_ref(), Origin::Http, "hello").await;
    let body = Wake::new(id.clone(), "test").to_body();
    // Delivered twice (the first deletion was lost): counted once.
    for _ in 0..2 {
        r.worker.dead_letter(&body, 5).await.unwrap();
    }
    let m = &r.metrics;
    assert_eq!(m.sum(metric::DEAD_LETTERS, Some("default")), 1.0);
    assert_eq!(m.sum(metric::TASKS_FAILED, Some("default")), 1.0);
    // A letter that is no wake names no agent: counted overall.
    r.worker.dead_letter("not a wake", 5).await.unwrap();
    assert_eq!(m.sum(metric::DEAD_LETTERS, None), 2.0);
    let stray = m.all().into_iter().last().unwrap();
    assert_eq!(stray.agent(), None);
}
