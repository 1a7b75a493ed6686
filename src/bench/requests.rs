//! `baton bench --count-requests`: the AWS requests one task costs.
//!
//! Runs scripted tasks through the real ingest handler and the real worker,
//! over the embedded backend wrapped in counting adapters of the three
//! ports. Each port call is mapped to the AWS request the AWS adapter makes
//! for it (`shared/aws`: a single write is `PutItem`/`DeleteItem`, several
//! are one `TransactWriteItems`; reads are strongly consistent; the sparse
//! index is read eventually consistently), and DynamoDB capacity units are
//! computed from the sizes of the items as the DynamoDB adapter encodes them.
//! The numbers feed docs/deploy.md's cost per 1,000 tasks.

use async_trait::async_trait;
use baton_agent::{SegmentBudget, Worker, WorkerSettings};
use baton_core::table::{ListingEntry, ListingKey};
use baton_core::NoReplies;
use baton_core::{
    BlobError, BlobStore, Delivery, Item, Key, QueueError, Table, TableError, TaskStatus,
    TaskStore, Tool, Usage, WorkQueue, Write,
};
use baton_embedded::{EmbeddedBackend, QueueConfig};
use baton_settings::{AgentConfig, Agents};
use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

/// Requests and capacity units, as the AWS adapters would spend them.
#[derive(Clone, Debug, Default, PartialEq)]
pub(crate) struct Counts {
    /// DynamoDB `GetItem` (strongly consistent).
    pub get_item: u64,
    /// DynamoDB `Query` on the table (strongly consistent).
    pub query: u64,
    /// DynamoDB `Query` on the sparse index `gsi1` (eventually consistent).
    pub query_index: u64,
    /// DynamoDB `PutItem` (a transaction of one put).
    pub put_item: u64,
    /// DynamoDB `DeleteItem` (a transaction of one delete).
    pub delete_item: u64,
    /// DynamoDB `TransactWriteItems`.
    pub transact: u64,
    /// Items written by those transactions.
    pub transact_items: u64,
    /// Read request units.
    pub rru: f64,
    /// Write request units on the table.
    pub wru: f64,
    /// Write request units on the index (projection `ALL`).
    pub gsi_wru: f64,
    /// Largest item written, bytes (DynamoDB's size rule).
    pub largest_item: usize,
    /// Bytes of all items written (DynamoDB's size rule).
    pub item_bytes: u64,
    /// SQS `SendMessage`.
    pub sqs_send: u64,
    /// SQS billing units of those sends (one per 64 KiB chunk).
    pub sqs_send_units: u64,
    /// SQS `ReceiveMessage` made by Baton itself.
    pub sqs_receive: u64,
    /// SQS `DeleteMessage` made by Baton itself.
    pub sqs_delete: u64,
    /// SQS `ChangeMessageVisibility` (heartbeats, retry delays).
    pub sqs_extend: u64,
    /// S3 `PutObject`.
    pub s3_put: u64,
    /// Bytes of those objects.
    pub s3_put_bytes: u64,
    /// S3 `GetObject`.
    pub s3_get: u64,
    /// S3 `ListObjectsV2`.
    pub s3_list: u64,
}

impl Counts {
    /// All DynamoDB requests.
    pub(crate) fn dynamodb_requests(&self) -> u64 {
        self.get_item
            + self.query
            + self.query_index
            + self.put_item
            + self.delete_item
            + self.transact
    }

    /// All requests to AWS services Baton makes itself.
    pub(crate) fn aws_requests(&self) -> u64 {
        self.dynamodb_requests()
            + self.sqs_send
            + self.sqs_receive
            + self.sqs_delete
            + self.sqs_extend
            + self.s3_put
            + self.s3_get
            + self.s3_list
    }

