//! The transcript: a task's append-only log.
//!
//! Entries are written once and never rewritten, so a checkpoint writes only
//! what is new. The transcript is both the conversation the model sees and
//! the progress events clients tail (`GET /tasks/{id}/events`).

use crate::clock::{self, Instant};
use crate::judgment::{PlanStep, SupervisorAction, Tier};
use crate::llm::{AttachmentContent, Message, ToolCall, ToolSpec, Usage};
use crate::recap::Recap;
use crate::task::TaskStatus;
use serde::{Deserialize, Serialize};

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Entry {
    pub seq: u64,
    /// Integer milliseconds in the store, as entries always were.
    #[serde(with = "clock::as_millis")]
    pub at: Instant,
    #[serde(flatten)]
    pub kind: EntryKind,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum EntryKind {
    /// Input from the user: the task's input, or a message that arrived
    /// while it ran.
    UserMessage {
        text: String,
        /// Who wrote it, as the source that authenticated it said
        /// ([`crate::author`]); absent on entries of earlier releases.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        from: Option<crate::task::author::Author>,
    },
    /// The earlier turns of the conversation the task continues
    /// ([`crate::recap`]), carried in as one entry however long the
    /// conversation is, so accepting its 500th message writes no more than
    /// its 5th. The model sees them as the messages they were.
    Recap {
        /// The digest of turns folded away.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        summary: Option<String>,
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        turns: Vec<crate::recap::Turn>,
    },
    /// Phase one of a step: the model's answer, with the tools it asked for,
    /// written before any of them runs.
    AssistantMessage {
        step: u32,
        text: String,
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        tool_calls: Vec<ToolCall>,
        usage: Usage,
        model: String,
    },
    /// A non-idempotent tool is about to run. If its result never follows,
    /// the call was interrupted and is not run again.
    ToolStarted {
        step: u32,
        call_id: String,
        name: String,
    },
    /// Phase two of a step: one tool's result, written as it completes.
    ToolResult {
        step: u32,
        call_id: String,
        name: String,
        content: String,
        is_error: bool,
        /// Characters cut from the result before it was stored.
        #[serde(default, skip_serializing_if = "is_zero")]
        truncated_chars: u64,
    },
    /// A lifecycle event (started, segment handed over, finished).
    Status { status: TaskStatus, detail: String },
    /// Compaction: a summary standing in for every conversational entry up
    /// to and including `through_seq`. The entries stay in the log; the
    /// context builder shows the summary instead of them.
    Summary { text: String, through_seq: u64 },
    /// An entry too large for the table, kept in the blob store.
    Offloaded { blob_key: String, bytes: u64 },
    /// A note from the runtime to the model (not from a person): a nudge
    /// after an empty answer, a warning that it repeats itself, advice
    /// after failing tools, the request for a closing summary. The model
    /// sees it as a user message; `reason` is what the loop decides on.
    Note { reason: NoteReason, text: String },
    /// The tools of the agent's remote (MCP) servers, listed when the task
    /// started; every segment offers the model these and no others.
    ToolsListed { listing: ToolListing },
    /// A file given with the user message before it
    /// ([`crate::attachment`]): its text, or its bytes base64-encoded
    /// (images, PDFs), or a note saying why it was not kept (too large,
    /// unsupported, download failed). Entries too large for the table go
    /// to the blob store like any other.
    Attachment {
        name: String,
        media_type: String,
        /// The file's size.
        bytes: u64,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        text: Option<String>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        data_base64: Option<String>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        note: Option<String>,
    },
    /// Someone rated the task's answer ([`crate::feedback`]); written by
    /// the ingest, possibly after the task ended. Not part of the model's
    /// context.
    Feedback {
        user: String,
        rating: crate::task::parts::Rating,
    },
    /// Text of step `step`'s answer as the model wrote it, for clients
    /// that follow a task (`GET /tasks/{id}/events`). `restart`: the call
    /// was retried, forget this step's text so far. Not part of the model's
    /// context: the step's `assistant_message` is the answer.
    AnswerDelta {
        step: u32,
        text: String,
        #[serde(default, skip_serializing_if = "std::ops::Not::not")]
        restart: bool,
    },
    /// The router's choice for the turn ([`crate::judgment`]): the model
    /// tier and the prompt modules that join the system prompt, and
    /// whether the request needs a plan. `fallback`: why the default was
    /// taken instead of an answer (the call failed or answered garbage).
    Route {
        tier: Tier,
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        modules: Vec<String>,
        #[serde(default)]
        needs_plan: bool,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        fallback: Option<String>,
    },
    /// The plan the task works to, from the planner or a replan. The model
    /// sees it as its execution plan.
    Plan { steps: Vec<PlanStep> },
    /// A supervision checkpoint after step `step`, recorded before it acts.
    /// `done`: indexes of plan steps now complete.
    Supervision {
        step: u32,
        action: SupervisorAction,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        note: Option<String>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        question: Option<String>,
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        done: Vec<usize>,
    },
    /// The quality gate's verdict on the answer of step `step`. A failing
    /// one sends the answer back (`sent_back`), once per turn, with
    /// `problems` as what was wrong; a second answer is delivered whatever
    /// its verdict. `rule`: decided by a cheap check (an answer that only
    /// narrates), not by a model call.
    Verdict {
        step: u32,
        pass: bool,
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        problems: Vec<String>,
        #[serde(default, skip_serializing_if = "std::ops::Not::not")]
        rule: bool,
        #[serde(default, skip_serializing_if = "std::ops::Not::not")]
        sent_back: bool,
    },
}

/// Why the runtime wrote a [`EntryKind::Note`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum NoteReason {
    /// The model answered with nothing: asked to continue.
    EmptyAnswer,
    /// From here on the agent's escalation model answers (it answered with
    /// nothing again, or its request was refused).
    Escalated,
    /// The model asked for the same call again and again.
    Repeating,
    /// Several tool calls in a row failed.
    ToolErrors,
    /// A limit was reached: asked for a summary of what was done.
    Summary,
    /// The earlier messages of the Slack thread the task was mentioned in
    /// (what others said there, not instructions), or why they could not
    /// be read.
    ThreadContext,
}

