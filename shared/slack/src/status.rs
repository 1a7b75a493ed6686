//! The in-memory limiter that keeps status updates within what Slack allows.
//!
//!
//! In Slack the status appears under the bot's name ("Baton is thinking…")
//! through `assistant.threads.setStatus`. It is ephemeral: Slack clears it
//! when the bot replies or after two minutes, so nothing about it is
//! durable. The transcript stays the record of what the task did.
//!
//! Slack documents "special" rate limits for `assistant.threads.setStatus`
//! (the posting limit of about one message per second per channel is the
//! closest published figure), so [`StatusLimiter`] allows one update per
//! thread every [`MIN_STATUS_INTERVAL`], skips a status identical to the one
//! shown, and backs off when Slack answers HTTP 429.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// Longest status shown; longer ones are cut with an ellipsis.
pub const MAX_STATUS_CHARS: usize = 100;

/// `status` on one line, at most [`MAX_STATUS_CHARS`] characters.
pub fn clamp(status: &str) -> String {
    let one_line = status.split_whitespace().collect::<Vec<_>>().join(" ");
    if one_line.chars().count() <= MAX_STATUS_CHARS {
        return one_line;
    }
    let mut cut: String = one_line.chars().take(MAX_STATUS_CHARS - 1).collect();
    cut.push('…');
    cut
}

/// The shortest time between two status updates of one thread.
pub const MIN_STATUS_INTERVAL: Duration = Duration::from_secs(3);
/// A status identical to the last one is sent again after this long, since
/// Slack clears a status by itself after two minutes.
pub const STATUS_REFRESH_AFTER: Duration = Duration::from_secs(90);
/// Threads remembered before old entries are dropped.
const MAX_TRACKED_THREADS: usize = 4_096;
/// Entries untouched for this long are dropped when the map is full.
const FORGET_AFTER: Duration = Duration::from_secs(30 * 60);

#[derive(Clone, Debug)]
struct ThreadState {
    /// When the last update was sent (or reserved).
    sent_at: Instant,
    /// What it said; `None` after the status was cleared by a reply.
    status: Option<String>,
    /// No updates before this (Slack's `Retry-After`).
    not_before: Option<Instant>,
    /// Slack refused status for this thread for good.
    disabled: bool,
}

/// Decides which status updates to send, per thread key. In memory only:
/// status is ephemeral, and at most one segment of a task runs at a time.
/// Time is passed in, so tests need no real clock.
#[derive(Debug)]
pub struct StatusLimiter {
    min_interval: Duration,
    threads: Mutex<HashMap<String, ThreadState>>,
    /// Slack refused status for every thread (a missing scope, a bad token).
    disabled: std::sync::atomic::AtomicBool,
}

impl Default for StatusLimiter {
    fn default() -> Self {
        StatusLimiter::new(MIN_STATUS_INTERVAL)
    }
}

impl StatusLimiter {
    /// A limiter allowing one update per thread every `min_interval`.
    pub fn new(min_interval: Duration) -> Self {
        StatusLimiter {
            min_interval,
            threads: Mutex::new(HashMap::new()),
            disabled: std::sync::atomic::AtomicBool::new(false),
        }
    }

    fn threads(&self) -> std::sync::MutexGuard<'_, HashMap<String, ThreadState>> {
        // The map holds no invariant a panicking holder could break.
        self.threads.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Whether `status` may be sent to `thread` at `now`. When it may, the
    /// send is recorded as made (so concurrent callers do not both send);
    /// report a failure with [`StatusLimiter::failed`].
    pub fn admit(&self, thread: &str, status: &str, now: Instant) -> bool {
        if self.disabled.load(std::sync::atomic::Ordering::Relaxed) {
            return false;
        }
        let mut threads = self.threads();
        if threads.len() >= MAX_TRACKED_THREADS {
            threads.retain(|_, s| now.saturating_duration_since(s.sent_at) < FORGET_AFTER);
        }
        if let Some(s) = threads.get(thread) {
            let since = now.saturating_duration_since(s.sent_at);
            let blocked = s.disabled
                || s.not_before.is_some_and(|t| now < t)
                || since < self.min_interval
                || (s.status.as_deref() == Some(status) && since < STATUS_REFRESH_AFTER);
            if blocked {
                return false;
            }
        }
        threads.insert(
            thread.to_owned(),
            ThreadState {
                sent_at: now,
                status: Some(status.to_owned()),
                not_before: None,
                disabled: false,
            },
        );
        true
    }

