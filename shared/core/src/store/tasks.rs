//! Task persistence: the task record, its transcript, dedupe keys and
//! threads, written over the [`Table`] port with the conditions that make
//! the execution protocol safe.
//!
//! Item layout (one table):
//!
//! | item | pk | sk | index |
//! | --- | --- | --- | --- |
//! | task | `TASK#{id}` | `TASK` | `active#{shard}` while not terminal; listing `tasks#{shard}` ([`crate::listing`]) |
//! | transcript entry | `TASK#{id}` | `E#{seq:010}` | |
//! | dedupe key | `DEDUPE#{key}` | `DEDUPE` | |
//! | thread | `THREAD#{key}` | `THREAD` | |

use super::error::StoreError;
use crate::blob::BlobStore;
use crate::clock::Instant;
use crate::ids::TaskId;
use crate::listing::{self, listing_key, Cursor, TaskFilter, TaskPage};
use crate::retention::{self, Retention};
use crate::table::{Condition, Item, Key, Table, TableError, Write};
use crate::task::Task;
use crate::transcript::{Entry, EntryKind};
use serde::{Deserialize, Serialize};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

/// The sparse index listing tasks that are not terminal (for the reaper),
/// before it was sharded: read until no task is left in it (tasks started
/// by an earlier release move to a shard on their next write).
pub const LEGACY_ACTIVE_INDEX: &str = "active";
/// How many shards the active-task index is spread over by default. Every
/// write of a task entering or leaving the index lands on one shard, so
/// one index partition takes 1/N of them (docs/scale.md).
pub const DEFAULT_ACTIVE_SHARDS: u32 = 16;
/// The most shards the setting may name.
pub const MAX_ACTIVE_SHARDS: u32 = 256;
/// How long dedupe keys are kept.
pub const DEDUPE_TTL_SECS: i64 = 24 * 3600;
/// Entries whose JSON is larger than this go to the blob store. DynamoDB
/// items hold 400 KB; this leaves room for keys and attributes.
pub const DEFAULT_OFFLOAD_THRESHOLD: usize = 64 * 1024;
/// How often a conflicting update is retried before giving up.
const MAX_CONFLICT_RETRIES: usize = 20;

/// The outcome of creating a task under a dedupe key.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Created {
    New(TaskId),
    /// The key was seen before: this is the task it created.
    Duplicate(TaskId),
}

#[derive(Serialize, Deserialize)]
struct DedupeRecord {
    task_id: TaskId,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    fingerprint: Option<String>,
}

/// A request's claim on its dedupe key: the key, and optionally a digest
/// of what the request asked, so that the key reused for a different
/// request ([`StoreError::KeyReused`]) is told apart from a retry.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Claim<'a> {
    pub key: &'a str,
    pub fingerprint: Option<&'a str>,
}

impl<'a> From<&'a str> for Claim<'a> {
    fn from(key: &'a str) -> Self {
        Claim {
            key,
            fingerprint: None,
        }
    }
}

/// A conversation: which task, if any, is running on it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Thread {
    pub key: String,
    pub active_task: Option<TaskId>,
    /// The conversation's earlier turns, for its next task.
    #[serde(default, skip_serializing_if = "crate::recap::Recap::is_unset")]
    pub recap: crate::recap::Recap,
    /// The newest Slack message (`ts`) the conversation took in: a task
    /// that joins the thread later reads only what came after it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub seen_ts: Option<String>,
    /// Kinds of calls people allowed for the rest of the conversation
    /// ("Always in this thread"): they run without asking.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub always: Vec<crate::task::always::AlwaysRule>,
    /// Tasks waiting their turn on the conversation, in order of arrival
    /// (`on_new_message = "queue"` or `"interrupt"`, [`crate::turn`]).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub waiting: Vec<TaskId>,
    #[serde(skip)]
    pub version: u64,
}

/// Typed access to tasks and transcripts. Cheap to clone.
#[derive(Clone)]
pub struct TaskStore {
    table: Arc<dyn Table>,
    blobs: Arc<dyn BlobStore>,
    offload_threshold: usize,
    bytes_written: Arc<AtomicU64>,
    active_shards: u32,
    retention: Retention,
}

