//! A wait for delegated tasks to end: each child reports its outcome to
//! its parent when it ends; the last report lifts the wait. A child ends
//! before it reports, so the reaper settles a report that was lost.

use crate::clock::Instant;
use crate::task::Task;
use serde::{Deserialize, Serialize};

/// How many children had not ended when the task began to wait.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Children {
    pub pending: u32,
}

impl Children {
    /// Over once every child reported.
    pub(super) fn is_over(&self, t: &Task) -> bool {
        t.waits.pending_children() == 0
    }

    /// The task's deadline, if it has one: the children may not outlive it.
    pub(super) fn wakes_at(&self, t: &Task) -> Option<Instant> {
        t.budget.limits.deadline_at
    }
}