fn is_zero(n: &u64) -> bool {
    *n == 0
}

impl EntryKind {
    /// The event type name clients see.
    pub fn type_name(&self) -> &'static str {
        match self {
            EntryKind::UserMessage { .. } => "user_message",
            EntryKind::Recap { .. } => "recap",
            EntryKind::AssistantMessage { .. } => "assistant_message",
            EntryKind::ToolStarted { .. } => "tool_started",
            EntryKind::ToolResult { .. } => "tool_result",
            EntryKind::Status { .. } => "status",
            EntryKind::Summary { .. } => "summary",
            EntryKind::Offloaded { .. } => "offloaded",
            EntryKind::Note { .. } => "note",
            EntryKind::ToolsListed { .. } => "tools_listed",
            EntryKind::Attachment { .. } => "attachment",
            EntryKind::Feedback { .. } => "feedback",
            EntryKind::AnswerDelta { .. } => "answer_delta",
            EntryKind::Route { .. } => "route",
            EntryKind::Plan { .. } => "plan",
            EntryKind::Supervision { .. } => "supervision",
            EntryKind::Verdict { .. } => "verdict",
        }
    }

    /// The messages this entry contributes to the model's context: one for
    /// most kinds, none for some, one per turn for a [`EntryKind::Recap`].
    pub fn to_messages(&self) -> Vec<Message> {
        match self {
            EntryKind::Recap { summary, turns } => {
                crate::recap::messages(summary.as_deref(), turns)
            }
            other => other.to_message().into_iter().collect(),
        }
    }

    /// Whether the entry is part of the model's context.
    pub fn is_conversational(&self) -> bool {
        match self {
            EntryKind::Recap { summary, turns } => summary.is_some() || !turns.is_empty(),
            other => other.to_message().is_some(),
        }
    }

    /// The one message of a kind that contributes at most one.
    fn to_message(&self) -> Option<Message> {
        match self {
            EntryKind::UserMessage { text, .. } => Some(Message::User {
                content: text.clone(),
            }),
            EntryKind::Note { text, .. } => Some(Message::User {
                content: format!("[Baton runtime note] {text}"),
            }),
            // Servers that could not be listed: the model is told why it
            // lacks their tools (the tools themselves go in the request).
            EntryKind::ToolsListed { listing } if !listing.unavailable.is_empty() => {
                let why: Vec<String> = listing
                    .unavailable
                    .iter()
                    .map(|u| format!("`{}` ({})", u.server, u.reason))
                    .collect();
                Some(Message::User {
                    content: format!(
                        "[Baton runtime note] The tools of these MCP servers are unavailable for this task: {}.",
                        why.join("; ")
                    ),
                })
            }
            EntryKind::Attachment {
                name,
                media_type,
                text,
                data_base64,
                note,
                ..
            } => Some(Message::Attachment {
                name: name.clone(),
                media_type: media_type.clone(),
                content: attachment_content(
                    media_type,
                    text.as_ref(),
                    data_base64.as_ref(),
                    note.as_ref(),
                ),
            }),
            EntryKind::AssistantMessage {
                text, tool_calls, ..
            } => Some(Message::Assistant {
                content: text.clone(),
                tool_calls: tool_calls.clone(),
            }),
            EntryKind::ToolResult {
                call_id,
                name,
                content,
                is_error,
                ..
            } => Some(Message::Tool {
                call_id: call_id.clone(),
                name: name.clone(),
                content: content.clone(),
                is_error: *is_error,
            }),
            EntryKind::Plan { steps } if !steps.is_empty() => Some(Message::User {
                content: format!(
                    "[Baton runtime note] Your execution plan for this request. Work through it; \
                     a supervisor checks progress against it.\n{}",
                    crate::judgment::plan_text(steps)
                ),
            }),
            EntryKind::Supervision {
                note: Some(note), ..
            } if !note.trim().is_empty() => Some(Message::User {
                content: format!("[Baton runtime note] From the supervisor: {note}"),
            }),
            EntryKind::Verdict {
                problems,
                sent_back: true,
                ..
            } => Some(Message::User {
                content: format!(
                    "[Baton runtime note] Your last answer was not delivered: a quality check \
                     found these problems with it:\n{}\nAnswer again, fixing them. If the \
                     request needs an action, call the tool now instead of saying you will.",
                    problems
                        .iter()
                        .map(|p| format!("- {p}"))
                        .collect::<Vec<_>>()
                        .join("\n")
                ),
            }),
            _ => None,
        }
    }
}