/// Adds the tasks of an index page that `seen` does not hold yet, up to
/// `limit` in `out`: each is read from its JSON once, whichever pass
/// meets it first.
fn push_tasks(
    out: &mut Vec<Task>,
    seen: &mut std::collections::HashSet<Key>,
    page: Vec<Item>,
    limit: usize,
) -> Result<(), StoreError> {
    for item in page {
        if out.len() >= limit {
            break;
        }
        if item.key.sk != "TASK" || !seen.insert(item.key.clone()) {
            continue;
        }
        out.push(Task::from_record(&item.data, item.version).map_err(corrupt)?);
    }
    Ok(())
}

/// The index shard of a task that is not terminal: `active#{n}`, `n`
/// derived from the task id.
pub fn active_index(id: &TaskId, shards: u32) -> String {
    format!(
        "{LEGACY_ACTIVE_INDEX}#{:02}",
        crate::table::shard_of(id.as_str(), shards)
    )
}

fn task_key(id: &TaskId) -> Key {
    Key::new(format!("TASK#{id}"), "TASK")
}

fn dedupe_key(key: &str) -> Key {
    Key::new(format!("DEDUPE#{key}"), "DEDUPE")
}

fn entry_sk(seq: u64) -> String {
    format!("E#{seq:010}")
}

/// Every task written goes through here: one that breaks a rule of the
/// record ([`Task::check`]) is refused, never stored.
fn check(task: &Task) -> Result<(), StoreError> {
    task.check()
        .map_err(|broken| StoreError::Invalid(task.id.clone(), broken))
}

fn corrupt(e: serde_json::Error) -> StoreError {
    StoreError::Corrupt(e.to_string())
}

impl TaskStore {
    pub fn new(table: Arc<dyn Table>, blobs: Arc<dyn BlobStore>) -> Self {
        TaskStore {
            table,
            blobs,
            offload_threshold: DEFAULT_OFFLOAD_THRESHOLD,
            bytes_written: Arc::new(AtomicU64::new(0)),
            active_shards: DEFAULT_ACTIVE_SHARDS,
            retention: Retention::default(),
        }
    }

    /// How long finished tasks and their transcripts are kept
    /// (`BATON_TASK_RETENTION_DAYS`, [`crate::retention`]).
    pub fn with_retention(mut self, retention: Retention) -> Self {
        self.retention = retention;
        self
    }

    pub fn retention(&self) -> Retention {
        self.retention
    }

    /// Spreads the active-task index over `shards` shards (clamped to
    /// `1..=MAX_ACTIVE_SHARDS`). Every process of a deployment must use
    /// the same number; raising it later is safe (the listing reads every
    /// shard up to the new number), lowering it strands tasks in the
    /// shards no longer read until their next write.
    pub fn with_active_shards(mut self, shards: u32) -> Self {
        self.active_shards = shards.clamp(1, MAX_ACTIVE_SHARDS);
        self
    }

    pub fn active_shards(&self) -> u32 {
        self.active_shards
    }

    pub fn with_offload_threshold(mut self, bytes: usize) -> Self {
        self.offload_threshold = bytes;
        self
    }

    pub fn table(&self) -> &Arc<dyn Table> {
        &self.table
    }

    pub fn blobs(&self) -> &Arc<dyn BlobStore> {
        &self.blobs
    }

    /// Logical bytes written through this store (item bodies and blobs), for
    /// benchmarks.
    pub fn bytes_written(&self) -> u64 {
        self.bytes_written.load(Ordering::Relaxed)
    }

    fn task_item(&self, task: &Task) -> Result<Item, StoreError> {
        let data = serde_json::to_string(task).map_err(corrupt)?;
        Ok(Item {
            key: task_key(&task.id),
            version: task.version,
            data,
            index: (!task.status.is_terminal()).then(|| active_index(&task.id, self.active_shards)),
            expires_at: if task.status.is_terminal() {
                self.retention.task_expires_at(task.updated_at)
            } else {
                None
            },
            // Fixed at creation, so no later write changes the index entry.
            listing: Some(listing_key(&task.id, task.created_at)),
        })
    }

