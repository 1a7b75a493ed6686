//! The segment's time budget: when to hand over to the next segment.

use std::time::Duration;
use tokio::time::Instant;

/// The time one segment may use, and what it has learned about how long a
/// step takes.
#[derive(Clone, Debug)]
pub struct SegmentBudget {
    deadline: Instant,
    longest_step: Duration,
    units_done: u32,
}

impl SegmentBudget {
    /// A budget ending `duration` from now.
    pub fn new(duration: Duration) -> Self {
        SegmentBudget {
            deadline: Instant::now() + duration,
            longest_step: Duration::ZERO,
            units_done: 0,
        }
    }

    /// A budget ending at `deadline` (a Lambda invocation's deadline minus
    /// the margin needed to checkpoint and hand over).
    pub fn until(deadline: Instant) -> Self {
        SegmentBudget {
            deadline,
            longest_step: Duration::ZERO,
            units_done: 0,
        }
    }

    pub fn time_left(&self) -> Duration {
        self.deadline.saturating_duration_since(Instant::now())
    }

    /// Whether another unit of work (an LLM call or a tool batch) may fit.
    /// The first unit of a segment always runs, so every segment makes
    /// progress however small the budget.
    pub fn fits_another(&self) -> bool {
        self.fits_in(self.time_left())
    }

    /// [`SegmentBudget::fits_another`] with `time_left` given instead of
    /// read from the clock: what [`super::next::next`] asks, so the
    /// decision stays a function of what it is given.
    pub fn fits_in(&self, time_left: Duration) -> bool {
        self.units_done == 0 || time_left > self.longest_step
    }

    /// Records that a unit of work took `took`.
    pub fn record(&mut self, took: Duration) {
        self.units_done += 1;
        self.longest_step = self.longest_step.max(took);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(start_paused = true)]
    async fn first_unit_always_fits_then_estimates_from_longest() {
        let mut b = SegmentBudget::new(Duration::from_secs(10));
        assert!(b.fits_another());
        b.record(Duration::from_secs(4));
        assert!(b.fits_another());
        tokio::time::advance(Duration::from_secs(7)).await;
        assert!(!b.fits_another(), "3 s left < 4 s longest step");
        let zero = SegmentBudget::new(Duration::ZERO);
        assert!(zero.fits_another());
    }
}
