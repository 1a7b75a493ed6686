//! What a waiting task waits for, and when its wait is over by the task's
//! own record: the one rule the worker applies when a wake comes and the
//! reaper applies when it looks for a wake that was lost.
//!
//! A wait ends in one of two ways. Its **event** (a decision, a reply, a
//! delivered callback, the last child's report, the person connecting) is
//! recorded by whoever saw it in the same write that lifts the wait, which
//! leaves the task `queued` for its wake; or its **expiry** passes (a
//! timer, an approval's, a question's, a callback's or a Connect link's
//! `expires_at`), which only a wake for that time notices. Two events are
//! written elsewhere first (a child ends before it reports to its parent;
//! a person's tokens are stored before the wait is lifted): the reaper
//! settles those from where they were written.

pub mod connection;

use crate::clock::Instant;
use crate::task::{approval, callback, question, Task, TaskStatus, WaitingFor};

/// Whether `t`, waiting, has nothing left to wait for at `now`: what it
/// waited for is on its record, or the wait's expiry passed. `false` for
/// a task that is not waiting, and for the waits of a `queued` task
/// (capacity, turn), which its admission decides when it is woken.
pub fn is_over(t: &Task, now: Instant) -> bool {
    if t.status != TaskStatus::Waiting {
        return false;
    }
    let Some(w) = &t.waiting_for else {
        return false;
    };
    match w {
        // Expired approvals are decided (denied) when the task is next
        // taken; the named one decided already lifts the wait.
        WaitingFor::Approval { approval_id, .. } => {
            t.approval(approval_id).is_none_or(|a| a.decision.is_some())
                || approval::next_expiry(t).is_some_and(|at| at <= now)
        }
        WaitingFor::Children { .. } => t.pending_children() == 0,
        WaitingFor::Timer { until } => *until <= now,
        WaitingFor::Reply { .. } => question::open(t).is_none_or(|q| q.expires_at <= now),
        WaitingFor::Callback { .. } => callback::open(t).is_none_or(|c| c.expires_at <= now),
        // Whether the person connected is in the store of connections,
        // not on the task ([`crate::store::connections`]).
        WaitingFor::Connection { expires_at, .. } => *expires_at <= now,
        WaitingFor::Capacity { .. } | WaitingFor::Turn { .. } => false,
    }
}

#[cfg(any(test, feature = "testing"))]
pub mod testing;

#[cfg(test)]
mod tests;
