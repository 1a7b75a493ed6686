//! What the store keeps of the files a task sends (`send_file`), in the
//! task's own partition:
//!
//! | item | pk | sk | what |
//! | --- | --- | --- | --- |
//! | sent file | `TASK#{id}` | `FILE#{name}` | a [`SentFile`] kept for an HTTP client; created once, never changed: the name is claimed by the first call that sends it |
//! | upload | `TASK#{id}` | `UPLOAD#{call key}` | the chat's id of the upload a `send_file` call started (Slack's `file_id`), written before its bytes are sent |
//!
//! Both expire like transcript entries ([`Retention::entry_expires_at`]);
//! the bytes of a sent file are in the blob store under `tasks/{id}/`,
//! which expires with the task's other payloads.
//!
//! [`Retention::entry_expires_at`]: crate::retention::Retention::entry_expires_at

use crate::clock::Instant;
use crate::ids::TaskId;
use crate::store::error::StoreError;
use crate::store::table::{Condition, Item, Key, TableError, Write};
use crate::store::tasks::TaskStore;
use crate::task::sent_file::SentFile;
use serde::{Deserialize, Serialize};

/// Most files one task may send to an HTTP client (its status lists them
/// all).
pub const MAX_SENT_FILES: usize = 50;

const FILE_PREFIX: &str = "FILE#";
const UPLOAD_PREFIX: &str = "UPLOAD#";

fn partition(task: &TaskId) -> String {
    format!("TASK#{task}")
}

/// The blob key of the bytes `call` (an idempotency key) sends for `task`.
/// Per call, not per name, so a call refused for a name already taken
/// never overwrites the other file's bytes.
pub fn blob_key(task: &TaskId, call: &str) -> String {
    let call: String = call
        .strip_prefix(&format!("{task}:"))
        .unwrap_or(call)
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '-' {
                c
            } else {
                '_'
            }
        })
        .take(200)
        .collect();
    format!("tasks/{task}/sent/{call}")
}

/// What became of recording a sent file.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Recorded {
    /// Recorded now.
    New,
    /// This very call had recorded it before (a re-run after a crash).
    Again(SentFile),
    /// Another call of the task sent a file of this name.
    NameTaken,
    /// The task has sent [`MAX_SENT_FILES`] files already.
    TooMany,
}

/// The chat's record of an upload a call started.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Upload {
    /// The chat's id of the file (Slack: from `files.getUploadURLExternal`).
    pub file_id: String,
}

fn corrupt(key: &Key, e: impl std::fmt::Display) -> StoreError {
    StoreError::Table(TableError::Corrupt(format!("{}/{}: {e}", key.pk, key.sk)))
}

impl TaskStore {
    /// The files `task` sent to its HTTP client, by name.
    pub async fn sent_files(&self, task: &TaskId) -> Result<Vec<SentFile>, StoreError> {
        let items = self
            .table()
            .query(&partition(task), FILE_PREFIX, None, MAX_SENT_FILES + 1)
            .await?;
        items
            .iter()
            .map(|i| serde_json::from_str(&i.data).map_err(|e| corrupt(&i.key, e)))
            .collect()
    }

    /// The file `task` sent under `name`, if any.
    pub async fn sent_file(
        &self,
        task: &TaskId,
        name: &str,
    ) -> Result<Option<SentFile>, StoreError> {
        let key = Key::new(partition(task), format!("{FILE_PREFIX}{name}"));
        match self.table().get(&key).await? {
            None => Ok(None),
            Some(i) => serde_json::from_str(&i.data)
                .map(Some)
                .map_err(|e| corrupt(&key, e)),
        }
    }

