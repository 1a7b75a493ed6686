//! The shared SQLite database: one connection behind a mutex, driven from
//! tokio's blocking pool so no SQLite call ever runs on an async worker.

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use rusqlite::{Connection, ErrorCode};
use tokio::sync::Notify;

/// The database file inside the data directory.
pub const DB_FILE: &str = "baton.sqlite3";

/// How long a statement waits for a lock held by another process (a second
/// `baton` command on the same data dir) before giving up.
const BUSY_TIMEOUT: Duration = Duration::from_secs(5);

/// How much a committed transaction survives.
///
/// Both levels use SQLite's write-ahead log, so the database is never left
/// half-written: after any crash it opens in the state of some committed
/// transaction.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Durability {
    /// `synchronous=NORMAL`: every commit is written to the WAL file before
    /// it is acknowledged, but not fsynced. A killed process (`kill -9`, a
    /// panic, an OOM kill) loses nothing, because the operating system
    /// still holds the written pages. A power loss or kernel crash may lose
    /// the last transactions before the next checkpoint (never corrupt the
    /// file). The right trade for a dev server: no fsync per commit.
    #[default]
    Process,
    /// `synchronous=FULL`: the WAL is fsynced at every commit, so an
    /// acknowledged commit also survives power loss, at the cost of one
    /// fsync (about a millisecond on SSDs, more on laptops' power-saving
    /// disks) per write.
    Full,
}

/// What went wrong talking to SQLite, classified for the ports' errors.
#[derive(Debug, thiserror::Error)]
pub enum DbError {
    /// Another connection (another process) holds the write lock.
    #[error("database busy: {0}")]
    Busy(String),
    /// The file is not a database, or its pages are damaged.
    #[error("database corrupt: {0}")]
    Corrupt(String),
    /// Anything else: I/O, a full disk, a bug.
    #[error("database error: {0}")]
    Other(String),
}

impl From<rusqlite::Error> for DbError {
    fn from(e: rusqlite::Error) -> Self {
        match e.sqlite_error_code() {
            Some(ErrorCode::DatabaseBusy | ErrorCode::DatabaseLocked) => {
                DbError::Busy(e.to_string())
            }
            Some(ErrorCode::DatabaseCorrupt | ErrorCode::NotADatabase) => {
                DbError::Corrupt(e.to_string())
            }
            _ => DbError::Other(e.to_string()),
        }
    }
}

/// Errors opening the embedded backend.
#[derive(Debug, thiserror::Error)]
pub enum OpenError {
    #[error("cannot create data directory {path}: {source}")]
    CreateDir {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("cannot open database {path}: {source}")]
    Database { path: PathBuf, source: DbError },
}

struct Inner {
    conn: Mutex<Connection>,
    path: PathBuf,
    /// Woken when a queue message may have become receivable (a send, a
    /// visibility change), so long polls return promptly. Lives here so
    /// every queue handle on this database shares it.
    queue_notify: Notify,
}

/// A handle on `{data_dir}/baton.sqlite3`. Cheap to clone; the table and
/// the queue share it.
#[derive(Clone)]
pub struct Database {
    inner: Arc<Inner>,
}

impl std::fmt::Debug for Database {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Database")
            .field("path", &self.inner.path)
            .finish_non_exhaustive()
    }
}

const SCHEMA: &str = "
CREATE TABLE IF NOT EXISTS items (
    pk TEXT NOT NULL,
    sk TEXT NOT NULL,
    version INTEGER NOT NULL,
    data TEXT NOT NULL,
    idx TEXT,
    expires_at INTEGER,
    lpk TEXT,
    lsk TEXT,
    PRIMARY KEY (pk, sk)
) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS items_by_idx ON items (idx) WHERE idx IS NOT NULL;
CREATE INDEX IF NOT EXISTS items_by_expiry ON items (expires_at) WHERE expires_at IS NOT NULL;

CREATE TABLE IF NOT EXISTS queue_messages (
    seq INTEGER PRIMARY KEY AUTOINCREMENT,
    message_id TEXT NOT NULL UNIQUE,
    body TEXT NOT NULL,
    sent_at INTEGER NOT NULL,
    visible_at INTEGER NOT NULL,
    receive_count INTEGER NOT NULL DEFAULT 0,
    receipt TEXT
);
CREATE INDEX IF NOT EXISTS queue_by_visibility ON queue_messages (visible_at, seq);
CREATE UNIQUE INDEX IF NOT EXISTS queue_by_receipt ON queue_messages (receipt) WHERE receipt IS NOT NULL;

CREATE TABLE IF NOT EXISTS queue_dead_letters (
    seq INTEGER PRIMARY KEY AUTOINCREMENT,
    message_id TEXT NOT NULL UNIQUE,
    body TEXT NOT NULL,
    receive_count INTEGER NOT NULL,
    sent_at INTEGER NOT NULL,
    dead_at INTEGER NOT NULL
);
";