    /// `self - earlier`, field by field.
    pub(crate) fn since(&self, earlier: &Counts) -> Counts {
        Counts {
            get_item: self.get_item - earlier.get_item,
            query: self.query - earlier.query,
            query_index: self.query_index - earlier.query_index,
            put_item: self.put_item - earlier.put_item,
            delete_item: self.delete_item - earlier.delete_item,
            transact: self.transact - earlier.transact,
            transact_items: self.transact_items - earlier.transact_items,
            rru: self.rru - earlier.rru,
            wru: self.wru - earlier.wru,
            gsi_wru: self.gsi_wru - earlier.gsi_wru,
            largest_item: self.largest_item,
            item_bytes: self.item_bytes - earlier.item_bytes,
            sqs_send: self.sqs_send - earlier.sqs_send,
            sqs_send_units: self.sqs_send_units - earlier.sqs_send_units,
            sqs_receive: self.sqs_receive - earlier.sqs_receive,
            sqs_delete: self.sqs_delete - earlier.sqs_delete,
            sqs_extend: self.sqs_extend - earlier.sqs_extend,
            s3_put: self.s3_put - earlier.s3_put,
            s3_put_bytes: self.s3_put_bytes - earlier.s3_put_bytes,
            s3_get: self.s3_get - earlier.s3_get,
            s3_list: self.s3_list - earlier.s3_list,
        }
    }
}

/// Shared, lockable counts.
#[derive(Clone, Default)]
pub(crate) struct Counter(Arc<Mutex<Counts>>);

impl Counter {
    fn lock(&self) -> MutexGuard<'_, Counts> {
        // A panic elsewhere while counting leaves plain numbers behind.
        self.0.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// A copy of the counts so far.
    pub(crate) fn snapshot(&self) -> Counts {
        self.lock().clone()
    }
}

/// Size of a DynamoDB number attribute value: about one byte per two
/// significant digits, plus one.
fn number_size(n: i128) -> usize {
    let digits = n
        .unsigned_abs()
        .to_string()
        .trim_end_matches('0')
        .len()
        .max(1);
    digits.div_ceil(2) + 1
}

/// The item's size by DynamoDB's rule (attribute names plus values), as
/// `shared/aws/src/table.rs` encodes it: `pk`, `sk`, `v`, `data`, and
/// `gsi1pk` and `ttl` when set.
pub(crate) fn dynamodb_item_size(item: &Item) -> usize {
    let mut size = 2 + item.key.pk.len() + 2 + item.key.sk.len();
    size += 1 + number_size(i128::from(item.version));
    size += 4 + item.data.len();
    if let Some(index) = &item.index {
        size += 6 + index.len();
    }
    if let Some(l) = &item.listing {
        size += 6 + l.partition.len() + 6 + l.sort.len();
    }
    if let Some(ttl) = item.expires_at {
        size += 3 + number_size(i128::from(ttl));
    }
    size
}

fn key_size(key: &Key) -> usize {
    2 + key.pk.len() + 2 + key.sk.len()
}

/// Units of `size` bytes in blocks of `block` (at least one).
fn units(size: usize, block: usize) -> f64 {
    size.div_ceil(block).max(1) as f64
}

/// The index keys a write touches on a keys-only index, by DynamoDB's
/// rule: none when the item's index value stays, else the value it leaves
/// and the value it enters (one write unit each, the entry being keys only).
pub(crate) fn index_writes<'a>(
    old: Option<&'a str>,
    new: Option<&'a str>,
) -> impl Iterator<Item = &'a str> {
    let changed = old != new;
    [old, new].into_iter().flatten().filter(move |_| changed)
}

/// The listing index partitions a write touches, by the same rule as
/// [`index_writes`]: none when the item's listing key stays.
pub(crate) fn listing_writes<'a>(
    old: Option<&'a ListingKey>,
    new: Option<&'a ListingKey>,
) -> impl Iterator<Item = &'a str> {
    let changed = old != new;
    [old, new]
        .into_iter()
        .flatten()
        .filter(move |_| changed)
        .map(|l| l.partition.as_str())
}

/// What the wrapper remembers of a stored item, to price overwrites (a write
/// costs by the larger of the old and new item) and index maintenance.
#[derive(Clone)]
struct Stored {
    size: usize,
    index: Option<String>,
    listing: Option<ListingKey>,
}

/// A [`Table`] that counts the DynamoDB requests and units its calls cost.
pub(crate) struct CountingTable {
    inner: Arc<dyn Table>,
    counts: Counter,
    stored: Mutex<HashMap<Key, Stored>>,
}