    /// Turns new entry kinds into items, numbering them from the task's
    /// `next_seq` and offloading any that are too large.
    async fn entry_items(
        &self,
        task: &mut Task,
        kinds: Vec<EntryKind>,
        now: Instant,
    ) -> Result<(Vec<Entry>, Vec<Item>), StoreError> {
        let mut entries = Vec::with_capacity(kinds.len());
        let mut items = Vec::with_capacity(kinds.len());
        for kind in kinds {
            let entry = Entry {
                seq: task.next_seq,
                at: now,
                kind,
            };
            task.next_seq += 1;
            let mut data = serde_json::to_string(&entry).map_err(corrupt)?;
            if data.len() > self.offload_threshold {
                let blob_key = format!("tasks/{}/entries/{:010}.json", task.id, entry.seq);
                let bytes = data.len() as u64;
                self.bytes_written.fetch_add(bytes, Ordering::Relaxed);
                self.blobs.put(&blob_key, data.into_bytes()).await?;
                let pointer = Entry {
                    seq: entry.seq,
                    at: now,
                    kind: EntryKind::Offloaded { blob_key, bytes },
                };
                data = serde_json::to_string(&pointer).map_err(corrupt)?;
            }
            items.push(Item {
                key: Key::new(format!("TASK#{}", task.id), entry_sk(entry.seq)),
                version: 0,
                data,
                index: None,
                expires_at: self.retention.entry_expires_at(now),
                listing: None,
            });
            entries.push(entry);
        }
        Ok((entries, items))
    }

    fn count(&self, writes: &[Write]) {
        let n: usize = writes
            .iter()
            .map(|w| match w {
                Write::Put { item, .. } => item.data.len(),
                Write::Delete { .. } => 0,
            })
            .sum();
        self.bytes_written.fetch_add(n as u64, Ordering::Relaxed);
    }

    fn dedupe_write(
        &self,
        claim: Claim<'_>,
        task_id: &TaskId,
        now: Instant,
    ) -> Result<Write, StoreError> {
        let record = DedupeRecord {
            task_id: task_id.clone(),
            fingerprint: claim.fingerprint.map(str::to_owned),
        };
        Ok(Write::Put {
            item: Item {
                key: dedupe_key(claim.key),
                version: 1,
                data: serde_json::to_string(&record).map_err(corrupt)?,
                index: None,
                expires_at: Some(now.unix_secs() + DEDUPE_TTL_SECS),
                listing: None,
            },
            condition: Condition::NotExists,
        })
    }

    /// The task a dedupe key was claimed for; [`StoreError::KeyReused`]
    /// when the claim that took it had another fingerprint.
    async fn claimed_by(&self, claim: Claim<'_>) -> Result<TaskId, StoreError> {
        let item = self
            .table
            .get(&dedupe_key(claim.key))
            .await?
            .ok_or_else(|| StoreError::Corrupt("dedupe key vanished".into()))?;
        let record: DedupeRecord = serde_json::from_str(&item.data).map_err(corrupt)?;
        match (record.fingerprint.as_deref(), claim.fingerprint) {
            (Some(first), Some(now)) if first != now => Err(StoreError::KeyReused(record.task_id)),
            _ => Ok(record.task_id),
        }
    }

    /// Creates a task with its first entries. With a dedupe key, the key is
    /// claimed in the same transaction: a second create with the same key
    /// writes nothing and returns the first task's id.
    pub async fn create(
        &self,
        task: &Task,
        first_entries: Vec<EntryKind>,
        claim: Option<Claim<'_>>,
    ) -> Result<Created, StoreError> {
        check(task)?;
        let mut task = task.clone();
        task.version = 1;
        if task.conversation.summary.is_none() {
            task.conversation.summary = first_entries.iter().find_map(|e| match e {
                EntryKind::UserMessage { text, .. } => Some(crate::task::parts::summary_of(text)),
                _ => None,
            });
        }
        let created_at = task.created_at;
        let (_, entry_items) = self
            .entry_items(&mut task, first_entries, created_at)
            .await?;
        let mut writes = Vec::new();
        if let Some(claim) = claim {
            writes.push(self.dedupe_write(claim, &task.id, created_at)?);
        }
        writes.push(Write::Put {
            item: self.task_item(&task)?,
            condition: Condition::NotExists,
        });
        writes.extend(entry_items.into_iter().map(|item| Write::Put {
            item,
            condition: Condition::NotExists,
        }));
        self.count(&writes);
        match self.table.transact(writes).await {
            Ok(()) => Ok(Created::New(task.id.clone())),
            Err(TableError::ConditionFailed { index: 0 }) => match claim {
                Some(claim) => Ok(Created::Duplicate(self.claimed_by(claim).await?)),
                None => Err(TableError::ConditionFailed { index: 0 }.into()),
            },
            Err(e) => Err(e.into()),
        }
    }

