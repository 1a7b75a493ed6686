//! The lease: which worker may write a task right now.
//!
//! A worker takes the lease with a conditional write before it runs a
//! segment, renews it while it works, and releases it when it hands over.
//! A lease must expire *before* the wake message it was taken for becomes
//! visible again, so that a crashed holder's redelivered message finds the
//! lease expired and carries the chain on (see `docs/architecture.md`).

use crate::clock::Millis;
use serde::{Deserialize, Serialize};

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Lease {
    /// Who holds it: unique per segment (worker instance + random).
    pub owner: String,
    pub expires_at: Millis,
}

impl Lease {
    pub fn is_live(&self, now: Millis) -> bool {
        self.expires_at > now
    }
}

/// Whether `owner` may take a task whose current lease is `current`.
pub fn can_acquire(current: Option<&Lease>, owner: &str, now: Millis) -> bool {
    match current {
        None => true,
        Some(l) => l.owner == owner || !l.is_live(now),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn free_expired_or_own_lease_can_be_taken() {
        let l = Lease {
            owner: "a".into(),
            expires_at: 100,
        };
        assert!(can_acquire(None, "b", 50));
        assert!(can_acquire(Some(&l), "a", 50));
        assert!(!can_acquire(Some(&l), "b", 50));
        assert!(can_acquire(Some(&l), "b", 100));
    }
}
