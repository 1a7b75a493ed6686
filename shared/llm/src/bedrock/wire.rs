//! The Converse wire format: the request, response and error bodies, as
//! the client sends and reads them and the mock server reads and sends
//! them.
//!
//! Content blocks are unions keyed by their one field (`{"text": …}`,
//! `{"toolUse": {…}}`); blocks of other kinds (reasoning, images,
//! citations, cache points) are read as `Other` and ignored. Absent and
//! `null` differ on the wire, so optional fields are skipped when empty;
//! unknown fields in responses are ignored.

use crate::mapping::{empty_object, null_as_default, open_enum};
use serde::{Deserialize, Serialize};
use serde_json::Value;

/// `POST /model/{modelId}/converse` (the model is in the URL).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct Request {
    pub(crate) messages: Vec<Message>,
    #[serde(
        default,
        deserialize_with = "null_as_default",
        skip_serializing_if = "Vec::is_empty"
    )]
    pub(crate) system: Vec<SystemBlock>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) inference_config: Option<InferenceConfig>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) tool_config: Option<ToolConfig>,
}

/// A system prompt block; only text ones are written or read.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub(crate) struct SystemBlock {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) text: Option<String>,
}

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct InferenceConfig {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) max_tokens: Option<u32>,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct ToolConfig {
    pub(crate) tools: Vec<Tool>,
    /// Left out unless the request forces a tool.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) tool_choice: Option<ToolChoice>,
}

/// `toolChoice`, a union: `{"tool": {"name": …}}` forces that tool;
/// `{"auto": {}}` and `{"any": {}}` are read (by the mock) but never sent.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub(crate) struct ToolChoice {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) auto: Option<Value>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) any: Option<Value>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) tool: Option<SpecificToolChoice>,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub(crate) struct SpecificToolChoice {
    pub(crate) name: String,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct Tool {
    pub(crate) tool_spec: ToolSpec,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct ToolSpec {
    pub(crate) name: String,
    /// At least one character when present.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) description: Option<String>,
    pub(crate) input_schema: InputSchema,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub(crate) struct InputSchema {
    /// JSON Schema of the input object.
    pub(crate) json: Value,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub(crate) enum Role {
    User,
    Assistant,
}

/// One message; tool results travel in user messages.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub(crate) struct Message {
    pub(crate) role: Role,
    pub(crate) content: Vec<ContentBlock>,
}

/// A content block of a message.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", from = "RawContentBlock")]
pub(crate) enum ContentBlock {
    /// Never blank: Converse refuses blank text.
    Text(String),
    ToolUse(ToolUse),
    ToolResult(ToolResult),
    /// An image (an attached file).
    Image(ImageBlock),
    /// A PDF (an attached file).
    Document(DocumentBlock),
    /// Any other kind; never sent.
    #[serde(skip_serializing)]
    Other,
}

/// `{"format": "png", "source": {"bytes": "<base64>"}}`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub(crate) struct ImageBlock {
    /// `png`, `jpeg`, `gif` or `webp`.
    pub(crate) format: String,
    pub(crate) source: BytesSource,
}

/// `{"format": "pdf", "name": …, "source": {"bytes": "<base64>"}}`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub(crate) struct DocumentBlock {
    pub(crate) format: String,
    /// Letters, digits, single spaces, hyphens, parentheses and brackets.
    pub(crate) name: String,
    pub(crate) source: BytesSource,
}

/// Bytes, base64-encoded in the JSON body.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub(crate) struct BytesSource {
    pub(crate) bytes: String,
}

/// A content block as read: whichever known field it has.
#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct RawContentBlock {
    #[serde(default)]
    text: Option<String>,
    #[serde(default)]
    tool_use: Option<ToolUse>,
    #[serde(default)]
    tool_result: Option<ToolResult>,
    #[serde(default)]
    image: Option<ImageBlock>,
    #[serde(default)]
    document: Option<DocumentBlock>,
}