/// The tool calls of the last assistant message that have no result yet,
/// with whether each was marked started. Empty when the last step is done.
pub fn pending_tool_calls(entries: &[Entry]) -> (u32, Vec<(ToolCall, bool)>) {
    let Some(pos) = entries
        .iter()
        .rposition(|e| matches!(e.kind, EntryKind::AssistantMessage { .. }))
    else {
        return (0, Vec::new());
    };
    let EntryKind::AssistantMessage {
        step, tool_calls, ..
    } = &entries[pos].kind
    else {
        return (0, Vec::new());
    };
    let later = &entries[pos + 1..];
    let pending = tool_calls
        .iter()
        .filter(|c| {
            !later.iter().any(
                |e| matches!(&e.kind, EntryKind::ToolResult { call_id, .. } if *call_id == c.id),
            )
        })
        .map(|c| {
            let started = later.iter().any(
                |e| matches!(&e.kind, EntryKind::ToolStarted { call_id, .. } if *call_id == c.id),
            );
            (c.clone(), started)
        })
        .collect();
    (*step, pending)
}

/// A tool found at run time on a remote server (an MCP server): what the
/// model is shown and how Baton treats its calls. Listed when a task
/// starts and kept with the task ([`EntryKind::ToolsListed`]), so
/// every segment offers the model the same tools.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ListedTool {
    /// The server it came from, as the configuration names it.
    pub server: String,
    /// The tool's own name on the server.
    pub remote_name: String,
    /// What the model sees; `spec.name` is unique among the task's tools.
    pub spec: ToolSpec,
    /// Safe to run again after a crash interrupted it (the server said
    /// it is read-only or idempotent).
    pub repeatable: bool,
    /// Waits for a human's approval unless the agent's rules decide.
    pub needs_approval: bool,
}

