//! The lease: which worker may write a task right now.
//!
//! A worker takes the lease with a conditional write before it runs a
//! segment, renews it while it works, and releases it when it hands over.
//! A lease must expire *before* the wake message it was taken for becomes
//! visible again, so that a crashed holder's redelivered message finds the
//! lease expired and carries the chain on (see `docs/architecture.md`).

use crate::clock::{self, Instant};
use serde::{Deserialize, Serialize};
use std::time::Duration;

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Lease {
    /// Who holds it: unique per segment (worker instance + random).
    pub owner: String,
    /// Stored as integer milliseconds, as it always was.
    #[serde(with = "clock::as_millis")]
    pub expires_at: Instant,
}

impl Lease {
    pub fn is_live(&self, now: Instant) -> bool {
        self.expires_at > now
    }
}

/// Whether `owner` may take a task whose current lease is `current`.
pub fn can_acquire(current: Option<&Lease>, owner: &str, now: Instant) -> bool {
    match current {
        None => true,
        Some(l) => l.owner == owner || !l.is_live(now),
    }
}

/// The lease was taken by another segment (or freed): this one must stop
/// writing the task.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
#[error("the task's lease is held by another segment, or by none")]
pub struct LeaseLost;

/// A task's lease slot, and the only way it is written: taken, renewed and
/// released by its holder, or cleared when no worker may run the task (it
/// ended, waits, or was given up on). Stored as the lease or `null`.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(transparent)]
pub struct LeaseSlot(Option<Lease>);

impl LeaseSlot {
    /// The lease, if any.
    pub fn get(&self) -> Option<&Lease> {
        self.0.as_ref()
    }

    /// Whether nobody holds it, live or expired.
    pub fn is_free(&self) -> bool {
        self.0.is_none()
    }

    /// Whether a live lease is held at `now`.
    pub fn is_live(&self, now: Instant) -> bool {
        self.0.as_ref().is_some_and(|l| l.is_live(now))
    }

    /// Whether `owner` holds it (live or not).
    pub fn is_held_by(&self, owner: &str) -> bool {
        self.0.as_ref().is_some_and(|l| l.owner == owner)
    }

    /// Takes it for `owner` until `now + ttl` if it is free, expired or
    /// `owner`'s already; whether it did.
    pub fn take(&mut self, owner: &str, now: Instant, ttl: Duration) -> bool {
        if !can_acquire(self.0.as_ref(), owner, now) {
            return false;
        }
        self.0 = Some(Lease {
            owner: owner.to_owned(),
            expires_at: now.saturating_add(ttl),
        });
        true
    }

    /// Extends `owner`'s lease to `now + ttl`.
    pub fn renew(&mut self, owner: &str, now: Instant, ttl: Duration) -> Result<(), LeaseLost> {
        match &mut self.0 {
            Some(l) if l.owner == owner => {
                l.expires_at = now.saturating_add(ttl);
                Ok(())
            }
            _ => Err(LeaseLost),
        }
    }

    /// Frees it if `owner` holds it; whether it did.
    pub fn release(&mut self, owner: &str) -> bool {
        if self.is_held_by(owner) {
            self.0 = None;
            return true;
        }
        false
    }

    /// Frees it, whoever holds it: no worker runs the task now.
    pub fn clear(&mut self) {
        self.0 = None;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const fn ms(n: u64) -> Duration {
        Duration::from_millis(n)
    }

    #[test]
    fn free_expired_or_own_lease_can_be_taken() {
        let l = Lease {
            owner: "a".into(),
            expires_at: Instant(100),
        };
        assert!(can_acquire(None, "b", Instant(50)));
        assert!(can_acquire(Some(&l), "a", Instant(50)));
        assert!(!can_acquire(Some(&l), "b", Instant(50)));
        assert!(can_acquire(Some(&l), "b", Instant(100)));
    }

    #[test]
    fn the_slot_is_taken_renewed_and_released_by_its_holder_only() {
        let mut slot = LeaseSlot::default();
        assert!(slot.is_free() && !slot.is_live(Instant(0)));
        assert!(slot.take("a", Instant(0), ms(100)));
        assert!(slot.is_live(Instant(50)) && slot.is_held_by("a"));
        assert!(
            !slot.take("b", Instant(50), ms(100)),
            "a live lease of another"
        );
        assert_eq!(slot.renew("b", Instant(50), ms(100)), Err(LeaseLost));
        assert_eq!(slot.renew("a", Instant(50), ms(100)), Ok(()));
        assert_eq!(slot.get().map(|l| l.expires_at), Some(Instant(150)));
        assert!(!slot.release("b"));
        assert!(
            slot.take("b", Instant(150), ms(100)),
            "expired: anyone may take it"
        );
        assert!(slot.release("b") && slot.is_free());
        assert_eq!(slot.renew("b", Instant(0), ms(1)), Err(LeaseLost), "freed");
        assert_eq!(serde_json::to_string(&slot).unwrap(), "null");
        slot.take("c", Instant(0), ms(5));
        assert_eq!(
            serde_json::to_value(&slot).unwrap(),
            serde_json::json!({"owner": "c", "expires_at": 5})
        );
    }

    #[test]
    fn a_stored_lease_reads_and_writes_as_before() {
        let old = r#"{"owner":"worker-1:3f2a","expires_at":1767225630000}"#;
        let slot: LeaseSlot = serde_json::from_str(old).unwrap();
        assert_eq!(
            slot.get().map(|l| l.expires_at),
            Some(Instant(1_767_225_630_000))
        );
        assert_eq!(serde_json::to_string(&slot).unwrap(), old);
    }

    #[test]
    fn a_huge_ttl_saturates_instead_of_overflowing() {
        let mut slot = LeaseSlot::default();
        assert!(slot.take("a", Instant(1), Duration::MAX));
        assert_eq!(slot.get().map(|l| l.expires_at), Some(Instant::MAX));
    }
}
