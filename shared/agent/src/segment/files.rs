//! The files a task's messages carried that it has not read yet: Slack's,
//! downloaded once, and those sent over HTTP to a running task, read from
//! the blob store. Taken at the first segment, before the model's first
//! call, and after each message that arrives while the task runs.

use super::Segment;
use crate::error::WorkerError;
use baton_core::attachment::{take_pending, unstash};

impl Segment<'_> {
    /// Downloads the task's pending files and commits their entries (the
    /// content, or the file named with why it could not be taken) and the
    /// cleared list in one commit, so a retried segment never downloads
    /// them again.
    pub(super) async fn take_files(&mut self) -> Result<(), WorkerError> {
        if self.task.conversation.pending_files.is_empty() {
            return Ok(());
        }
        let source = self.deps.files.as_deref();
        let max_bytes = self.deps.max_file_bytes;
        let mut entries = Vec::with_capacity(self.task.conversation.pending_files.len());
        for file in &self.task.conversation.pending_files {
            let entry = match &file.stashed {
                Some(key) => unstash(self.deps.store.blobs().as_ref(), file, key)
                    .await
                    .map_err(baton_core::StoreError::from)?,
                None => take_pending(file, source, max_bytes).await,
            };
            if let baton_core::EntryKind::Attachment {
                note: Some(why), ..
            } = &entry
            {
                tracing::info!(task_id = %self.task.id, file = %file.name, reason = %why, "file not given to the model");
            }
            entries.push(entry);
        }
        self.commit(|t| {
            t.conversation.pending_files.clear();
            Some(entries.clone())
        })
        .await
    }
}