impl CountingTable {
    /// Counts into `counts` the calls it forwards to `inner`.
    pub(crate) fn new(inner: Arc<dyn Table>, counts: Counter) -> Self {
        CountingTable {
            inner,
            counts,
            stored: Mutex::default(),
        }
    }

    fn stored(&self) -> MutexGuard<'_, HashMap<Key, Stored>> {
        self.stored.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Table and index WRU of one write, by DynamoDB's rules: the larger of
    /// the old and new item, per KB; for the keys-only index, one unit for
    /// an item entering or leaving it, two when its index key changes (a
    /// delete and a put), none when it stays (no projected attribute).
    fn write_units(&self, write: &Write) -> (f64, f64, usize) {
        let stored = self.stored();
        let old = stored.get(write.key()).cloned();
        let (new_size, new_index, new_listing) = match write {
            Write::Put { item, .. } => (
                dynamodb_item_size(item),
                item.index.clone(),
                item.listing.clone(),
            ),
            Write::Delete { key, .. } => (key_size(key), None, None),
        };
        let old_size = old.as_ref().map_or(0, |o| o.size);
        let table = units(new_size.max(old_size), 1024);
        let (old_index, old_listing) = old.map_or((None, None), |o| (o.index, o.listing));
        // Both keys-only indexes: `gsi2` (active tasks) and `gsi3` (listing).
        let gsi = (index_writes(old_index.as_deref(), new_index.as_deref()).count()
            + listing_writes(old_listing.as_ref(), new_listing.as_ref()).count())
            as f64;
        let written = match write {
            Write::Put { .. } => new_size,
            Write::Delete { .. } => 0,
        };
        (table, gsi, written)
    }

    fn applied(&self, writes: &[Write]) {
        let mut stored = self.stored();
        for w in writes {
            match w {
                Write::Put { item, .. } => {
                    stored.insert(
                        item.key.clone(),
                        Stored {
                            size: dynamodb_item_size(item),
                            index: item.index.clone(),
                            listing: item.listing.clone(),
                        },
                    );
                }
                Write::Delete { key, .. } => {
                    stored.remove(key);
                }
            }
        }
    }
}

#[async_trait]
impl Table for CountingTable {
    async fn get(&self, key: &Key) -> Result<Option<Item>, TableError> {
        let found = self.inner.get(key).await?;
        let mut c = self.counts.lock();
        c.get_item += 1;
        // Strongly consistent: 1 RRU per 4 KB, at least 1 (also when absent).
        c.rru += units(found.as_ref().map_or(0, dynamodb_item_size), 4096);
        Ok(found)
    }

    async fn query(
        &self,
        pk: &str,
        sk_prefix: &str,
        after_sk: Option<&str>,
        limit: usize,
    ) -> Result<Vec<Item>, TableError> {
        let items = self.inner.query(pk, sk_prefix, after_sk, limit).await?;
        let bytes: usize = items.iter().map(dynamodb_item_size).sum();
        let mut c = self.counts.lock();
        // One page per call: the adapter's pages hold 1,000 items, and a
        // page stops at 1 MB, more than any query here returns.
        c.query += 1 + (bytes / (1024 * 1024)) as u64;
        c.rru += units(bytes, 4096);
        Ok(items)
    }

    async fn query_index(&self, index: &str, limit: usize) -> Result<Vec<Item>, TableError> {
        let items = self.inner.query_index(index, limit).await?;
        let bytes: usize = items.iter().map(dynamodb_item_size).sum();
        let mut c = self.counts.lock();
        c.query_index += 1;
        // Index reads are eventually consistent: half a unit per 4 KB.
        c.rru += units(bytes, 4096) / 2.0;
        Ok(items)
    }

    async fn query_listing(
        &self,
        partition: &str,
        before: Option<&str>,
        limit: usize,
    ) -> Result<Vec<ListingEntry>, TableError> {
        let entries = self.inner.query_listing(partition, before, limit).await?;
        let bytes: usize = entries
            .iter()
            .map(|e| key_size(&e.key) + 12 + partition.len() + e.sort.len())
            .sum();
        let mut c = self.counts.lock();
        c.query_index += 1;
        c.rru += units(bytes, 4096) / 2.0;
        Ok(entries)
    }