    pub async fn get(&self, id: &TaskId) -> Result<Option<Task>, StoreError> {
        let Some(item) = self.table.get(&task_key(id)).await? else {
            return Ok(None);
        };
        Task::from_record(&item.data, item.version)
            .map(Some)
            .map_err(corrupt)
    }

    /// Writes `task` (whose `version` is the one it was read at) and appends
    /// `new_entries`, all or nothing, if nobody wrote the task since. On
    /// success `task` carries its new version and `next_seq`.
    pub async fn commit(
        &self,
        task: &mut Task,
        new_entries: Vec<EntryKind>,
    ) -> Result<Vec<Entry>, StoreError> {
        self.commit_claiming(task, new_entries, None).await
    }

    /// [`commit`](Self::commit), and in the same transaction claim a dedupe
    /// key: if the key was claimed before, nothing is written and the result
    /// is [`StoreError::AlreadyClaimed`].
    pub async fn commit_claiming(
        &self,
        task: &mut Task,
        new_entries: Vec<EntryKind>,
        claim: Option<Claim<'_>>,
    ) -> Result<Vec<Entry>, StoreError> {
        check(task)?;
        let now = Instant::now();
        let mut next = task.clone();
        next.version = task.version + 1;
        next.updated_at = now.max(task.updated_at);
        let commit_id = uuid::Uuid::new_v4().simple().to_string();
        next.answer.last_commit = Some(commit_id.clone());
        let (entries, items) = self.entry_items(&mut next, new_entries, now).await?;
        let mut writes = vec![Write::Put {
            item: self.task_item(&next)?,
            condition: Condition::VersionIs(task.version),
        }];
        writes.extend(items.into_iter().map(|item| Write::Put {
            item,
            condition: Condition::NotExists,
        }));
        if let Some(claim) = claim {
            writes.push(self.dedupe_write(claim, &task.id, now)?);
        }
        let claim_index = writes.len() - 1;
        self.count(&writes);
        match self.table.transact(writes).await {
            Ok(()) => {
                *task = next;
                if task.status.is_terminal() {
                    // The end is committed; a failure here leaves some
                    // entries to expire early, which is logged, not fatal.
                    // (Only tasks older than the horizon read anything.)
                    if let Err(e) =
                        retention::restamp_long_lived(self.table.as_ref(), self.retention, task)
                            .await
                    {
                        tracing::warn!(task_id = %task.id, error = %e, "re-stamping the expiry of a long task's entries failed");
                    }
                }
                Ok(entries)
            }
            Err(TableError::ConditionFailed { index })
                if claim.is_some() && index == claim_index =>
            {
                match claim {
                    Some(claim) => Err(StoreError::AlreadyClaimed(self.claimed_by(claim).await?)),
                    None => Err(StoreError::Conflict(task.id.clone())),
                }
            }
            Err(TableError::ConditionFailed { .. }) | Err(TableError::Contention) => {
                // A retried write that had in fact applied fails its own
                // condition: the stored commit id tells.
                match self.get(&task.id).await? {
                    Some(stored)
                        if stored.answer.last_commit.as_deref() == Some(commit_id.as_str()) =>
                    {
                        *task = stored;
                        Ok(entries)
                    }
                    _ => Err(StoreError::Conflict(task.id.clone())),
                }
            }
            Err(e) => Err(e.into()),
        }
    }

    /// Read-modify-write with optimistic concurrency: applies `change` to
    /// the freshest task (starting from `cached`, if given, to save a read)
    /// and commits, retrying from a fresh read on conflict. `change` decides
    /// anew each time, so it may refuse (return an error) when the task it
    /// sees no longer allows the change. `Ok(None)` means "nothing to write".
    pub async fn update<F>(
        &self,
        id: &TaskId,
        cached: Option<Task>,
        change: F,
    ) -> Result<(Task, Vec<Entry>), StoreError>
    where
        F: FnMut(&mut Task) -> Result<Option<Vec<EntryKind>>, StoreError>,
    {
        self.update_claiming(id, cached, None, change).await
    }

