//! `baton bench --conversation 5,50,500`: one conversation of N messages,
//! each sent with `POST /tasks` on the same `thread` through the real
//! ingest handler and answered by the real worker (an instant model), over
//! the embedded backend wrapped in the request-counting table of
//! `--count-requests`. For each message it measures what accepting it cost
//! the ingest (items written, transactions, reads) and the input tokens of
//! the task's first model call, by the context pipeline's own estimator.
//! Both must stay flat however long the conversation grows.

use super::requests::{Counter, CountingTable};
use anyhow::Context as _;
use baton_agent::context::build_context;
use baton_agent::{SegmentBudget, Worker, WorkerSettings};
use baton_core::{
    Entry, EntryKind, NoReplies, Table, TaskId, TaskStatus, TaskStore, Usage, WorkQueue,
};
use baton_embedded::{EmbeddedBackend, QueueConfig};
use baton_settings::{AgentConfig, Agents};
use std::sync::Arc;
use std::time::Duration;

const TOKEN: &str = "bench-conversation-token-0123456789ab";
const MODEL: &str = "claude-sonnet-4-5";

/// A user message of realistic length (about 300 characters; numbered
/// with four digits, so every message has the same length).
fn user_text(i: usize) -> String {
    format!(
        "Message {i:04}: can you check the deploy of service-{i:04} and tell me whether the error rate \
went back to normal after the rollback? {}",
        "Some more detail about what I saw in the dashboard. ".repeat(3)
    )
}

/// The answer to every message (about 900 characters).
const ANSWER: &str = "The deploy finished and the error rate is back under 0.1%. \
Here is what I checked and what I found, in a few sentences. Here is what I checked and what I found, in a few sentences. \
Here is what I checked and what I found, in a few sentences. Here is what I checked and what I found, in a few sentences. \
Here is what I checked and what I found, in a few sentences. Here is what I checked and what I found, in a few sentences. \
Here is what I checked and what I found, in a few sentences. Here is what I checked and what I found, in a few sentences. \
Here is what I checked and what I found, in a few sentences. Here is what I checked and what I found, in a few sentences. \
Here is what I checked and what I found, in a few sentences. Here is what I checked and what I found, in a few sentences. \
Here is what I checked and what I found, in a few sentences. Here is what I checked and what I found, in a few sentences.";

/// What one message of the conversation cost.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct MessageCost {
    /// Estimated input tokens of the task's first model call.
    pub tokens: u64,
    /// The model's context window.
    pub window: u64,
    /// Items the ingest wrote to accept the message.
    pub items_written: u64,
    /// Items in the ingest's transactions (all of them: at least the
    /// largest one).
    pub transaction_items: u64,
    /// DynamoDB reads the ingest made (GetItem and Query).
    pub reads: u64,
}

/// The ingest and worker of one conversation, over a counted table.
struct Rig {
    ingest: baton_ingest::Ingest,
    worker: Worker,
    queue: Arc<baton_embedded::EmbeddedQueue>,
    store: TaskStore,
    agent: AgentConfig,
    counts: Counter,
    _dir: super::tempfile_dir::TempDir,
}

fn rig() -> anyhow::Result<Rig> {
    let dir = std::env::temp_dir().join(format!(
        "baton-bench-conversation-{}",
        uuid::Uuid::new_v4().simple()
    ));
    let backend = EmbeddedBackend::open(&dir, QueueConfig::default())
        .context("opening the embedded backend")?;
    let counts = Counter::default();
    let table: Arc<dyn Table> = Arc::new(CountingTable::new(backend.table.clone(), counts.clone()));
    let store = TaskStore::new(table, backend.blobs.clone());
    let queue: Arc<dyn WorkQueue> = backend.queue.clone();
    let agent = AgentConfig::new("default", MODEL);
    let agents = Agents::new(agent.clone(), Vec::new());
    let worker = Worker::new(
        store.clone(),
        queue.clone(),
        Arc::new(super::model::InstantModel {
            name: MODEL,
            steps: 1,
            tools: Vec::new(),
            answer: ANSWER,
            usage: Usage {
                input_tokens: 1500,
                output_tokens: 250,
            },
        }),
        Vec::new(),
        agents.clone(),
        Arc::new(NoReplies),
        WorkerSettings::default(),
    );
    let token = baton_ingest::ApiToken::parse(TOKEN)
        .map_err(|e| anyhow::anyhow!("bench API token: {e}"))?;
    let ingest = baton_ingest::Ingest::new(store.clone(), queue, agents, Some(token), None);
    Ok(Rig {
        ingest,
        worker,
        queue: backend.queue,
        store,
        agent,
        counts,
        _dir: super::tempfile_dir::TempDir(dir),
    })
}