/// Gives a database of a release before the task listing its columns,
/// then the listing index (newest first within a partition).
fn migrate_listing(conn: &Connection) -> Result<(), DbError> {
    let has_listing: bool = conn
        .prepare("SELECT 1 FROM pragma_table_info('items') WHERE name = 'lpk'")?
        .exists([])?;
    if !has_listing {
        conn.execute_batch(
            "ALTER TABLE items ADD COLUMN lpk TEXT; ALTER TABLE items ADD COLUMN lsk TEXT;",
        )?;
    }
    conn.execute_batch(
        "CREATE INDEX IF NOT EXISTS items_by_listing ON items (lpk, lsk) WHERE lpk IS NOT NULL;",
    )?;
    Ok(())
}

impl Database {
    /// Opens (creating if needed) `{data_dir}/baton.sqlite3`, creating the
    /// directory too. Blocking; call it at startup.
    pub fn open(data_dir: impl AsRef<Path>, durability: Durability) -> Result<Self, OpenError> {
        let dir = data_dir.as_ref();
        std::fs::create_dir_all(dir).map_err(|source| OpenError::CreateDir {
            path: dir.to_owned(),
            source,
        })?;
        let path = dir.join(DB_FILE);
        let conn = Self::connect(&path, durability).map_err(|source| OpenError::Database {
            path: path.clone(),
            source,
        })?;
        Ok(Database {
            inner: Arc::new(Inner {
                conn: Mutex::new(conn),
                path,
                queue_notify: Notify::new(),
            }),
        })
    }

    fn connect(path: &Path, durability: Durability) -> Result<Connection, DbError> {
        let conn = Connection::open(path)?;
        conn.busy_timeout(BUSY_TIMEOUT)?;
        // journal_mode answers with the mode in force; WAL can be refused
        // (e.g. on some network filesystems), which would silently change
        // the durability story, so check it.
        let mode: String = conn.query_row("PRAGMA journal_mode=WAL", [], |r| r.get(0))?;
        if !mode.eq_ignore_ascii_case("wal") {
            return Err(DbError::Other(format!(
                "could not switch to WAL mode (got {mode})"
            )));
        }
        let sync = match durability {
            Durability::Process => "NORMAL",
            Durability::Full => "FULL",
        };
        conn.pragma_update(None, "synchronous", sync)?;
        conn.pragma_update(None, "foreign_keys", "OFF")?;
        conn.execute_batch(SCHEMA)?;
        migrate_listing(&conn)?;
        Ok(conn)
    }

    /// The database file's path.
    pub fn path(&self) -> &Path {
        &self.inner.path
    }

    pub(crate) fn queue_notify(&self) -> &Notify {
        &self.inner.queue_notify
    }

    /// Runs `f` with the connection on the blocking pool.
    pub(crate) async fn call<T, F>(&self, f: F) -> Result<T, DbError>
    where
        T: Send + 'static,
        F: FnOnce(&mut Connection) -> Result<T, DbError> + Send + 'static,
    {
        let inner = Arc::clone(&self.inner);
        tokio::task::spawn_blocking(move || {
            // A panic while holding the lock can only have happened between
            // statements; an open transaction is rolled back when its guard
            // drops, so the connection is still usable.
            let mut conn = inner.conn.lock().unwrap_or_else(|p| p.into_inner());
            f(&mut conn)
        })
        .await
        .map_err(|e| DbError::Other(format!("database task failed: {e}")))?
    }

    /// Runs `f` with the connection on the current thread. Only for
    /// startup code that is not on an async runtime's worker yet.
    pub(crate) fn call_blocking<T>(
        &self,
        f: impl FnOnce(&mut Connection) -> Result<T, DbError>,
    ) -> Result<T, DbError> {
        let mut conn = self.inner.conn.lock().unwrap_or_else(|p| p.into_inner());
        f(&mut conn)
    }

    /// Runs SQLite's own consistency check; `Ok(())` when the file is sound.
    pub async fn integrity_check(&self) -> Result<(), DbError> {
        self.call(|conn| {
            let result: String = conn.query_row("PRAGMA integrity_check", [], |r| r.get(0))?;
            if result == "ok" {
                Ok(())
            } else {
                Err(DbError::Corrupt(result))
            }
        })
        .await
    }
}

/// Versions are `u64` in the port and `INTEGER` (i64) in SQLite. They are
/// stored bit-for-bit so every `u64` round-trips; only equality is ever
/// compared, so the sign of huge values does not matter.
pub(crate) fn version_to_sql(v: u64) -> i64 {
    v as i64
}

pub(crate) fn version_from_sql(v: i64) -> u64 {
    v as u64
}

/// Saturating conversion for `LIMIT` clauses.
pub(crate) fn limit_to_sql(limit: usize) -> i64 {
    i64::try_from(limit).unwrap_or(i64::MAX)
}