    async fn transact(&self, writes: Vec<Write>) -> Result<(), TableError> {
        let mut table = 0.0;
        let mut gsi = 0.0;
        let mut written = Vec::with_capacity(writes.len());
        for w in &writes {
            let (t, g, size) = self.write_units(w);
            table += t;
            gsi += g;
            written.push(size);
        }
        let single = writes.len() == 1;
        {
            let mut c = self.counts.lock();
            match writes.first() {
                Some(Write::Put { .. }) if single => c.put_item += 1,
                Some(Write::Delete { .. }) if single => c.delete_item += 1,
                Some(_) => {
                    c.transact += 1;
                    c.transact_items += writes.len() as u64;
                    // Transactional writes cost twice on the table.
                    table *= 2.0;
                }
                None => {}
            }
            // A write whose condition fails is billed all the same.
            c.wru += table;
            c.gsi_wru += gsi;
            c.item_bytes += written.iter().sum::<usize>() as u64;
            c.largest_item = c
                .largest_item
                .max(written.iter().copied().max().unwrap_or(0));
        }
        let result = self.inner.transact(writes.clone()).await;
        if result.is_ok() {
            self.applied(&writes);
        }
        result
    }
}

/// A [`WorkQueue`] that counts SQS requests.
pub(crate) struct CountingQueue {
    inner: Arc<dyn WorkQueue>,
    counts: Counter,
}

impl CountingQueue {
    /// Counts into `counts` the calls it forwards to `inner`.
    pub(crate) fn new(inner: Arc<dyn WorkQueue>, counts: Counter) -> Self {
        CountingQueue { inner, counts }
    }
}

#[async_trait]
impl WorkQueue for CountingQueue {
    async fn send(&self, body: &str, delay: Duration) -> Result<(), QueueError> {
        {
            let mut c = self.counts.lock();
            c.sqs_send += 1;
            // SQS bills every 64 KB chunk of a payload as one request.
            c.sqs_send_units += body.len().div_ceil(64 * 1024).max(1) as u64;
        }
        self.inner.send(body, delay).await
    }

    async fn receive(&self, max: usize, wait: Duration) -> Result<Vec<Delivery>, QueueError> {
        self.counts.lock().sqs_receive += 1;
        self.inner.receive(max, wait).await
    }

    async fn delete(&self, receipt: &str) -> Result<(), QueueError> {
        self.counts.lock().sqs_delete += 1;
        self.inner.delete(receipt).await
    }

    async fn extend(&self, receipt: &str, visibility: Duration) -> Result<(), QueueError> {
        self.counts.lock().sqs_extend += 1;
        self.inner.extend(receipt, visibility).await
    }
}

/// A [`BlobStore`] that counts S3 requests.
pub(crate) struct CountingBlobs {
    inner: Arc<dyn BlobStore>,
    counts: Counter,
}

impl CountingBlobs {
    /// Counts into `counts` the calls it forwards to `inner`.
    pub(crate) fn new(inner: Arc<dyn BlobStore>, counts: Counter) -> Self {
        CountingBlobs { inner, counts }
    }
}

#[async_trait]
impl BlobStore for CountingBlobs {
    async fn put(&self, key: &str, bytes: Vec<u8>) -> Result<(), BlobError> {
        {
            let mut c = self.counts.lock();
            c.s3_put += 1;
            c.s3_put_bytes += bytes.len() as u64;
        }
        self.inner.put(key, bytes).await
    }

    async fn get(&self, key: &str) -> Result<Option<Vec<u8>>, BlobError> {
        self.counts.lock().s3_get += 1;
        self.inner.get(key).await
    }

    async fn list(&self, prefix: &str) -> Result<Vec<String>, BlobError> {
        self.counts.lock().s3_list += 1;
        self.inner.list(prefix).await
    }
}

