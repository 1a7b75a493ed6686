//! How long finished tasks are kept (`BATON_TASK_RETENTION_DAYS`), as
//! item expiry times (DynamoDB TTL; the embedded table purges the same).
//!
//! * A task record expires `days` after the task ended: set by the commit
//!   that makes it terminal.
//! * A transcript entry expires `days` + [`ENTRY_HORIZON_DAYS`] after it was
//!   written, set when it is written. Setting it at the end instead would
//!   rewrite every entry (a write costs by the item's size, so as much as
//!   the transcript cost to write). The horizon covers tasks that end
//!   within 30 days of their start, nearly all; a task that lived longer
//!   has its entries re-stamped when it ends ([`crate::store::TaskStore`]'s terminal
//!   commit), which only such tasks pay for.
//! * Offloaded payloads and traces (the blob store) expire by age,
//!   `days` + the horizon after they were written: an S3 lifecycle rule,
//!   and [`Retention::blob_max_age`] for the embedded blob store.
//! * Dedupe keys keep their own 24-hour window; threads, schedules,
//!   memory and usage counters are not touched by retention.

use super::error::StoreError;
use crate::clock::Instant;
use crate::table::{Condition, Table, Write, MAX_TRANSACTION_WRITES};
use crate::task::Task;
use std::time::Duration;

/// The default of `BATON_TASK_RETENTION_DAYS`.
pub const DEFAULT_RETENTION_DAYS: u32 = 90;
/// The longest retention that may be set (ten years).
pub const MAX_RETENTION_DAYS: u32 = 3650;
/// How much longer than a finished task its transcript entries and blobs
/// are kept, counted from when they were written: the time a task may run
/// before its entries need re-stamping at its end.
pub const ENTRY_HORIZON_DAYS: u32 = 30;
const DAY_SECS: i64 = 24 * 3600;

/// How long finished tasks are kept; `forever` sets no expiry.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Retention {
    /// 0: forever.
    days: u32,
}

impl Default for Retention {
    fn default() -> Self {
        Retention::days(DEFAULT_RETENTION_DAYS)
    }
}

impl Retention {
    /// Tasks kept `days` after they end (at most [`MAX_RETENTION_DAYS`]);
    /// 0 keeps them forever.
    pub fn days(days: u32) -> Self {
        Retention {
            days: days.min(MAX_RETENTION_DAYS),
        }
    }

    pub fn forever() -> Self {
        Retention { days: 0 }
    }

    /// The retention in days; 0 is forever.
    pub fn in_days(&self) -> u32 {
        self.days
    }

    fn secs(&self) -> Option<i64> {
        (self.days > 0).then(|| i64::from(self.days) * DAY_SECS)
    }

    /// When the record of a task that ended at `ended` expires (seconds).
    pub fn task_expires_at(&self, ended: Instant) -> Option<i64> {
        Some(ended.unix_secs() + self.secs()?)
    }

    /// When a transcript entry written at `at` expires (seconds).
    pub fn entry_expires_at(&self, at: Instant) -> Option<i64> {
        Some(at.unix_secs() + self.secs()? + i64::from(ENTRY_HORIZON_DAYS) * DAY_SECS)
    }

    /// How old a blob (offloaded entry, trace) may grow before it is
    /// deleted; `None` keeps them forever.
    pub fn blob_max_age(&self) -> Option<Duration> {
        let days = u64::from(self.days.checked_add(ENTRY_HORIZON_DAYS)?);
        (self.days > 0).then(|| Duration::from_secs(days * DAY_SECS as u64))
    }
}

