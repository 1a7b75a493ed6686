//! [`Table`] on SQLite: one row per item, transactions as `BEGIN IMMEDIATE`.

use baton_core::table::{validate, ListingEntry, ListingKey};
use std::path::Path;
use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::Arc;

use async_trait::async_trait;
use baton_core::{Condition, Item, Key, Table, TableError, Write};
use rusqlite::{params, Connection, OptionalExtension, TransactionBehavior};

use crate::db::{
    limit_to_sql, version_from_sql, version_to_sql, Database, DbError, Durability, OpenError,
};

pub use baton_core::table::MAX_TRANSACTION_WRITES;

/// How often (at most) expired items are purged during writes.
const PURGE_INTERVAL_MS: i64 = 60_000;

fn table_err(e: DbError) -> TableError {
    match e {
        DbError::Busy(_) => TableError::Contention,
        DbError::Corrupt(m) => TableError::Corrupt(m),
        DbError::Other(m) => TableError::Unavailable(m),
    }
}

/// A transaction failed: either a write's condition (abort, report which)
/// or the database.
enum TxError {
    Condition(usize),
    Db(DbError),
}

impl From<rusqlite::Error> for TxError {
    fn from(e: rusqlite::Error) -> Self {
        TxError::Db(e.into())
    }
}

/// The embedded [`Table`]: items in the `items` table of the shared
/// database. Cheap to share behind an `Arc`.
#[derive(Debug)]
pub struct EmbeddedTable {
    db: Database,
    /// Wall-clock ms of the last purge of expired items.
    last_purge: Arc<AtomicI64>,
}

const ITEM_COLUMNS: &str = "pk, sk, version, data, idx, expires_at, lpk, lsk";

fn row_to_item(row: &rusqlite::Row<'_>) -> rusqlite::Result<Item> {
    Ok(Item {
        key: Key {
            pk: row.get(0)?,
            sk: row.get(1)?,
        },
        version: version_from_sql(row.get(2)?),
        data: row.get(3)?,
        index: row.get(4)?,
        expires_at: row.get(5)?,
        listing: match (row.get::<_, Option<String>>(6)?, row.get(7)?) {
            (Some(partition), Some(sort)) => Some(ListingKey { partition, sort }),
            _ => None,
        },
    })
}

/// The smallest string greater than every string that starts with
/// `prefix`, in byte (= code point) order, or `None` when there is no such
/// bound (empty prefix, or one made only of `char::MAX`). With it a prefix
/// match is a plain range, which uses the primary key and has none of
/// `LIKE`'s wildcard or case-folding surprises.
pub(crate) fn prefix_successor(prefix: &str) -> Option<String> {
    let mut chars: Vec<char> = prefix.chars().collect();
    while let Some(last) = chars.pop() {
        let mut next = u32::from(last) + 1;
        // Skip the surrogate gap, which holds no chars.
        if (0xD800..=0xDFFF).contains(&next) {
            next = 0xE000;
        }
        if let Some(c) = char::from_u32(next) {
            chars.push(c);
            return Some(chars.into_iter().collect());
        }
        // `last` was char::MAX: nothing follows it at this position, so the
        // bound moves one character to the left.
    }
    None
}

fn purge_expired(conn: &Connection, now_secs: i64) -> Result<usize, DbError> {
    Ok(conn.execute(
        "DELETE FROM items WHERE expires_at IS NOT NULL AND expires_at < ?1",
        params![now_secs],
    )?)
}

fn apply(conn: &mut Connection, writes: &[Write]) -> Result<(), TxError> {
    // IMMEDIATE takes the write lock up front, so the conditions checked
    // below cannot change before the writes land (and a second process
    // waits on the busy timeout instead of failing mid-transaction).
    let tx = conn.transaction_with_behavior(TransactionBehavior::Immediate)?;
    {
        let mut current =
            tx.prepare_cached("SELECT version FROM items WHERE pk = ?1 AND sk = ?2")?;
        for (index, w) in writes.iter().enumerate() {
            let (key, condition) = match w {
                Write::Put { item, condition } => (&item.key, condition),
                Write::Delete { key, condition } => (key, condition),
            };
            if *condition == Condition::None {
                continue;
            }
            let version: Option<i64> = current
                .query_row(params![key.pk, key.sk], |r| r.get(0))
                .optional()?;
            let holds = match (condition, version) {
                (Condition::NotExists, v) => v.is_none(),
                (Condition::VersionIs(want), Some(v)) => version_from_sql(v) == *want,
                (Condition::VersionIs(_), None) => false,
                (Condition::None, _) => true,
            };
            if !holds {
                // Nothing was written yet; dropping `tx` rolls back anyway.
                return Err(TxError::Condition(index));
            }
        }
        let mut put = tx.prepare_cached(
            "INSERT OR REPLACE INTO items (pk, sk, version, data, idx, expires_at, lpk, lsk) \
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)",
        )?;
        let mut delete = tx.prepare_cached("DELETE FROM items WHERE pk = ?1 AND sk = ?2")?;
        for w in writes {
            match w {
                Write::Put { item, .. } => {
                    put.execute(params![
                        item.key.pk,
                        item.key.sk,
                        version_to_sql(item.version),
                        item.data,
                        item.index,
                        item.expires_at,
                        item.listing.as_ref().map(|l| &l.partition),
                        item.listing.as_ref().map(|l| &l.sort),
                    ])?;
                }
                Write::Delete { key, .. } => {
                    delete.execute(params![key.pk, key.sk])?;
                }
            }
        }
    }
    tx.commit()?;
    Ok(())
}

