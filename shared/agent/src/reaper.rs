//! The reaper: a periodic sweep that re-sends the wake of any task that
//! should be running but that no live segment holds, so a lost message can
//! delay a task but never strand it.
//!
//! Every kind of wait is kept: a waiting task is woken once its wait is
//! over by its record ([`baton_core::wait::is_over`], the rule the worker
//! applies when the wake comes) and it sat unchanged for the staleness
//! period; the two events recorded elsewhere before the wait is lifted (a
//! child's end, a person's connection) are settled from where they were
//! written.

use baton_core::store::connections::{ConnectionError, ConnectionStore};
use baton_core::wait::{WaitingFor, WrittenFirst};
use baton_core::{Instant, QueueError, StoreError, Task, TaskStatus, TaskStore, Wake, WorkQueue};
use std::sync::Arc;
use std::time::Duration;

pub struct Reaper {
    store: TaskStore,
    queue: Arc<dyn WorkQueue>,
    /// The store of per-person connections, where a person's connecting
    /// is written before their task's wait is lifted; without it a task
    /// waiting for a connection is woken at its expiry.
    connections: Option<ConnectionStore>,
    /// How long a task may sit without progress and without a live lease
    /// before its wake is re-sent.
    stale_after: Duration,
}

#[derive(Debug, thiserror::Error)]
pub enum ReaperError {
    #[error(transparent)]
    Store(#[from] StoreError),
    #[error(transparent)]
    Queue(#[from] QueueError),
    #[error(transparent)]
    Connections(#[from] ConnectionError),
}

impl Reaper {
    pub fn new(store: TaskStore, queue: Arc<dyn WorkQueue>, stale_after: Duration) -> Self {
        Reaper {
            store,
            queue,
            connections: None,
            stale_after,
        }
    }

    /// Also settles tasks waiting for a person who has connected since.
    pub fn with_connections(mut self, connections: Option<ConnectionStore>) -> Self {
        self.connections = connections;
        self
    }

    /// One sweep; returns how many wakes it re-sent.
    #[tracing::instrument(skip_all)]
    pub async fn sweep(&self) -> Result<usize, ReaperError> {
        let now = Instant::now();
        let stale = now - self.stale_after;
        let mut sent = 0;
        for task in self.store.active_tasks(10_000).await? {
            if task.updated_at >= stale || task.lease().is_live(now) {
                // Just changed, or held by a live segment.
                continue;
            }
            if task.status() == TaskStatus::Waiting {
                // What each kind's event writes elsewhere first.
                let woken = match task.waiting_for().and_then(WaitingFor::written_first) {
                    Some(WrittenFirst::Children) => {
                        self.settle_children(&task).await?;
                        false
                    }
                    Some(WrittenFirst::Connections) => self.settle_connection(&task).await?,
                    None => false,
                };
                if woken {
                    sent += 1;
                    continue;
                }
            }
            if wake_lost(&task, stale) {
                tracing::info!(task_id = %task.id, "re-sending a lost wake");
                self.wake(&task).await?;
                sent += 1;
            }
        }
        Ok(sent)
    }

    async fn wake(&self, task: &Task) -> Result<(), ReaperError> {
        self.queue
            .send(
                &Wake::new(task.id.clone(), "reaper").to_body(),
                Duration::ZERO,
            )
            .await?;
        Ok(())
    }

    /// A parent waiting for children that have in fact ended (a child whose
    /// report was lost, e.g. dead-lettered with the store down) gets their
    /// outcomes now.
    async fn settle_children(&self, parent: &Task) -> Result<(), ReaperError> {
        for c in parent.waits.children.iter().filter(|c| c.outcome.is_none()) {
            let Some(child) = self.store.get(&c.task_id).await? else {
                continue;
            };
            if !child.status().is_terminal() {
                continue;
            }
            tracing::info!(parent = %parent.id, child = %child.id, "settling a child's lost report");
            crate::delegation::report_ended(&self.store, self.queue.as_ref(), &child).await;
        }
        Ok(())
    }

    /// A task waiting for a person who connected since they were asked
    /// (their tokens were stored but the wait was not lifted: the ingest
    /// stopped between the two writes, or the person connected before the
    /// task began to wait) is lifted and woken, as `/oauth/callback` does.
    /// `true` when it was woken.
    async fn settle_connection(&self, task: &Task) -> Result<bool, ReaperError> {
        let (Some(connections), Some(wait)) = (
            &self.connections,
            baton_core::wait::connection::awaited(task),
        ) else {
            return Ok(false);
        };
        let connected = connections
            .summary_of(&wait.person, &wait.provider)
            .await?
            .is_some_and(|c| c.connected_at >= wait.created_at);
        if !connected {
            return Ok(false);
        }
        let provider = wait.provider.clone();
        let (task, _) = self
            .store
            .update(&task.id, Some(task.clone()), |t| {
                Ok(baton_core::wait::connection::lift(t, &provider))
            })
            .await?;
        if task.status() != TaskStatus::Queued {
            return Ok(false);
        }
        tracing::info!(task_id = %task.id, provider, "settling a connection whose wake was lost");
        self.wake(&task).await?;
        Ok(true)
    }
}

/// Whether the wake of `task`, unchanged since before `stale` and held by
/// no live segment, was lost: it is queued or running (a handed-over or
/// crashed segment), or waiting for what was over by `stale` (its wait,
/// a cancel, its deadline).
fn wake_lost(task: &Task, stale: Instant) -> bool {
    match task.status() {
        TaskStatus::Queued | TaskStatus::Running => true,
        TaskStatus::Waiting => {
            task.cancel_requested
                || task.budget.limits.deadline_at.is_some_and(|d| d < stale)
                || baton_core::wait::is_over(task, stale)
        }
        TaskStatus::Succeeded | TaskStatus::Failed | TaskStatus::Cancelled => false,
    }
}
