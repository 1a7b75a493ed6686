//! The lookup items of `wait_for_callback` tokens: one item per token, in a
//! partition of its own (keys spread however many tasks wait), keyed by the
//! token's hash so a POST finds its task in one read and the token itself
//! is never stored:
//!
//! | item | pk | sk | what |
//! | --- | --- | --- | --- |
//! | callback | `CALLBACK#{sha256 of the token, hex}` | `CALLBACK` | a [`CallbackRecord`]: the task and call it resumes; created once, never changed |
//!
//! Whether it was called is the task's to say ([`crate::callback`]): the
//! claim is a conditional write of the task, so two racing POSTs cannot
//! both win. The item expires with the task's transcript, counted from
//! the callback's own expiry, so a late POST still gets 409, not 404.

use crate::clock::Instant;
use crate::ids::TaskId;
use crate::store::error::StoreError;
use crate::store::table::{Condition, Item, Key, TableError, Write};
use crate::store::tasks::TaskStore;
use serde::{Deserialize, Serialize};

/// What a token's lookup item says.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct CallbackRecord {
    pub task_id: TaskId,
    pub call_id: String,
    #[serde(with = "crate::clock::as_millis")]
    pub expires_at: Instant,
}

fn key(token_hash: &str) -> Key {
    Key::new(format!("CALLBACK#{token_hash}"), "CALLBACK")
}

fn corrupt(key: &Key, e: impl std::fmt::Display) -> StoreError {
    StoreError::Table(TableError::Corrupt(format!("{}/{}: {e}", key.pk, key.sk)))
}

impl TaskStore {
    /// Writes the lookup item of a new token (before the task names it, so
    /// a callback the task shows can always be found). A hash taken
    /// already (never, for 256 random bits) is an error.
    pub async fn record_callback(
        &self,
        token_hash: &str,
        record: &CallbackRecord,
    ) -> Result<(), StoreError> {
        let key = key(token_hash);
        let data = serde_json::to_string(record).map_err(|e| corrupt(&key, e))?;
        let item = Item {
            key,
            version: 1,
            data,
            index: None,
            expires_at: self.retention().entry_expires_at(record.expires_at),
            listing: None,
        };
        self.table()
            .transact(vec![Write::Put {
                item,
                condition: Condition::NotExists,
            }])
            .await
            .map_err(StoreError::from)
    }

    /// The task and call the token hashing to `token_hash` resumes.
    pub async fn callback_record(
        &self,
        token_hash: &str,
    ) -> Result<Option<CallbackRecord>, StoreError> {
        let key = key(token_hash);
        match self.table().get(&key).await? {
            None => Ok(None),
            Some(i) => serde_json::from_str(&i.data)
                .map(Some)
                .map_err(|e| corrupt(&key, e)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::{MemoryTable, NoBlobs};
    use std::sync::Arc;

    #[tokio::test]
    async fn a_token_is_found_by_its_hash_once_recorded() {
        let store = TaskStore::new(Arc::new(MemoryTable::default()), Arc::new(NoBlobs));
        let record = CallbackRecord {
            task_id: TaskId::generate(),
            call_id: "c1".into(),
            expires_at: Instant(5_000),
        };
        assert_eq!(store.callback_record("h1").await.unwrap(), None);
        store.record_callback("h1", &record).await.unwrap();
        assert_eq!(
            store.callback_record("h1").await.unwrap(),
            Some(record.clone())
        );
        assert!(
            store.record_callback("h1", &record).await.is_err(),
            "a hash is taken once"
        );
        assert_eq!(store.callback_record("h2").await.unwrap(), None);
    }
}
