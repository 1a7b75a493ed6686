//! A task's tool calls as items of its streamed answer
//! ([`baton_core::ReplySink::tool_call`] for [`crate::SlackReplies`]).
//!
//! Slack's streaming methods take `task_update` chunks (`id`, `title`,
//! `status` pending/in_progress/complete/error, optional `details`,
//! `output`, `sources`: docs.slack.dev chat.appendStream, python-slack-sdk
//! 3.40 `TaskUpdateChunk`). A chunk sent again with the same id updates the
//! item, so each call is one item keyed by the model's call id: a segment
//! retried after a crash updates the items it showed rather than adding
//! more. Only the title is sent, the tool's name in plain words: details
//! and output would carry arguments and results, which may hold secrets or
//! personal data.
//!
//! Streams start with `task_display_mode` "plan" (their tasks together in
//! one block, [`crate::stream::TASK_DISPLAY_MODE`]) because a plan's steps
//! are tasks too; calls then show in that block after the steps. Without a
//! plan, "timeline" (each task a card between the text) would suit calls
//! alone, but the mode is fixed when the stream starts, before the worker
//! knows whether a plan or calls will come.

use crate::stream::{Chunk, TaskStatus};
use baton_core::{ToolCallShown, ToolCallState};

/// The longest tool name shown.
const NAME_CHARS: usize = 40;
/// The longest call id kept in a task id (model ids are about 30-40).
const ID_CHARS: usize = 64;

/// The stream task id of call `call_id`: `tool-` and the id's safe
/// characters (never clashing with a plan step's `step-N`).
pub(crate) fn task_id(call_id: &str) -> String {
    let safe: String = call_id
        .chars()
        .filter(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '-'))
        .take(ID_CHARS)
        .collect();
    format!("tool-{safe}")
}

/// The tool's name as shown: the characters safe in plain text (the model
/// writes it), or "a tool".
fn plain_name(name: &str) -> String {
    let clean: String = name
        .chars()
        .filter(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '.'))
        .take(NAME_CHARS)
        .collect();
    if clean.is_empty() {
        "a tool".to_owned()
    } else {
        clean
    }
}

/// The chunk that shows `call`: its title says what happens in plain words,
/// like the status texts ("Running web_search", "Ran web_search").
pub(crate) fn chunk(call: &ToolCallShown<'_>) -> Chunk {
    let name = plain_name(call.name);
    let (title, status) = match call.state {
        ToolCallState::Running => (format!("Running {name}"), TaskStatus::InProgress),
        ToolCallState::Done => (format!("Ran {name}"), TaskStatus::Complete),
        ToolCallState::Failed => (format!("{name} failed"), TaskStatus::Error),
    };
    Chunk::TaskUpdate {
        id: task_id(call.id),
        title,
        status,
        details: None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn call(id: &'static str, name: &'static str, state: ToolCallState) -> ToolCallShown<'static> {
        ToolCallShown { id, name, state }
    }

    #[test]
    fn a_call_is_one_item_by_its_id_through_its_states() {
        let running = chunk(&call("call_1", "web_search", ToolCallState::Running));
        let done = chunk(&call("call_1", "web_search", ToolCallState::Done));
        let failed = chunk(&call("call_1", "web_search", ToolCallState::Failed));
        let parts = |c: &Chunk| match c {
            Chunk::TaskUpdate {
                id,
                title,
                status,
                details,
            } => (id.clone(), title.clone(), *status, details.clone()),
            other => panic!("not a task: {other:?}"),
        };
        assert_eq!(
            parts(&running),
            (
                "tool-call_1".into(),
                "Running web_search".into(),
                TaskStatus::InProgress,
                None
            )
        );
        assert_eq!(
            parts(&done),
            (
                "tool-call_1".into(),
                "Ran web_search".into(),
                TaskStatus::Complete,
                None
            )
        );
        assert_eq!(
            parts(&failed),
            (
                "tool-call_1".into(),
                "web_search failed".into(),
                TaskStatus::Error,
                None
            )
        );
    }

    #[test]
    fn names_and_ids_are_made_plain() {
        let c = chunk(&call(
            "toolu_01<@U1>",
            "<!channel>*bold*",
            ToolCallState::Running,
        ));
        let Chunk::TaskUpdate { id, title, .. } = c else {
            panic!("not a task");
        };
        assert_eq!(id, "tool-toolu_01U1");
        assert_eq!(title, "Running channelbold");
        let c = chunk(&call("x", "<>", ToolCallState::Done));
        let Chunk::TaskUpdate { title, .. } = c else {
            panic!("not a task");
        };
        assert_eq!(title, "Ran a tool");
    }
}
