//! `baton bench --wake-entries N`: the time from a wake message to the
//! first model request, for a task whose transcript already holds N
//! entries, through the real worker on either backend.
//!
//! The transcript is what the loop leaves after a long run: tool steps of
//! 1 KB results, compacted along the way (a summary every 40 entries, as
//! compaction keeps the context near 50 messages), and a new message from
//! the user last, so the wake's first action is a model call. What is
//! measured: reading the task, taking the lease, reading the transcript,
//! the tool listing, the decision and building the request — until the
//! model is asked.

use anyhow::Context as _;
use async_trait::async_trait;
use baton_agent::{SegmentBudget, Worker, WorkerSettings};
use baton_core::{
    Completion, CompletionRequest, Delivery, EntryKind, LlmError, LlmProvider, NoReplies, TaskId,
    TaskStore, ToolCall, Usage, Wake,
};
use baton_settings::{AgentConfig, Agents};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// A model that notes when it is first asked, then answers at once.
#[derive(Default)]
struct FirstRequest(Mutex<Option<Instant>>);

#[async_trait]
impl LlmProvider for FirstRequest {
    fn name(&self) -> &str {
        "bench"
    }

    async fn complete(&self, _: &CompletionRequest) -> Result<Completion, LlmError> {
        if let Ok(mut at) = self.0.lock() {
            at.get_or_insert_with(Instant::now);
        }
        Ok(Completion {
            content: "done".into(),
            ..Completion::default()
        })
    }
}

/// The entries of a task `n` entries long (`n` ≥ 2), as described above.
fn history(n: usize) -> Vec<EntryKind> {
    let mut entries = vec![EntryKind::UserMessage {
        text: "Research the question and report.".into(),
        from: None,
    }];
    let mut step = 0;
    while entries.len() + 3 <= n {
        if entries.len() % 40 >= 38 {
            entries.push(EntryKind::Summary {
                text: "The work so far: pages read, notes taken. ".repeat(20),
                through_seq: entries.len() as u64 - 10,
            });
            continue;
        }
        step += 1;
        let call_id = format!("call_{step}");
        entries.push(EntryKind::AssistantMessage {
            step,
            text: String::new(),
            tool_calls: vec![ToolCall {
                id: call_id.clone(),
                name: "current_time".into(),
                arguments: serde_json::json!({}),
            }],
            usage: Usage::default(),
            model: "bench".into(),
        });
        entries.push(EntryKind::ToolResult {
            step,
            call_id,
            name: "current_time".into(),
            content: "r".repeat(1024),
            is_error: false,
            truncated_chars: 0,
        });
    }
    while entries.len() + 1 < n {
        entries.push(EntryKind::Status {
            status: baton_core::TaskStatus::Running,
            detail: "segment handed over".into(),
        });
    }
    entries.push(EntryKind::UserMessage {
        text: "And now the summary, please.".into(),
        from: None,
    });
    entries
}

/// A task with `n` entries in `store`, queued. Entries are added 20 at a
/// time: the embedded table, like DynamoDB before 2022, takes
/// at most 25 items in a transaction.
async fn seeded_task(store: &TaskStore, n: usize) -> anyhow::Result<TaskId> {
    let task = super::bench_task(10_000);
    let mut chunks = history(n.max(2));
    let rest = chunks.split_off(1);
    store.create(&task, chunks, None).await?;
    for chunk in rest.chunks(20) {
        store
            .update(&task.id, None, |_| Ok(Some(chunk.to_vec())))
            .await?;
    }
    Ok(task.id)
}

/// Wake → first model request for `runs` tasks of `entries` entries on the
/// table and blobs of `stack`; the sorted times.
pub(crate) async fn run(
    stack: &super::load::Stack,
    entries: usize,
    runs: usize,
) -> anyhow::Result<Vec<Duration>> {
    let store = TaskStore::new(stack.table.clone(), stack.blobs.clone());
    let mut agent = AgentConfig::new("default", "bench");
    agent.tools = Some(Vec::new());
    let mut times = Vec::with_capacity(runs);
    // One warm-up run, not counted: first-use costs (connections, SQLite
    // statements) are not what a warm worker pays.
    for i in 0..=runs {
        let model = Arc::new(FirstRequest::default());
        let worker = Worker::new(
            store.clone(),
            stack.queue.clone(),
            model.clone(),
            Vec::new(),
            Agents::new(agent.clone(), Vec::new()),
            Arc::new(NoReplies),
            WorkerSettings::default(),
        );
        let id = seeded_task(&store, entries).await?;
        let delivery = Delivery {
            message_id: format!("bench-{i}"),
            receipt: format!("bench-{i}"),
            body: Wake::new(id.clone(), "bench").to_body(),
            receive_count: 1,
        };
        let woken = Instant::now();
        worker
            .handle(&delivery, SegmentBudget::new(Duration::from_secs(600)))
            .await;
        let asked = model
            .0
            .lock()
            .ok()
            .and_then(|at| *at)
            .context("the model was never asked")?;
        if i > 0 {
            times.push(asked.duration_since(woken));
        }
    }
    times.sort();
    Ok(times)
}
