//! The worker: runs an agent's loop in checkpointed segments.
//!
//! One implementation serves the `worker` Lambda (one SQS record at a time)
//! and `baton dev` (a local pool over the embedded queue): both hand a wake
//! message to [`Worker::handle`] with the time the segment may use, and act
//! on the returned [`Disposition`].
//!
//! The protocol (see `docs/architecture.md`): read the task; take its lease
//! with a conditional write; run steps — build context, one LLM call,
//! the requested tools in parallel — checkpointing the assistant message
//! before any tool runs and each tool result as it completes; when the next
//! step may not fit the time left, release the lease, send the next wake,
//! then acknowledge.

pub mod callback;
pub mod capacity;
pub mod compaction;
pub mod context;
pub mod context_cache;
pub mod delegation;
mod deps;
mod error;
pub mod judgment;
pub mod model_choice;
mod policy;
pub mod progress;
pub mod question;
pub mod reaper;
mod recap;
pub mod sanitize;
pub mod segment;
pub mod spend;
pub mod timer;
pub mod tokens;
pub mod worker;

pub use error::WorkerError;
pub use reaper::Reaper;
pub use segment::{SegmentBudget, SegmentEnd};
pub use worker::{
    Disposition, HeartbeatReplies, Worker, WorkerSettings, DEFAULT_PUBLIC_URL,
    DEFAULT_REPEAT_WINDOW,
};
