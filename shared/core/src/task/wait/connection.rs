//! A wait for a person to connect an account: the person's tokens are
//! stored first (by `/oauth/callback`), then the wait is lifted, in two
//! writes; the reaper lifts one whose second write was lost.

use crate::connection::ConnectionWait;
use crate::task::{Task, TaskStatus, WaitingFor};
use crate::transcript::EntryKind;

/// The Connect link the task waits on now: whose connection, to which
/// provider, asked since when.
pub fn awaited(t: &Task) -> Option<&ConnectionWait> {
    let Some(WaitingFor::Connection { url, provider, .. }) = &t.waiting_for else {
        return None;
    };
    if t.status != TaskStatus::Waiting {
        return None;
    }
    t.connections
        .iter()
        .rev()
        .find(|w| !w.retrying && &w.url == url && &w.provider == provider)
}

/// Lifts the task's wait for a connection to `provider` (the person
/// connected): it is queued again, wake it. The entry to append; `None`
/// when it does not wait for that.
pub fn lift(t: &mut Task, provider: &str) -> Option<Vec<EntryKind>> {
    let waiting = t.status == TaskStatus::Waiting
        && matches!(&t.waiting_for, Some(WaitingFor::Connection { provider: p, .. }) if p == provider);
    if !waiting {
        return None;
    }
    t.stop_waiting();
    Some(vec![EntryKind::Status {
        status: t.status,
        detail: format!("connected {provider}"),
    }])
}