impl From<RawContentBlock> for ContentBlock {
    fn from(raw: RawContentBlock) -> Self {
        match raw {
            RawContentBlock { text: Some(t), .. } => ContentBlock::Text(t),
            RawContentBlock {
                tool_use: Some(u), ..
            } => ContentBlock::ToolUse(u),
            RawContentBlock {
                tool_result: Some(r),
                ..
            } => ContentBlock::ToolResult(r),
            RawContentBlock { image: Some(i), .. } => ContentBlock::Image(i),
            RawContentBlock {
                document: Some(d), ..
            } => ContentBlock::Document(d),
            _ => ContentBlock::Other,
        }
    }
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct ToolUse {
    pub(crate) tool_use_id: String,
    pub(crate) name: String,
    /// Always an object.
    #[serde(default = "empty_object")]
    pub(crate) input: Value,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct ToolResult {
    pub(crate) tool_use_id: String,
    #[serde(default, deserialize_with = "null_as_default")]
    pub(crate) content: Vec<ToolResultBlock>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) status: Option<ToolResultStatus>,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub(crate) enum ToolResultStatus {
    Success,
    Error,
}

/// A block of a tool result's content.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", from = "RawToolResultBlock")]
pub(crate) enum ToolResultBlock {
    Text(String),
    Json(Value),
    /// Any other kind (images, documents); never sent.
    #[serde(skip_serializing)]
    Other,
}

#[derive(Deserialize)]
struct RawToolResultBlock {
    #[serde(default)]
    text: Option<String>,
    #[serde(default)]
    json: Option<Value>,
}

impl From<RawToolResultBlock> for ToolResultBlock {
    fn from(raw: RawToolResultBlock) -> Self {
        match raw {
            RawToolResultBlock { text: Some(t), .. } => ToolResultBlock::Text(t),
            RawToolResultBlock { json: Some(j), .. } => ToolResultBlock::Json(j),
            _ => ToolResultBlock::Other,
        }
    }
}

/// The answer to a request. It names no model.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct Response {
    /// Checked by the client: an answer without `output.message.content`
    /// is undecodable.
    #[serde(default)]
    pub(crate) output: Option<Output>,
    #[serde(default)]
    pub(crate) stop_reason: Option<StopReason>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) usage: Option<Usage>,
    /// Written by the mock; the client does not read it.
    #[serde(skip_deserializing, skip_serializing_if = "Option::is_none")]
    pub(crate) metrics: Option<Metrics>,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub(crate) struct Output {
    #[serde(default)]
    pub(crate) message: Option<OutputMessage>,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub(crate) struct OutputMessage {
    /// `assistant`; written by the mock, not read.
    #[serde(skip_deserializing, skip_serializing_if = "Option::is_none")]
    pub(crate) role: Option<Role>,
    #[serde(default)]
    pub(crate) content: Option<Vec<ContentBlock>>,
}

open_enum! {
    /// Why the model stopped.
    StopReason {
        EndTurn = "end_turn",
        ToolUse = "tool_use",
        MaxTokens = "max_tokens",
        StopSequence = "stop_sequence",
        GuardrailIntervened = "guardrail_intervened",
        ContentFiltered = "content_filtered",
    }
}

/// Token counts; cached prompt tokens are counted apart.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct Usage {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) input_tokens: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) output_tokens: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) total_tokens: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) cache_read_input_tokens: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) cache_write_input_tokens: Option<u64>,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct Metrics {
    pub(crate) latency_ms: u64,
}

/// An error answer: `{"message": …}` (`Message` from some front ends),
/// the error type in the `x-amzn-errortype` header or, from some front
/// ends, in `__type`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub(crate) struct ErrorResponse {
    #[serde(
        default,
        alias = "Message",
        deserialize_with = "null_as_default",
        skip_serializing_if = "String::is_empty"
    )]
    pub(crate) message: String,
    #[serde(rename = "__type", default, skip_serializing_if = "Option::is_none")]
    pub(crate) kind: Option<String>,
}

/// `contentBlockStart`: sent for tool calls only (a text block begins
/// with its first delta).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct ContentBlockStartEvent {
    pub(crate) content_block_index: u32,
    #[serde(default)]
    pub(crate) start: BlockStart,
}

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct BlockStart {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) tool_use: Option<ToolUseStart>,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct ToolUseStart {
    pub(crate) tool_use_id: String,
    pub(crate) name: String,
}

/// `contentBlockDelta`: text, or a piece of a tool call's input (JSON
/// text); reasoning and citations are not read.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct ContentBlockDeltaEvent {
    pub(crate) content_block_index: u32,
    #[serde(default)]
    pub(crate) delta: BlockDelta,
}

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct BlockDelta {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) text: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) tool_use: Option<ToolUseDelta>,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub(crate) struct ToolUseDelta {
    #[serde(default)]
    pub(crate) input: String,
}

/// `messageStop`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct MessageStopEvent {
    #[serde(default)]
    pub(crate) stop_reason: Option<StopReason>,
}

/// `metadata`, the last event: the usage.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub(crate) struct MetadataEvent {
    #[serde(default)]
    pub(crate) usage: Option<Usage>,
    /// Written by the mock; the client does not read it.
    #[serde(skip_deserializing, skip_serializing_if = "Option::is_none")]
    pub(crate) metrics: Option<Metrics>,
}
