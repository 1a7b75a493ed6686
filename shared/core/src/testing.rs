//! Test doubles of the ports, for the unit tests of this and other crates
//! (feature `testing`). Real adapters are tested against real servers;
//! these are for logic above the ports.

use crate::blob::{BlobError, BlobStore};
use crate::table::{Condition, Item, Key, Table, TableError, Write};
use async_trait::async_trait;
use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Mutex;

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
