//! Where answers go: the task's origin decides.

use async_trait::async_trait;
use baton_core::{Origin, Task};

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

/// Posts answers of Slack-born tasks in their thread, as mrkdwn.
pub struct SlackReplies {
    client: baton_slack::web::SlackClient,
}

impl SlackReplies {
    pub fn new(client: baton_slack::web::SlackClient) -> Self {
        SlackReplies { client }
    }

    async fn post(&self, task: &Task, text: &str) -> Result<(), ReplyError> {
        let Origin::Slack {
            channel, thread_ts, ..
        } = &task.origin
        else {
            return Ok(());
        };
        let mrkdwn = baton_slack::mrkdwn::from_markdown(text);
        self.client
            // An empty thread_ts (a scheduled post to a channel) starts a new message.
            .post_message(
                channel,
                Some(thread_ts.as_str()).filter(|t| !t.is_empty()),
                &mrkdwn,
                None,
            )
            .await
            .map(|_| ())
            .map_err(|e| ReplyError(e.to_string()))
    }
}

#[async_trait]
impl ReplySink for SlackReplies {
    async fn answer(&self, task: &Task, text: &str) -> Result<(), ReplyError> {
        self.post(task, text).await
    }

    async fn ended(&self, task: &Task, message: &str) -> Result<(), ReplyError> {
        self.post(task, &format!(":warning: {message}")).await
    }
}
