//! Retention on the embedded backend, playing what DynamoDB TTL and the S3
//! lifecycle rules do on AWS: items whose `expires_at` has passed are
//! deleted (the table also does so at start-up and now and then during
//! writes), and blobs under the task prefixes are deleted once older than
//! the retention allows ([`baton_core::retention::Retention::blob_max_age`]).
//! `baton dev` runs [`EmbeddedBackend::prune`] at start-up and hourly.

use std::path::Path;
use std::time::{Duration, SystemTime};

use baton_core::retention::Retention;
use baton_core::{BlobError, BlobStore, TableError};

use crate::{EmbeddedBackend, FileBlobStore};

/// The blob prefixes retention applies to: offloaded transcript entries
/// and files (`tasks/{id}/…`) and traces (`traces/{id}/…`).
pub const TASK_BLOB_PREFIXES: [&str; 2] = ["tasks/", "traces/"];

/// What a prune deleted.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Pruned {
    pub items: usize,
    pub blobs: usize,
}

#[derive(Debug, thiserror::Error)]
pub enum PruneError {
    #[error("pruning expired items: {0}")]
    Table(#[from] TableError),
    #[error("pruning old blobs: {0}")]
    Blob(#[from] BlobError),
}

impl FileBlobStore {
    /// Deletes the blobs under `prefix` last written more than `max_age`
    /// ago, and the directories that leaves empty; how many went.
    pub async fn prune_older_than(
        &self,
        prefix: &str,
        max_age: Duration,
    ) -> Result<usize, BlobError> {
        let keys = self.list(prefix).await?;
        let root = self.dir().to_owned();
        tokio::task::spawn_blocking(move || {
            let cutoff = SystemTime::now()
                .checked_sub(max_age)
                .unwrap_or(SystemTime::UNIX_EPOCH);
            let mut pruned = 0;
            for key in keys {
                let path = root.join(&key);
                let old = std::fs::metadata(&path)
                    .and_then(|m| m.modified())
                    .is_ok_and(|at| at < cutoff);
                if !old {
                    continue;
                }
                match std::fs::remove_file(&path) {
                    Ok(()) => pruned += 1,
                    // Deleted meanwhile: nothing to do.
                    Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
                    Err(e) => return Err(BlobError::Unavailable(format!("deleting {key}: {e}"))),
                }
                remove_empty_parents(&root, &path);
            }
            Ok(pruned)
        })
        .await
        .map_err(|e| BlobError::Unavailable(format!("blob task failed: {e}")))?
    }
}

/// Removes the now empty directories between `path` and `root` (best
/// effort: a directory another write just filled stays).
fn remove_empty_parents(root: &Path, path: &Path) {
    let mut dir = path.parent();
    while let Some(d) = dir.filter(|d| *d != root && d.starts_with(root)) {
        if std::fs::remove_dir(d).is_err() {
            return;
        }
        dir = d.parent();
    }
}

impl EmbeddedBackend {
    /// Deletes what `retention` lets go: expired items and old task blobs.
    /// Nothing when tasks are kept forever, except items that carry their
    /// own expiry (dedupe keys, usage counters).
    pub async fn prune(&self, retention: Retention) -> Result<Pruned, PruneError> {
        let items = self.table.purge_expired().await?;
        let mut blobs = 0;
        if let Some(max_age) = retention.blob_max_age() {
            for prefix in TASK_BLOB_PREFIXES {
                blobs += self.blobs.prune_older_than(prefix, max_age).await?;
            }
        }
        Ok(Pruned { items, blobs })
    }
}
