//! An agent's Slack surfaces (`[agents.NAME.slack]`): the suggested
//! prompts offered when someone opens an assistant thread with it, how
//! much of a thread it joins it reads, and how its work shows (a reaction
//! on the message it took, a progress message where no status shows).

use std::time::Duration;

/// The most prompts Slack shows in an assistant thread.
pub const MAX_SUGGESTED_PROMPTS: usize = 4;
/// Baton's bounds on a prompt's label and message, and on the list's
/// title (Slack documents none; these keep the call small and the labels
/// readable).
pub const MAX_PROMPT_TITLE_CHARS: usize = 75;
pub const MAX_PROMPT_MESSAGE_CHARS: usize = 2000;

/// One suggested prompt: the label shown, and the message it sends.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SuggestedPrompt {
    pub title: String,
    pub message: String,
}

/// How many of a thread's earlier messages a task that joins it reads,
/// unless the agent says otherwise.
pub const DEFAULT_THREAD_CONTEXT: u32 = 50;
/// The most it may read: one `conversations.replies` page is at most 1000,
/// and a model's context is the real bound.
pub const MAX_THREAD_CONTEXT: u32 = 200;
/// The reaction that says a message was taken.
pub const DEFAULT_ACK_REACTION: &str = "eyes";
/// How long a task works before it posts a progress message where the
/// thread shows no status.
pub const DEFAULT_PROGRESS_AFTER: Duration = Duration::from_secs(10);

/// `[agents.NAME.slack]`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AgentSlack {
    /// Offered when an assistant thread starts; empty: none.
    pub suggested_prompts: Vec<SuggestedPrompt>,
    /// The heading above them (Slack's default when `None`).
    pub prompts_title: Option<String>,
    /// At most this many of a thread's earlier messages (the newest) start
    /// a task mentioned in a thread it has not read; 0: none.
    pub thread_context: u32,
    /// The reaction added to a message when it is taken (a name without
    /// colons); `None` (`ack_reaction = ""`): no reactions at all.
    pub ack_reaction: Option<String>,
    /// A task still working after this long posts a progress message where
    /// the thread has no status (channels, group DMs).
    pub progress_after: Duration,
}

impl Default for AgentSlack {
    fn default() -> Self {
        AgentSlack {
            suggested_prompts: Vec::new(),
            prompts_title: None,
            thread_context: DEFAULT_THREAD_CONTEXT,
            ack_reaction: Some(DEFAULT_ACK_REACTION.to_owned()),
            progress_after: DEFAULT_PROGRESS_AFTER,
        }
    }
}
