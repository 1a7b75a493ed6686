//! The Messages wire format: the request, response and error bodies, as
//! the client sends and reads them and the mock server reads and sends
//! them.
//!
//! Absent and `null` differ on the wire, so optional fields are skipped
//! when empty. In responses, unknown fields and content blocks (thinking,
//! server tools, …) are ignored, and fields the client does not read are
//! not parsed.

use crate::mapping::{empty_object, null_as_default, open_enum};
use serde::{Deserialize, Serialize};
use serde_json::Value;

/// `POST /v1/messages`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub(crate) struct Request {
    pub(crate) model: String,
    /// Required by the API.
    pub(crate) max_tokens: u32,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) system: Option<Content>,
    pub(crate) messages: Vec<MessageParam>,
    #[serde(
        default,
        deserialize_with = "null_as_default",
        skip_serializing_if = "Vec::is_empty"
    )]
    pub(crate) tools: Vec<Tool>,
    /// Left out unless the request forces a tool.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) tool_choice: Option<ToolChoice>,
    /// `true` asks for the answer as server-sent [`StreamEvent`]s.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) stream: Option<bool>,
}

/// `tool_choice`: `{"type": "tool", "name": …}` forces that tool. The
/// other kinds are read (by the mock) but never sent.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub(crate) enum ToolChoice {
    Auto,
    Any,
    None,
    Tool { name: String },
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub(crate) enum Role {
    User,
    Assistant,
}

/// One message; tool results travel in user messages.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub(crate) struct MessageParam {
    pub(crate) role: Role,
    pub(crate) content: Content,
}

/// Content: a string, or an array of blocks. (Also the shape of `system`
/// and of a tool result's content.)
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(untagged)]
pub(crate) enum Content {
    Text(String),
    Blocks(Vec<Block>),
}

#[cfg(any(test, feature = "mock-server"))]
impl Content {
    /// The text blocks' text, joined by newlines (the mock reads `system`
    /// and tool results with it).
    pub(crate) fn text(&self) -> String {
        match self {
            Content::Text(s) => s.clone(),
            Content::Blocks(blocks) => blocks
                .iter()
                .filter_map(|b| match b {
                    Block::Text { text } => Some(text.as_str()),
                    _ => None,
                })
                .collect::<Vec<_>>()
                .join("\n"),
        }
    }
}

/// A content block, tagged by `type`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub(crate) enum Block {
    Text {
        #[serde(default)]
        text: String,
    },
    ToolUse {
        id: String,
        name: String,
        /// Always an object.
        #[serde(default = "empty_object")]
        input: Value,
    },
    ToolResult {
        tool_use_id: String,
        /// Left out when empty: the API refuses empty text.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        content: Option<Content>,
        #[serde(default)]
        is_error: bool,
    },
    /// An image, sent base64-encoded (an attached file).
    Image { source: Source },
    /// A PDF, sent base64-encoded (an attached file).
    Document {
        source: Source,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        title: Option<String>,
    },
    /// thinking, redacted_thinking, server tool blocks: not for us.
    /// Never sent.
    #[serde(other, skip_serializing)]
    Other,
}

/// The source of an image or document block: `{"type": "base64",
/// "media_type", "data"}`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub(crate) struct Source {
    #[serde(rename = "type")]
    pub(crate) kind: String,
    #[serde(default)]
    pub(crate) media_type: String,
    #[serde(default)]
    pub(crate) data: String,
}

/// A tool offered to the model.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub(crate) struct Tool {
    pub(crate) name: String,
    #[serde(default)]
    pub(crate) description: String,
    /// JSON Schema of the input object.
    #[serde(default = "empty_object")]
    pub(crate) input_schema: Value,
}

/// The answer to a request.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub(crate) struct Response {
    /// Written by the mock; the client does not read it.
    #[serde(skip_deserializing, skip_serializing_if = "Option::is_none")]
    pub(crate) id: Option<String>,
    /// `message`; written by the mock, not read.
    #[serde(
        rename = "type",
        skip_deserializing,
        skip_serializing_if = "Option::is_none"
    )]
    pub(crate) kind: Option<String>,
    /// `assistant`; written by the mock, not read.
    #[serde(skip_deserializing, skip_serializing_if = "Option::is_none")]
    pub(crate) role: Option<Role>,
    #[serde(default, deserialize_with = "null_as_default")]
    pub(crate) model: String,
    /// Checked by the client: an answer without it is undecodable.
    #[serde(default)]
    pub(crate) content: Option<Vec<Block>>,
    #[serde(default)]
    pub(crate) stop_reason: Option<StopReason>,
    /// Sent as `null` by the mock, as by the API; not read.
    #[serde(skip_deserializing)]
    pub(crate) stop_sequence: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) usage: Option<Usage>,
}

open_enum! {
    /// Why the model stopped.
    StopReason {
        EndTurn = "end_turn",
        MaxTokens = "max_tokens",
        StopSequence = "stop_sequence",
        ToolUse = "tool_use",
        PauseTurn = "pause_turn",
        Refusal = "refusal",
    }
}

/// Token counts; cached prompt tokens are counted apart.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct Usage {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) input_tokens: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) output_tokens: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) cache_creation_input_tokens: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) cache_read_input_tokens: Option<u64>,
}

/// An error answer: `{"type": "error", "error": {"type", "message"}}`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub(crate) struct ErrorResponse {
    /// `error`.
    #[serde(rename = "type", default)]
    pub(crate) kind: String,
    pub(crate) error: ErrorDetail,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub(crate) struct ErrorDetail {
    /// `invalid_request_error`, `overloaded_error`, …
    #[serde(rename = "type", default, deserialize_with = "null_as_default")]
    pub(crate) kind: String,
    #[serde(default, deserialize_with = "null_as_default")]
    pub(crate) message: String,
}

/// One event of a streamed answer (its SSE `event:` name is its `type`).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub(crate) enum StreamEvent {
    /// The message with no content yet, and the input's usage.
    MessageStart {
        message: Response,
    },
    /// A block begins: text (normally empty), or a tool call with its id
    /// and name (its input comes in deltas).
    ContentBlockStart {
        index: u32,
        content_block: Block,
    },
    ContentBlockDelta {
        index: u32,
        delta: BlockDelta,
    },
    ContentBlockStop {
        index: u32,
    },
    /// The stop reason, and the usage so far (cumulative).
    MessageDelta {
        delta: MessageDelta,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        usage: Option<Usage>,
    },
    MessageStop,
    Ping,
    /// An error after the answer began (`overloaded_error`, …).
    Error {
        error: ErrorDetail,
    },
    /// Events added since; ignored, as the API asks. Never sent.
    #[serde(other, skip_serializing)]
    Other,
}

/// What a delta adds to its block.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub(crate) enum BlockDelta {
    TextDelta {
        text: String,
    },
    /// A piece of a tool call's input, as JSON text.
    InputJsonDelta {
        partial_json: String,
    },
    /// Thinking, signatures, citations: not for us. Never sent.
    #[serde(other, skip_serializing)]
    Other,
}

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub(crate) struct MessageDelta {
    #[serde(default)]
    pub(crate) stop_reason: Option<StopReason>,
    /// Sent as `null` by the mock, as by the API; not read.
    #[serde(skip_deserializing)]
    pub(crate) stop_sequence: Option<String>,
}
