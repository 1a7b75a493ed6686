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

use baton_core::Child;

/// Before an LLM call.
pub const THINKING: &str = "is thinking…";
/// While a tool call waits for a human decision.
pub const WAITING_FOR_APPROVAL: &str = "is waiting for approval…";
pub const WAITING_FOR_REPLY: &str = "is waiting for your reply…";
/// While a `wait_for_callback` call waits for its URL to be called.
pub const WAITING_FOR_CALLBACK: &str = "is waiting for a callback…";
/// While a call waits for its person to connect an account.
pub const WAITING_FOR_CONNECTION: &str = "is waiting for an account to be connected…";
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
    match named(names) {
        Some(list) => format!("is running {list}…"),
        None => WORKING.to_owned(),
    }
}

/// "is waiting for 1 sub-task: `researcher`…", "is waiting for 2 sub-tasks
/// (1 of 3 done): `researcher` and `writer`…": the agents of the sub-tasks
/// still running, so a thread sees its sub-agents' progress.
pub fn waiting_for_subtasks(children: &[Child]) -> String {
    let pending: Vec<&str> = children
        .iter()
        .filter(|c| c.outcome.is_none())
        .map(|c| c.agent.as_str())
        .collect();
    let n = pending.len();
    let s = if n == 1 { "" } else { "s" };
    let done = children.len() - n;
    let count = if done == 0 {
        format!("{n} sub-task{s}")
    } else {
        format!("{n} sub-task{s} ({done} of {} done)", children.len())
    };
    match named(pending) {
        Some(list) => format!("is waiting for {count}: {list}…"),
        None => format!("is waiting for {count}…"),
    }
}

/// `a`, `a` and `b`, `a`, `b`, `c` and 2 more: names made safe for Slack
/// text, each once; `None` when none is left.
fn named<'a>(names: impl IntoIterator<Item = &'a str>) -> Option<String> {
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
    Some(match (named.as_slice(), more) {
        ([], _) => return None,
        ([one], 0) => one.clone(),
        ([init @ .., last], 0) => format!("{} and {last}", init.join(", ")),
        (all, more) => format!("{} and {more} more", all.join(", ")),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use baton_core::{ChildOutcome, TaskId, TaskStatus};

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
        let child = |agent: &str, done: bool| Child {
            task_id: TaskId::generate(),
            agent: agent.into(),
            call_id: "c".into(),
            outcome: done.then(|| ChildOutcome {
                status: TaskStatus::Succeeded,
                text: "done".into(),
                usage: Default::default(),
            }),
        };
        assert_eq!(
            waiting_for_subtasks(&[child("researcher", false)]),
            "is waiting for 1 sub-task: `researcher`…"
        );
        assert_eq!(
            waiting_for_subtasks(&[
                child("researcher", false),
                child("writer", false),
                child("checker", true)
            ]),
            "is waiting for 2 sub-tasks (1 of 3 done): `researcher` and `writer`…"
        );
        assert_eq!(
            waiting_for_subtasks(&[child("<!here>", false), child("<!here>", false)]),
            "is waiting for 2 sub-tasks: `here`…"
        );
    }
}
