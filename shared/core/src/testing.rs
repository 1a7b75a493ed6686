//! Test doubles of the ports, for the unit tests of this and other crates
//! (feature `testing`). Real adapters are tested against real servers;
//! these are for logic above the ports.

use crate::blob::{BlobError, BlobStore};
use crate::queue::{Delivery, QueueError, WorkQueue};
use crate::table::{Condition, Item, Key, ListingEntry, Table, TableError, Write};
use async_trait::async_trait;
use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

/// An in-memory [`Table`] with the port's conditional, all-or-nothing
/// semantics. It can also pretend that a write which applied failed, as an
/// SDK retry of a write that had in fact succeeded does.
#[derive(Default)]
pub struct MemoryTable {
    items: Mutex<BTreeMap<Key, Item>>,
    lie_after_next_write: AtomicBool,
}

impl MemoryTable {
    /// The next write applies, then reports a failed condition.
    pub fn lie_after_next_write(&self) {
        self.lie_after_next_write.store(true, Ordering::SeqCst);
    }

    /// Every stored key, in order.
    pub fn keys(&self) -> Vec<Key> {
        self.items().keys().cloned().collect()
    }

    fn items(&self) -> std::sync::MutexGuard<'_, BTreeMap<Key, Item>> {
        self.items.lock().unwrap_or_else(|e| e.into_inner())
    }
}

#[async_trait]
impl Table for MemoryTable {
    async fn get(&self, key: &Key) -> Result<Option<Item>, TableError> {
        Ok(self.items().get(key).cloned())
    }

    async fn query(
        &self,
        pk: &str,
        prefix: &str,
        after: Option<&str>,
        limit: usize,
    ) -> Result<Vec<Item>, TableError> {
        Ok(self
            .items()
            .values()
            .filter(|i| {
                i.key.pk == pk
                    && i.key.sk.starts_with(prefix)
                    && after.is_none_or(|a| i.key.sk.as_str() > a)
            })
            .take(limit)
            .cloned()
            .collect())
    }

    async fn query_index(&self, index: &str, limit: usize) -> Result<Vec<Item>, TableError> {
        Ok(self
            .items()
            .values()
            .filter(|i| i.index.as_deref() == Some(index))
            .take(limit)
            .cloned()
            .collect())
    }

    async fn query_listing(
        &self,
        partition: &str,
        before: Option<&str>,
        limit: usize,
    ) -> Result<Vec<ListingEntry>, TableError> {
        let mut out: Vec<ListingEntry> = self
            .items()
            .values()
            .filter_map(|i| {
                let l = i.listing.as_ref()?;
                (l.partition == partition && before.is_none_or(|b| l.sort.as_str() < b)).then(
                    || ListingEntry {
                        sort: l.sort.clone(),
                        key: i.key.clone(),
                    },
                )
            })
            .collect();
        out.sort_by(|a, b| b.sort.cmp(&a.sort));
        out.truncate(limit);
        Ok(out)
    }

    async fn transact(&self, writes: Vec<Write>) -> Result<(), TableError> {
        let mut items = self.items();
        for (index, w) in writes.iter().enumerate() {
            let (key, condition) = match w {
                Write::Put { item, condition } => (&item.key, condition),
                Write::Delete { key, condition } => (key, condition),
            };
            let ok = match condition {
                Condition::None => true,
                Condition::NotExists => !items.contains_key(key),
                Condition::VersionIs(v) => items.get(key).is_some_and(|i| i.version == *v),
            };
            if !ok {
                return Err(TableError::ConditionFailed { index });
            }
        }
        for w in writes {
            match w {
                Write::Put { item, .. } => {
                    items.insert(item.key.clone(), item);
                }
                Write::Delete { key, .. } => {
                    items.remove(&key);
                }
            }
        }
        if self.lie_after_next_write.swap(false, Ordering::SeqCst) {
            return Err(TableError::ConditionFailed { index: 0 });
        }
        Ok(())
    }
}

/// What a [`RecordingTable`] saw since it was last taken.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct TableLog {
    /// Item reads: gets (each key of a batch get counts) and queries.
    pub reads: usize,
    /// The number of writes in each transaction, in order.
    pub transactions: Vec<usize>,
}

impl TableLog {
    /// Items written, over all transactions.
    pub fn items_written(&self) -> usize {
        self.transactions.iter().sum()
    }
}

