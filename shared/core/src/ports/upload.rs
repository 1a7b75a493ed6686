//! The upload port: files a task sends (`send_file`) into a chat thread,
//! implemented by `baton_slack::uploads` (Slack's external upload:
//! `files.getUploadURLExternal`, the bytes, `files.completeUploadExternal`).
//!
//! An upload is three calls, so a crash may leave it half done. The port
//! names each part, and [`FileUploads::is_shared`] lets the caller see,
//! after a crash, whether an upload it started was completed: the
//! `send_file` tool records the file id of [`FileUploads::start`] before
//! it sends the bytes, and on a re-run completes nothing twice.

use async_trait::async_trait;

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("could not upload the file: {0}")]
pub struct UploadError(pub String);

/// An upload started: the chat's id for the file and where its bytes go.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct UploadSlot {
    pub file_id: String,
    pub upload_url: String,
}

/// Where a file is shared: a conversation and the thread in it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Thread<'a> {
    pub channel: &'a str,
    pub thread_ts: &'a str,
}

#[async_trait]
pub trait FileUploads: Send + Sync {
    /// Starts the upload of a file named `name` of `length` bytes.
    async fn start(&self, name: &str, length: u64) -> Result<UploadSlot, UploadError>;
    /// Sends the file's bytes to where `slot` says.
    async fn send_bytes(&self, slot: &UploadSlot, bytes: Vec<u8>) -> Result<(), UploadError>;
    /// Completes the upload and shares the file in `thread`, titled
    /// `title`, introduced by `comment` when there is one.
    async fn complete(
        &self,
        file_id: &str,
        title: &str,
        thread: Thread<'_>,
        comment: Option<&str>,
    ) -> Result<(), UploadError>;
    /// Whether the file `file_id` was shared in `thread`'s conversation
    /// (its upload completed). `false` also for a file the chat no longer
    /// knows (an upload never completed is discarded).
    async fn is_shared(&self, file_id: &str, thread: Thread<'_>) -> Result<bool, UploadError>;
}