/// One run of a scripted task through ingest and worker.
pub(crate) struct TaskRun {
    /// LLM calls (steps) of the task.
    pub steps: u32,
    /// Requests made while ingest handled `POST /tasks`.
    pub ingest: Counts,
    /// Requests made by the worker's segments.
    pub worker: Counts,
    /// Ingest invocations (API requests).
    pub ingest_invocations: u64,
    /// Worker invocations (one segment each here).
    pub worker_invocations: u64,
    /// Wall time of ingest's handler, summed.
    pub ingest_time: Duration,
    /// Wall time of the worker's segments, summed.
    pub worker_time: Duration,
}

/// The store, queue and handlers of one counted run.
struct Rig {
    ingest: baton_ingest::Ingest,
    worker: Worker,
    /// The embedded queue itself: the bench plays Lambda's event source
    /// mapping, whose receives and deletes are counted apart.
    raw_queue: Arc<baton_embedded::EmbeddedQueue>,
    store: TaskStore,
    counts: Counter,
    _dir: super::tempfile_dir::TempDir,
}

const TOKEN: &str = "bench-request-count-token-0123456789";

fn rig(steps: u32, result_bytes: usize) -> anyhow::Result<Rig> {
    let dir = std::env::temp_dir().join(format!(
        "baton-bench-requests-{}",
        uuid::Uuid::new_v4().simple()
    ));
    let backend = EmbeddedBackend::open(&dir, QueueConfig::default())
        .map_err(|e| anyhow::anyhow!("opening the embedded backend: {e}"))?;
    let counts = Counter::default();
    let table: Arc<dyn Table> = Arc::new(CountingTable::new(backend.table.clone(), counts.clone()));
    let blobs: Arc<dyn BlobStore> =
        Arc::new(CountingBlobs::new(backend.blobs.clone(), counts.clone()));
    let queue: Arc<dyn WorkQueue> =
        Arc::new(CountingQueue::new(backend.queue.clone(), counts.clone()));
    let store = TaskStore::new(table, blobs);
    let mut agent = AgentConfig::new("default", "bench-scripted");
    agent.limits.max_steps = steps + 1;
    agent.max_tool_result_chars = result_bytes + 1;
    let agents = Agents::new(agent, Vec::new());
    let tools: Vec<Arc<dyn Tool>> = vec![
        Arc::new(baton_tools::CurrentTimeTool::new()),
        Arc::new(super::model::SizedTool {
            name: "fetch",
            bytes: result_bytes,
            fill: 'p',
        }),
    ];
    // The timings `lambda_app` gives the worker on Lambda.
    let settings = WorkerSettings {
        lease_ttl: Duration::from_secs(60),
        heartbeat_every: Duration::from_secs(20),
        visibility: Duration::from_secs(90),
        retry_delay: Duration::from_secs(10),
        ..WorkerSettings::default()
    };
    let worker = Worker::new(
        store.clone(),
        queue.clone(),
        Arc::new(super::model::InstantModel {
            name: "bench-scripted",
            steps,
            tools: vec!["current_time", "fetch"],
            answer: "Here is the answer, based on what the tools returned.",
            usage: Usage {
                input_tokens: 1500,
                output_tokens: 150,
            },
        }),
        tools,
        agents.clone(),
        Arc::new(NoReplies),
        settings,
    );
    let token = baton_ingest::ApiToken::parse(TOKEN)
        .map_err(|e| anyhow::anyhow!("bench API token: {e}"))?;
    let ingest = baton_ingest::Ingest::new(store.clone(), queue, agents, Some(token), None);
    Ok(Rig {
        ingest,
        worker,
        raw_queue: backend.queue,
        store,
        counts,
        _dir: super::tempfile_dir::TempDir(dir),
    })
}

