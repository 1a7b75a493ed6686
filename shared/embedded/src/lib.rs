//! The durable embedded backend of `baton dev`: Baton's [`Table`],
//! [`WorkQueue`] and [`BlobStore`] ports on one machine, with no cloud
//! account, surviving `kill -9` at any moment.
//!
//! * [`EmbeddedTable`] and [`EmbeddedQueue`] share one SQLite database,
//!   `{data_dir}/baton.sqlite3`.
//! * [`FileBlobStore`] keeps blobs as files under `{data_dir}/blobs/`.
//!
//! ```no_run
//! # async fn demo() -> Result<(), Box<dyn std::error::Error>> {
//! use baton_core::{TaskStore, WorkQueue};
//! use baton_embedded::{EmbeddedBackend, QueueConfig};
//! use std::time::Duration;
//!
//! let backend = EmbeddedBackend::open(".baton", QueueConfig::default())?;
//! let store = TaskStore::new(backend.table.clone(), backend.blobs.clone());
//! backend.queue.send(r#"{"task_id":"..."}"#, Duration::ZERO).await?;
//! # let _ = store; Ok(()) }
//! ```
//!
//! # Why SQLite
//!
//! The backend needs multi-key atomic transactions with conditions
//! (DynamoDB's `TransactWriteItems`), range scans in key order, a secondary
//! index, and crash safety, from one small dependency that builds
//! everywhere. SQLite (bundled, via `rusqlite`) gives all of it, its
//! crash-safety is among the best-tested code there is, and the file can be
//! opened with the `sqlite3` shell to see what a task did. Pure-Rust
//! stores were weighed: `redb` is sound and simple, but it is a key-value
//! store, so the secondary index, the queue's visibility ordering and the
//! dead-letter move would all be hand-maintained tables; `sled`'s released
//! line is old, self-described beta, with an unfinished rewrite; `fjall`
//! (an LSM tree) is built for write volumes far beyond a dev server and
//! brings compaction to reason about. None would be less code or better
//! tested against crashes.
//!
//! # Durability
//!
//! The database runs in WAL mode. With the default
//! [`Durability::Process`] (`synchronous=NORMAL`) a commit is written to
//! the log before it is acknowledged but not fsynced: a killed or crashed
//! *process* loses nothing (the kernel already holds the pages), while a
//! *power loss* or kernel panic may roll back the last commits — never
//! corrupting the file. That avoids an fsync per write, which dominates the
//! cost of small transactions on laptops. [`Durability::Full`]
//! (`synchronous=FULL`) fsyncs every commit for power-loss durability.
//! Blob writes are fsynced before their atomic rename either way (so a
//! pointer in the table never outlives its bytes); `Full` also syncs the
//! directory.
//!
//! Blocking SQLite calls run on tokio's blocking pool behind one
//! connection and a mutex: SQLite serialises writers anyway, and a
//! single-item transaction takes about 90 µs end to end with
//! [`Durability::Process`] (about 1.4 ms with `Full`, the fsync), a get
//! about 25 µs, on a 2-core VM (`tests/throughput.rs`) — far more than a
//! dev server needs.
//!
//! [`Table`]: baton_core::Table
//! [`WorkQueue`]: baton_core::WorkQueue
//! [`BlobStore`]: baton_core::BlobStore

mod blob;
mod db;
mod queue;
pub mod retention;
pub mod scheduler;
mod sealer;
mod table;

use std::path::Path;
use std::sync::Arc;

pub use blob::{validate_key, FileBlobStore};
pub use db::{Database, DbError, Durability, OpenError, DB_FILE};
pub use queue::{DeadLetter, EmbeddedQueue, QueueConfig, MAX_BODY_BYTES};
pub use retention::{PruneError, Pruned};
pub use scheduler::EmbeddedScheduler;
pub use sealer::{KeyFileError, KeyFileSealer, KEY_FILE};
pub use table::{EmbeddedTable, MAX_TRANSACTION_WRITES};

/// The blob directory inside the data directory.
pub const BLOB_DIR: &str = "blobs";

/// The three embedded adapters on one data directory.
#[derive(Clone, Debug)]
pub struct EmbeddedBackend {
    pub database: Database,
    pub table: Arc<EmbeddedTable>,
    pub queue: Arc<EmbeddedQueue>,
    pub blobs: Arc<FileBlobStore>,
}

impl EmbeddedBackend {
    /// Opens (creating) everything under `data_dir` with
    /// [`Durability::Process`]. Blocking; call it at startup.
    pub fn open(data_dir: impl AsRef<Path>, queue: QueueConfig) -> Result<Self, OpenError> {
        Self::open_with(data_dir, queue, Durability::Process)
    }

    /// Like [`open`](Self::open) with a chosen durability.
    pub fn open_with(
        data_dir: impl AsRef<Path>,
        queue: QueueConfig,
        durability: Durability,
    ) -> Result<Self, OpenError> {
        let dir = data_dir.as_ref();
        let database = Database::open(dir, durability)?;
        let table = EmbeddedTable::with_database(database.clone())?;
        let queue = EmbeddedQueue::with_database(database.clone(), queue);
        let blobs = FileBlobStore::open_with(dir.join(BLOB_DIR), durability)?;
        Ok(EmbeddedBackend {
            database,
            table: Arc::new(table),
            queue: Arc::new(queue),
            blobs: Arc::new(blobs),
        })
    }
}
