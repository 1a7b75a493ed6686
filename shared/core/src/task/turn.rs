//! A conversation's turns (`on_new_message = "queue"` or `"interrupt"`).
//!
//! A message that arrives while a task runs on its conversation becomes a
//! task of its own that waits its turn: `queued`, `waiting_for: turn`, no
//! lease and no wake — it costs nothing while it waits. Its place is in
//! the conversation's line ([`Thread::waiting`], in order of arrival).
//!
//! A waiting task starts once the conversation's task and every live task
//! ahead of it in line have ended; starting, it takes the conversation
//! (`active_task`) and leaves the line in one conditional write, so two
//! wakes cannot start it twice, nor two waiters at once. A task that ends
//! wakes the one whose turn it is ([`wake_next`]). The order of writes rules
//! out a lost wake: the ingest puts a task in line before it looks whether
//! the conversation is idle, and a task's end is committed before it looks
//! at the line, so one of them sees the other. A wake lost to a crash is
//! re-sent by the reaper (a `queued` task without progress), and the task
//! asks again whether it is its turn: it is delayed, never lost.

use crate::store::{StoreError, TaskStore, Thread};
use crate::{TaskId, Wake, WorkQueue};
use std::time::Duration;

/// How often a write to the conversation is retried when another request
/// changed it meanwhile.
const RACES: usize = 8;