    /// [`update`](Self::update) with the caller's error type, so a change
    /// can refuse with an error of its own (the worker's "lease lost")
    /// rather than one described in text.
    pub async fn update_with<F, E>(
        &self,
        id: &TaskId,
        cached: Option<Task>,
        change: F,
    ) -> Result<(Task, Vec<Entry>), E>
    where
        F: FnMut(&mut Task) -> Result<Option<Vec<EntryKind>>, E>,
        E: From<StoreError>,
    {
        self.apply(id, cached, None, change).await
    }

    /// [`update`](Self::update) that also claims a dedupe key with the
    /// write, so a retried request changes the task only once.
    pub async fn update_claiming<F>(
        &self,
        id: &TaskId,
        cached: Option<Task>,
        claim: Option<Claim<'_>>,
        change: F,
    ) -> Result<(Task, Vec<Entry>), StoreError>
    where
        F: FnMut(&mut Task) -> Result<Option<Vec<EntryKind>>, StoreError>,
    {
        self.apply(id, cached, claim, change).await
    }

    /// The read-change-write loop behind every update: re-reads and
    /// re-applies `change` after a conflicting write.
    async fn apply<F, E>(
        &self,
        id: &TaskId,
        cached: Option<Task>,
        claim: Option<Claim<'_>>,
        mut change: F,
    ) -> Result<(Task, Vec<Entry>), E>
    where
        F: FnMut(&mut Task) -> Result<Option<Vec<EntryKind>>, E>,
        E: From<StoreError>,
    {
        let mut current = cached;
        for _ in 0..MAX_CONFLICT_RETRIES {
            let mut task = match current.take() {
                Some(t) => t,
                None => self
                    .get(id)
                    .await?
                    .ok_or_else(|| StoreError::NotFound(id.clone()))?,
            };
            let before = task.clone();
            let Some(entries) = change(&mut task)? else {
                return Ok((before, Vec::new()));
            };
            task.version = before.version;
            match self.commit_claiming(&mut task, entries, claim).await {
                Ok(written) => return Ok((task, written)),
                Err(StoreError::Conflict(_)) => continue,
                Err(e) => return Err(e.into()),
            }
        }
        Err(StoreError::Conflict(id.clone()).into())
    }

    /// Transcript entries after `after` (exclusive), in order, with
    /// offloaded entries read back from the blob store.
    pub async fn entries(
        &self,
        id: &TaskId,
        after: Option<u64>,
        limit: usize,
    ) -> Result<Vec<Entry>, StoreError> {
        let after_sk = after.map(entry_sk);
        let items = self
            .table
            .query(&format!("TASK#{id}"), "E#", after_sk.as_deref(), limit)
            .await?;
        let mut out = Vec::with_capacity(items.len());
        for item in items {
            let entry: Entry = serde_json::from_str(&item.data).map_err(corrupt)?;
            if let EntryKind::Offloaded { blob_key, .. } = &entry.kind {
                let bytes = self
                    .blobs
                    .get(blob_key)
                    .await?
                    .ok_or_else(|| StoreError::Corrupt(format!("missing blob {blob_key}")))?;
                out.push(serde_json::from_slice(&bytes).map_err(corrupt)?);
            } else {
                out.push(entry);
            }
        }
        Ok(out)
    }

    /// The whole transcript.
    pub async fn transcript(&self, id: &TaskId) -> Result<Vec<Entry>, StoreError> {
        self.entries(id, None, usize::MAX).await
    }

    /// Tasks that are not terminal, at most `limit`, read evenly from every
    /// shard of the index (so no shard is starved when there are more than
    /// `limit`) and from the unsharded index of earlier releases. Shards
    /// with fewer than their share leave the rest to the fuller ones, so the
    /// answer is short of `limit` only when fewer tasks are active.
    pub async fn active_tasks(&self, limit: usize) -> Result<Vec<Task>, StoreError> {
        let mut names: Vec<String> = (0..self.active_shards)
            .map(|n| format!("{LEGACY_ACTIVE_INDEX}#{n:02}"))
            .collect();
        names.push(LEGACY_ACTIVE_INDEX.to_owned());
        let per_name = limit.div_ceil(names.len()).max(1);
        let mut out = Vec::new();
        let mut seen = std::collections::HashSet::new();
        // Shards whose page came back full, with how many were read.
        let mut fuller = Vec::new();
        for name in names {
            let left = limit.saturating_sub(out.len()).min(per_name);
            if left == 0 {
                break;
            }
            let page = self.table.query_index(&name, left).await?;
            if page.len() == left {
                fuller.push((name, left));
            }
            push_tasks(&mut out, &mut seen, page, limit)?;
        }
        // The index has no cursor: a fuller shard is read again from its
        // start, leaving out the tasks the first pass took.
        for (name, read) in fuller {
            let left = limit.saturating_sub(out.len());
            if left == 0 {
                break;
            }
            let page = self.table.query_index(&name, read + left).await?;
            push_tasks(&mut out, &mut seen, page, limit)?;
        }
        Ok(out)
    }

