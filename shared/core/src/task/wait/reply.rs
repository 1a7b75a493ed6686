//! `ask_user`: the requester's next message answers the question and
//! lifts the wait in the write that records it; unanswered by its expiry,
//! the agent goes on without it.

use crate::clock::Instant;
use crate::task::{question, Task};
use serde::{Deserialize, Serialize};

/// The question the requester is to answer, and until when.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Reply {
    pub question: String,
    /// Unanswered by then, the agent goes on without it.
    pub expires_at: Instant,
}

impl Reply {
    /// Over once the open question was answered (or is gone), or expired.
    pub(super) fn is_over(&self, t: &Task, now: Instant) -> bool {
        question::open(t).is_none_or(|q| q.expires_at <= now)
    }

    pub(super) fn wakes_at(&self, t: &Task) -> Option<Instant> {
        question::open(t).map(|q| q.expires_at)
    }
}
