//! A wait for a person to decide an approval (`[approvals]`): the
//! decision lifts it in the write that records it; an undecided approval
//! is denied as expired when the task is next taken.

use crate::clock::Instant;
use crate::task::Task;
use serde::{Deserialize, Serialize};

/// The approval the task waits for: which, of what call, in words.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Approval {
    pub approval_id: String,
    pub tool: String,
    pub summary: String,
}

impl Approval {
    /// Over once the named approval is decided (or gone), or when an
    /// undecided one expired (its expiry decides it at the next take).
    pub(super) fn is_over(&self, t: &Task, now: Instant) -> bool {
        t.waits
            .approval(&self.approval_id)
            .is_none_or(|a| a.decision.is_some())
            || self.wakes_at(t).is_some_and(|at| at <= now)
    }

    /// The first expiry among the approvals not decided yet.
    pub(super) fn wakes_at(&self, t: &Task) -> Option<Instant> {
        t.waits.next_approval_expiry()
    }
}
