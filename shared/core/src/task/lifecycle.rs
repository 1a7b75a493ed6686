//! The task's lifecycle: its status, what it waits for and its lease,
//! read by anyone and changed only by the transitions here, each of which
//! leaves the three consistent ([`Task::check`] names the rules; the store
//! still checks them on every write, as a backstop).
//!
//! | transition | from | to |
//! | --- | --- | --- |
//! | [`Task::start`] | queued (admitted), or waiting with its wait over | running, the lease taken |
//! | [`Task::wait`] | running (or queued, for an admission) | waiting, or queued for a slot or its turn; no lease |
//! | [`Task::wake`] | waiting | queued, waiting for nothing |
//! | [`Task::admit`] | queued for a slot or its turn | queued, waiting for nothing |
//! | [`Task::requeue`] | running | queued between segments, no lease |
//! | [`Task::finish`] | any | succeeded, failed or cancelled; no lease, no wait |
//!
//! A running segment also renews its lease with every write and its
//! heartbeat ([`Task::renew_lease`]).

use crate::clock::Instant;
use crate::lease::{LeaseLost, LeaseSlot};
use crate::task::wait::WaitingFor;
use crate::task::{Task, TaskStatus};
use std::time::Duration;

impl Task {
    pub fn status(&self) -> TaskStatus {
        self.status
    }

    /// What the task waits for: a `waiting` task's wait, or a `queued`
    /// task's admission (a slot, its turn).
    pub fn waiting_for(&self) -> Option<&WaitingFor> {
        self.waiting_for.as_ref()
    }

    pub fn lease(&self) -> &LeaseSlot {
        &self.lease
    }

    /// Takes the lease for `owner` until `now + ttl` and runs the task,
    /// leaving any admission wait behind (admitted, or running only to
    /// end); `false`, changing nothing, when another holds a live lease.
    /// A `waiting` task is [woken](Task::wake) first.
    pub fn start(&mut self, owner: &str, now: Instant, ttl: Duration) -> bool {
        if self.status.is_terminal() || self.status == TaskStatus::Waiting {
            return false;
        }
        if !self.lease.take(owner, now, ttl) {
            return false;
        }
        self.waiting_for = None;
        self.status = TaskStatus::Running;
        true
    }

    /// Renews `owner`'s lease until `now + ttl`: every write of a
    /// running segment does, and none is made without it.
    pub fn renew_lease(
        &mut self,
        owner: &str,
        now: Instant,
        ttl: Duration,
    ) -> Result<(), LeaseLost> {
        self.lease.renew(owner, now, ttl)
    }

    /// Puts the task in wait for `what`, with no lease (no worker runs a
    /// waiting task): `waiting`, or `queued` for an admission (a slot,
    /// its turn), which its next wake decides.
    pub fn wait(&mut self, what: WaitingFor) {
        self.status = if what.is_admission() {
            TaskStatus::Queued
        } else {
            TaskStatus::Waiting
        };
        self.waiting_for = Some(what);
        self.lease.clear();
    }

    /// Lifts a wait: the task is queued again (wake it), waiting for
    /// nothing.
    pub fn wake(&mut self) {
        self.status = TaskStatus::Queued;
        self.waiting_for = None;
    }

    /// A queued task's admission came (its turn): it waits for nothing
    /// more and its next wake runs it.
    pub fn admit(&mut self) {
        if self
            .waiting_for
            .as_ref()
            .is_some_and(WaitingFor::is_admission)
        {
            self.waiting_for = None;
        }
    }

    /// Hands the task back to the queue between segments: queued, with
    /// no lease (its next wake takes one).
    pub fn requeue(&mut self) {
        self.status = TaskStatus::Queued;
        self.lease.clear();
    }

    /// Ends the task with `status` (succeeded, failed or cancelled): no
    /// lease, nothing waited for. A status that does not end a task is
    /// recorded as `failed`: ending is not undone by a wrong argument.
    pub fn finish(&mut self, status: TaskStatus) {
        debug_assert!(status.is_terminal(), "finish with {status:?}");
        self.status = if status.is_terminal() {
            status
        } else {
            TaskStatus::Failed
        };
        self.lease.clear();
        self.waiting_for = None;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::task::wait;
    use crate::{Limits, Origin, TaskId};

    const TTL: Duration = Duration::from_secs(60);

    fn task() -> Task {
        Task::new(
            TaskId::generate(),
            "a",
            Origin::Http,
            None,
            Limits::default(),
            0,
        )
    }

    fn timer() -> WaitingFor {
        WaitingFor::Timer(wait::Timer { until: Instant(10) })
    }

    fn turn() -> WaitingFor {
        WaitingFor::Turn(wait::Turn {
            behind: TaskId::generate(),
        })
    }

    #[test]
    fn every_transition_leaves_a_record_that_keeps_the_rules() {
        let now = Instant(5);
        let mut t = task();
        let mut seen = vec![t.check()];
        assert!(t.start("w1", now, TTL));
        seen.push(t.check());
        assert_eq!(t.status(), TaskStatus::Running);
        t.wait(timer());
        seen.push(t.check());
        assert_eq!(
            (t.status(), t.lease().is_free()),
            (TaskStatus::Waiting, true)
        );
        assert!(!t.start("w1", now, TTL), "a waiting task is woken first");
        t.wake();
        seen.push(t.check());
        assert_eq!((t.status(), t.waiting_for()), (TaskStatus::Queued, None));
        assert!(t.start("w2", now, TTL));
        t.requeue();
        seen.push(t.check());
        t.wait(turn());
        seen.push(t.check());
        assert_eq!(t.status(), TaskStatus::Queued, "an admission waits queued");
        t.admit();
        seen.push(t.check());
        assert_eq!(t.waiting_for(), None);
        t.wait(turn());
        assert!(
            t.start("w3", now, TTL),
            "running only to end leaves its turn"
        );
        assert_eq!(t.waiting_for(), None);
        t.wait(timer());
        t.finish(TaskStatus::Cancelled);
        seen.push(t.check());
        assert_eq!(
            (t.status(), t.waiting_for(), t.lease().is_free()),
            (TaskStatus::Cancelled, None, true)
        );
        assert!(!t.start("w4", now, TTL), "an ended task never runs again");
        assert!(seen.iter().all(Result::is_ok), "{seen:?}");
    }

    #[test]
    fn a_live_lease_of_another_is_not_taken() {
        let mut t = task();
        assert!(t.start("w1", Instant(0), TTL));
        t.requeue();
        assert!(t.start("w1", Instant(0), TTL));
        let before = t.clone();
        assert!(!t.start("w2", Instant(1), TTL));
        assert_eq!(t, before, "nothing changed");
        assert!(t.start("w2", Instant(0) + TTL, TTL), "an expired one is");
    }
}