/// A [`Table`] over another that records the work asked of it, so a test
/// can show that a path does a bounded amount of it.
/// It can also refuse every write, as a table that is down does.
pub struct RecordingTable {
    inner: Arc<dyn Table>,
    log: Mutex<TableLog>,
    refuse_writes: AtomicBool,
}

impl RecordingTable {
    pub fn new(inner: Arc<dyn Table>) -> Self {
        RecordingTable {
            inner,
            log: Mutex::default(),
            refuse_writes: AtomicBool::new(false),
        }
    }

    /// From now on every transaction fails as unavailable (or, with
    /// `false`, goes through again).
    pub fn refuse_writes(&self, refuse: bool) {
        self.refuse_writes.store(refuse, Ordering::SeqCst);
    }

    /// What was recorded since the last call, which starts afresh.
    pub fn take(&self) -> TableLog {
        std::mem::take(&mut *self.log.lock().unwrap_or_else(|e| e.into_inner()))
    }

    fn note(&self, f: impl FnOnce(&mut TableLog)) {
        f(&mut self.log.lock().unwrap_or_else(|e| e.into_inner()));
    }
}

#[async_trait]
impl Table for RecordingTable {
    async fn get(&self, key: &Key) -> Result<Option<Item>, TableError> {
        self.note(|l| l.reads += 1);
        self.inner.get(key).await
    }

    async fn get_many(&self, keys: &[Key]) -> Result<Vec<Option<Item>>, TableError> {
        self.note(|l| l.reads += keys.len());
        self.inner.get_many(keys).await
    }

    async fn query(
        &self,
        pk: &str,
        prefix: &str,
        after: Option<&str>,
        limit: usize,
    ) -> Result<Vec<Item>, TableError> {
        self.note(|l| l.reads += 1);
        self.inner.query(pk, prefix, after, limit).await
    }

    async fn query_index(&self, index: &str, limit: usize) -> Result<Vec<Item>, TableError> {
        self.note(|l| l.reads += 1);
        self.inner.query_index(index, limit).await
    }

    async fn query_listing(
        &self,
        partition: &str,
        before: Option<&str>,
        limit: usize,
    ) -> Result<Vec<ListingEntry>, TableError> {
        self.note(|l| l.reads += 1);
        self.inner.query_listing(partition, before, limit).await
    }

    async fn transact(&self, writes: Vec<Write>) -> Result<(), TableError> {
        self.note(|l| l.transactions.push(writes.len()));
        if self.refuse_writes.load(Ordering::SeqCst) {
            return Err(TableError::Unavailable("writes refused by the test".into()));
        }
        self.inner.transact(writes).await
    }
}

/// A [`WorkQueue`] that keeps what it is sent (body and delay) and
/// delivers nothing.
#[derive(Default)]
pub struct SentQueue {
    sent: Mutex<Vec<(String, std::time::Duration)>>,
}

impl SentQueue {
    /// Every message sent so far, in order.
    pub fn sent(&self) -> Vec<(String, std::time::Duration)> {
        self.sent.lock().map(|s| s.clone()).unwrap_or_default()
    }
}

#[async_trait]
impl WorkQueue for SentQueue {
    async fn send(&self, body: &str, delay: std::time::Duration) -> Result<(), QueueError> {
        if let Ok(mut s) = self.sent.lock() {
            s.push((body.to_owned(), delay));
        }
        Ok(())
    }
    async fn receive(&self, _: usize, _: std::time::Duration) -> Result<Vec<Delivery>, QueueError> {
        Ok(Vec::new())
    }
    async fn delete(&self, _: &str) -> Result<(), QueueError> {
        Ok(())
    }
    async fn extend(&self, _: &str, _: std::time::Duration) -> Result<(), QueueError> {
        Ok(())
    }
}

/// A [`BlobStore`] that has nothing and refuses writes.
pub struct NoBlobs;

#[async_trait]
impl BlobStore for NoBlobs {
    async fn put(&self, _: &str, _: Vec<u8>) -> Result<(), BlobError> {
        Err(BlobError::Unavailable("no blob store in this test".into()))
    }
    async fn get(&self, _: &str) -> Result<Option<Vec<u8>>, BlobError> {
        Ok(None)
    }
    async fn list(&self, _: &str) -> Result<Vec<String>, BlobError> {
        Ok(Vec::new())
    }
}

