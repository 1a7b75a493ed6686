//! The context pipeline's and escalation's knobs.

/// The context pipeline's knobs (issue items 1 and 2).
#[derive(Clone, Debug, PartialEq)]
pub struct ContextSettings {
    /// The model's context window in tokens; `None`: the known window of the
    /// model, or a conservative guess.
    pub window_tokens: Option<u32>,
    /// Turns kept verbatim after the summary.
    pub keep_last_turns: u32,
    /// Fraction of the window past which long old tool results are trimmed
    /// to head and tail.
    pub soft_trim_at: f64,
    /// Fraction past which old tool results are cleared.
    pub hard_clear_at: f64,
    /// Fraction past which older turns are summarised.
    pub compact_at: f64,
    /// Tool results longer than this are what soft trimming shortens.
    pub trim_tool_results_over_chars: usize,
}

impl Default for ContextSettings {
    fn default() -> Self {
        ContextSettings {
            window_tokens: None,
            keep_last_turns: 20,
            soft_trim_at: 0.30,
            hard_clear_at: 0.50,
            compact_at: 0.75,
            trim_tool_results_over_chars: 4000,
        }
    }
}

/// Switch to a stronger model after repeated tool errors.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Escalation {
    pub model: String,
    /// Consecutive failed tool calls that trigger the switch.
    pub after_tool_errors: u32,
}