    /// The admitted update was not shown (a transient failure): the same
    /// status may be sent again, after the interval and after `retry_after`
    /// when Slack gave one.
    pub fn failed(&self, thread: &str, now: Instant, retry_after: Option<Duration>) {
        if let Some(s) = self.threads().get_mut(thread) {
            s.status = None;
            // Capped, and never an overflow, whatever Slack (or a proxy) says.
            s.not_before =
                retry_after.and_then(|d| now.checked_add(d.min(Duration::from_secs(600))));
        }
    }

    /// Slack refused status for this thread: never try it again.
    pub fn disable_thread(&self, thread: &str, now: Instant) {
        self.threads()
            .entry(thread.to_owned())
            .and_modify(|s| s.disabled = true)
            .or_insert(ThreadState {
                sent_at: now,
                status: None,
                not_before: None,
                disabled: true,
            });
    }

    /// Slack refused status for the whole app: stop sending any.
    pub fn disable_all(&self) {
        self.disabled
            .store(true, std::sync::atomic::Ordering::Relaxed);
    }

    /// The bot replied in `thread`, which clears its status in Slack: the
    /// next status is new even if its text is the last one's. The interval
    /// still applies.
    pub fn cleared(&self, thread: &str) {
        if let Some(s) = self.threads().get_mut(thread) {
            s.status = None;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const THINKING: &str = "is thinking…";

    #[test]
    fn an_absurd_retry_after_neither_panics_nor_blocks_for_ever() {
        let limiter = StatusLimiter::new(Duration::from_secs(3));
        let now = Instant::now();
        assert!(limiter.admit("C1/1.0", "is thinking…", now));
        limiter.failed("C1/1.0", now, Some(Duration::MAX));
        let later = now + Duration::from_secs(601);
        assert!(
            limiter.admit("C1/1.0", "is thinking…", later),
            "capped at 10 minutes"
        );
    }

    #[test]
    fn limiter_holds_the_interval_per_thread() {
        let l = StatusLimiter::new(Duration::from_secs(3));
        let t0 = Instant::now();
        let at = |s: u64| t0 + Duration::from_secs(s);
        assert!(l.admit("C1/1.0", THINKING, at(0)));
        assert!(!l.admit("C1/1.0", "is running `x`…", at(1)));
        // Another thread is not held back.
        assert!(l.admit("C1/2.0", THINKING, at(1)));
        assert!(l.admit("C1/1.0", "is running `x`…", at(3)));
        // The same text again is skipped until Slack may have cleared it.
        assert!(!l.admit("C1/1.0", "is running `x`…", at(10)));
        assert!(l.admit("C1/1.0", "is running `x`…", at(3 + 90)));
    }

    #[test]
    fn limiter_after_replies_failures_and_refusals() {
        let l = StatusLimiter::new(Duration::from_secs(3));
        let t0 = Instant::now();
        let at = |s: u64| t0 + Duration::from_secs(s);
        assert!(l.admit("a", THINKING, at(0)));
        l.cleared("a");
        assert!(!l.admit("a", THINKING, at(1)), "the interval still holds");
        assert!(l.admit("a", THINKING, at(3)), "a reply cleared the status");
        // A rate-limited send: the same status later, after Retry-After.
        l.failed("a", at(3), Some(Duration::from_secs(20)));
        assert!(!l.admit("a", THINKING, at(10)));
        assert!(l.admit("a", THINKING, at(23)));
        l.disable_thread("a", at(23));
        assert!(!l.admit("a", "other", at(500)));
        assert!(l.admit("b", THINKING, at(500)));
        l.disable_all();
        assert!(!l.admit("c", THINKING, at(600)));
    }

    #[test]
    fn statuses_are_one_line_and_clamped() {
        assert_eq!(clamp("is\n thinking…"), "is thinking…");
        let long = clamp(&"x".repeat(500));
        assert_eq!(long.chars().count(), MAX_STATUS_CHARS);
        assert!(long.ends_with('…'));
    }
}
