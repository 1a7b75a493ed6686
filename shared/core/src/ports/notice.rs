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

    /// Posts `text` in `channel` for everyone there (in the thread
    /// `thread_ts` when given) and returns the new message's ts: the
    /// answer to a command where nothing can be shown to one person alone
    /// (a direct message, an assistant thread), and the message a
    /// `/baton …` task is threaded under. Without it, an error.
    async fn post(
        &self,
        _channel: &str,
        _thread_ts: Option<&str>,
        _text: &str,
    ) -> Result<String, NoticeError> {
        Err(NoticeError("posting is not supported here".into()))
    }

    /// Shows `user` alone, in `channel` (in the thread `thread_ts` when
    /// given), a prompt to connect their `provider` account: a
    /// **Connect `provider`** button opening `url` where the front end has
    /// buttons. `url` is a capability of that person's: never posted for
    /// the conversation. Without buttons, the URL in a plain note.
    async fn connect_prompt(
        &self,
        channel: &str,
        user: &str,
        thread_ts: Option<&str>,
        provider: &str,
        url: &str,
    ) -> Result<(), NoticeError> {
        let text = format!("To go on, connect your `{provider}` account: {url}");
        self.ephemeral(channel, user, thread_ts, &text).await
    }

    /// Answers a slash command through its `response_url` with `text`
    /// that only its sender sees. Without it, an error.
    async fn respond(&self, _response_url: &str, _text: &str) -> Result<(), NoticeError> {
        Err(NoticeError(
            "answering a slash command is not supported here".into(),
        ))
    }
}
