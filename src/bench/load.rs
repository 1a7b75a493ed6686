//! `baton bench --load N`: N tasks at once through the real ingest handler
//! (`POST /tasks`) and worker, with an instant model, on the embedded
//! backend or on AWS (moto, or a real account): tasks and steps per
//! second, time from submit to answer, errors, where the time goes, and
//! how the table's writes spread over partition keys ([`KeyRecorder`]).
//! Results: docs/performance.md; the capacity model they feed:
//! docs/scale.md.

use super::model::{InstantModel, SizedTool};
use anyhow::Context;
use async_trait::async_trait;
use baton_agent::{Disposition, SegmentBudget, Worker, WorkerSettings};
use baton_core::table::{ListingEntry, ListingKey};
use baton_core::{
    BlobStore, Delivery, Item, Key, NoReplies, QueueError, Table, TableError, TaskId, TaskStatus,
    TaskStore, Usage, WorkMessage, WorkQueue, Write,
};
use baton_settings::{AgentConfig, Agents, BudgetSettings};
use futures::StreamExt;
use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

/// The ports one load run goes through, and whatever keeps them alive.
pub(crate) struct Stack {
    pub table: Arc<dyn Table>,
    pub blobs: Arc<dyn BlobStore>,
    pub queue: Arc<dyn WorkQueue>,
    pub _keep: Box<dyn std::any::Any + Send>,
}

/// The shape of a load run.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Load {
    /// Tasks submitted at once.
    pub tasks: usize,
    /// Model calls per task (the last one answers).
    pub steps: u32,
    /// Concurrent consumers of the work queue (Lambda's pollers).
    pub consumers: usize,
    /// Messages each consumer takes per receive (the batch size).
    pub batch: usize,
    /// Shards of the active-task index (`BATON_ACTIVE_INDEX_SHARDS`).
    pub active_shards: u32,
}

/// What one load run measured.
pub(crate) struct Report {
    pub load: Load,
    pub elapsed: Duration,
    /// Submit-to-answer times of the tasks that succeeded, sorted.
    pub latencies: Vec<Duration>,
    /// Tasks that did not succeed, and segments that asked to be retried.
    pub errors: usize,
    pub retries: u64,
    pub segments: u64,
    /// Busy time summed over concurrent calls: ingest's handler, the
    /// worker's segments, and inside both the table and queue calls.
    pub ingest_busy: Duration,
    pub worker_busy: Duration,
    pub table_busy: Duration,
    pub queue_busy: Duration,
    pub writes: WriteSpread,
}

impl Report {
    pub(crate) fn percentile(&self, p: f64) -> Duration {
        if self.latencies.is_empty() {
            return Duration::ZERO;
        }
        let i = ((self.latencies.len() as f64 - 1.0) * p).round() as usize;
        self.latencies[i.min(self.latencies.len() - 1)]
    }
}

/// How writes spread over partitions: each table write counts on its
/// partition key; each index write on the index key it lands on.
#[derive(Clone, Debug, Default)]
pub(crate) struct WriteSpread {
    pub per_key: HashMap<String, u64>,
}

impl WriteSpread {
    pub(crate) fn total(&self) -> u64 {
        self.per_key.values().sum()
    }

    /// The partition key taking the most writes, and its share of all.
    pub(crate) fn hottest(&self) -> (String, f64) {
        let total = self.total().max(1) as f64;
        self.per_key
            .iter()
            .max_by_key(|(k, n)| (**n, std::cmp::Reverse((*k).clone())))
            .map(|(k, n)| (k.clone(), *n as f64 / total))
            .unwrap_or_default()
    }
}

/// A [`Table`] that records which partition each applied write lands on,
/// and the time spent in table calls. Index writes follow DynamoDB's rule
/// for a keys-only index: only an item entering, leaving or changing its
/// index value writes the index.
pub(crate) struct KeyRecorder {
    inner: Arc<dyn Table>,
    spread: Mutex<WriteSpread>,
    indexed: Mutex<HashMap<Key, String>>,
    listed: Mutex<HashMap<Key, ListingKey>>,
    busy_us: AtomicU64,
}