#[derive(Debug, thiserror::Error)]
pub enum TurnError {
    #[error("conversation turns: {0}")]
    Store(#[from] StoreError),
    #[error("conversation turns: {0}")]
    Queue(#[from] crate::QueueError),
    #[error("conversation turns: the conversation {0} kept changing under concurrent writes")]
    Contended(String),
}

/// Whether task `id` exists and has not ended.
async fn live(store: &TaskStore, id: &TaskId) -> Result<bool, StoreError> {
    Ok(store
        .get(id)
        .await?
        .is_some_and(|t| !t.status.is_terminal()))
}

/// Puts `id` at the end of conversation `key`'s line (once: a retried
/// request does not add it twice).
pub async fn join_line(store: &TaskStore, key: &str, id: &TaskId) -> Result<(), TurnError> {
    for _ in 0..RACES {
        let mut thread = store.thread(key).await?.unwrap_or_else(|| Thread {
            key: key.to_owned(),
            active_task: None,
            recap: Default::default(),
            seen_ts: None,
            always: Vec::new(),
            waiting: Vec::new(),
            version: 0,
        });
        if thread.waiting.contains(id) || thread.active_task.as_ref() == Some(id) {
            return Ok(());
        }
        thread.waiting.push(id.clone());
        if store.put_thread(&thread).await? {
            return Ok(());
        }
    }
    Err(TurnError::Contended(key.to_owned()))
}

/// The last task on conversation `key`: the last in its line, else the
/// one it runs (what a new message queues behind), if it is live.
pub async fn last_live(store: &TaskStore, thread: &Thread) -> Result<Option<TaskId>, StoreError> {
    for id in thread.waiting.iter().rev().chain(thread.active_task.iter()) {
        if live(store, id).await? {
            return Ok(Some(id.clone()));
        }
    }
    Ok(None)
}

/// Whether a live task is ahead of `id` on the conversation: its running
/// task, or a live one before it in line (the whole line, for a task that
/// is not in it).
async fn anyone_ahead(store: &TaskStore, thread: &Thread, id: &TaskId) -> Result<bool, StoreError> {
    if let Some(active) = thread.active_task.as_ref().filter(|a| *a != id) {
        if live(store, active).await? {
            return Ok(true);
        }
    }
    for w in thread.waiting.iter().take_while(|w| *w != id) {
        if live(store, w).await? {
            return Ok(true);
        }
    }
    Ok(false)
}

/// Whether it is `id`'s turn on conversation `key`; if so, `id` takes the
/// conversation (it becomes its `active_task`, and leaves the line with
/// the ended tasks before it), so the next message goes to it.
pub async fn take_turn(store: &TaskStore, key: &str, id: &TaskId) -> Result<bool, TurnError> {
    for _ in 0..RACES {
        let Some(mut thread) = store.thread(key).await? else {
            // No conversation to wait on.
            return Ok(true);
        };
        if thread.active_task.as_ref() == Some(id) {
            return Ok(true);
        }
        if anyone_ahead(store, &thread, id).await? {
            return Ok(false);
        }
        match thread.waiting.iter().position(|w| w == id) {
            Some(at) => {
                thread.waiting.drain(..=at);
            }
            None => thread.waiting.clear(),
        }
        thread.active_task = Some(id.clone());
        if store.put_thread(&thread).await? {
            return Ok(true);
        }
    }
    Err(TurnError::Contended(key.to_owned()))
}

/// The task whose turn it is on conversation `key`, if the conversation
/// is idle (its task ended) and a live task waits in line.
pub async fn next_turn(store: &TaskStore, key: &str) -> Result<Option<TaskId>, StoreError> {
    let Some(thread) = store.thread(key).await? else {
        return Ok(None);
    };
    if let Some(active) = &thread.active_task {
        if live(store, active).await? {
            return Ok(None);
        }
    }
    for w in &thread.waiting {
        if live(store, w).await? {
            return Ok(Some(w.clone()));
        }
    }
    Ok(None)
}

/// Wakes the task whose turn it is on conversation `key`, if any
/// ([`next_turn`]). A duplicate wake is harmless: the task asks
/// [`take_turn`] before it runs.
pub async fn wake_next(
    store: &TaskStore,
    queue: &dyn WorkQueue,
    key: &str,
) -> Result<Option<TaskId>, TurnError> {
    let Some(id) = next_turn(store, key).await? else {
        return Ok(None);
    };
    queue
        .send(&Wake::new(id.clone(), "turn").to_body(), Duration::ZERO)
        .await?;
    Ok(Some(id))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::{MemoryTable, NoBlobs, SentQueue};
    use crate::{Limits, Origin, Task, TaskStatus};
    use std::sync::Arc;

    const KEY: &str = "http:chat";

    fn store() -> TaskStore {
        TaskStore::new(Arc::new(MemoryTable::default()), Arc::new(NoBlobs))
    }

    async fn task(store: &TaskStore) -> TaskId {
        let t = Task::new(
            TaskId::generate(),
            "default",
            Origin::Http,
            Some(KEY.into()),
            Limits::default(),
            crate::Instant::now(),
        );
        store.create(&t, Vec::new(), None).await.unwrap();
        t.id
    }

    async fn end(store: &TaskStore, id: &TaskId) {
        store
            .update(id, None, |t| {
                t.finish(TaskStatus::Cancelled);
                Ok(Some(Vec::new()))
            })
            .await
            .unwrap();
    }

    async fn running(store: &TaskStore) -> TaskId {
        let id = task(store).await;
        let thread = Thread {
            key: KEY.into(),
            active_task: Some(id.clone()),
            recap: Default::default(),
            seen_ts: None,
            always: Vec::new(),
            waiting: Vec::new(),
            version: 0,
        };
        assert!(store.put_thread(&thread).await.unwrap());
        id
    }

    #[tokio::test]
    async fn waiters_start_in_order_once_the_task_ahead_ended() {
        let store = store();
        let queue = SentQueue::default();
        let a = running(&store).await;
        let (b, c) = (task(&store).await, task(&store).await);
        join_line(&store, KEY, &b).await.unwrap();
        join_line(&store, KEY, &c).await.unwrap();
        join_line(&store, KEY, &b).await.unwrap();
        let thread = store.thread(KEY).await.unwrap().unwrap();
        assert_eq!(
            thread.waiting,
            [b.clone(), c.clone()],
            "once each, in order"
        );
        assert_eq!(last_live(&store, &thread).await.unwrap(), Some(c.clone()));

        // A runs: nobody's turn, nobody woken.
        assert!(!take_turn(&store, KEY, &b).await.unwrap());
        assert!(!take_turn(&store, KEY, &c).await.unwrap());
        assert_eq!(wake_next(&store, &queue, KEY).await.unwrap(), None);

        end(&store, &a).await;
        assert!(!take_turn(&store, KEY, &c).await.unwrap(), "B is ahead");
        assert_eq!(
            wake_next(&store, &queue, KEY).await.unwrap(),
            Some(b.clone())
        );
        assert!(queue.sent()[0].0.contains(b.as_str()));
        assert!(take_turn(&store, KEY, &b).await.unwrap());
        assert!(take_turn(&store, KEY, &b).await.unwrap(), "a repeated wake");
        let thread = store.thread(KEY).await.unwrap().unwrap();
        assert_eq!(thread.active_task.as_ref(), Some(&b));
        assert_eq!(thread.waiting, std::slice::from_ref(&c));
        assert!(!take_turn(&store, KEY, &c).await.unwrap());

        end(&store, &b).await;
        assert_eq!(
            wake_next(&store, &queue, KEY).await.unwrap(),
            Some(c.clone())
        );
        assert!(take_turn(&store, KEY, &c).await.unwrap());
        assert!(store.thread(KEY).await.unwrap().unwrap().waiting.is_empty());
    }

    #[tokio::test]
    async fn an_ended_waiter_is_skipped_and_one_never_in_line_still_gets_its_turn() {
        let store = store();
        let queue = SentQueue::default();
        let a = running(&store).await;
        let (b, c) = (task(&store).await, task(&store).await);
        join_line(&store, KEY, &b).await.unwrap();
        join_line(&store, KEY, &c).await.unwrap();
        end(&store, &b).await;
        end(&store, &a).await;
        assert_eq!(
            wake_next(&store, &queue, KEY).await.unwrap(),
            Some(c.clone())
        );
        // Created, but its request died before it joined the line: it
        // waits for the line, then goes.
        let lost = task(&store).await;
        assert!(!take_turn(&store, KEY, &lost).await.unwrap());
        assert!(take_turn(&store, KEY, &c).await.unwrap());
        end(&store, &c).await;
        assert!(take_turn(&store, KEY, &lost).await.unwrap());
    }
}
