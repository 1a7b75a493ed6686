//! The table port: versioned items under a partition and sort key, with
//! conditional, all-or-nothing writes.
//!
//! This is the narrow waist of persistence. It maps one-to-one onto a
//! single DynamoDB table (`pk`, `sk`, a sparse index, a sorted listing
//! index, TTL, and `TransactWriteItems`) and onto an embedded database's transactions, so
//! each adapter is small and the task semantics ([`crate::TaskStore`]) are
//! written once, above it.

use async_trait::async_trait;

#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Key {
    pub pk: String,
    pub sk: String,
}

impl Key {
    pub fn new(pk: impl Into<String>, sk: impl Into<String>) -> Self {
        Key {
            pk: pk.into(),
            sk: sk.into(),
        }
    }
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Item {
    pub key: Key,
    /// Bumped by the writer; conditions compare against it.
    pub version: u64,
    /// The item's body, JSON.
    pub data: String,
    /// A sparse secondary index: items whose `index` is `Some(name)` are
    /// listed by [`Table::query_index`] under that name.
    pub index: Option<String>,
    /// When the backend may delete the item (seconds since the epoch, the
    /// DynamoDB TTL convention). Reads do not filter on it.
    pub expires_at: Option<i64>,
    /// A second sparse index, sorted: items whose `listing` is `Some` are
    /// read by [`Table::query_listing`] under its partition, greatest sort
    /// key first. Keys only, like `index`.
    pub listing: Option<ListingKey>,
}

/// Where an item sits in the listing index.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct ListingKey {
    pub partition: String,
    /// Ordered as bytes (DynamoDB's order for strings).
    pub sort: String,
}

/// One entry read from the listing index: its sort key and the item's key.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ListingEntry {
    pub sort: String,
    pub key: Key,
}

/// What must hold of the stored item for a write to apply.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Condition {
    /// No condition.
    None,
    /// The item must not exist.
    NotExists,
    /// The item must exist with exactly this version.
    VersionIs(u64),
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Write {
    Put { item: Item, condition: Condition },
    Delete { key: Key, condition: Condition },
}

/// A stable shard number in `0..shards` for `name` (FNV-1a): the same on
/// every process and every release, since it is part of stored keys.
pub fn shard_of(name: &str, shards: u32) -> u32 {
    let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
    for byte in name.bytes() {
        hash ^= u64::from(byte);
        hash = hash.wrapping_mul(0x0000_0100_0000_01b3);
    }
    (hash % u64::from(shards.max(1))) as u32
}

/// The most writes one transaction may hold (DynamoDB's classic limit;
/// both adapters enforce it so code that works locally works on AWS).
pub const MAX_TRANSACTION_WRITES: usize = 25;

impl Write {
    /// The key this write touches.
    pub fn key(&self) -> &Key {
        match self {
            Write::Put { item, .. } => &item.key,
            Write::Delete { key, .. } => key,
        }
    }
}

/// Checks a transaction against the port's rules: at most
/// [`MAX_TRANSACTION_WRITES`] writes, no two on one key.
pub fn validate(writes: &[Write]) -> Result<(), TableError> {
    if writes.len() > MAX_TRANSACTION_WRITES {
        return Err(TableError::Unavailable(format!(
            "invalid transaction: {} writes (at most {MAX_TRANSACTION_WRITES})",
            writes.len()
        )));
    }
    let mut seen = std::collections::HashSet::with_capacity(writes.len());
    for w in writes {
        let key = w.key();
        if !seen.insert(key) {
            return Err(TableError::Unavailable(format!(
                "invalid transaction: two writes on {}/{}",
                key.pk, key.sk
            )));
        }
    }
    Ok(())
}

#[derive(Debug, Clone, thiserror::Error, PartialEq, Eq)]
pub enum TableError {
    /// The condition of the write at this position in the transaction failed.
    #[error("condition failed on write {index} of the transaction")]
    ConditionFailed { index: usize },
    /// Another transaction touched the same items at the same time; retry.
    #[error("transaction conflict, retry")]
    Contention,
    #[error("table unavailable: {0}")]
    Unavailable(String),
    #[error("table data corrupt: {0}")]
    Corrupt(String),
}

#[async_trait]
pub trait Table: Send + Sync {
    async fn get(&self, key: &Key) -> Result<Option<Item>, TableError>;

    /// The items at `keys`, in the same order (`None` where there is none).
    /// Adapters with a batch read override it (DynamoDB's `BatchGetItem`:
    /// one request for up to 100 keys); the default reads one by one.
    async fn get_many(&self, keys: &[Key]) -> Result<Vec<Option<Item>>, TableError> {
        let mut out = Vec::with_capacity(keys.len());
        for key in keys {
            out.push(self.get(key).await?);
        }
        Ok(out)
    }

    /// Items of partition `pk` whose sort key starts with `sk_prefix` and is
    /// greater than `after_sk`, in ascending sort-key order, at most `limit`.
    async fn query(
        &self,
        pk: &str,
        sk_prefix: &str,
        after_sk: Option<&str>,
        limit: usize,
    ) -> Result<Vec<Item>, TableError>;

    /// Items whose sparse index is `index`, at most `limit`, in no set order.
    ///
    /// The index holds keys only (on DynamoDB a `KEYS_ONLY` projection, so
    /// a write that leaves an item's index value unchanged costs the index
    /// nothing); adapters read the items themselves from the table, and
    /// leave out those that no longer carry `index`.
    async fn query_index(&self, index: &str, limit: usize) -> Result<Vec<Item>, TableError>;

    /// Entries of the listing index under `partition` whose sort key is
    /// less than `before` (every one when `None`), greatest first, at most
    /// `limit`. Keys only: the caller reads the items it keeps with
    /// [`get_many`](Self::get_many), so a page reads only what it shows.
    ///
    /// Defaults to an error, for test doubles that list nothing; the
    /// adapters and every wrapper of a table implement it.
    async fn query_listing(
        &self,
        partition: &str,
        before: Option<&str>,
        limit: usize,
    ) -> Result<Vec<ListingEntry>, TableError> {
        let _ = (partition, before, limit);
        Err(TableError::Unavailable(
            "this table has no listing index".into(),
        ))
    }

    /// Applies all writes or none. At most 25 writes, no two on one key.
    async fn transact(&self, writes: Vec<Write>) -> Result<(), TableError>;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shards_are_stable_and_spread() {
        // Part of stored keys: these values must never change.
        assert_eq!(shard_of("", 16), (0xcbf2_9ce4_8422_2325u64 % 16) as u32);
        assert_eq!(shard_of("abc", 1), 0);
        assert_eq!(shard_of("abc", 0), 0);
        let mut counts = [0u32; 16];
        for i in 0..16_000 {
            counts[shard_of(&format!("task-{i}"), 16) as usize] += 1;
        }
        // Each shard within 15% of the mean of 1,000.
        assert!(
            counts.iter().all(|&c| (850..=1150).contains(&c)),
            "{counts:?}"
        );
    }
}
