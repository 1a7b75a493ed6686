//! Following a task live: its new events, in order, after a `seq`, until
//! it ends. The store has no change feed on both backends, so this polls
//! it: a page of events after the last seen, and, only when that page is
//! empty, the task itself to learn whether it ended. Shared by every live
//! consumer (`GET /tasks/{id}/stream`, and A2A streaming or MCP progress
//! may reuse it).

use baton_core::{Entry, StoreError, Task, TaskId, TaskStore};
use futures::stream::{self, BoxStream};
use std::time::Duration;

/// How often an idle task is polled: an answer's deltas show within half
/// a second, and an idle watch costs two small reads a second (one page
/// of events, one task record).
pub const POLL_INTERVAL: Duration = Duration::from_millis(500);

/// Events read from the store at once.
const PAGE: usize = 200;

/// What a watch yields.
#[derive(Debug, Clone)]
pub enum Seen {
    /// An event of the task, each once, in `seq` order.
    Event(Box<Entry>),
    /// The task ended: every event it wrote came before this. The last
    /// item of the watch.
    Ended(Box<Task>),
}

/// The events of task `id` after `after` (all of them for `None`),
/// polling every `every` while there is nothing new, then
/// [`Seen::Ended`]. A store error is yielded and ends the watch (the
/// caller resumes after the last `seq` it saw). A task that does not
/// exist ends the watch with [`StoreError::NotFound`].
pub fn watch(
    store: TaskStore,
    id: TaskId,
    after: Option<u64>,
    every: Duration,
) -> BoxStream<'static, Result<Seen, StoreError>> {
    let state = State {
        store,
        id,
        after,
        every,
        buffered: Vec::new().into_iter(),
        ended: None,
        done: false,
        first: true,
    };
    Box::pin(stream::unfold(state, |mut s| async move {
        let item = s.next().await?;
        Some((item, s))
    }))
}

struct State {
    store: TaskStore,
    id: TaskId,
    after: Option<u64>,
    every: Duration,
    /// Events read but not yet yielded.
    buffered: std::vec::IntoIter<Entry>,
    /// The task, once it was seen ended: the events are drained once
    /// more, then it is yielded.
    ended: Option<Task>,
    done: bool,
    /// No sleep before the first read.
    first: bool,
}

impl State {
    async fn next(&mut self) -> Option<Result<Seen, StoreError>> {
        if self.done {
            return None;
        }
        loop {
            if let Some(e) = self.buffered.next() {
                self.after = Some(e.seq);
                return Some(Ok(Seen::Event(Box::new(e))));
            }
            let page = match self.store.entries(&self.id, self.after, PAGE).await {
                Ok(p) => p,
                Err(e) => return Some(self.fail(e)),
            };
            if !page.is_empty() {
                self.buffered = page.into_iter();
                continue;
            }
            // Nothing new. A task seen ended before this empty read wrote
            // its last event before it ended (the end and its events are
            // one commit), so nothing can follow.
            if let Some(task) = self.ended.take() {
                self.done = true;
                return Some(Ok(Seen::Ended(Box::new(task))));
            }
            if !self.first {
                tokio::time::sleep(self.every).await;
            }
            self.first = false;
            match self.store.get(&self.id).await {
                Ok(Some(task)) if task.status().is_terminal() => self.ended = Some(task),
                Ok(Some(_)) => {}
                Ok(None) => return Some(self.fail(StoreError::NotFound(self.id.clone()))),
                Err(e) => return Some(self.fail(e)),
            }
        }
    }

    fn fail(&mut self, e: StoreError) -> Result<Seen, StoreError> {
        self.done = true;
        Err(e)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use baton_core::{now_ms, EntryKind, Limits, Origin, TaskStatus};
    use baton_embedded::{EmbeddedBackend, QueueConfig};
    use futures::StreamExt;

    async fn store_with_task() -> (tempfile::TempDir, TaskStore, TaskId) {
        let dir = tempfile::tempdir().unwrap();
        let backend = EmbeddedBackend::open(dir.path(), QueueConfig::default()).unwrap();
        let store = TaskStore::new(backend.table.clone(), backend.blobs.clone());
        let t = Task::new(
            TaskId::generate(),
            "default",
            Origin::Http,
            None,
            Limits::default(),
            now_ms(),
        );
        let text = "m0".to_owned();
        store
            .create(&t, vec![EntryKind::UserMessage { text, from: None }], None)
            .await
            .unwrap();
        (dir, store, t.id)
    }

    async fn append(store: &TaskStore, id: &TaskId, text: &str, status: Option<TaskStatus>) {
        let mut t = store.get(id).await.unwrap().unwrap();
        if let Some(s) = status {
            baton_core::testing::set_status(&mut t, s);
        }
        let text = text.to_owned();
        store
            .commit(&mut t, vec![EntryKind::UserMessage { text, from: None }])
            .await
            .unwrap();
    }

    fn seqs(seen: &[Result<Seen, StoreError>]) -> Vec<u64> {
        seen.iter()
            .filter_map(|s| match s {
                Ok(Seen::Event(e)) => Some(e.seq),
                _ => None,
            })
            .collect()
    }

    #[tokio::test]
    async fn yields_every_event_once_in_order_then_the_end() {
        let (_dir, store, id) = store_with_task().await;
        let w = watch(store.clone(), id.clone(), None, Duration::from_millis(5));
        let writer = {
            let (store, id) = (store.clone(), id.clone());
            tokio::spawn(async move {
                for i in 1..6 {
                    append(&store, &id, &format!("m{i}"), None).await;
                    tokio::time::sleep(Duration::from_millis(3)).await;
                }
                append(&store, &id, "last", Some(TaskStatus::Succeeded)).await;
            })
        };
        let seen: Vec<_> = w.collect().await;
        writer.await.unwrap();
        let all: Vec<u64> = store
            .entries(&id, None, 1000)
            .await
            .unwrap()
            .iter()
            .map(|e| e.seq)
            .collect();
        assert_eq!(all.len(), 7);
        assert_eq!(seqs(&seen), all);
        assert!(
            matches!(seen.last(), Some(Ok(Seen::Ended(t))) if t.status() == TaskStatus::Succeeded)
        );
    }

    #[tokio::test]
    async fn resumes_after_a_seq_with_nothing_earlier() {
        let (_dir, store, id) = store_with_task().await;
        for i in 1..4 {
            append(&store, &id, &format!("m{i}"), None).await;
        }
        append(&store, &id, "last", Some(TaskStatus::Failed)).await;
        let all: Vec<u64> = store
            .entries(&id, None, 1000)
            .await
            .unwrap()
            .iter()
            .map(|e| e.seq)
            .collect();
        let seen: Vec<_> = watch(store, id, Some(all[1]), Duration::from_millis(5))
            .collect()
            .await;
        assert_eq!(seqs(&seen), all[2..].to_vec());
        assert!(matches!(seen.last(), Some(Ok(Seen::Ended(_)))));
    }

    #[tokio::test]
    async fn an_unknown_task_is_not_found() {
        let (_dir, store, _) = store_with_task().await;
        let seen: Vec<_> = watch(store, TaskId::generate(), None, Duration::from_millis(5))
            .collect()
            .await;
        assert!(matches!(seen.as_slice(), [Err(StoreError::NotFound(_))]));
    }
}
