//! Why the worker could not finish what a message asked of it.
//!
//! Every fallible step of a segment returns a [`WorkerError`]; the wake
//! handler decides from its variant, never from its text, whether the
//! message is worth retrying ([`WorkerError::is_transient`]).

use baton_core::{LedgerError, QueueError, ReplyError, StoreError, TableError};
use baton_schedule::{ScheduleError, SchedulerError};

#[derive(Debug, thiserror::Error)]
pub enum WorkerError {
    /// Another segment owns the task now: this one's lease expired (a long
    /// pause) and was taken over. Nothing to retry; the owner carries on.
    #[error("lease lost: another segment owns the task now")]
    LeaseLost,
    #[error("task store: {0}")]
    Store(#[from] StoreError),
    #[error("work queue: {0}")]
    Queue(#[from] QueueError),
    /// A message to the user (answer, approval request) was not delivered.
    #[error("{0}")]
    Reply(#[from] ReplyError),
    #[error("scheduler: {0}")]
    Scheduler(#[from] SchedulerError),
    #[error("schedules: {0}")]
    Schedule(#[from] ScheduleError),
    #[error("monthly budgets: {0}")]
    Budgets(#[from] LedgerError),
    #[error(transparent)]
    Capacity(#[from] crate::capacity::CapacityError),
    #[error(transparent)]
    Turn(#[from] baton_core::turn::TurnError),
    /// The store of per-person connections (a Connect link's record).
    #[error("connections: {0}")]
    Connections(#[from] baton_core::store::connections::ConnectionError),
}

impl WorkerError {
    /// What went wrong in words for the person who asked (recorded on the
    /// task and told when it is given up on): no URLs, ARNs or service
    /// messages, which go to the logs with the task id.
    pub fn plain(&self) -> &'static str {
        match self {
            WorkerError::LeaseLost => "another worker took the task over",
            WorkerError::Store(_) => "the task store was unavailable",
            WorkerError::Queue(_) => "the work queue was unavailable",
            WorkerError::Reply(_) => "a message to the user could not be delivered",
            WorkerError::Scheduler(_) | WorkerError::Schedule(_) => "the scheduler was unavailable",
            WorkerError::Budgets(_) => "the usage counters could not be read",
            WorkerError::Capacity(_) => "the concurrency slots could not be read",
            WorkerError::Turn(_) => "the conversation's waiting line could not be read",
            WorkerError::Connections(_) => "the store of account connections was unavailable",
        }
    }

    /// Whether delivering the message again may succeed: a service that
    /// was down or busy may be back. A lost lease, a record that cannot be
    /// read or a task that is gone will not heal by retrying; such a
    /// message is left to the dead-letter path, which ends the task with
    /// the reason.
    pub fn is_transient(&self) -> bool {
        match self {
            WorkerError::LeaseLost => false,
            WorkerError::Store(e) => store_error_is_transient(e),
            WorkerError::Budgets(LedgerError::Corrupt(_)) => false,
            WorkerError::Capacity(crate::capacity::CapacityError::Table(TableError::Corrupt(
                _,
            ))) => false,
            WorkerError::Capacity(crate::capacity::CapacityError::Store(e)) => {
                store_error_is_transient(e)
            }
            WorkerError::Turn(baton_core::turn::TurnError::Store(e)) => store_error_is_transient(e),
            WorkerError::Schedule(ScheduleError::Corrupt(_))
            | WorkerError::Scheduler(SchedulerError::Invalid(_))
            | WorkerError::Schedule(ScheduleError::Scheduler(SchedulerError::Invalid(_))) => false,
            WorkerError::Connections(baton_core::store::connections::ConnectionError::Table(e)) => {
                !matches!(e, TableError::Corrupt(_))
            }
            WorkerError::Connections(_) => false,
            WorkerError::Queue(_)
            | WorkerError::Reply(_)
            | WorkerError::Scheduler(_)
            | WorkerError::Schedule(_)
            | WorkerError::Budgets(_)
            | WorkerError::Capacity(_)
            | WorkerError::Turn(_) => true,
        }
    }
}

fn store_error_is_transient(e: &StoreError) -> bool {
    !matches!(
        e,
        StoreError::Corrupt(_)
            | StoreError::NotFound(_)
            | StoreError::Table(TableError::Corrupt(_))
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use baton_core::TaskId;

    #[test]
    fn only_what_may_heal_is_transient() {
        assert!(!WorkerError::LeaseLost.is_transient());
        assert!(!WorkerError::Store(StoreError::Corrupt("x".into())).is_transient());
        assert!(!WorkerError::Store(StoreError::NotFound(TaskId::generate())).is_transient());
        assert!(WorkerError::Store(StoreError::Conflict(TaskId::generate())).is_transient());
        assert!(
            WorkerError::Store(StoreError::Table(TableError::Unavailable("down".into())))
                .is_transient()
        );
        assert!(WorkerError::Reply(ReplyError("slack down".into())).is_transient());
    }
}