impl Rig {
    /// Runs every wake in the queue, as Lambda's event source mapping would.
    async fn drain(&self) -> anyhow::Result<()> {
        for _ in 0..100 {
            let batch = self.queue.receive(1, Duration::ZERO).await?;
            let Some(delivery) = batch.into_iter().next() else {
                return Ok(());
            };
            self.worker
                .handle(&delivery, SegmentBudget::new(Duration::from_secs(840)))
                .await;
            self.queue.delete(&delivery.receipt).await?;
        }
        anyhow::bail!("the task does not end")
    }

    /// Sends message `i`, has it answered, and says what it cost.
    async fn message(&self, thread: &str, i: usize) -> anyhow::Result<MessageCost> {
        let before = self.counts.snapshot();
        let id: TaskId = super::post_task(&self.ingest, TOKEN, &user_text(i), thread)
            .await
            .with_context(|| format!("message {i} of the conversation"))?;
        let ingest = self.counts.snapshot().since(&before);
        self.drain().await?;
        let task = self
            .store
            .get(&id)
            .await?
            .ok_or_else(|| anyhow::anyhow!("task {id} vanished"))?;
        anyhow::ensure!(
            task.status() == TaskStatus::Succeeded,
            "message {i} ended {:?}: {:?}",
            task.status(),
            task.answer.error
        );
        // The first model call saw the task's entries up to its input.
        let transcript = self.store.transcript(&id).await?;
        let first_call: Vec<Entry> = transcript
            .iter()
            .take_while(|e| !matches!(e.kind, EntryKind::Status { .. }))
            .filter(|e| !matches!(e.kind, EntryKind::AssistantMessage { .. }))
            .cloned()
            .collect();
        let (_, report) = build_context(&self.agent, &first_call, Vec::new());
        Ok(MessageCost {
            tokens: report.estimated_tokens,
            window: report.window_tokens,
            items_written: ingest.transact_items + ingest.put_item + ingest.delete_item,
            transaction_items: ingest.transact_items,
            reads: ingest.get_item + ingest.query + ingest.query_index,
        })
    }
}

/// The cost of each message, 1..=n, of one conversation over HTTP.
pub(crate) async fn per_message(n: usize) -> anyhow::Result<Vec<MessageCost>> {
    let rig = rig()?;
    let thread = format!("bench-conversation-{}", uuid::Uuid::new_v4().simple());
    let mut out = Vec::with_capacity(n);
    for i in 1..=n {
        out.push(rig.message(&thread, i).await?);
    }
    Ok(out)
}

pub(crate) async fn run(lengths: &[usize]) -> anyhow::Result<()> {
    println!(
        "# baton bench --conversation (real ingest and worker, embedded backend; context pipeline estimate, model {MODEL})\n"
    );
    println!("| messages | tokens, message 1 | tokens, message 5 | tokens, message 50 | tokens, last message | most, any message | window | items written to accept message 5 / last | most items in the ingest's transactions, any message | ingest reads, message 5 / last |");
    println!("| ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |");
    for &n in lengths {
        let per = per_message(n).await?;
        let at = |k: usize, f: &dyn Fn(&MessageCost) -> String| {
            per.get(k.wrapping_sub(1)).map_or("—".to_owned(), f)
        };
        let tokens = |c: &MessageCost| c.tokens.to_string();
        let items = |c: &MessageCost| c.items_written.to_string();
        let reads = |c: &MessageCost| c.reads.to_string();
        let most = per.iter().map(|c| c.tokens).max().unwrap_or(0);
        let largest = per.iter().map(|c| c.transaction_items).max().unwrap_or(0);
        let window = per.first().map_or(0, |c| c.window);
        println!(
            "| {n} | {} | {} | {} | {} | {most} | {window} | {} / {} | {largest} | {} / {} |",
            at(1, &tokens),
            at(5, &tokens),
            at(50, &tokens),
            at(n, &tokens),
            at(5, &items),
            at(n, &items),
            at(5, &reads),
            at(n, &reads),
        );
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_long_conversation_costs_what_a_short_one_does() {
        let per = per_message(130).await.unwrap();
        let (t50, window) = (per[49].tokens, per[49].window);
        assert!(t50 < window, "{t50} tokens for message 50, window {window}");
        // Flat once the recap is full: the last message costs no more
        // than the most any of the first 60 did.
        let by_60 = per[..60].iter().map(|c| c.tokens).max().unwrap();
        assert!(per[129].tokens <= by_60, "{} > {by_60}", per[129].tokens);
        // And it does grow at first: the earlier turns are really there.
        assert!(per[4].tokens > per[0].tokens);
        // Accepting a message does the same work at 130 as at 5.
        for (i, c) in per.iter().enumerate().skip(5) {
            assert!(
                c.items_written <= per[4].items_written && c.reads <= per[4].reads,
                "message {}: {c:?}, message 5: {:?}",
                i + 1,
                per[4]
            );
            assert!(c.transaction_items <= 4, "message {}: {c:?}", i + 1);
        }
    }
}