/// The task listing's contract, for every [`Table`] adapter to run over
/// its own backend: 37 tasks (some created in the same millisecond), paged
/// newest first with no task twice or missing, each filter, and the expiry
/// of a task that ended. The store must be empty and keep 90 days.
pub async fn check_task_listing(store: &crate::TaskStore) {
    use crate::listing::{Cursor, TaskFilter};
    use crate::{Limits, Origin, Task, TaskId, TaskStatus};

    async fn pages(store: &crate::TaskStore, filter: &TaskFilter, limit: usize) -> Vec<TaskId> {
        let mut out: Vec<TaskId> = Vec::new();
        let mut cursor: Option<Cursor> = None;
        for _ in 0..100 {
            let page = store
                .list_tasks(filter, limit, cursor.as_ref())
                .await
                .expect("list");
            assert!(page.tasks.len() <= limit);
            out.extend(page.tasks.into_iter().map(|t| t.id));
            match page.next {
                // Through its text, as a client would hand it back.
                Some(c) => cursor = Some(Cursor::decode(&c.encode()).expect("own cursor")),
                None => return out,
            }
        }
        panic!("the listing did not end");
    }

    let base = crate::now_ms() - 60_000;
    let mut made: Vec<Task> = Vec::new();
    for i in 0..37i64 {
        let agent = if i % 3 == 0 { "ops" } else { "default" };
        let thread = (i % 4 == 0).then(|| "http:chat-1".to_owned());
        let task = Task::new(
            TaskId::generate(),
            agent,
            Origin::Http,
            thread,
            Limits::default(),
            base + i / 2,
        );
        store
            .create(
                &task,
                vec![crate::EntryKind::UserMessage {
                    text: "hi".into(),
                    from: None,
                }],
                None,
            )
            .await
            .expect("create");
        made.push(task);
    }
    for task in made.iter().step_by(5) {
        // Every other ended task rated up, the rest down.
        let rating = if made.iter().position(|m| m.id == task.id).unwrap_or(0) % 10 == 0 {
            crate::task::feedback::Rating::Positive
        } else {
            crate::task::feedback::Rating::Negative
        };
        let (ended, _) = store
            .update(&task.id, None, |t| {
                t.finish(TaskStatus::Succeeded);
                t.answer.feedback = vec![crate::task::feedback::Feedback {
                    user: "U1".into(),
                    rating,
                    at: t.updated_at,
                    action_ts: None,
                }];
                Ok(Some(Vec::new()))
            })
            .await
            .expect("end");
        let item = store
            .table()
            .get(&Key::new(format!("TASK#{}", task.id), "TASK"))
            .await
            .expect("get")
            .expect("the task");
        assert_eq!(
            item.expires_at,
            Some(ended.updated_at.unix_secs() + 90 * 24 * 3600),
            "an ended task expires 90 days after its end"
        );
        assert!(item.listing.is_some(), "an ended task stays listed");
    }
    let ended: Vec<TaskId> = made.iter().step_by(5).map(|t| t.id.clone()).collect();
    let mut newest_first = made.clone();
    newest_first.sort_by(|a, b| (b.created_at, &b.id).cmp(&(a.created_at, &a.id)));
    let want = |keep: &dyn Fn(&Task) -> bool| -> Vec<TaskId> {
        newest_first
            .iter()
            .filter(|t| keep(t))
            .map(|t| t.id.clone())
            .collect()
    };

    let all = pages(store, &TaskFilter::default(), 10).await;
    assert_eq!(all, want(&|_| true), "every task once, newest first");
    assert_eq!(pages(store, &TaskFilter::default(), 100).await, all);
    // One a page: each shard is read two entries at a time, so an adapter
    // that does not read a shard newest first shows here.
    assert_eq!(pages(store, &TaskFilter::default(), 1).await, all);
    let by_agent = TaskFilter {
        agent: Some("ops".into()),
        ..TaskFilter::default()
    };
    assert_eq!(
        pages(store, &by_agent, 3).await,
        want(&|t| t.agent == "ops")
    );
    let by_thread = TaskFilter {
        thread: Some("chat-1".into()),
        ..TaskFilter::default()
    };
    assert_eq!(
        pages(store, &by_thread, 4).await,
        want(&|t| t.conversation.thread.is_some())
    );
    let by_status = TaskFilter {
        status: Some(TaskStatus::Succeeded),
        ..TaskFilter::default()
    };
    assert_eq!(
        pages(store, &by_status, 2).await,
        want(&|t| ended.contains(&t.id))
    );
    let queued_ops = TaskFilter {
        status: Some(TaskStatus::Queued),
        agent: Some("ops".into()),
        ..TaskFilter::default()
    };
    assert_eq!(
        pages(store, &queued_ops, 5).await,
        want(&|t| t.agent == "ops" && !ended.contains(&t.id))
    );
    let nobody = TaskFilter {
        agent: Some("nobody".into()),
        ..TaskFilter::default()
    };
    assert!(pages(store, &nobody, 5).await.is_empty());
    let position = |t: &Task| made.iter().position(|m| m.id == t.id).unwrap_or(1);
    for (feedback, keep) in [
        (
            crate::listing::FeedbackFilter::Up,
            &(|t: &Task| position(t) % 10 == 0) as &dyn Fn(&Task) -> bool,
        ),
        (crate::listing::FeedbackFilter::Down, &|t: &Task| {
            position(t) % 10 == 5
        }),
        (crate::listing::FeedbackFilter::Any, &|t: &Task| {
            position(t) % 5 == 0
        }),
    ] {
        let rated = TaskFilter {
            feedback: Some(feedback),
            ..TaskFilter::default()
        };
        assert_eq!(pages(store, &rated, 2).await, want(keep), "{feedback:?}");
    }
    // Since an instant: the newest tasks only, with or without other filters.
    let since = crate::Instant(base + 10);
    let recent = TaskFilter {
        since: Some(since),
        ..TaskFilter::default()
    };
    let newer = |t: &Task| t.created_at >= since;
    assert_eq!(pages(store, &recent, 3).await, want(&newer));
    assert_eq!(pages(store, &recent, 100).await, want(&newer));
    let recent_ops = TaskFilter {
        since: Some(since),
        agent: Some("ops".into()),
        ..TaskFilter::default()
    };
    assert_eq!(
        pages(store, &recent_ops, 2).await,
        want(&|t| newer(t) && t.agent == "ops")
    );
}

