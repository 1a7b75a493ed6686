//! Forking a task from a step: a new task whose transcript is the
//! source's through the end of step N, copied from its checkpoints with
//! nothing re-run, that goes on from there (`POST /tasks/{id}/fork`).
//!
//! What is copied is the model's context: user messages, the recap,
//! attachments, the model's messages and tool results (with their
//! `tool_started` marks), runtime notes, compaction summaries, the tools
//! listed, and the judgment entries (route, plan, supervision, verdicts),
//! so the fork's first model call is asked what the source's step N+1 was.
//! Client-only events (status, answer deltas, feedback) are not.
//! Step 0 is the input and what came with it: the recap, attachments and
//! the thread's context, no judgment and no tool listing.

use crate::ids::TaskId;
use crate::task::parts::{ForkedFrom, ToolMode};
use crate::task::Task;
use crate::transcript::{Entry, EntryKind, NoteReason};

/// What a fork asks besides its source.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ForkRequest {
    /// The last step copied (0: only the input).
    pub from_step: u32,
    /// Replaces the last user message before step `from_step + 1`.
    pub input: Option<String>,
    pub tools: ToolMode,
}

/// Why a task cannot be forked from the step asked.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum ForkError {
    #[error("`from_step` {step} is beyond task {task}'s completed steps ({completed})")]
    StepBeyond {
        task: TaskId,
        step: u32,
        completed: u32,
    },
    #[error(
        "`from_step` {step} of task {task} has tool calls without results yet: \
         fork from an earlier step, or once they are answered"
    )]
    Unanswered { task: TaskId, step: u32 },
}

/// The fork of `source` (whose transcript is `transcript`, offloaded
/// entries read back) asked by `req`: `fresh` (a new task of the chosen
/// agent) made the fork, and its first entries.
///
/// The fork's step counter goes on from `from_step`, so its steps keep the
/// source's numbers (recorded tool results are found by them); its usage
/// and cost count only its own model calls.
pub fn fork(
    source: &Task,
    transcript: &[Entry],
    req: &ForkRequest,
    fresh: Task,
) -> Result<(Task, Vec<EntryKind>), ForkError> {
    let step = req.from_step;
    let completed = completed_steps(transcript);
    if step > completed {
        return Err(ForkError::StepBeyond {
            task: source.id.clone(),
            step,
            completed,
        });
    }
    if step > 0 && !answered(transcript, step) {
        return Err(ForkError::Unanswered {
            task: source.id.clone(),
            step,
        });
    }
    // Everything the source wrote before asking the model for step N+1.
    let cut = transcript
        .iter()
        .position(|e| matches!(&e.kind, EntryKind::AssistantMessage { step: s, .. } if *s > step))
        .unwrap_or(transcript.len());
    let mut kept: Vec<(u64, EntryKind)> = transcript[..cut]
        .iter()
        .filter(|e| copied(&e.kind, step))
        .map(|e| (e.seq, e.kind.clone()))
        .collect();
    // The copies are numbered from 0: a summary names the last entry it
    // stands for by its new number (dropped if it stands for none).
    let renumbered: Vec<u64> = kept.iter().map(|(seq, _)| *seq).collect();
    kept.retain_mut(|(_, kind)| match kind {
        EntryKind::Summary { through_seq, .. } => {
            match renumbered.iter().rposition(|s| *s <= *through_seq) {
                Some(new) => {
                    *through_seq = new as u64;
                    true
                }
                None => false,
            }
        }
        _ => true,
    });
    let carried = kept
        .iter()
        .filter(|(seq, _)| *seq < source.conversation.carried)
        .count() as u64;
    let mut entries: Vec<EntryKind> = kept.into_iter().map(|(_, kind)| kind).collect();
    if let Some(input) = &req.input {
        // The fork's client (the API token's holder) wrote the new input.
        let api = Some(crate::task::author::Author::Person(
            crate::task::author::Actor::Api { person: None },
        ));
        let last_user = entries.iter_mut().rev().find_map(|e| match e {
            EntryKind::UserMessage { text, from } => Some((text, from)),
            _ => None,
        });
        match last_user {
            Some((text, from)) => {
                input.clone_into(text);
                *from = api;
            }
            None => entries.push(EntryKind::UserMessage {
                text: input.clone(),
                from: api,
            }),
        }
    }
    let mut task = fresh;
    task.budget.steps = step;
    task.conversation.carried = carried;
    task.fork.tools = req.tools;
    task.fork.forked_from = Some(ForkedFrom {
        task_id: source.id.clone(),
        step,
    });
    Ok((task, entries))
}