/// After `task` ended: if it lived past the horizon, its earliest entries
/// would expire before its record, so every entry is given the record's
/// expiry. Rare (tasks running over 30 days); entries are immutable once
/// written, so a plain rewrite is safe.
pub(crate) async fn restamp_long_lived(
    table: &dyn Table,
    retention: Retention,
    task: &Task,
) -> Result<(), StoreError> {
    let horizon = Duration::from_secs(u64::from(ENTRY_HORIZON_DAYS) * DAY_SECS as u64);
    let Some(expires_at) = retention.task_expires_at(task.updated_at) else {
        return Ok(());
    };
    if !task.status.is_terminal() || task.updated_at.since(task.created_at) <= horizon {
        return Ok(());
    }
    let pk = format!("TASK#{}", task.id);
    let mut after: Option<String> = None;
    loop {
        let items = table
            .query(&pk, "E#", after.as_deref(), MAX_TRANSACTION_WRITES)
            .await?;
        let Some(last) = items.last() else {
            return Ok(());
        };
        after = Some(last.key.sk.clone());
        let writes: Vec<Write> = items
            .into_iter()
            .filter(|i| i.expires_at.is_some_and(|e| e < expires_at))
            .map(|mut item| {
                item.expires_at = Some(expires_at);
                Write::Put {
                    item,
                    condition: Condition::None,
                }
            })
            .collect();
        table.transact(writes).await?;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ids::TaskId;
    use crate::store::{TaskStore, DEDUPE_TTL_SECS};
    use crate::table::{Item, Key, Table};
    use crate::task::{Limits, Origin, TaskStatus};
    use crate::testing::{MemoryTable, NoBlobs};
    use crate::transcript::EntryKind;
    use std::sync::Arc;

    const DAY_MS: i64 = DAY_SECS * 1000;

    fn store(retention: Retention) -> (TaskStore, Arc<MemoryTable>) {
        let table = Arc::new(MemoryTable::default());
        let store = TaskStore::new(table.clone(), Arc::new(NoBlobs)).with_retention(retention);
        (store, table)
    }

    async fn items(table: &MemoryTable, pk: &str) -> Vec<Item> {
        let mut out = Vec::new();
        for key in table.keys().into_iter().filter(|k| k.pk == pk) {
            out.push(table.get(&key).await.unwrap().unwrap());
        }
        out
    }

    fn text(t: &str) -> EntryKind {
        EntryKind::UserMessage {
            text: t.into(),
            from: None,
        }
    }

    #[test]
    fn expiry_times() {
        let r = Retention::days(90);
        assert_eq!(r.task_expires_at(Instant(10_500)), Some(10 + 90 * DAY_SECS));
        assert_eq!(
            r.entry_expires_at(Instant(10_500)),
            Some(10 + 120 * DAY_SECS)
        );
        assert_eq!(
            r.blob_max_age(),
            Some(Duration::from_secs(120 * DAY_SECS as u64))
        );
        let never = Retention::forever();
        assert_eq!(never.task_expires_at(Instant(1)), None);
        assert_eq!(never.entry_expires_at(Instant(1)), None);
        assert_eq!(never.blob_max_age(), None);
        assert_eq!(Retention::default().in_days(), DEFAULT_RETENTION_DAYS);
        assert_eq!(Retention::days(u32::MAX).in_days(), MAX_RETENTION_DAYS);
    }

    #[tokio::test]
    async fn a_task_expires_when_it_ends_and_its_entries_when_written() {
        let (store, table) = store(Retention::days(7));
        let task = Task::new(
            TaskId::generate(),
            "default",
            Origin::Http,
            Some("http:t".into()),
            Limits::default(),
            crate::now_ms(),
        );
        store
            .create(&task, vec![text("hi")], Some("http:key".into()))
            .await
            .unwrap();
        let pk = format!("TASK#{}", task.id);
        let before: Vec<Item> = items(&table, &pk).await;
        let record = before.iter().find(|i| i.key.sk == "TASK").unwrap();
        assert_eq!(record.expires_at, None, "a running task never expires");
        let entry = before.iter().find(|i| i.key.sk != "TASK").unwrap();
        let written = task.created_at.unix_secs();
        assert_eq!(entry.expires_at, Some(written + (7 + 30) * DAY_SECS));
        let dedupe = table
            .get(&Key::new("DEDUPE#http:key", "DEDUPE"))
            .await
            .unwrap()
            .unwrap();
        assert_eq!(
            dedupe.expires_at,
            Some(written + DEDUPE_TTL_SECS),
            "dedupe keys keep their window"
        );

        let (ended, _) = store
            .update(&task.id, None, |t| {
                t.finish(TaskStatus::Succeeded);
                Ok(Some(vec![text("done")]))
            })
            .await
            .unwrap();
        let record = table.get(&Key::new(&pk, "TASK")).await.unwrap().unwrap();
        assert_eq!(
            record.expires_at,
            Some(ended.updated_at.unix_secs() + 7 * DAY_SECS)
        );
        assert!(record.listing.is_some(), "still listed");
        // Short-lived: the entries keep the expiry they were written with.
        for i in items(&table, &pk)
            .await
            .iter()
            .filter(|i| i.key.sk != "TASK")
        {
            assert!(i.expires_at.unwrap() >= written + 37 * DAY_SECS, "{i:?}");
        }
    }

    #[tokio::test]
    async fn a_long_lived_task_has_its_entries_restamped_when_it_ends() {
        let (store, table) = store(Retention::days(7));
        let started = crate::now_ms() - 40 * DAY_MS;
        let task = Task::new(
            TaskId::generate(),
            "default",
            Origin::Http,
            None,
            Limits::default(),
            started,
        );
        let many: Vec<EntryKind> = (0..30).map(|i| text(&format!("m{i}"))).collect();
        store.create(&task, many, None).await.unwrap();
        let pk = format!("TASK#{}", task.id);
        let (ended, _) = store
            .update(&task.id, None, |t| {
                t.finish(TaskStatus::Failed);
                Ok(Some(Vec::new()))
            })
            .await
            .unwrap();
        let want = ended.updated_at.unix_secs() + 7 * DAY_SECS;
        let all = items(&table, &pk).await;
        assert_eq!(all.len(), 31);
        for i in all {
            assert_eq!(i.expires_at, Some(want), "{:?}", i.key);
        }
    }

    #[tokio::test]
    async fn threads_and_memory_never_expire() {
        let (store, table) = store(Retention::days(1));
        let thread = crate::store::Thread {
            key: "http:t".into(),
            active_task: None,
            recap: Default::default(),
            seen_ts: None,
            always: Vec::new(),
            waiting: Vec::new(),
            version: 0,
        };
        assert!(store.put_thread(&thread).await.unwrap());
        let memory = crate::memory::MemoryStore::new(table.clone());
        memory
            .remember(
                &crate::memory::MemoryScope::Api,
                "f1",
                "a fact",
                "t",
                Instant(0),
            )
            .await
            .unwrap();
        let keys = table.keys();
        assert!(keys.iter().any(|k| k.pk == "THREAD#http:t"));
        assert!(keys.iter().any(|k| k.pk.starts_with("MEM#")));
        for key in keys {
            let item = table.get(&key).await.unwrap().unwrap();
            assert_eq!(item.expires_at, None, "{key:?}");
        }
    }

    #[tokio::test]
    async fn forever_sets_no_expiry_but_dedupe_keys_still_lapse() {
        let (store, table) = store(Retention::forever());
        let task = Task::new(
            TaskId::generate(),
            "default",
            Origin::Http,
            None,
            Limits::default(),
            crate::now_ms(),
        );
        store
            .create(&task, vec![text("hi")], Some("k".into()))
            .await
            .unwrap();
        store
            .update(&task.id, None, |t| {
                t.finish(TaskStatus::Cancelled);
                Ok(Some(vec![text("bye")]))
            })
            .await
            .unwrap();
        for i in items(&table, &format!("TASK#{}", task.id)).await {
            assert_eq!(i.expires_at, None, "{:?}", i.key);
        }
        let dedupe = table
            .get(&Key::new("DEDUPE#k", "DEDUPE"))
            .await
            .unwrap()
            .unwrap();
        assert!(dedupe.expires_at.is_some());
    }
}