impl EmbeddedTable {
    /// Opens the table in `{data_dir}/baton.sqlite3` with
    /// [`Durability::Process`], creating the directory and the file as
    /// needed, and purges expired items. Blocking; call it at startup.
    pub fn open(data_dir: impl AsRef<Path>) -> Result<Self, OpenError> {
        let db = Database::open(data_dir, Durability::Process)?;
        Self::with_database(db)
    }

    /// The table on an already open database (shared with the queue).
    /// Purges expired items first. Blocking; call it at startup.
    pub fn with_database(db: Database) -> Result<Self, OpenError> {
        let now_ms = baton_core::now_ms();
        let purged = db
            .call_blocking(|conn| purge_expired(conn, now_ms.div_euclid(1000)))
            .map_err(|source| OpenError::Database {
                path: db.path().to_owned(),
                source,
            })?;
        if purged > 0 {
            tracing::debug!(purged, "purged expired items");
        }
        Ok(EmbeddedTable {
            db,
            last_purge: Arc::new(AtomicI64::new(now_ms)),
        })
    }

    /// The underlying database.
    pub fn database(&self) -> &Database {
        &self.db
    }

    /// Deletes every item whose `expires_at` (seconds) is in the past and
    /// returns how many went. Runs by itself now and then during writes.
    pub async fn purge_expired(&self) -> Result<usize, TableError> {
        let now_ms = baton_core::now_ms();
        self.last_purge.store(now_ms, Ordering::Relaxed);
        self.db
            .call(move |conn| purge_expired(conn, now_ms.div_euclid(1000)))
            .await
            .map_err(table_err)
    }

    /// Number of items stored (for tests and the CLI).
    pub async fn count(&self) -> Result<usize, TableError> {
        self.db
            .call(|conn| {
                let n: i64 = conn.query_row("SELECT COUNT(*) FROM items", [], |r| r.get(0))?;
                Ok(usize::try_from(n).unwrap_or(0))
            })
            .await
            .map_err(table_err)
    }

    /// Whether a purge is due; claims it so only one caller runs it.
    fn purge_due(&self, now_ms: i64) -> bool {
        let last = self.last_purge.load(Ordering::Relaxed);
        now_ms - last >= PURGE_INTERVAL_MS
            && self
                .last_purge
                .compare_exchange(last, now_ms, Ordering::Relaxed, Ordering::Relaxed)
                .is_ok()
    }
}

#[async_trait]
impl Table for EmbeddedTable {
    async fn get(&self, key: &Key) -> Result<Option<Item>, TableError> {
        let key = key.clone();
        self.db
            .call(move |conn| {
                let mut stmt = conn.prepare_cached(&format!(
                    "SELECT {ITEM_COLUMNS} FROM items WHERE pk = ?1 AND sk = ?2"
                ))?;
                Ok(stmt
                    .query_row(params![key.pk, key.sk], row_to_item)
                    .optional()?)
            })
            .await
            .map_err(table_err)
    }

