//! Notes meant for one person only: the notice port, implemented for Slack
//! in `baton_slack::notices` (`chat.postEphemeral`).
//!
//! The ingest uses it to tell someone that what they asked was refused
//! (a `stop` from someone who may not stop the task). A notice is a
//! courtesy: a failed one is logged by the caller and changes nothing.

use async_trait::async_trait;

#[derive(Debug, thiserror::Error)]
#[error("could not deliver the notice: {0}")]
pub struct NoticeError(pub String);

/// Shows short notes to one person in a conversation.
#[async_trait]
pub trait Notices: Send + Sync {
    /// Shows `text` to `user` alone in `channel`, in the thread `thread_ts`
    /// when one is given.
    async fn ephemeral(
        &self,
        channel: &str,
        user: &str,
        thread_ts: Option<&str>,
        text: &str,
    ) -> Result<(), NoticeError>;
}