/// Submits one task with `POST /tasks` (a thread and an idempotency key,
/// as a client that may retry sends it), then runs every wake it causes
/// until the queue is empty, as Lambda's event source mapping would.
pub(crate) async fn run_task(steps: u32, result_bytes: usize) -> anyhow::Result<TaskRun> {
    let rig = rig(steps, result_bytes)?;
    let before = rig.counts.snapshot();
    let started = Instant::now();
    let id = super::post_task(
        &rig.ingest,
        TOKEN,
        "What changed in the release notes since last week? Summarise in three bullets.",
        &format!("bench-{}", uuid::Uuid::new_v4().simple()),
    )
    .await?;
    let ingest_time = started.elapsed();
    let after_ingest = rig.counts.snapshot();

    let mut worker_time = Duration::ZERO;
    let mut invocations = 0u64;
    loop {
        let batch = rig.raw_queue.receive(1, Duration::ZERO).await?;
        let Some(delivery) = batch.into_iter().next() else {
            break;
        };
        invocations += 1;
        anyhow::ensure!(invocations <= 100, "the task does not end");
        let started = Instant::now();
        let disposition = rig
            .worker
            .handle(&delivery, SegmentBudget::new(Duration::from_secs(840)))
            .await;
        worker_time += started.elapsed();
        anyhow::ensure!(
            matches!(disposition, baton_agent::Disposition::Ack),
            "segment ended {disposition:?}"
        );
        rig.raw_queue.delete(&delivery.receipt).await?;
    }
    let task = rig
        .store
        .get(&id)
        .await?
        .ok_or_else(|| anyhow::anyhow!("task vanished"))?;
    anyhow::ensure!(
        task.status() == TaskStatus::Succeeded && task.budget.steps == steps,
        "bench task ended {:?} after {} steps: {:?}",
        task.status(),
        task.budget.steps,
        task.answer.error
    );
    let end = rig.counts.snapshot();
    Ok(TaskRun {
        steps,
        ingest: after_ingest.since(&before),
        worker: end.since(&after_ingest),
        ingest_invocations: 1,
        worker_invocations: invocations,
        ingest_time,
        worker_time,
    })
}

/// Prints the per-task request counts of `runs` as a Markdown table.
pub(crate) fn print(runs: &[TaskRun]) {
    let header: Vec<String> = runs
        .iter()
        .map(|r| format!("{}-step task", r.steps))
        .collect();
    println!("| per task | {} |", header.join(" | "));
    println!("| --- |{}", " ---: |".repeat(runs.len()));
    let row = |name: &str, f: &dyn Fn(&TaskRun) -> String| {
        let cells: Vec<String> = runs.iter().map(f).collect();
        println!("| {name} | {} |", cells.join(" | "));
    };
    let both =
        |r: &TaskRun, f: &dyn Fn(&Counts) -> u64| format!("{} + {}", f(&r.ingest), f(&r.worker));
    row("Lambda invocations, ingest + worker", &|r| {
        format!("{} + {}", r.ingest_invocations, r.worker_invocations)
    });
    row("DynamoDB GetItem (ingest + worker)", &|r| {
        both(r, &|c| c.get_item)
    });
    row("DynamoDB Query (ingest + worker)", &|r| {
        both(r, &|c| c.query + c.query_index)
    });
    row("DynamoDB PutItem/DeleteItem (ingest + worker)", &|r| {
        both(r, &|c| c.put_item + c.delete_item)
    });
    row("DynamoDB TransactWriteItems (ingest + worker)", &|r| {
        both(r, &|c| c.transact)
    });
    row("DynamoDB requests, total", &|r| {
        (r.ingest.dynamodb_requests() + r.worker.dynamodb_requests()).to_string()
    });
    row("DynamoDB RRU", &|r| {
        format!("{:.1}", r.ingest.rru + r.worker.rru)
    });
    row("DynamoDB WRU (table + index)", &|r| {
        format!(
            "{:.0} + {:.0}",
            r.ingest.wru + r.worker.wru,
            r.ingest.gsi_wru + r.worker.gsi_wru
        )
    });
    row("item bytes written / largest item", &|r| {
        format!(
            "{} / {}",
            r.ingest.item_bytes + r.worker.item_bytes,
            r.ingest.largest_item.max(r.worker.largest_item)
        )
    });
    row("AWS requests made by Baton, total", &|r| {
        (r.ingest.aws_requests() + r.worker.aws_requests()).to_string()
    });
    row("SQS SendMessage (ingest + worker)", &|r| {
        both(r, &|c| c.sqs_send)
    });
    row("SQS receive + delete by the event source mapping", &|r| {
        format!("{} + {}", r.worker_invocations, r.worker_invocations)
    });
    row("SQS ChangeMessageVisibility by Baton", &|r| {
        (r.ingest.sqs_extend + r.worker.sqs_extend).to_string()
    });
    row("S3 PUT (objects / bytes)", &|r| {
        format!(
            "{} / {}",
            r.ingest.s3_put + r.worker.s3_put,
            r.ingest.s3_put_bytes + r.worker.s3_put_bytes
        )
    });
    row("S3 GET + LIST", &|r| {
        (r.ingest.s3_get + r.ingest.s3_list + r.worker.s3_get + r.worker.s3_list).to_string()
    });
    row("Baton time, ingest handler (ms)", &|r| {
        format!("{:.2}", r.ingest_time.as_secs_f64() * 1000.0)
    });
    row("Baton time, worker segments (ms)", &|r| {
        format!("{:.2}", r.worker_time.as_secs_f64() * 1000.0)
    });
}