/// A [`Sealer`](crate::connection::Sealer) for tests: reversible without a
/// key, but the stored bytes never hold the plaintext as it was, and a
/// wrong context or a changed byte fails to open, as with the real ones.
#[derive(Default)]
pub struct TestSealer;

impl TestSealer {
    /// The plaintext masked, then a checksum of context and plaintext
    /// standing in for the tag.
    fn mask(context: &str, bytes: &[u8]) -> Vec<u8> {
        let mut out: Vec<u8> = bytes.iter().map(|b| b ^ 0xA5).collect();
        out.extend(Self::tag(context, bytes));
        out
    }

    fn tag(context: &str, plain: &[u8]) -> [u8; 8] {
        let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
        for byte in context.bytes().chain([0]).chain(plain.iter().copied()) {
            hash ^= u64::from(byte);
            hash = hash.wrapping_mul(0x0000_0100_0000_01b3);
        }
        hash.to_be_bytes()
    }
}

#[async_trait]
impl crate::connection::Sealer for TestSealer {
    async fn seal(
        &self,
        plaintext: &[u8],
        context: &str,
    ) -> Result<Vec<u8>, crate::connection::SealError> {
        Ok(Self::mask(context, plaintext))
    }

    async fn open(
        &self,
        sealed: &[u8],
        context: &str,
    ) -> Result<Vec<u8>, crate::connection::SealError> {
        let fail = || crate::connection::SealError {
            action: "open",
            reason: "the item or its context does not match".into(),
        };
        let cut = sealed.len().checked_sub(8).ok_or_else(fail)?;
        let plain: Vec<u8> = sealed[..cut].iter().map(|b| b ^ 0xA5).collect();
        if sealed[cut..] != Self::tag(context, &plain) {
            return Err(fail());
        }
        Ok(plain)
    }
}

/// Puts `t` in `status` as a record of an earlier release, a crash or a
/// concurrent writer could leave it, past the transitions' guard
/// ([`crate::task::lifecycle`]): for tests of what reads such a record.
pub fn set_status(t: &mut crate::Task, status: crate::TaskStatus) {
    t.status = status;
}

/// Takes `t`'s lease away, as another segment taking it over (or a
/// crash) does from a running segment's view.
pub fn lose_lease(t: &mut crate::Task) {
    t.lease.clear();
}