impl ListedTool {
    /// The `{server}__connect` tool offered for a per-person server its
    /// person has not connected (it has no name on the server).
    pub fn is_connect(&self) -> bool {
        self.remote_name.is_empty()
    }
}

/// A server whose tools could not be listed: the task runs without them,
/// and the model is told why.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct UnavailableServer {
    pub server: String,
    /// Readable, and free of secrets: the model sees it.
    pub reason: String,
}

/// The remote tools of a task, as listed when it started.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct ToolListing {
    pub tools: Vec<ListedTool>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub unavailable: Vec<UnavailableServer>,
}

/// What of an attachment entry the model is given.
fn attachment_content(
    media_type: &str,
    text: Option<&String>,
    data_base64: Option<&String>,
    note: Option<&String>,
) -> AttachmentContent {
    match (note, text, data_base64) {
        (Some(reason), _, _) => AttachmentContent::Unreadable {
            reason: reason.clone(),
        },
        (None, Some(text), _) => AttachmentContent::Text { text: text.clone() },
        (None, None, Some(data)) if media_type == "application/pdf" => {
            AttachmentContent::Document {
                data_base64: data.clone(),
            }
        }
        (None, None, Some(data)) => AttachmentContent::Image {
            data_base64: data.clone(),
        },
        (None, None, None) => AttachmentContent::Unreadable {
            reason: "its content was not kept".to_owned(),
        },
    }
}

impl Recap {
    /// The entry a new task on the conversation starts with, before its
    /// own input (`None` for a conversation with nothing to carry): one
    /// entry, whatever the number of turns.
    pub fn entry(&self) -> Option<EntryKind> {
        (!self.is_empty()).then(|| EntryKind::Recap {
            summary: self.carried_summary(),
            turns: self.turns.clone(),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(seq: u64, kind: EntryKind) -> Entry {
        Entry {
            seq,
            at: Instant(0),
            kind,
        }
    }

    fn call(id: &str) -> ToolCall {
        ToolCall {
            id: id.into(),
            name: "t".into(),
            arguments: serde_json::json!({}),
        }
    }

    #[test]
    fn finds_calls_without_results() {
        let entries = vec![
            entry(
                0,
                EntryKind::UserMessage {
                    text: "hi".into(),
                    from: None,
                },
            ),
            entry(
                1,
                EntryKind::AssistantMessage {
                    step: 1,
                    text: String::new(),
                    tool_calls: vec![call("a"), call("b"), call("c")],
                    usage: Usage::default(),
                    model: "m".into(),
                },
            ),
            entry(
                2,
                EntryKind::ToolResult {
                    step: 1,
                    call_id: "b".into(),
                    name: "t".into(),
                    content: "x".into(),
                    is_error: false,
                    truncated_chars: 0,
                },
            ),
            entry(
                3,
                EntryKind::ToolStarted {
                    step: 1,
                    call_id: "c".into(),
                    name: "t".into(),
                },
            ),
        ];
        let (step, pending) = pending_tool_calls(&entries);
        assert_eq!(step, 1);
        let ids: Vec<_> = pending.iter().map(|(c, s)| (c.id.as_str(), *s)).collect();
        assert_eq!(ids, vec![("a", false), ("c", true)]);
    }

    #[test]
    fn entry_json_is_flat_with_type() {
        let e = entry(
            7,
            EntryKind::UserMessage {
                text: "hi".into(),
                from: None,
            },
        );
        let v = serde_json::to_value(&e).unwrap();
        assert_eq!(
            v,
            serde_json::json!({"seq": 7, "at": 0, "type": "user_message", "text": "hi"})
        );
        assert_eq!(serde_json::from_value::<Entry>(v).unwrap(), e);
    }

    #[test]
    fn a_stored_entry_reads_and_writes_as_before() {
        let old = r#"{"seq":3,"at":1767225600123,"type":"status","status":"running","detail":"segment 1 started"}"#;
        let e: Entry = serde_json::from_str(old).unwrap();
        assert_eq!(e.at, Instant(1_767_225_600_123));
        assert_eq!(serde_json::to_string(&e).unwrap(), old);
    }
}