    /// A page of the task listing ([`crate::listing`]): up to `limit`
    /// tasks (1 to [`listing::MAX_PAGE`]) that `filter` keeps, newest first,
    /// starting below `after`.
    pub async fn list_tasks(
        &self,
        filter: &TaskFilter,
        limit: usize,
        after: Option<&Cursor>,
    ) -> Result<TaskPage, StoreError> {
        listing::page(&self.table, filter, limit, after).await
    }

    /// Claims `key` for an answer that makes no task (a command word's
    /// reply): true the first time, false for a redelivery of the same
    /// request within the dedupe window, so the answer is posted once.
    pub async fn claim_once(&self, key: &str, now: Instant) -> Result<bool, StoreError> {
        let item = Item {
            key: Key::new(format!("ONCE#{key}"), "ONCE"),
            version: 1,
            data: "{}".to_owned(),
            index: None,
            expires_at: Some(now.unix_secs() + DEDUPE_TTL_SECS),
            listing: None,
        };
        let condition = Condition::NotExists;
        match self
            .table
            .transact(vec![Write::Put { item, condition }])
            .await
        {
            Ok(()) => Ok(true),
            Err(TableError::ConditionFailed { .. }) => Ok(false),
            Err(e) => Err(e.into()),
        }
    }

    pub async fn thread(&self, key: &str) -> Result<Option<Thread>, StoreError> {
        let Some(item) = self
            .table
            .get(&Key::new(format!("THREAD#{key}"), "THREAD"))
            .await?
        else {
            return Ok(None);
        };
        let mut thread: Thread = serde_json::from_str(&item.data).map_err(corrupt)?;
        thread.version = item.version;
        Ok(Some(thread))
    }

    /// Changes conversation `key`'s always-rules with `change` (re-applied
    /// when the conversation changed meanwhile; `false` from it: nothing to
    /// write). The rules after, or `None` when there is no such
    /// conversation.
    pub async fn change_always<F>(
        &self,
        key: &str,
        mut change: F,
    ) -> Result<Option<Vec<crate::task::always::AlwaysRule>>, StoreError>
    where
        F: FnMut(&mut Vec<crate::task::always::AlwaysRule>) -> bool,
    {
        for _ in 0..10 {
            let Some(mut thread) = self.thread(key).await? else {
                return Ok(None);
            };
            if !change(&mut thread.always) || self.put_thread(&thread).await? {
                return Ok(Some(thread.always));
            }
        }
        Err(TableError::Contention.into())
    }

