//! Recording an ended task's turns on its conversation ([`baton_core::recap`]),
//! for the next task on the same thread.

use baton_core::recap::{Speaker, Turn};
use baton_core::{approval, Entry, EntryKind, Task, TaskStore};

/// This task's own turns: its user messages (not the carried ones) and
/// its answer. The input is the requester's; later messages say who wrote
/// them in their text when they came from someone else.
pub(crate) fn turns_of(task: &Task, transcript: &[Entry]) -> Vec<Turn> {
    let requester = approval::requester(task).map(str::to_owned);
    let mut turns: Vec<Turn> = transcript
        .iter()
        .filter(|e| e.seq >= task.carried)
        .filter_map(|e| match &e.kind {
            EntryKind::UserMessage { text } if !crate::compaction::is_compact_command(text) => {
                Some(Turn {
                    speaker: Speaker::User,
                    // A message from someone else says so in its text.
                    author: requester.clone().filter(|_| !text.starts_with("[from <@")),
                    text: text.clone(),
                    at: e.at,
                })
            }
            _ => None,
        })
        .collect();
    if let Some(answer) = task.result.as_deref().filter(|a| !a.trim().is_empty()) {
        turns.push(Turn {
            speaker: Speaker::Agent,
            text: answer.to_owned(),
            author: None,
            at: task.updated_at,
        });
    }
    turns
}

/// Adds the ended task's turns to its thread's recap (once: a retried end
/// adds nothing). Best effort: a failure is logged, and the next task on
/// the thread starts without these turns.
pub(crate) async fn record(store: &TaskStore, task: &Task, transcript: &[Entry]) {
    let Some(key) = task.thread.as_deref() else {
        return;
    };
    if task.parent.is_some() {
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
