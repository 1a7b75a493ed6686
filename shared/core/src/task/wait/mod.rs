//! What a waiting task waits for: one module per kind, each owning its
//! data and its rules (when a wake for it is due, when it is over), and
//! [`WaitingFor`], the one enum over them that every place handling waits
//! matches exhaustively (the worker's take and next wake, the reaper, each
//! renderer): a new kind is a module here plus one arm per renderer, and
//! the compiler names each place.
//!
//! A wait ends in one of two ways. Its **event** (a decision, a reply, a
//! delivered callback, the last child's report, the person connecting) is
//! recorded by whoever saw it in the same write that lifts the wait, which
//! leaves the task `queued` for its wake; or its **expiry** passes (a
//! timer, an approval's, a question's, a callback's or a Connect link's
//! `expires_at`), which only a wake for that time notices. Two events are
//! written elsewhere first (a child ends before it reports to its parent;
//! a person's tokens are stored before the wait is lifted): the reaper
//! settles those from where they were written ([`WaitingFor::written_first`]).

pub mod approval;
pub mod callback;
pub mod capacity;
pub mod children;
pub mod connection;
pub mod reply;
pub mod timer;
pub mod turn;

pub use approval::Approval;
pub use callback::Callback;
pub use capacity::{Capacity, CapacityScope};
pub use children::Children;
pub use connection::Connection;
pub use reply::Reply;
pub use timer::Timer;
pub use turn::Turn;

use crate::clock::Instant;
use crate::task::{Task, TaskStatus};
use serde::{Deserialize, Serialize};

/// What a waiting task waits for. Serialised as the `waiting_for` of the
/// task status JSON: `{"kind": "approval", …its fields}`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum WaitingFor {
    Approval(Approval),
    Children(Children),
    Timer(Timer),
    /// Only a `queued` task waits for this.
    Capacity(Capacity),
    /// Only a `queued` task waits for this.
    Turn(Turn),
    Callback(Callback),
    Connection(Connection),
    Reply(Reply),
}

/// Where a wait's event is written before the wait is lifted, for the
/// reaper to settle a lift that was lost.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum WrittenFirst {
    /// The children's own records: each ends before it reports.
    Children,
    /// The store of connections: the tokens are stored before the lift.
    Connections,
}

impl WaitingFor {
    /// Whether this is a `queued` task's wait for admission (a slot, its
    /// turn), decided at each wake by the worker, rather than a `waiting`
    /// task's.
    pub fn is_admission(&self) -> bool {
        match self {
            WaitingFor::Capacity(_) | WaitingFor::Turn(_) => true,
            WaitingFor::Approval(_)
            | WaitingFor::Children(_)
            | WaitingFor::Timer(_)
            | WaitingFor::Callback(_)
            | WaitingFor::Connection(_)
            | WaitingFor::Reply(_) => false,
        }
    }

    /// Whether a person must act for the wait to end (decide, answer,
    /// connect): a client waiting on it would only hang.
    pub fn awaits_a_person(&self) -> bool {
        match self {
            WaitingFor::Approval(_) | WaitingFor::Reply(_) | WaitingFor::Connection(_) => true,
            WaitingFor::Children(_)
            | WaitingFor::Timer(_)
            | WaitingFor::Capacity(_)
            | WaitingFor::Turn(_)
            | WaitingFor::Callback(_) => false,
        }
    }

    /// Where the wait's event is written before the lift, if elsewhere.
    pub fn written_first(&self) -> Option<WrittenFirst> {
        match self {
            WaitingFor::Children(_) => Some(WrittenFirst::Children),
            WaitingFor::Connection(_) => Some(WrittenFirst::Connections),
            // Their event (a decision, a delivered callback, a reply)
            // lifts the wait in the write that records it; a timer has
            // only its time; an admission is decided at each wake.
            WaitingFor::Approval(_)
            | WaitingFor::Callback(_)
            | WaitingFor::Reply(_)
            | WaitingFor::Timer(_)
            | WaitingFor::Capacity(_)
            | WaitingFor::Turn(_) => None,
        }
    }

    /// When a wake for this wait is due, by `t`'s record: its expiry, a
    /// timer's end, a delegating task's deadline. `None` for an
    /// admission, and for an event with no expiry.
    fn wakes_at(&self, t: &Task) -> Option<Instant> {
        match self {
            WaitingFor::Approval(w) => w.wakes_at(t),
            WaitingFor::Children(w) => w.wakes_at(t),
            WaitingFor::Timer(w) => w.wakes_at(),
            WaitingFor::Callback(w) => w.wakes_at(t),
            WaitingFor::Connection(w) => w.wakes_at(),
            WaitingFor::Reply(w) => w.wakes_at(t),
            WaitingFor::Capacity(_) | WaitingFor::Turn(_) => None,
        }
    }

    fn is_over(&self, t: &Task, now: Instant) -> bool {
        match self {
            WaitingFor::Approval(w) => w.is_over(t, now),
            WaitingFor::Children(w) => w.is_over(t),
            WaitingFor::Timer(w) => w.is_over(now),
            WaitingFor::Callback(w) => w.is_over(t, now),
            WaitingFor::Connection(w) => w.is_over(now),
            WaitingFor::Reply(w) => w.is_over(t, now),
            WaitingFor::Capacity(_) | WaitingFor::Turn(_) => false,
        }
    }
}

/// Whether `t`, waiting, has nothing left to wait for at `now`: what it
/// waited for is on its record, or the wait's expiry passed. `false` for
/// a task that is not waiting, and for the waits of a `queued` task
/// (capacity, turn), which its admission decides when it is woken.
pub fn is_over(t: &Task, now: Instant) -> bool {
    if t.status != TaskStatus::Waiting {
        return false;
    }
    t.waiting_for.as_ref().is_some_and(|w| w.is_over(t, now))
}

/// When the waiting task `t` is next to be woken for its wait, if that is
/// after `now` (a time already past needs no timer: the wake that noticed
/// it runs now).
pub fn next_wake(t: &Task, now: Instant) -> Option<Instant> {
    if t.status != TaskStatus::Waiting {
        return None;
    }
    t.waiting_for
        .as_ref()
        .and_then(|w| w.wakes_at(t))
        .filter(|at| *at > now)
}

#[cfg(any(test, feature = "testing"))]
pub mod testing;

#[cfg(test)]
mod tests;