#[cfg(test)]
mod tests {
    use super::*;
    use baton_core::Condition;

    fn item(data: &str, index: Option<&str>) -> Item {
        Item {
            key: Key::new("TASK#1", "META"),
            version: 1,
            data: data.into(),
            index: index.map(str::to_owned),
            expires_at: None,
            listing: None,
        }
    }

    #[test]
    fn item_size_follows_dynamodb_rules() {
        // pk(2)+6, sk(2)+4, v(1)+2, data(4)+3
        assert_eq!(dynamodb_item_size(&item("abc", None)), 8 + 6 + 3 + 7);
        assert_eq!(dynamodb_item_size(&item("abc", Some("live"))), 24 + 6 + 4);
    }

    #[tokio::test]
    async fn counts_requests_and_units() {
        let dir = std::env::temp_dir().join(format!("baton-count-{}", uuid::Uuid::new_v4()));
        let backend = EmbeddedBackend::open(&dir, QueueConfig::default()).unwrap();
        let counts = Counter::default();
        let t = CountingTable::new(backend.table.clone(), counts.clone());
        let big = "x".repeat(1500);
        t.transact(vec![Write::Put {
            item: item(&big, Some("live")),
            condition: Condition::NotExists,
        }])
        .await
        .unwrap();
        let c = counts.snapshot();
        assert_eq!((c.put_item, c.transact), (1, 0));
        assert_eq!(c.wru, 2.0); // 1.5 KB -> 2 units
        assert_eq!(c.gsi_wru, 1.0); // enters the keys-only index
        t.transact(vec![
            Write::Put {
                item: Item {
                    version: 2,
                    ..item("small", None)
                },
                condition: Condition::VersionIs(1),
            },
            Write::Put {
                item: Item {
                    key: Key::new("TASK#1", "E#1"),
                    ..item("e", None)
                },
                condition: Condition::NotExists,
            },
        ])
        .await
        .unwrap();
        let c = counts.snapshot();
        assert_eq!((c.transact, c.transact_items), (1, 2));
        // Overwrite costs by the larger (old) item, doubled in a transaction:
        // 2 x 2 + 2 x 1; leaving the keys-only index costs one unit.
        assert_eq!(c.wru, 2.0 + 6.0);
        assert_eq!(c.gsi_wru, 1.0 + 1.0);
        assert!(t.get(&Key::new("TASK#1", "META")).await.unwrap().is_some());
        assert!(t.get(&Key::new("nope", "nope")).await.unwrap().is_none());
        let c = counts.snapshot();
        assert_eq!((c.get_item, c.rru), (2, 2.0));
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[tokio::test]
    async fn a_five_step_task_is_counted_end_to_end() {
        let run = run_task(5, 2048).await.unwrap();
        assert_eq!(run.worker_invocations, 1);
        assert_eq!(run.ingest.sqs_send, 1, "ingest sends the wake");
        assert!(
            run.ingest.transact >= 1,
            "dedupe and task in one transaction"
        );
        assert!(run.worker.dynamodb_requests() >= 5, "a checkpoint per step");
        assert!(run.worker.s3_put >= 1, "the trace");
        assert!(run.worker.wru > run.ingest.wru);
    }
}