    async fn query(
        &self,
        pk: &str,
        sk_prefix: &str,
        after_sk: Option<&str>,
        limit: usize,
    ) -> Result<Vec<Item>, TableError> {
        if limit == 0 {
            return Ok(Vec::new());
        }
        let pk = pk.to_owned();
        let lower = sk_prefix.to_owned();
        let upper = prefix_successor(sk_prefix);
        let after = after_sk.map(str::to_owned);
        self.db
            .call(move |conn| {
                // Four shapes of one range query; kept as distinct statements
                // (rather than `?3 IS NULL OR ...`) so SQLite can use the
                // primary key for both bounds.
                let mut sql =
                    format!("SELECT {ITEM_COLUMNS} FROM items WHERE pk = ?1 AND sk >= ?2");
                if upper.is_some() {
                    sql.push_str(" AND sk < ?3");
                }
                if after.is_some() {
                    sql.push_str(" AND sk > ?4");
                }
                sql.push_str(" ORDER BY sk ASC LIMIT ?5");
                let mut stmt = conn.prepare_cached(&sql)?;
                let mut out = Vec::new();
                let mut bind = |i: usize, v: &dyn rusqlite::ToSql| stmt.raw_bind_parameter(i, v);
                bind(1, &pk)?;
                bind(2, &lower)?;
                if let Some(u) = &upper {
                    bind(3, u)?;
                }
                if let Some(a) = &after {
                    bind(4, a)?;
                }
                bind(5, &limit_to_sql(limit))?;
                let mut rows = stmt.raw_query();
                while let Some(row) = rows.next()? {
                    out.push(row_to_item(row)?);
                }
                Ok(out)
            })
            .await
            .map_err(table_err)
    }

    async fn query_index(&self, index: &str, limit: usize) -> Result<Vec<Item>, TableError> {
        let index = index.to_owned();
        self.db
            .call(move |conn| {
                let mut stmt = conn.prepare_cached(&format!(
                    "SELECT {ITEM_COLUMNS} FROM items WHERE idx = ?1 LIMIT ?2"
                ))?;
                let rows = stmt.query_map(params![index, limit_to_sql(limit)], row_to_item)?;
                Ok(rows.collect::<Result<Vec<_>, _>>()?)
            })
            .await
            .map_err(table_err)
    }

    async fn query_listing(
        &self,
        partition: &str,
        before: Option<&str>,
        limit: usize,
    ) -> Result<Vec<ListingEntry>, TableError> {
        let partition = partition.to_owned();
        let before = before.map(str::to_owned);
        self.db
            .call(move |conn| {
                // Two statements rather than `?2 IS NULL OR ...`, so both
                // use the listing index for the range.
                let sql = if before.is_some() {
                    "SELECT lsk, pk, sk FROM items WHERE lpk = ?1 AND lsk < ?2 \
                     ORDER BY lsk DESC LIMIT ?3"
                } else {
                    "SELECT lsk, pk, sk FROM items WHERE lpk = ?1 AND ?2 IS NULL \
                     ORDER BY lsk DESC LIMIT ?3"
                };
                let mut stmt = conn.prepare_cached(sql)?;
                let rows =
                    stmt.query_map(params![partition, before, limit_to_sql(limit)], |row| {
                        Ok(ListingEntry {
                            sort: row.get(0)?,
                            key: Key {
                                pk: row.get(1)?,
                                sk: row.get(2)?,
                            },
                        })
                    })?;
                Ok(rows.collect::<Result<Vec<_>, _>>()?)
            })
            .await
            .map_err(table_err)
    }

    async fn transact(&self, writes: Vec<Write>) -> Result<(), TableError> {
        if writes.is_empty() {
            return Ok(());
        }
        validate(&writes)?;
        let now_ms = baton_core::now_ms();
        let purge = self.purge_due(now_ms);
        let result = self
            .db
            .call(move |conn| {
                if purge {
                    // Best effort: a failed purge must not fail the write.
                    if let Err(e) = purge_expired(conn, now_ms.div_euclid(1000)) {
                        tracing::warn!(error = %e, "purging expired items failed");
                    }
                }
                Ok(apply(conn, &writes))
            })
            .await
            .map_err(table_err)?;
        match result {
            Ok(()) => Ok(()),
            Err(TxError::Condition(index)) => Err(TableError::ConditionFailed { index }),
            Err(TxError::Db(e)) => Err(table_err(e)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::prefix_successor;

    #[test]
    fn successor_bounds_exactly_the_prefixed_strings() {
        assert_eq!(prefix_successor(""), None);
        assert_eq!(prefix_successor("E#").as_deref(), Some("E$"));
        assert_eq!(prefix_successor("a\u{D7FF}").as_deref(), Some("a\u{E000}"));
        assert_eq!(
            prefix_successor("a\u{10FFFF}").as_deref(),
            Some("b"),
            "char::MAX carries to the left"
        );
        assert_eq!(prefix_successor("\u{10FFFF}\u{10FFFF}"), None);
        for (p, inside, outside) in [
            ("ab", "ab\u{10FFFF}zz", "ac"),
            ("é", "éé", "ê"),
            ("a\u{10FFFF}", "a\u{10FFFF}\u{10FFFF}", "b"),
        ] {
            let s = prefix_successor(p).unwrap();
            assert!(
                inside >= p && inside < s.as_str(),
                "{inside:?} in [{p:?}, {s:?})"
            );
            assert!(outside >= s.as_str(), "{outside:?} outside [{p:?}, {s:?})");
        }
    }
}
