//! What a store can fail with.

use crate::blob::BlobError;
use crate::ids::TaskId;
use crate::table::TableError;
use crate::task::Invariant;

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
    /// The write would store a task that breaks a rule of the record.
    #[error("task {0} was not written: {1}")]
    Invalid(TaskId, Invariant),
    #[error("stored data unreadable: {0}")]
    Corrupt(String),
}
