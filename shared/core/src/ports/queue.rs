//! The work-queue port: at-least-once delivery of wake messages.

use async_trait::async_trait;
use std::time::Duration;

/// A received message. It stays invisible to other receivers until its
/// visibility timeout passes; deleting it acknowledges it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Delivery {
    pub message_id: String,
    /// Opaque handle for `delete` and `extend`.
    pub receipt: String,
    pub body: String,
    /// 1 on first delivery.
    pub receive_count: u32,
}

#[derive(Debug, Clone, thiserror::Error, PartialEq, Eq)]
pub enum QueueError {
    #[error("queue unavailable: {0}")]
    Unavailable(String),
    #[error("message too large: {0} bytes")]
    TooLarge(usize),
    #[error("invalid delay: {0:?} (at most 15 minutes)")]
    InvalidDelay(Duration),
}

/// The longest delay a queue message can have (SQS's limit). Longer waits
/// use a one-time schedule.
pub const MAX_DELAY: Duration = Duration::from_secs(15 * 60);

#[async_trait]
pub trait WorkQueue: Send + Sync {
    async fn send(&self, body: &str, delay: Duration) -> Result<(), QueueError>;
    /// Up to `max` messages, waiting at most `wait` for the first.
    async fn receive(&self, max: usize, wait: Duration) -> Result<Vec<Delivery>, QueueError>;
    async fn delete(&self, receipt: &str) -> Result<(), QueueError>;
    /// Makes the message invisible for `visibility` from now.
    async fn extend(&self, receipt: &str, visibility: Duration) -> Result<(), QueueError>;
}
