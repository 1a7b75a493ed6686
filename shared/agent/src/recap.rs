//! Recording an ended task's turns on its conversation ([`baton_core::recap`]),
//! for the next task on the same thread.

pub(crate) mod summariser;

use baton_core::recap::{Speaker, Turn};
use baton_core::{approval, Entry, EntryKind, Task, TaskStore};

/// This task's own turns: its user messages (not the carried ones) and
/// its answer. Each message's Slack author is its recorded one
/// ([`baton_core::Author`]); entries of earlier releases, which recorded
/// none, are the requester's.
pub(crate) fn turns_of(task: &Task, transcript: &[Entry]) -> Vec<Turn> {
    let requester = approval::requester(task).map(str::to_owned);
    let mut turns: Vec<Turn> = transcript
        .iter()
        .filter(|e| e.seq >= task.conversation.carried)
        .filter_map(|e| match &e.kind {
            EntryKind::UserMessage { text, from } if !crate::context::is_compact_command(text) => {
                Some(Turn {
                    speaker: Speaker::User,
                    author: match from {
                        Some(author) => author.slack_user().map(str::to_owned),
                        None => requester.clone(),
                    },
                    text: text.clone(),
                    at: e.at,
                })
            }
            _ => None,
        })
        .collect();
    if let Some(answer) = task
        .answer
        .result
        .as_deref()
        .filter(|a| !a.trim().is_empty())
    {
        let tools = tool_digest(task, transcript);
        turns.push(Turn {
            speaker: Speaker::Agent,
            text: if tools.is_empty() {
                answer.to_owned()
            } else {
                format!(
                    "{}{tools}]\n\n{answer}",
                    baton_core::recap::TOOLS_USED_PREFIX
                )
            },
            author: None,
            at: task.updated_at,
        });
    } else if task.status() == baton_core::TaskStatus::Cancelled {
        // Stopped before it answered (a `stop`, or a new message that
        // interrupted it): the next task sees how far it got.
        if let Some(text) = interrupted(task, transcript) {
            turns.push(Turn {
                speaker: Speaker::Agent,
                text,
                author: None,
                at: task.updated_at,
            });
        }
    }
    turns
}

/// What a task cancelled before its answer had done: what it last wrote
/// and its tools' results, marked as cut short; `None` when it had done
/// nothing yet.
fn interrupted(task: &Task, transcript: &[Entry]) -> Option<String> {
    let said = transcript
        .iter()
        .filter(|e| e.seq >= task.conversation.carried)
        .rev()
        .find_map(|e| match &e.kind {
            EntryKind::AssistantMessage { text, .. } if !text.trim().is_empty() => {
                Some(text.trim().to_owned())
            }
            _ => None,
        });
    let tools = tool_digest(task, transcript);
    if said.is_none() && tools.is_empty() {
        return None;
    }
    let mut text = INTERRUPTED.to_owned();
    if !tools.is_empty() {
        text.push_str(&format!(
            " {}{tools}]",
            baton_core::recap::TOOLS_USED_PREFIX
        ));
    }
    if let Some(said) = said {
        text.push_str(&format!("\n\nSo far: {said}"));
    }
    Some(text)
}

/// How the turn of a task cancelled before its answer begins.
pub(crate) const INTERRUPTED: &str = "[Cancelled before it finished.]";

/// How much of each tool result the next task sees.
const TOOL_RESULT_CHARS: usize = 200;
/// How much of all the task's tool results it sees.
const TOOL_DIGEST_CHARS: usize = 1_500;

/// What the task's tools returned, short: `name → result` (cut), the
/// latest last, within [`TOOL_DIGEST_CHARS`] — what the context pipeline
/// keeps of tool results once they are old.
fn tool_digest(task: &Task, transcript: &[Entry]) -> String {
    let mut parts: Vec<String> = transcript
        .iter()
        .filter(|e| e.seq >= task.conversation.carried)
        .filter_map(|e| match &e.kind {
            EntryKind::ToolResult {
                name,
                content,
                is_error,
                ..
            } => {
                let (cut, _) = baton_core::tool::cut_middle(
                    content,
                    TOOL_RESULT_CHARS * 3 / 4,
                    TOOL_RESULT_CHARS / 4,
                    |_, _| " … ".to_owned(),
                );
                let failed = if *is_error { " (failed)" } else { "" };
                Some(format!("{name}{failed} → {}", cut.replace('\n', " ")))
            }
            _ => None,
        })
        .collect();
    // The newest results matter most: drop the oldest past the bound.
    while parts.iter().map(|p| p.chars().count() + 2).sum::<usize>() > TOOL_DIGEST_CHARS
        && !parts.is_empty()
    {
        parts.remove(0);
    }
    parts.join("; ")
}

/// Adds the ended task's turns to its thread's recap (once: a retried end
/// adds nothing). Best effort: a failure is logged, and the next task on
/// the thread starts without these turns.
pub(crate) async fn record(store: &TaskStore, task: &Task, transcript: &[Entry]) {
    let Some(key) = task.conversation.thread.as_deref() else {
        return;
    };
    if task.source.parent.is_some() {
        return;
    }
    let turns = turns_of(task, transcript);
    for _ in 0..5 {
        let mut thread = match store.thread(key).await {
            Ok(Some(t)) => t,
            Ok(None) => return,
            Err(e) => {
                tracing::warn!(task_id = %task.id, error = %e, "could not read the conversation to record the task");
                return;
            }
        };
        if !thread.recap.record(&task.id, turns.clone()) {
            return;
        }
        match store.put_thread(&thread).await {
            Ok(true) => return,
            Ok(false) => continue,
            Err(e) => {
                tracing::warn!(task_id = %task.id, error = %e, "could not record the task on its conversation");
                return;
            }
        }
    }
    tracing::warn!(task_id = %task.id, "could not record the task on its conversation under contention");
}

#[cfg(test)]
mod tests {
    use super::*;
    use baton_core::{Limits, Origin, TaskId};

    fn entry(seq: u64, kind: EntryKind) -> Entry {
        Entry {
            seq,
            at: baton_core::Instant(0),
            kind,
        }
    }

    #[test]
    fn the_turns_are_the_tasks_own_with_a_short_tool_digest() {
        let mut task = Task::new(
            TaskId::generate(),
            "default",
            Origin::Http,
            None,
            Limits::default(),
            0,
        );
        task.conversation.carried = 1;
        task.answer.result = Some("It is 9:00 in Berlin.".into());
        let transcript = vec![
            entry(
                0,
                EntryKind::UserMessage {
                    text: "carried earlier turn".into(),
                    from: None,
                },
            ),
            entry(
                1,
                EntryKind::UserMessage {
                    text: "what time is it in Berlin?".into(),
                    from: None,
                },
            ),
            entry(
                2,
                EntryKind::ToolResult {
                    step: 1,
                    call_id: "c1".into(),
                    name: "current_time".into(),
                    content: format!("09:00 Europe/Berlin {}", "x".repeat(1_000)),
                    is_error: false,
                    truncated_chars: 0,
                },
            ),
        ];
        let turns = turns_of(&task, &transcript);
        assert_eq!(turns.len(), 2, "the carried turn is not recorded again");
        assert_eq!(turns[0].text, "what time is it in Berlin?");
        let answer = &turns[1].text;
        assert!(
            answer.starts_with("[Tools used for this answer: current_time → 09:00 Europe/Berlin"),
            "{answer}"
        );
        assert!(answer.ends_with("It is 9:00 in Berlin."), "{answer}");
        assert!(answer.chars().count() < 400, "cut: {answer}");
    }
}