    /// Records `file` as sent by `task`, once: the first call to send a
    /// name keeps it. The bytes must be in the blob store already.
    pub async fn record_sent_file(
        &self,
        task: &TaskId,
        file: &SentFile,
    ) -> Result<Recorded, StoreError> {
        if let Some(earlier) = self.sent_file(task, &file.name).await? {
            return Ok(if earlier.call == file.call {
                Recorded::Again(earlier)
            } else {
                Recorded::NameTaken
            });
        }
        if self.sent_files(task).await?.len() >= MAX_SENT_FILES {
            return Ok(Recorded::TooMany);
        }
        let key = Key::new(partition(task), format!("{FILE_PREFIX}{}", file.name));
        let data = serde_json::to_string(file).map_err(|e| corrupt(&key, e))?;
        let put = Write::Put {
            item: self.item(key, data),
            condition: Condition::NotExists,
        };
        match self.table().transact(vec![put]).await {
            Ok(()) => Ok(Recorded::New),
            // Recorded meanwhile: by this call (another attempt) or another.
            Err(TableError::ConditionFailed { .. }) => {
                match self.sent_file(task, &file.name).await? {
                    Some(earlier) if earlier.call == file.call => Ok(Recorded::Again(earlier)),
                    _ => Ok(Recorded::NameTaken),
                }
            }
            Err(e) => Err(e.into()),
        }
    }

    /// The upload `call` (an idempotency key) of `task` started, if any.
    pub async fn upload(&self, task: &TaskId, call: &str) -> Result<Option<Upload>, StoreError> {
        let key = Key::new(partition(task), format!("{UPLOAD_PREFIX}{call}"));
        match self.table().get(&key).await? {
            None => Ok(None),
            Some(i) => serde_json::from_str(&i.data)
                .map(Some)
                .map_err(|e| corrupt(&key, e)),
        }
    }

    /// Records that `call` of `task` started `upload` (replacing one it
    /// started before and never completed).
    pub async fn record_upload(
        &self,
        task: &TaskId,
        call: &str,
        upload: &Upload,
    ) -> Result<(), StoreError> {
        let key = Key::new(partition(task), format!("{UPLOAD_PREFIX}{call}"));
        let data = serde_json::to_string(upload).map_err(|e| corrupt(&key, e))?;
        let put = Write::Put {
            item: self.item(key, data),
            condition: Condition::None,
        };
        Ok(self.table().transact(vec![put]).await?)
    }

    fn item(&self, key: Key, data: String) -> Item {
        Item {
            key,
            version: 1,
            data,
            index: None,
            expires_at: self.retention().entry_expires_at(Instant::now()),
            listing: None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::MemoryTable;
    use std::sync::Arc;

    fn store() -> TaskStore {
        TaskStore::new(
            Arc::new(MemoryTable::default()),
            Arc::new(crate::testing::NoBlobs),
        )
    }

    fn file(name: &str, call: &str) -> SentFile {
        SentFile {
            name: name.into(),
            media_type: "text/csv".into(),
            size: 3,
            blob_key: format!("b/{call}"),
            call: call.into(),
        }
    }

    #[tokio::test]
    async fn a_name_is_kept_by_the_first_call_and_found_again_by_it() {
        let s = store();
        let t = TaskId::generate();
        assert_eq!(
            s.record_sent_file(&t, &file("a.csv", "k1")).await.unwrap(),
            Recorded::New
        );
        assert_eq!(
            s.record_sent_file(&t, &file("a.csv", "k1")).await.unwrap(),
            Recorded::Again(file("a.csv", "k1"))
        );
        assert_eq!(
            s.record_sent_file(&t, &file("a.csv", "k2")).await.unwrap(),
            Recorded::NameTaken
        );
        s.record_sent_file(&t, &file("b.csv", "k2")).await.unwrap();
        let names: Vec<String> = s
            .sent_files(&t)
            .await
            .unwrap()
            .into_iter()
            .map(|f| f.name)
            .collect();
        assert_eq!(names, ["a.csv", "b.csv"]);
        assert!(s.sent_file(&t, "c.csv").await.unwrap().is_none());
        assert!(s.sent_files(&TaskId::generate()).await.unwrap().is_empty());
    }

    #[tokio::test]
    async fn uploads_are_kept_per_call() {
        let s = store();
        let t = TaskId::generate();
        assert!(s.upload(&t, "k1").await.unwrap().is_none());
        let up = Upload {
            file_id: "F1".into(),
        };
        s.record_upload(&t, "k1", &up).await.unwrap();
        assert_eq!(s.upload(&t, "k1").await.unwrap(), Some(up));
        assert!(s.upload(&t, "k2").await.unwrap().is_none());
    }

    #[test]
    fn blob_keys_are_per_call_and_plain() {
        let t = TaskId::generate();
        let key = blob_key(&t, &format!("{t}:3:call/../9"));
        assert_eq!(key, format!("tasks/{t}/sent/3_call____9"));
    }
}
