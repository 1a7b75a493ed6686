//! Progress shown while a task runs: the status texts the worker passes to
//! [`ReplySink::progress`](baton_core::ReplySink::progress). Slack's limiter
//! of status updates is `baton_slack::status`.
//!
//! In Slack the status appears under the bot's name ("Baton is thinking…")
//! through `assistant.threads.setStatus`. It is ephemeral: Slack clears it
//! when the bot replies or after two minutes, so nothing about it is
//! durable. The transcript stays the record of what the task did.
//!
//! Slack documents "special" rate limits for `assistant.threads.setStatus`
//! (the posting limit of about one message per second per channel is the
//! closest published figure), so [`StatusLimiter`] allows one update per
//! thread every [`MIN_STATUS_INTERVAL`], skips a status identical to the one
//! shown, and backs off when Slack answers HTTP 429.

/// Before an LLM call.
pub const THINKING: &str = "is thinking…";
/// While a tool call waits for a human decision.
pub const WAITING_FOR_APPROVAL: &str = "is waiting for approval…";
pub const WAITING_FOR_REPLY: &str = "is waiting for your reply…";
/// While older turns are summarised.
pub const COMPACTING: &str = "is summarising the conversation so far…";
/// When the tools of a batch are not known by name.
pub const WORKING: &str = "is working…";

/// Tool names listed in a status; more are counted.
const MAX_TOOLS_NAMED: usize = 3;
/// Longest tool name shown.
const MAX_TOOL_NAME_CHARS: usize = 40;

/// "is running `a`…", "is running `a` and `b`…", "is running `a`, `b`,
/// `c` and 2 more…". Repeated names are shown once; the names are cut to
/// characters that are safe in Slack text (tool names come from the model,
/// and must not become mentions or formatting).
pub fn running_tools<'a>(names: impl IntoIterator<Item = &'a str>) -> String {
    let mut unique: Vec<String> = Vec::new();
    for name in names {
        let clean: String = name
            .chars()
            .filter(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '.'))
            .take(MAX_TOOL_NAME_CHARS)
            .collect();
        if !clean.is_empty() && !unique.contains(&clean) {
            unique.push(clean);
        }
    }
    let named: Vec<String> = unique
        .iter()
        .take(MAX_TOOLS_NAMED)
        .map(|n| format!("`{n}`"))
        .collect();
    let more = unique.len().saturating_sub(MAX_TOOLS_NAMED);
    let list = match (named.as_slice(), more) {
        ([], _) => return WORKING.to_owned(),
        ([one], 0) => one.clone(),
        ([init @ .., last], 0) => format!("{} and {last}", init.join(", ")),
        (all, more) => format!("{} and {more} more", all.join(", ")),
    };
    format!("is running {list}…")
}

/// "is waiting for 1 sub-task…", "is waiting for 3 sub-tasks…".
pub fn waiting_for_subtasks(pending: usize) -> String {
    let s = if pending == 1 { "" } else { "s" };
    format!("is waiting for {pending} sub-task{s}…")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tool_statuses_name_the_tools() {
        assert_eq!(
            running_tools(["http_request"]),
            "is running `http_request`…"
        );
        assert_eq!(
            running_tools(["http_request", "current_time", "http_request"]),
            "is running `http_request` and `current_time`…"
        );
        assert_eq!(
            running_tools(["a", "b", "c"]),
            "is running `a`, `b` and `c`…"
        );
        assert_eq!(
            running_tools(["a", "b", "c", "d", "e"]),
            "is running `a`, `b`, `c` and 2 more…"
        );
        assert_eq!(running_tools([]), WORKING);
    }

    #[test]
    fn tool_names_cannot_inject_slack_markup() {
        let s = running_tools(["<!channel>`x`", "``", &"n".repeat(200)]);
        assert!(!s.contains('<') && !s.contains('!'), "{s}");
        assert!(s.starts_with("is running `channelx` and `nnnn"), "{s}");
        assert!(
            s.chars().count() < baton_slack::status::MAX_STATUS_CHARS,
            "{s}"
        );
    }

    #[test]
    fn other_statuses() {
        assert_eq!(waiting_for_subtasks(1), "is waiting for 1 sub-task…");
        assert_eq!(waiting_for_subtasks(3), "is waiting for 3 sub-tasks…");
    }
}