impl KeyRecorder {
    pub(crate) fn new(inner: Arc<dyn Table>) -> Self {
        KeyRecorder {
            inner,
            spread: Mutex::default(),
            indexed: Mutex::default(),
            listed: Mutex::default(),
            busy_us: AtomicU64::new(0),
        }
    }

    pub(crate) fn spread(&self) -> WriteSpread {
        lock(&self.spread).clone()
    }

    fn busy(&self) -> Duration {
        Duration::from_micros(self.busy_us.load(Ordering::Relaxed))
    }

    fn time(&self, started: Instant) {
        let us = started.elapsed().as_micros().min(u128::from(u64::MAX)) as u64;
        self.busy_us.fetch_add(us, Ordering::Relaxed);
    }

    fn applied(&self, writes: &[Write]) {
        let mut spread = lock(&self.spread);
        let mut indexed = lock(&self.indexed);
        let mut listed = lock(&self.listed);
        for w in writes {
            *spread
                .per_key
                .entry(format!("table {}", w.key().pk))
                .or_default() += 1;
            let new = match w {
                Write::Put { item, .. } => item.index.clone(),
                Write::Delete { .. } => None,
            };
            let old = match &new {
                Some(n) => indexed.insert(w.key().clone(), n.clone()),
                None => indexed.remove(w.key()),
            };
            for name in super::requests::index_writes(old.as_deref(), new.as_deref()) {
                *spread.per_key.entry(format!("index {name}")).or_default() += 1;
            }
            let new = match w {
                Write::Put { item, .. } => item.listing.clone(),
                Write::Delete { .. } => None,
            };
            let old = match &new {
                Some(n) => listed.insert(w.key().clone(), n.clone()),
                None => listed.remove(w.key()),
            };
            for name in super::requests::listing_writes(old.as_ref(), new.as_ref()) {
                *spread.per_key.entry(format!("listing {name}")).or_default() += 1;
            }
        }
    }
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

#[async_trait]
impl Table for KeyRecorder {
    async fn get(&self, key: &Key) -> Result<Option<Item>, TableError> {
        let started = Instant::now();
        let out = self.inner.get(key).await;
        self.time(started);
        out
    }

    async fn get_many(&self, keys: &[Key]) -> Result<Vec<Option<Item>>, TableError> {
        let started = Instant::now();
        let out = self.inner.get_many(keys).await;
        self.time(started);
        out
    }

    async fn query(
        &self,
        pk: &str,
        sk_prefix: &str,
        after_sk: Option<&str>,
        limit: usize,
    ) -> Result<Vec<Item>, TableError> {
        let started = Instant::now();
        let out = self.inner.query(pk, sk_prefix, after_sk, limit).await;
        self.time(started);
        out
    }

    async fn query_index(&self, index: &str, limit: usize) -> Result<Vec<Item>, TableError> {
        let started = Instant::now();
        let out = self.inner.query_index(index, limit).await;
        self.time(started);
        out
    }

    async fn query_listing(
        &self,
        partition: &str,
        before: Option<&str>,
        limit: usize,
    ) -> Result<Vec<ListingEntry>, TableError> {
        let started = Instant::now();
        let out = self.inner.query_listing(partition, before, limit).await;
        self.time(started);
        out
    }

