//! A wait for a person to connect an account: the person's tokens are
//! stored first (by `/oauth/callback`), then the wait is lifted, in two
//! writes; the reaper lifts one whose second write was lost.

use crate::clock::Instant;
use crate::connection::{ConnectionWait, PersonKey};
use crate::task::{Task, TaskStatus, WaitingFor};
use crate::transcript::EntryKind;
use serde::{Deserialize, Serialize};

/// A tool call needs a connection the person lacks (`auth = "oauth"`):
/// the person opens `url` (`GET /connect/{state}`) and connects;
/// unconnected by `expires_at`, the model is told they did not.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Connection {
    pub provider: String,
    pub url: String,
    pub expires_at: Instant,
}

impl Connection {
    /// Over at its expiry; whether the person connected is in the store
    /// of connections, not on the task ([`crate::store::connections`]),
    /// and the reaper looks there.
    pub(super) fn is_over(&self, now: Instant) -> bool {
        self.expires_at <= now
    }

    pub(super) fn wakes_at(&self) -> Option<Instant> {
        Some(self.expires_at)
    }
}

/// The Connect link the task waits on now: whose connection, to which
/// provider, asked since when.
pub fn awaited(t: &Task) -> Option<&ConnectionWait> {
    let Some(WaitingFor::Connection(Connection { url, provider, .. })) = &t.waiting_for else {
        return None;
    };
    if t.status != TaskStatus::Waiting {
        return None;
    }
    t.waits
        .connections
        .iter()
        .rev()
        .find(|w| !w.retrying && &w.url == url && &w.provider == provider)
}

/// A message from `from` to a task waiting for `from` to connect: their
/// link may have failed them (a provider error, a lost tab), so the wait
/// is lifted and the call runs again, which brings them a fresh link (or
/// runs, if they connected meanwhile). `true` when lifted: wake the task.
/// Anyone else's message leaves the wait as it is.
pub fn renew_for(t: &mut Task, from: &PersonKey) -> bool {
    let waiting = awaited(t).is_some_and(|w| &w.person == from);
    if waiting {
        t.wake();
    }
    waiting
}

/// Lifts the task's wait for a connection to `provider` (the person
/// connected): it is queued again, wake it. The entry to append; `None`
/// when it does not wait for that.
pub fn lift(t: &mut Task, provider: &str) -> Option<Vec<EntryKind>> {
    let waiting = t.status == TaskStatus::Waiting
        && matches!(&t.waiting_for, Some(WaitingFor::Connection(c)) if c.provider == provider);
    if !waiting {
        return None;
    }
    t.wake();
    Some(vec![EntryKind::Status {
        status: t.status,
        detail: format!("connected {provider}"),
    }])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_the_awaited_persons_message_lifts_a_connection_wait() {
        use crate::clock::Instant;
        use crate::{Limits, Origin, TaskId};
        let mut t = Task::new(
            TaskId::generate(),
            "default",
            Origin::Http,
            None,
            Limits::default(),
            0,
        );
        let alice = PersonKey::new("T1", "U1");
        t.wait(WaitingFor::Connection(Connection {
            provider: "gh".into(),
            url: "https://b.example/connect/s".into(),
            expires_at: Instant(9_000),
        }));
        t.waits.connections.push(ConnectionWait {
            step: 1,
            call_id: "c1".into(),
            provider: "gh".into(),
            person: alice.clone(),
            url: "https://b.example/connect/s".into(),
            created_at: Instant(0),
            expires_at: Instant(9_000),
            retrying: false,
        });
        let before = t.clone();
        assert!(!renew_for(&mut t, &PersonKey::new("T1", "U2")));
        assert!(!renew_for(&mut t, &PersonKey::new("T2", "U1")));
        assert_eq!(t.status, before.status);
        assert!(renew_for(&mut t, &alice));
        assert_eq!(
            (t.status, t.waiting_for.clone()),
            (TaskStatus::Queued, None)
        );
        // Not waiting any more: nothing to lift.
        assert!(!renew_for(&mut t, &alice));
    }
}
