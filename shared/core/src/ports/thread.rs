//! What was said in a chat thread before Baton was called into it: the
//! thread-history port, implemented for Slack in `baton_slack::thread`
//! (`conversations.replies`).
//!
//! The worker reads it once, when a task joins a thread whose earlier
//! messages the conversation has not taken in ([`crate::UnreadThread`]),
//! and shows them to the model as the thread's earlier discussion.

use crate::task::{Task, UnreadThread};
use async_trait::async_trait;

/// One earlier message of a thread, as the chat gave it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct EarlierMessage {
    /// The chat's id of the message (Slack's `ts`), ordering the thread.
    pub ts: String,
    /// Who wrote it (a Slack user id); `None` for an app or a workflow.
    pub user: Option<String>,
    /// A name the chat gave with the message (an app's `username`), when
    /// it has no user.
    pub name: Option<String>,
    pub text: String,
    /// The names of the files it carried (not their content).
    pub files: Vec<String>,
}

/// Why a thread could not be read. The task goes on with a note saying so.
#[derive(Debug, thiserror::Error)]
pub enum HistoryError {
    /// The app may not read this conversation (a `*:history` scope is
    /// missing, it is not in the channel).
    #[error("Baton may not read this thread ({0})")]
    Refused(String),
    /// The chat failed to answer (network, rate limit, server error).
    #[error("the thread could not be read ({0})")]
    Failed(String),
}

/// Reads a thread's earlier messages.
#[async_trait]
pub trait ThreadHistory: Send + Sync {
    /// The messages of `task`'s thread that `unread` names (before the
    /// task's own message, after what the conversation took in), oldest
    /// first, the newest `limit` of them, without the bot's own.
    async fn earlier(
        &self,
        task: &Task,
        unread: &UnreadThread,
        limit: usize,
    ) -> Result<Vec<EarlierMessage>, HistoryError>;
}

/// Orders Slack timestamps (`seconds.micros`) as numbers: seconds first,
/// then the fraction; an unreadable one sorts first.
pub fn ts_order(a: &str, b: &str) -> std::cmp::Ordering {
    fn parts(ts: &str) -> (u64, u64) {
        let (s, f) = ts.split_once('.').unwrap_or((ts, "0"));
        (s.parse().unwrap_or(0), f.parse().unwrap_or(0))
    }
    parts(a).cmp(&parts(b))
}

#[cfg(test)]
mod tests {
    use super::ts_order;

    #[test]
    fn timestamps_order_as_numbers() {
        assert!(ts_order("99.9", "100.0").is_lt());
        assert!(ts_order("100.000010", "100.000009").is_gt());
        assert!(ts_order("x", "1.0").is_lt());
    }
}
