//! Where answers go: the reply port, implemented per front end (Slack in
//! `baton_slack::replies`; nothing for HTTP clients, who poll).
//!
//! Messages are posted **exactly once**: each carries a [`PostKey`]. The
//! worker records on the task that a post has started before it posts, so
//! a retry after a crash knows the post may have happened
//! ([`PostKey::maybe_posted`]); the sink then looks for the key in what it
//! posted (Slack: the message metadata in the thread) before posting again.

use crate::task::Task;
use async_trait::async_trait;

#[derive(Debug, thiserror::Error)]
#[error("could not deliver the reply: {0}")]
pub struct ReplyError(pub String);

/// The identity of one message to a user.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PostKey {
    /// Unique among the messages of all tasks, e.g. `TASK:answer:7`.
    pub key: String,
    /// An earlier attempt started this post and was not seen to finish:
    /// look for the message before posting it.
    pub maybe_posted: bool,
}

/// Tells users about their task.
#[async_trait]
pub trait ReplySink: Send + Sync {
    /// Whether this sink posts anything for `task` (so the worker records
    /// posts it starts only when there are any).
    fn posts_for(&self, _task: &Task) -> bool {
        true
    }
    /// The final answer (already sanitised; never `NO_REPLY`).
    async fn answer(&self, task: &Task, text: &str, post: &PostKey) -> Result<(), ReplyError>;
    /// The task ended without an answer: failed or cancelled, and why.
    async fn ended(&self, task: &Task, message: &str, post: &PostKey) -> Result<(), ReplyError>;
    /// What the task is doing now, e.g. "is thinking…". Best effort and
    /// ephemeral: it never fails the task, and a sink may drop updates
    /// (rate limits). Default: nothing.
    async fn progress(&self, _task: &Task, _status: &str) {}
}

/// For deployments with no chat front end: HTTP clients poll.
pub struct NoReplies;

#[async_trait]
impl ReplySink for NoReplies {
    fn posts_for(&self, _: &Task) -> bool {
        false
    }
    async fn answer(&self, _: &Task, _: &str, _: &PostKey) -> Result<(), ReplyError> {
        Ok(())
    }
    async fn ended(&self, _: &Task, _: &str, _: &PostKey) -> Result<(), ReplyError> {
        Ok(())
    }
}