    /// Writes a thread if it is unchanged since it was read (version 0: new).
    pub async fn put_thread(&self, thread: &Thread) -> Result<bool, StoreError> {
        let item = Item {
            key: Key::new(format!("THREAD#{}", thread.key), "THREAD"),
            version: thread.version + 1,
            data: serde_json::to_string(thread).map_err(corrupt)?,
            index: None,
            expires_at: None,
            listing: None,
        };
        let condition = if thread.version == 0 {
            Condition::NotExists
        } else {
            Condition::VersionIs(thread.version)
        };
        match self
            .table
            .transact(vec![Write::Put { item, condition }])
            .await
        {
            Ok(()) => Ok(true),
            Err(TableError::ConditionFailed { .. }) | Err(TableError::Contention) => Ok(false),
            Err(e) => Err(e.into()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::task::{Limits, Origin};
    use crate::testing::{MemoryTable, NoBlobs};

    fn store() -> (TaskStore, Arc<MemoryTable>) {
        let table = Arc::new(MemoryTable::default());
        (TaskStore::new(table.clone(), Arc::new(NoBlobs)), table)
    }

    fn new_task() -> Task {
        Task::new(
            TaskId::generate(),
            "default",
            Origin::Http,
            None,
            Limits::default(),
            Instant::now(),
        )
    }

    #[tokio::test]
    async fn always_rules_are_kept_on_the_conversation_and_forgotten() {
        use crate::task::always::{add, Allowed, AlwaysRule};
        let (store, _) = store();
        let rule = AlwaysRule {
            allowed: Allowed::Tool {
                tool: "deploy".into(),
            },
            by: "U1".into(),
            at: Instant(0),
        };
        // No conversation: nothing to keep a rule on.
        let none = store
            .change_always("slack:T1:C1:1.0", |r| add(r, rule.clone()))
            .await
            .unwrap();
        assert_eq!(none, None);
        let thread = Thread {
            key: "slack:T1:C1:1.0".into(),
            active_task: None,
            recap: Default::default(),
            seen_ts: None,
            always: Vec::new(),
            waiting: Vec::new(),
            version: 0,
        };
        assert!(store.put_thread(&thread).await.unwrap());
        let kept = store
            .change_always(&thread.key, |r| add(r, rule.clone()))
            .await
            .unwrap();
        assert_eq!(kept, Some(vec![rule.clone()]));
        let read = store.thread(&thread.key).await.unwrap().unwrap();
        assert_eq!(read.always, vec![rule]);
        let forgotten = store
            .change_always(&thread.key, |r| !std::mem::take(r).is_empty())
            .await
            .unwrap();
        assert_eq!(forgotten, Some(Vec::new()));
        assert!(store
            .thread(&thread.key)
            .await
            .unwrap()
            .unwrap()
            .always
            .is_empty());
    }

    #[tokio::test]
    async fn an_applied_commit_reported_as_failed_is_recognised_not_repeated() {
        let (store, table) = store();
        let task = new_task();
        store
            .create(
                &task,
                vec![EntryKind::UserMessage {
                    text: "hi".into(),
                    from: None,
                }],
                None,
            )
            .await
            .unwrap();
        let mut current = store.get(&task.id).await.unwrap().unwrap();
        table.lie_after_next_write();
        current.budget.steps += 1;
        let written = store
            .commit(
                &mut current,
                vec![EntryKind::UserMessage {
                    text: "once".into(),
                    from: None,
                }],
            )
            .await
            .expect("the commit applied, so it must be reported as applied");
        assert_eq!(written.len(), 1);
        let transcript = store.transcript(&task.id).await.unwrap();
        assert_eq!(transcript.len(), 2, "applied exactly once");
        assert_eq!(current.version, 2);
        assert_eq!(store.get(&task.id).await.unwrap().unwrap().budget.steps, 1);
    }

    #[tokio::test]
    async fn a_stale_commit_conflicts_and_update_reapplies_on_fresh_state() {
        let (store, _) = store();
        let task = new_task();
        store.create(&task, Vec::new(), None).await.unwrap();
        let mut stale = store.get(&task.id).await.unwrap().unwrap();
        store
            .update(&task.id, None, |t| {
                t.conversation.inbox.push(crate::InboxMessage {
                    text: "steer".into(),
                    from: None,
                });
                Ok(Some(Vec::new()))
            })
            .await
            .unwrap();
        assert!(matches!(
            store.commit(&mut stale, Vec::new()).await,
            Err(StoreError::Conflict(_))
        ));
        let (fresh, _) = store
            .update(&task.id, Some(stale), |t| {
                t.budget.steps += 1;
                Ok(Some(Vec::new()))
            })
            .await
            .unwrap();
        assert_eq!(
            fresh
                .conversation
                .inbox
                .iter()
                .map(|m| m.text.as_str())
                .collect::<Vec<_>>(),
            vec!["steer"],
            "the concurrent write survives"
        );
        assert_eq!(fresh.budget.steps, 1);
    }

    #[tokio::test]
    async fn active_tasks_are_spread_over_shards_and_the_legacy_index_is_read() {
        let (store, table) = store();
        let store = store.with_active_shards(4);
        let mut ids = Vec::new();
        for _ in 0..20 {
            let task = new_task();
            store.create(&task, Vec::new(), None).await.unwrap();
            ids.push(task.id);
        }
        // A task written by a release before sharding.
        let old = new_task();
        table
            .transact(vec![Write::Put {
                item: Item {
                    key: task_key(&old.id),
                    version: 1,
                    data: serde_json::to_string(&old).unwrap(),
                    index: Some(LEGACY_ACTIVE_INDEX.to_owned()),
                    expires_at: None,
                    listing: None,
                },
                condition: Condition::NotExists,
            }])
            .await
            .unwrap();
        let shards: std::collections::BTreeSet<String> =
            ids.iter().map(|id| active_index(id, 4)).collect();
        assert!(shards.len() > 1, "20 tasks on one shard: {shards:?}");
        assert!(shards.iter().all(|s| s.starts_with("active#0")));
        let mut listed: Vec<TaskId> = store
            .active_tasks(100)
            .await
            .unwrap()
            .into_iter()
            .map(|t| t.id)
            .collect();
        assert_eq!(listed.len(), 21);
        listed.sort();
        let mut want = ids.clone();
        want.push(old.id.clone());
        want.sort();
        assert_eq!(listed, want);
        // Shards hold uneven numbers of tasks: the limit is met whatever
        // it is, from the fuller shards when the others run short.
        for limit in 1..=21 {
            let some = store.active_tasks(limit).await.unwrap();
            assert_eq!(some.len(), limit, "the limit holds");
            let distinct: std::collections::BTreeSet<&TaskId> =
                some.iter().map(|t| &t.id).collect();
            assert_eq!(distinct.len(), limit, "no task twice");
        }

        // A terminal task leaves its shard.
        store
            .update(&ids[0], None, |t| {
                t.finish(crate::task::TaskStatus::Succeeded);
                Ok(Some(Vec::new()))
            })
            .await
            .unwrap();
        assert_eq!(store.active_tasks(100).await.unwrap().len(), 20);
    }

    #[tokio::test]
    async fn an_answer_without_a_task_is_claimed_once() {
        let (store, _) = store();
        let now = Instant::now();
        assert!(store.claim_once("slack:T:C:1.2", now).await.unwrap());
        assert!(!store.claim_once("slack:T:C:1.2", now).await.unwrap());
        assert!(store.claim_once("slack:T:C:1.3", now).await.unwrap());
    }

    #[tokio::test]
    async fn dedupe_claims_act_once() {
        let (store, _) = store();
        let task = new_task();
        assert_eq!(
            store
                .create(&task, Vec::new(), Some("k".into()))
                .await
                .unwrap(),
            Created::New(task.id.clone())
        );
        let other = new_task();
        assert_eq!(
            store
                .create(&other, Vec::new(), Some("k".into()))
                .await
                .unwrap(),
            Created::Duplicate(task.id.clone())
        );
        assert!(
            store.get(&other.id).await.unwrap().is_none(),
            "the duplicate wrote nothing"
        );
        let steer = |t: &mut Task| {
            t.conversation.inbox.push(crate::InboxMessage {
                text: "x".into(),
                from: None,
            });
            Ok(Some(Vec::new()))
        };
        store
            .update_claiming(&task.id, None, Some("s".into()), steer)
            .await
            .unwrap();
        let again = store
            .update_claiming(&task.id, None, Some("s".into()), steer)
            .await;
        assert!(matches!(again, Err(StoreError::AlreadyClaimed(_))));
        assert_eq!(
            store
                .get(&task.id)
                .await
                .unwrap()
                .unwrap()
                .conversation
                .inbox
                .len(),
            1
        );
    }

    #[tokio::test]
    async fn a_write_that_breaks_a_rule_of_the_record_is_refused() {
        let (store, _) = store();
        let task = new_task();
        store.create(&task, Vec::new(), None).await.unwrap();
        let broken = store
            .update(&task.id, None, |t| {
                t.status = crate::task::TaskStatus::Waiting;
                Ok(Some(Vec::new()))
            })
            .await;
        assert_eq!(
            broken.map(|_| ()),
            Err(StoreError::Invalid(
                task.id.clone(),
                crate::task::Invariant::WaitingForNothing
            ))
        );
        let stored = store.get(&task.id).await.unwrap().unwrap();
        assert_eq!(
            (stored.status, stored.version),
            (crate::task::TaskStatus::Queued, 1)
        );
        let mut waiting = new_task();
        waiting.status = crate::task::TaskStatus::Waiting;
        assert!(matches!(
            store.create(&waiting, Vec::new(), None).await,
            Err(StoreError::Invalid(..))
        ));
        assert!(store.get(&waiting.id).await.unwrap().is_none());
    }
}
