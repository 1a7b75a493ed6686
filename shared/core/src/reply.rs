//! Where answers go: the reply port, implemented per front end (Slack in
//! `baton_slack::replies`; nothing for HTTP clients, who poll).

use crate::task::Task;
use async_trait::async_trait;

#[derive(Debug, thiserror::Error)]
#[error("could not deliver the reply: {0}")]
pub struct ReplyError(pub String);

/// Tells users about their task. Delivery is at least once: a crash between
/// posting and checkpointing posts again, which is preferable to never.
#[async_trait]
pub trait ReplySink: Send + Sync {
    /// The final answer (already sanitised; never `NO_REPLY`).
    async fn answer(&self, task: &Task, text: &str) -> Result<(), ReplyError>;
    /// The task ended without an answer: failed or cancelled, and why.
    async fn ended(&self, task: &Task, message: &str) -> Result<(), ReplyError>;
    /// What the task is doing now, e.g. "is thinking…" (texts in
    /// [`crate::progress`]). Best effort and ephemeral: it never fails the
    /// task, and a sink may drop updates (rate limits). Default: nothing.
    async fn progress(&self, _task: &Task, _status: &str) {}
}

/// For deployments with no chat front end: HTTP clients poll.
pub struct NoReplies;

#[async_trait]
impl ReplySink for NoReplies {
    async fn answer(&self, _: &Task, _: &str) -> Result<(), ReplyError> {
        Ok(())
    }
    async fn ended(&self, _: &Task, _: &str) -> Result<(), ReplyError> {
        Ok(())
    }
}