/// The highest step the transcript has a model message for.
pub fn completed_steps(transcript: &[Entry]) -> u32 {
    transcript
        .iter()
        .filter_map(|e| match &e.kind {
            EntryKind::AssistantMessage { step, .. } => Some(*step),
            _ => None,
        })
        .max()
        .unwrap_or(0)
}

/// Whether every tool call of step `step` has its result.
fn answered(transcript: &[Entry], step: u32) -> bool {
    transcript
        .iter()
        .filter_map(|e| match &e.kind {
            EntryKind::AssistantMessage {
                step: s,
                tool_calls,
                ..
            } if *s == step => Some(tool_calls),
            _ => None,
        })
        .flatten()
        .all(|call| {
            transcript.iter().any(
                |e| matches!(&e.kind, EntryKind::ToolResult { call_id, .. } if *call_id == call.id),
            )
        })
}

/// Whether an entry of the source is copied into a fork from `step`.
fn copied(kind: &EntryKind, step: u32) -> bool {
    if step == 0 {
        return matches!(
            kind,
            EntryKind::UserMessage { .. }
                | EntryKind::Recap { .. }
                | EntryKind::Attachment { .. }
                | EntryKind::Note {
                    reason: NoteReason::ThreadContext,
                    ..
                }
        );
    }
    !matches!(
        kind,
        EntryKind::Status { .. }
            | EntryKind::AnswerDelta { .. }
            | EntryKind::Feedback { .. }
            // Read back by the store before it gets here; never copied as a
            // pointer to a blob the source owns.
            | EntryKind::Offloaded { .. }
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::clock::Instant;
    use crate::llm::{ToolCall, Usage};
    use crate::task::parts::{Limits, Origin, TaskStatus};

    fn entry(seq: u64, kind: EntryKind) -> Entry {
        Entry {
            seq,
            at: Instant(0),
            kind,
        }
    }

    fn user(text: &str) -> EntryKind {
        EntryKind::UserMessage {
            text: text.into(),
            from: None,
        }
    }

    fn call(id: &str, arg: u32) -> ToolCall {
        ToolCall {
            id: id.into(),
            name: "fetch".into(),
            arguments: serde_json::json!({ "n": arg }),
        }
    }

    fn assistant(step: u32, calls: Vec<ToolCall>) -> EntryKind {
        EntryKind::AssistantMessage {
            step,
            text: format!("step {step}"),
            tool_calls: calls,
            usage: Usage::default(),
            model: "m".into(),
        }
    }

    fn result(step: u32, id: &str) -> EntryKind {
        EntryKind::ToolResult {
            step,
            call_id: id.into(),
            name: "fetch".into(),
            content: format!("result {id}"),
            is_error: false,
            truncated_chars: 0,
        }
    }

    fn status() -> EntryKind {
        EntryKind::Status {
            status: TaskStatus::Running,
            detail: "segment 1 started".into(),
        }
    }

    /// Three steps with a call each, then the answer; with the events a
    /// client sees between them.
    fn source_transcript() -> Vec<Entry> {
        let kinds = vec![
            EntryKind::Recap {
                summary: Some("earlier".into()),
                turns: Vec::new(),
            },
            user("do it"),
            status(),
            assistant(1, vec![call("a", 1)]),
            result(1, "a"),
            EntryKind::AnswerDelta {
                step: 2,
                text: "x".into(),
                restart: false,
            },
            assistant(2, vec![call("b", 2)]),
            EntryKind::ToolStarted {
                step: 2,
                call_id: "b".into(),
                name: "fetch".into(),
            },
            result(2, "b"),
            EntryKind::Summary {
                text: "so far".into(),
                through_seq: 6,
            },
            user("and also"),
            assistant(3, vec![call("c", 3)]),
            result(3, "c"),
            assistant(4, Vec::new()),
            EntryKind::Feedback {
                user: "U1".into(),
                rating: crate::task::parts::Rating::Positive,
            },
        ];
        kinds
            .into_iter()
            .enumerate()
            .map(|(i, k)| entry(i as u64, k))
            .collect()
    }

    fn source() -> Task {
        let mut t = Task::new(
            TaskId::generate(),
            "default",
            Origin::Http,
            None,
            Limits::default(),
            0,
        );
        t.conversation.carried = 1;
        t.budget.steps = 4;
        t
    }

    fn fresh() -> Task {
        Task::new(
            TaskId::generate(),
            "other",
            Origin::Http,
            None,
            Limits::default(),
            0,
        )
    }

    fn req(from_step: u32, input: Option<&str>) -> ForkRequest {
        ForkRequest {
            from_step,
            input: input.map(str::to_owned),
            tools: ToolMode::Recorded,
        }
    }

    fn types(entries: &[EntryKind]) -> Vec<&'static str> {
        entries.iter().map(EntryKind::type_name).collect()
    }

    #[test]
    fn a_fork_from_step_two_copies_its_context_through_step_two() {
        let src = source();
        let (task, entries) = fork(&src, &source_transcript(), &req(2, None), fresh()).unwrap();
        assert_eq!(
            types(&entries),
            vec![
                "recap",
                "user_message",
                "assistant_message",
                "tool_result",
                "assistant_message",
                "tool_started",
                "tool_result",
                "summary",
                "user_message",
            ]
        );
        // The summary stood for source entries through seq 6 (step 2's
        // message), which is copy number 4.
        assert!(matches!(
            entries[7],
            EntryKind::Summary { through_seq: 4, .. }
        ));
        assert_eq!(task.budget.steps, 2);
        assert_eq!(task.conversation.carried, 1);
        assert_eq!(task.agent, "other");
        assert_eq!(task.fork.tools, ToolMode::Recorded);
        assert_eq!(
            task.fork.forked_from,
            Some(ForkedFrom {
                task_id: src.id.clone(),
                step: 2
            })
        );
        assert_eq!(task.budget.usage, Usage::default());
    }

    #[test]
    fn input_replaces_the_last_user_message_before_the_next_step() {
        let (_, entries) = fork(
            &source(),
            &source_transcript(),
            &req(2, Some("instead")),
            fresh(),
        )
        .unwrap();
        let users: Vec<_> = entries
            .iter()
            .filter_map(|e| match e {
                EntryKind::UserMessage { text, .. } => Some(text.as_str()),
                _ => None,
            })
            .collect();
        assert_eq!(users, vec!["do it", "instead"]);
    }

    #[test]
    fn step_zero_is_the_input_and_what_came_with_it() {
        let (task, entries) = fork(
            &source(),
            &source_transcript(),
            &req(0, Some("new")),
            fresh(),
        )
        .unwrap();
        assert_eq!(types(&entries), vec!["recap", "user_message"]);
        // The new input is the fork's client's (the API token's holder).
        assert_eq!(
            entries[1],
            EntryKind::UserMessage {
                text: "new".into(),
                from: Some(crate::Author::Person(crate::Actor::Api { person: None })),
            }
        );
        assert_eq!(task.budget.steps, 0);
    }

    #[test]
    fn the_last_step_copies_everything_but_client_events() {
        let (_, entries) = fork(&source(), &source_transcript(), &req(4, None), fresh()).unwrap();
        assert_eq!(entries.len(), 12);
        assert!(!types(&entries)
            .iter()
            .any(|t| ["status", "answer_delta", "feedback"].contains(t)));
    }

    #[test]
    fn a_step_beyond_the_source_is_refused_naming_it() {
        let err = fork(&source(), &source_transcript(), &req(5, None), fresh()).unwrap_err();
        assert!(matches!(
            err,
            ForkError::StepBeyond {
                step: 5,
                completed: 4,
                ..
            }
        ));
        assert!(err.to_string().contains("`from_step` 5"));
    }

    #[test]
    fn a_step_whose_calls_are_not_all_answered_is_refused() {
        let mut running = source_transcript();
        running.truncate(12); // step 3's call has no result yet
        let err = fork(&source(), &running, &req(3, None), fresh()).unwrap_err();
        assert!(matches!(err, ForkError::Unanswered { step: 3, .. }));
        // The steps before it are finished: forking from them is allowed.
        assert!(fork(&source(), &running, &req(2, None), fresh()).is_ok());
    }

    #[test]
    fn the_forks_named_are_bounded_and_not_repeated() {
        let mut t = source();
        let first = TaskId::generate();
        assert!(t.fork.add(&first));
        assert!(!t.fork.add(&first));
        for _ in 0..crate::task::parts::MAX_FORKS {
            t.fork.add(&TaskId::generate());
        }
        assert_eq!(t.fork.forks.len(), crate::task::parts::MAX_FORKS);
        assert!(!t.fork.forks.contains(&first), "the oldest is dropped");
    }
}