    async fn transact(&self, writes: Vec<Write>) -> Result<(), TableError> {
        let started = Instant::now();
        let out = self.inner.transact(writes.clone()).await;
        self.time(started);
        if out.is_ok() {
            self.applied(&writes);
        }
        out
    }
}

/// A [`WorkQueue`] that sums the time spent in its calls.
struct TimedQueue {
    inner: Arc<dyn WorkQueue>,
    busy_us: AtomicU64,
}

impl TimedQueue {
    async fn timed<T>(&self, call: impl std::future::Future<Output = T>) -> T {
        let started = Instant::now();
        let out = call.await;
        let us = started.elapsed().as_micros().min(u128::from(u64::MAX)) as u64;
        self.busy_us.fetch_add(us, Ordering::Relaxed);
        out
    }
}

#[async_trait]
impl WorkQueue for TimedQueue {
    async fn send(&self, body: &str, delay: Duration) -> Result<(), QueueError> {
        self.timed(self.inner.send(body, delay)).await
    }
    async fn receive(&self, max: usize, wait: Duration) -> Result<Vec<Delivery>, QueueError> {
        self.timed(self.inner.receive(max, wait)).await
    }
    async fn delete(&self, receipt: &str) -> Result<(), QueueError> {
        self.timed(self.inner.delete(receipt)).await
    }
    async fn extend(&self, receipt: &str, visibility: Duration) -> Result<(), QueueError> {
        self.timed(self.inner.extend(receipt, visibility)).await
    }
}

const TOKEN: &str = "bench-load-token-0123456789abcdef";
/// A run that has not finished by then is reported as failed.
const RUN_LIMIT: Duration = Duration::from_secs(1800);
/// A run in which no task has ended for this long is stuck (a message lost
/// to the dead-letter queue, a failed consumer): it stops and says so
/// instead of waiting out [`RUN_LIMIT`].
const STALL_LIMIT: Duration = Duration::from_secs(60);

/// Runs `load` over `stack`: submits every task through ingest while the
/// consumers drain the queue, until every task has ended.
pub(crate) async fn run(stack: Stack, load: Load) -> anyhow::Result<Report> {
    let recorder = Arc::new(KeyRecorder::new(stack.table.clone()));
    let queue = Arc::new(TimedQueue {
        inner: stack.queue.clone(),
        busy_us: AtomicU64::new(0),
    });
    let store = TaskStore::new(recorder.clone(), stack.blobs.clone())
        .with_active_shards(load.active_shards);
    let mut agent = AgentConfig::new("default", "bench-load");
    agent.limits.max_steps = load.steps + 1;
    let agents = Agents::new(agent, Vec::new());
    let settings = WorkerSettings {
        lease_ttl: Duration::from_secs(60),
        heartbeat_every: Duration::from_secs(20),
        visibility: Duration::from_secs(90),
        retry_delay: Duration::from_secs(1),
        ..WorkerSettings::default()
    };
    let model = InstantModel {
        name: "bench-load",
        steps: load.steps,
        tools: vec!["fetch"],
        answer: "done",
        usage: Usage {
            input_tokens: 1500,
            output_tokens: 150,
        },
    };
    let tool = SizedTool {
        name: "fetch",
        bytes: 512,
        fill: 'p',
    };
    // Monthly budgets on, so usage counting is part of the load.
    let worker = Arc::new(
        Worker::new(
            store.clone(),
            queue.clone(),
            Arc::new(model),
            vec![Arc::new(tool)],
            agents.clone(),
            Arc::new(NoReplies),
            settings,
        )
        .with_budgets(BudgetSettings {
            workspace_monthly_tokens: Some(u64::MAX / 4),
            user_monthly_tokens: None,
            ..Default::default()
        }),
    );
    let token = baton_ingest::ApiToken::parse(TOKEN).map_err(|e| anyhow::anyhow!("{e}"))?;
    let ingest = baton_ingest::Ingest::new(store.clone(), queue.clone(), agents, Some(token), None);

    let state = Arc::new(RunState {
        submitted: Mutex::default(),
        done: Mutex::default(),
        early: Mutex::default(),
        ended: AtomicUsize::new(0),
        last_end_ms: AtomicU64::new(0),
        began: Instant::now(),
        stop: std::sync::atomic::AtomicBool::new(false),
        errors: AtomicUsize::new(0),
        retries: AtomicU64::new(0),
        segments: AtomicU64::new(0),
        worker_us: AtomicU64::new(0),
    });
    let started = Instant::now();
    let consumers: Vec<_> = (0..load.consumers.max(1))
        .map(|_| {
            let (worker, queue, store, state) =
                (worker.clone(), queue.clone(), store.clone(), state.clone());
            tokio::spawn(consume(worker, queue, store, state, load))
        })
        .collect();

    let ingest_us = AtomicU64::new(0);
    let submissions = futures::stream::iter(0..load.tasks)
        .map(|i| submit(&ingest, i, &state, &ingest_us))
        .buffer_unordered(64)
        .collect::<Vec<anyhow::Result<()>>>()
        .await;
    for s in submissions {
        s?;
    }
    for c in consumers {
        c.await.context("a consumer panicked")??;
    }
    let elapsed = started.elapsed();
    let mut latencies: Vec<Duration> = lock(&state.done).values().copied().collect();
    latencies.sort();
    Ok(Report {
        load,
        elapsed,
        latencies,
        errors: state.errors.load(Ordering::Relaxed),
        retries: state.retries.load(Ordering::Relaxed),
        segments: state.segments.load(Ordering::Relaxed),
        ingest_busy: Duration::from_micros(ingest_us.load(Ordering::Relaxed)),
        worker_busy: Duration::from_micros(state.worker_us.load(Ordering::Relaxed)),
        table_busy: recorder.busy(),
        queue_busy: Duration::from_micros(queue.busy_us.load(Ordering::Relaxed)),
        writes: recorder.spread(),
    })
}

struct RunState {
    submitted: Mutex<HashMap<TaskId, Instant>>,
    /// Tasks that ended before their `POST /tasks` returned (a consumer can
    /// finish one first): when, and whether they succeeded. Guarded by
    /// `submitted`'s lock, taken first, so each end is counted once.
    early: Mutex<HashMap<TaskId, (Instant, bool)>>,
    /// Submit-to-answer time of each task that succeeded.
    done: Mutex<HashMap<TaskId, Duration>>,
    /// Tasks that ended, however.
    ended: AtomicUsize,
    /// When the last one ended (ms since the run began).
    last_end_ms: AtomicU64,
    began: Instant,
    /// Set when a consumer fails: the others stop too.
    stop: std::sync::atomic::AtomicBool,
    errors: AtomicUsize,
    retries: AtomicU64,
    segments: AtomicU64,
    worker_us: AtomicU64,
}

async fn submit(
    ingest: &baton_ingest::Ingest,
    i: usize,
    state: &RunState,
    busy_us: &AtomicU64,
) -> anyhow::Result<()> {
    let at = Instant::now();
    let id = super::post_task(
        ingest,
        TOKEN,
        &format!("Load task {i}: fetch the page and summarise it."),
        &format!("load-{i}-{}", uuid::Uuid::new_v4().simple()),
    )
    .await?;
    busy_us.fetch_add(at.elapsed().as_micros() as u64, Ordering::Relaxed);
    let mut submitted = lock(&state.submitted);
    let early = lock(&state.early).remove(&id);
    match early {
        Some((ended_at, ok)) => state.count_end(&id, ended_at.duration_since(at), ok),
        None => {
            submitted.insert(id, at);
        }
    }
    Ok(())
}

/// One poller of the work queue, as Lambda's event source mapping runs
/// them: receive a batch, run its segments at once, settle each message.
async fn consume(
    worker: Arc<Worker>,
    queue: Arc<TimedQueue>,
    store: TaskStore,
    state: Arc<RunState>,
    load: Load,
) -> anyhow::Result<()> {
    let out = consume_until_done(&worker, &queue, &store, &state, load).await;
    if out.is_err() {
        state.stop.store(true, Ordering::Relaxed);
    }
    out
}

async fn consume_until_done(
    worker: &Worker,
    queue: &TimedQueue,
    store: &TaskStore,
    state: &RunState,
    load: Load,
) -> anyhow::Result<()> {
    let started = Instant::now();
    while state.ended.load(Ordering::Relaxed) < load.tasks {
        if state.stop.load(Ordering::Relaxed) {
            return Ok(()); // another consumer failed and says why
        }
        anyhow::ensure!(
            started.elapsed() < RUN_LIMIT,
            "the load did not finish within {RUN_LIMIT:?}"
        );
        let idle_ms = (state.began.elapsed().as_millis() as u64)
            .saturating_sub(state.last_end_ms.load(Ordering::Relaxed));
        if idle_ms > STALL_LIMIT.as_millis() as u64 {
            let left: Vec<String> = lock(&state.submitted)
                .keys()
                .take(5)
                .map(|id| id.to_string())
                .collect();
            anyhow::bail!(
                "stuck: {} of {} tasks ended, none for {STALL_LIMIT:?} (e.g. {left:?})",
                state.ended.load(Ordering::Relaxed),
                load.tasks
            );
        }
        let batch = queue
            .receive(load.batch.max(1), Duration::from_millis(50))
            .await?;
        let handled = futures::future::join_all(batch.iter().map(|d| async {
            let at = Instant::now();
            let disposition = worker
                .handle(d, SegmentBudget::new(Duration::from_secs(840)))
                .await;
            state
                .worker_us
                .fetch_add(at.elapsed().as_micros() as u64, Ordering::Relaxed);
            disposition
        }))
        .await;
        for (d, disposition) in batch.iter().zip(handled) {
            state.segments.fetch_add(1, Ordering::Relaxed);
            match disposition {
                Disposition::Ack => queue.delete(&d.receipt).await?,
                Disposition::Retry { after, .. } => {
                    state.retries.fetch_add(1, Ordering::Relaxed);
                    queue.extend(&d.receipt, after).await?;
                    continue;
                }
                Disposition::Poison { reason } => anyhow::bail!("poison message: {reason}"),
            }
            if let Ok(WorkMessage::Wake(wake)) = WorkMessage::parse(&d.body) {
                record_end(store, state, &wake.task_id).await?;
            }
        }
    }
    Ok(())
}

/// Notes the task's end, once, if it has ended.
async fn record_end(store: &TaskStore, state: &RunState, id: &TaskId) -> anyhow::Result<()> {
    let Some(task) = store.get(id).await? else {
        return Ok(());
    };
    if !task.status().is_terminal() {
        return Ok(());
    }
    let ok = task.status() == TaskStatus::Succeeded;
    let mut submitted = lock(&state.submitted);
    match submitted.remove(id) {
        Some(at) => state.count_end(id, at.elapsed(), ok),
        // Its POST has not returned yet: `submit` counts it.
        None => {
            lock(&state.early)
                .entry(id.clone())
                .or_insert((Instant::now(), ok));
        }
    }
    Ok(())
}

impl RunState {
    fn count_end(&self, id: &TaskId, took: Duration, ok: bool) {
        if ok {
            lock(&self.done).insert(id.clone(), took);
        } else {
            self.errors.fetch_add(1, Ordering::Relaxed);
        }
        self.ended.fetch_add(1, Ordering::Relaxed);
        self.last_end_ms
            .store(self.began.elapsed().as_millis() as u64, Ordering::Relaxed);
    }
}

/// Prints a report as Markdown.
pub(crate) fn print(backend: &str, r: &Report) {
    let secs = r.elapsed.as_secs_f64().max(1e-9);
    let (hot, share) = r.writes.hottest();
    println!(
        "| {backend} | {} | {} | {:.1} | {:.1} | {:.0} | {:.0} | {} | {} | {} | `{hot}` {:.2}% |",
        r.load.tasks,
        r.load.steps,
        r.load.tasks as f64 / secs,
        (r.load.tasks as f64 * f64::from(r.load.steps)) / secs,
        r.percentile(0.5).as_secs_f64() * 1000.0,
        r.percentile(0.99).as_secs_f64() * 1000.0,
        r.errors,
        r.retries,
        r.writes.total(),
        share * 100.0,
    );
}

/// Prints where the time went, as busy time summed over concurrent calls.
pub(crate) fn print_time(backend: &str, r: &Report) {
    let ms = |d: Duration| d.as_secs_f64() * 1000.0 / r.load.tasks.max(1) as f64;
    println!(
        "| {backend} | {} | {:.2} | {:.2} | {:.2} | {:.2} | {:.2} | {:.2} |",
        r.load.tasks,
        r.elapsed.as_secs_f64(),
        r.segments as f64 / r.load.tasks.max(1) as f64,
        ms(r.ingest_busy),
        ms(r.worker_busy),
        ms(r.table_busy),
        ms(r.queue_busy),
    );
}

#[cfg(test)]
mod tests;
