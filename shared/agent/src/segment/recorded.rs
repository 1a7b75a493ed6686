//! Recorded tools: a fork made with `"tools": "recorded"` runs no tool.
//! A call identical (name, and arguments as JSON values) to the one its
//! source task made at the same position — the same step number, the same
//! index among that step's calls — is answered with the source's recorded
//! result; any other call with an error saying it was not recorded.
//! [`super::plan`] turns every call of such a task into that answer, so
//! nothing with a side effect runs: no HTTP or MCP tool, no memory write,
//! no `delegate`, `ask_user`, `send_file`, timer or Slack post.

use baton_core::{Entry, EntryKind, TaskId, ToolCall, ToolOutput};
use std::collections::HashMap;

/// The source task's calls and their results, by position.
#[derive(Debug, Default)]
pub(super) struct Recorded {
    /// The source, named in the "not recorded" answer.
    source: Option<TaskId>,
    /// `(step, index in the step)` → the call and its result.
    calls: HashMap<(u32, usize), (ToolCall, ToolOutput)>,
}

impl Recorded {
    /// The recorded calls of `source`'s transcript (empty when the source
    /// is gone: then no call was recorded). A call without a result was
    /// not recorded.
    pub(super) fn of(source: Option<TaskId>, transcript: &[Entry]) -> Recorded {
        let results: HashMap<&str, ToolOutput> = transcript
            .iter()
            .filter_map(|e| match &e.kind {
                EntryKind::ToolResult {
                    call_id,
                    content,
                    is_error,
                    ..
                } => Some((
                    call_id.as_str(),
                    ToolOutput {
                        content: content.clone(),
                        is_error: *is_error,
                        needs_connection: None,
                    },
                )),
                _ => None,
            })
            .collect();
        let mut calls = HashMap::new();
        for e in transcript {
            if let EntryKind::AssistantMessage {
                step, tool_calls, ..
            } = &e.kind
            {
                for (i, call) in tool_calls.iter().enumerate() {
                    if let Some(out) = results.get(call.id.as_str()) {
                        calls.insert((*step, i), (call.clone(), out.clone()));
                    }
                }
            }
        }
        Recorded { source, calls }
    }

    /// The answer to `call`, the `index`-th call of step `step` (`None`:
    /// its position is unknown).
    pub(super) fn answer(&self, step: u32, index: Option<usize>, call: &ToolCall) -> ToolOutput {
        let recorded = index.and_then(|i| self.calls.get(&(step, i)));
        match recorded {
            Some((made, out)) if made.name == call.name && made.arguments == call.arguments => {
                out.clone()
            }
            _ => ToolOutput::error(format!(
                "`{}` was not recorded: this task replays the recorded tool results of {} and \
                 runs no tool, and that task made no identical call (same tool, same arguments) \
                 at this position (step {step}, call {}). Answer with what you have.",
                call.name,
                self.source
                    .as_ref()
                    .map_or_else(|| "its source task".to_owned(), |s| format!("task {s}")),
                index.map_or_else(|| "?".to_owned(), |i| (i + 1).to_string()),
            )),
        }
    }
}

/// The index of `call` among the calls of step `step`'s model message.
pub(super) fn index_in_step(transcript: &[Entry], step: u32, call: &ToolCall) -> Option<usize> {
    transcript.iter().rev().find_map(|e| match &e.kind {
        EntryKind::AssistantMessage {
            step: s,
            tool_calls,
            ..
        } if *s == step => tool_calls.iter().position(|c| c.id == call.id),
        _ => None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use baton_core::{Instant, Usage};
    use serde_json::json;

    fn call(id: &str, name: &str, args: serde_json::Value) -> ToolCall {
        ToolCall {
            id: id.into(),
            name: name.into(),
            arguments: args,
        }
    }

    fn entry(seq: u64, kind: EntryKind) -> Entry {
        Entry {
            seq,
            at: Instant(0),
            kind,
        }
    }

    fn source() -> Vec<Entry> {
        vec![
            entry(
                0,
                EntryKind::AssistantMessage {
                    step: 1,
                    text: String::new(),
                    tool_calls: vec![
                        call("s1", "fetch", json!({"url": "a", "n": 1})),
                        call("s2", "fetch", json!({"url": "b"})),
                        call("s3", "post", json!({})),
                    ],
                    usage: Usage::default(),
                    model: "m".into(),
                },
            ),
            entry(
                1,
                EntryKind::ToolResult {
                    step: 1,
                    call_id: "s2".into(),
                    name: "fetch".into(),
                    content: "B failed".into(),
                    is_error: true,
                    truncated_chars: 0,
                },
            ),
            entry(
                2,
                EntryKind::ToolResult {
                    step: 1,
                    call_id: "s1".into(),
                    name: "fetch".into(),
                    content: "A".into(),
                    is_error: false,
                    truncated_chars: 0,
                },
            ),
        ]
    }

    #[test]
    fn an_identical_call_at_the_same_position_gets_the_recorded_result() {
        let rec = Recorded::of(Some(TaskId::generate()), &source());
        // Other call ids, arguments in another order: the same call.
        let out = rec.answer(
            1,
            Some(0),
            &call("f1", "fetch", json!({"n": 1, "url": "a"})),
        );
        assert_eq!(out, ToolOutput::ok("A"));
        let out = rec.answer(1, Some(1), &call("f2", "fetch", json!({"url": "b"})));
        assert_eq!((out.content.as_str(), out.is_error), ("B failed", true));
    }

    #[test]
    fn any_other_call_is_not_recorded() {
        let src = TaskId::generate();
        let rec = Recorded::of(Some(src.clone()), &source());
        let other = [
            (1, Some(0), call("f", "fetch", json!({"url": "a", "n": 2}))),
            (1, Some(1), call("f", "fetch", json!({"url": "a", "n": 1}))),
            (2, Some(0), call("f", "fetch", json!({"url": "a", "n": 1}))),
            (1, Some(0), call("f", "get", json!({"url": "a", "n": 1}))),
            // Made, but its result never recorded.
            (1, Some(2), call("f", "post", json!({}))),
            (1, None, call("f", "fetch", json!({"url": "a", "n": 1}))),
        ];
        for (step, index, c) in other {
            let out = rec.answer(step, index, &c);
            assert!(out.is_error, "{c:?}");
            assert!(out.content.contains("was not recorded"), "{}", out.content);
            assert!(out.content.contains(src.as_str()));
        }
        let gone = Recorded::of(None, &[]);
        assert!(gone
            .answer(1, Some(0), &call("f", "fetch", json!({"url": "a", "n": 1})))
            .content
            .contains("was not recorded"));
    }

    #[test]
    fn a_call_is_found_at_its_index_in_its_step() {
        let t = source();
        assert_eq!(index_in_step(&t, 1, &call("s2", "x", json!({}))), Some(1));
        assert_eq!(index_in_step(&t, 2, &call("s2", "x", json!({}))), None);
    }
}
