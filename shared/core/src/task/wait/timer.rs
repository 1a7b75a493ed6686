//! A wait until a time (`sleep`, a step's pause): nothing but the time
//! ends it.

use crate::clock::Instant;
use serde::{Deserialize, Serialize};

/// The time the task sleeps until.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Timer {
    pub until: Instant,
}

impl Timer {
    pub(super) fn is_over(&self, now: Instant) -> bool {
        self.until <= now
    }

    pub(super) fn wakes_at(&self) -> Option<Instant> {
        Some(self.until)
    }
}
