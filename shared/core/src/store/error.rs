//! What a store can fail with.

use crate::blob::BlobError;
use crate::ids::TaskId;
use crate::table::TableError;

#[derive(Debug, Clone, thiserror::Error, PartialEq, Eq)]
pub enum StoreError {
    /// The task changed under us too many times in a row.
    #[error("task {0} kept changing under concurrent writers")]
    Conflict(TaskId),
    #[error("task {0} not found")]
    NotFound(TaskId),
    /// The dedupe key was claimed before, by a request that acted on this task.
    #[error("request already handled (task {0})")]
    AlreadyClaimed(TaskId),
    /// The dedupe key was claimed before by a different request (its
    /// fingerprint differs), which acted on this task.
    #[error("the key was used before for a different request (task {0})")]
    KeyReused(TaskId),
    #[error(transparent)]
    Table(#[from] TableError),
    #[error(transparent)]
    Blob(#[from] BlobError),
    #[error("stored data unreadable: {0}")]
    Corrupt(String),
}
