//! The reaper: a periodic sweep that re-sends the wake of any task that
//! should be running but that no live segment holds, so a lost message can
//! delay a task but never strand it.

use baton_core::{Instant, QueueError, StoreError, Task, TaskStatus, TaskStore, Wake, WorkQueue};
use std::sync::Arc;
use std::time::Duration;

pub struct Reaper {
    store: TaskStore,
    queue: Arc<dyn WorkQueue>,
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
}

impl Reaper {
    pub fn new(store: TaskStore, queue: Arc<dyn WorkQueue>, stale_after: Duration) -> Self {
        Reaper {
            store,
            queue,
            stale_after,
        }
    }

    /// One sweep; returns how many wakes it re-sent.
    #[tracing::instrument(skip_all)]
    pub async fn sweep(&self) -> Result<usize, ReaperError> {
        let now = Instant::now();
        let stale = now - self.stale_after;
        let mut sent = 0;
        for task in self.store.active_tasks(10_000).await? {
            if task.status == TaskStatus::Waiting
                && matches!(
                    task.waiting_for,
                    Some(baton_core::WaitingFor::Children { .. })
                )
                && task.updated_at < stale
            {
                self.settle_children(&task).await?;
            }
            // A waiting task whose timer (or approval expiry) passed long ago
            // lost its wake too.
            let timer_over = task.status == TaskStatus::Waiting
                && match &task.waiting_for {
                    Some(baton_core::WaitingFor::Timer { until }) => *until < stale,
                    Some(baton_core::WaitingFor::Callback { expires_at, .. }) => {
                        *expires_at < stale
                    }
                    Some(baton_core::WaitingFor::Approval { .. }) => {
                        baton_core::approval::next_expiry(&task).is_some_and(|at| at < stale)
                    }
                    _ => false,
                };
            // A waiting task asked to cancel whose wake was lost.
            // A waiting task asked to cancel, or past its deadline, whose
            // wake was lost.
            let cancel_lost = task.status == TaskStatus::Waiting
                && (task.cancel_requested || task.limits.deadline_at.is_some_and(|d| d < stale));
            let runnable = matches!(task.status, TaskStatus::Queued | TaskStatus::Running)
                || timer_over
                || cancel_lost;
            let unheld = !task.lease.is_live(now);
            if runnable && unheld && task.updated_at < stale {
                tracing::info!(task_id = %task.id, "re-sending a lost wake");
                self.queue
                    .send(
                        &Wake::new(task.id.clone(), "reaper").to_body(),
                        Duration::ZERO,
                    )
                    .await?;
                sent += 1;
            }
        }
        Ok(sent)
    }

    /// A parent waiting for children that have in fact ended (a child whose
    /// report was lost, e.g. dead-lettered with the store down) gets their
    /// outcomes now.
    async fn settle_children(&self, parent: &Task) -> Result<(), ReaperError> {
        for c in parent.children.iter().filter(|c| c.outcome.is_none()) {
            let Some(child) = self.store.get(&c.task_id).await? else {
                continue;
            };
            if !child.status.is_terminal() {
                continue;
            }
            tracing::info!(parent = %parent.id, child = %child.id, "settling a child's lost report");
            crate::delegation::report_ended(&self.store, self.queue.as_ref(), &child).await;
        }
        Ok(())
    }
}
