//! `wait_for_callback`: the first POST to the callback's URL (once, no
//! bearer) records its body and lifts the wait in the same write;
//! uncalled by its expiry, the agent goes on without it.

use crate::clock::Instant;
use crate::task::{callback, Task};
use serde::{Deserialize, Serialize};

/// Where the outside system calls, and until when.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Callback {
    pub url: String,
    /// Uncalled by then, the agent goes on without it.
    pub expires_at: Instant,
}

impl Callback {
    /// Over once the open callback was called (or is gone), or expired.
    pub(super) fn is_over(&self, t: &Task, now: Instant) -> bool {
        callback::open(t).is_none_or(|c| c.expires_at <= now)
    }

    pub(super) fn wakes_at(&self, t: &Task) -> Option<Instant> {
        callback::open(t).map(|c| c.expires_at)
    }
}
