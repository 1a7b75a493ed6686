//! The scripted model as the recap summariser (a request whose system
//! prompt is [`baton_core::recap::SUMMARISER_PROMPT`]): it keeps what a
//! test marks, so a test can tell a model summary from the fold.
//!
//! | directive | effect |
//! | --- | --- |
//! | `#remember` (in a line of a summarised turn or summary) | the line is kept in the summary, once |
//! | `#recap_fail` (anywhere in the input) | the call fails: rejected by the mock server, an error from the scripted provider |
//!
//! The summary is `[scripted model] summary of N turns`, then the kept
//! lines in order. The previous summary is part of the input, so its kept
//! lines carry into the next summary, as a real summariser's facts do.

use super::LABEL;
use baton_core::{CompletionRequest, Message};

/// Marks a line the scripted summariser keeps.
pub const REMEMBER: &str = "#remember";
/// Makes the summarising call fail.
pub const FAIL: &str = "#recap_fail";
/// The name a recap summary is held under by the mock server's
/// `hold_next` (it forces no tool).
pub const HOLD: &str = "#recap";

/// Whether `request` asks for a conversation's recap summary.
pub fn is_recap_summary(request: &CompletionRequest) -> bool {
    request.system == baton_core::recap::SUMMARISER_PROMPT
}

/// Whether the summarising `request` is to fail (`#recap_fail`).
pub fn fails(request: &CompletionRequest) -> bool {
    is_recap_summary(request) && input(request).contains(FAIL)
}

/// The scripted summary of `request`'s input.
pub fn summary(request: &CompletionRequest) -> String {
    let input = input(request);
    // The turns are labelled `[user]`, `[assistant]` or `[<@U1>]`.
    let turns = input
        .lines()
        .skip_while(|l| *l != "<turns>")
        .filter(|l| l.starts_with('[') && l.ends_with(']'))
        .count();
    let mut kept: Vec<&str> = Vec::new();
    for line in input.lines().map(str::trim) {
        if line.contains(REMEMBER) && !kept.contains(&line) {
            kept.push(line);
        }
    }
    let mut out = format!("{LABEL}summary of {turns} turns");
    for line in kept {
        out.push('\n');
        out.push_str(line);
    }
    out
}

fn input(request: &CompletionRequest) -> String {
    request
        .messages
        .iter()
        .filter_map(|m| match m {
            Message::User { content } => Some(content.as_str()),
            _ => None,
        })
        .collect::<Vec<_>>()
        .join("\n")
}

#[cfg(test)]
mod tests {
    use super::*;
    use baton_core::recap::{Pending, Speaker, Turn};

    fn request(pending: &Pending) -> CompletionRequest {
        CompletionRequest {
            model: "m".into(),
            system: baton_core::recap::SUMMARISER_PROMPT.into(),
            messages: vec![Message::User {
                content: pending.render(),
            }],
            tools: Vec::new(),
            max_tokens: 100,
            tool_choice: baton_core::ToolChoice::Auto,
        }
    }

    fn turn(text: &str) -> Turn {
        Turn {
            speaker: Speaker::User,
            author: None,
            text: text.into(),
            at: baton_core::Instant(0),
        }
    }

    #[test]
    fn marked_lines_are_kept_and_carried_into_the_next_summary() {
        let first = Pending {
            summary: None,
            turns: vec![
                turn("hello\n#remember the code is ZX-4471\nthanks"),
                turn("#remember the code is ZX-4471"),
            ],
        };
        let r = request(&first);
        assert!(is_recap_summary(&r) && !fails(&r));
        let s = summary(&r);
        assert_eq!(
            s,
            "[scripted model] summary of 2 turns\n#remember the code is ZX-4471"
        );
        let next = Pending {
            summary: Some(s),
            turns: vec![turn("#remember order 12 shipped"), turn("no fact")],
        };
        assert_eq!(
            summary(&request(&next)),
            "[scripted model] summary of 2 turns\n#remember the code is ZX-4471\n#remember order 12 shipped"
        );
    }

    #[test]
    fn a_marked_input_fails_and_other_requests_are_not_summaries() {
        let bad = Pending {
            summary: None,
            turns: vec![turn("#recap_fail please")],
        };
        assert!(fails(&request(&bad)));
        let mut other = request(&bad);
        other.system = "be brief".into();
        assert!(!is_recap_summary(&other) && !fails(&other));
    }
}
