//! An agent's Slack surfaces: the suggested prompts offered when someone
//! opens an assistant thread with it (`[agents.NAME.slack]`).

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

/// `[agents.NAME.slack]`.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct AgentSlack {
    /// Offered when an assistant thread starts; empty: none.
    pub suggested_prompts: Vec<SuggestedPrompt>,
    /// The heading above them (Slack's default when `None`).
    pub prompts_title: Option<String>,
}
