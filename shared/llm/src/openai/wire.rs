//! The Chat Completions wire format: the request, response and error
//! bodies, as the client sends and reads them and the mock server reads and
//! sends them.
//!
//! Absent and `null` differ on the wire, so optional fields are skipped
//! when empty unless the format wants an explicit `null` (an assistant
//! message's `content` next to tool calls). Responses come from many
//! servers that copy the API loosely: unknown fields are ignored, `null`
//! reads like absent, and fields the client does not read are not parsed.

use crate::mapping::{empty_object, null_as_default, open_enum};
use serde::{Deserialize, Serialize};
use serde_json::Value;

/// `POST /chat/completions`. The token limit goes in one of two fields
/// ([`super::MaxTokensField`]).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub(crate) struct Request {
    pub(crate) model: String,
    pub(crate) messages: Vec<ChatMessage>,
    #[serde(
        default,
        deserialize_with = "null_as_default",
        skip_serializing_if = "Vec::is_empty"
    )]
    pub(crate) tools: Vec<Tool>,
    /// Left out unless the request forces a tool.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) tool_choice: Option<ToolChoice>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) max_tokens: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) max_completion_tokens: Option<u32>,
    /// `true` asks for the answer as server-sent events of [`Chunk`]s.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) stream: Option<bool>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) stream_options: Option<StreamOptions>,
}

/// `tool_choice`: a mode (`"auto"`, `"none"`, `"required"`), or
/// `{"type": "function", "function": {"name": …}}` to force that function.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(untagged)]
pub(crate) enum ToolChoice {
    Mode(String),
    Named(NamedToolChoice),
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub(crate) struct NamedToolChoice {
    #[serde(rename = "type", default = "function")]
    pub(crate) kind: String,
    pub(crate) function: FunctionName,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub(crate) struct FunctionName {
    pub(crate) name: String,
}

impl ToolChoice {
    /// Forces a call of the function `name`.
    pub(crate) fn function(name: &str) -> Self {
        ToolChoice::Named(NamedToolChoice {
            kind: function(),
            function: FunctionName {
                name: name.to_owned(),
            },
        })
    }
}

/// `{"include_usage": true}`: a last chunk, with no choices, carries the
/// usage (without it a stream reports none).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct StreamOptions {
    #[serde(default)]
    pub(crate) include_usage: bool,
}

/// One message, tagged by its role.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "role", rename_all = "snake_case")]
pub(crate) enum ChatMessage {
    /// Newer models call it `developer`; both are read.
    #[serde(alias = "developer")]
    System {
        #[serde(default)]
        content: Option<Content>,
    },
    User {
        #[serde(default)]
        content: Option<Content>,
    },
    /// `content` is `null` (sent, not left out) when the message is only
    /// tool calls.
    Assistant {
        #[serde(default)]
        content: Option<Content>,
        #[serde(
            default,
            deserialize_with = "null_as_default",
            skip_serializing_if = "Vec::is_empty"
        )]
        tool_calls: Vec<ToolCall>,
    },
    Tool {
        tool_call_id: String,
        #[serde(default)]
        content: Option<Content>,
    },
}

/// Message text: a string, or (some servers) an array of parts.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(untagged)]
pub(crate) enum Content {
    Text(String),
    Parts(Vec<ContentPart>),
}

/// One part of an array content: text, or (in requests) an image.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub(crate) struct ContentPart {
    #[serde(rename = "type", default, skip_serializing_if = "Option::is_none")]
    pub(crate) kind: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) text: Option<String>,
    /// `{"url": "data:image/png;base64,…"}` in an `image_url` part.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) image_url: Option<ImageUrl>,
    /// `{"filename", "file_data": "data:application/pdf;base64,…"}` in a
    /// `file` part (a PDF).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) file: Option<FileData>,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub(crate) struct FileData {
    #[serde(default)]
    pub(crate) filename: String,
    pub(crate) file_data: String,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub(crate) struct ImageUrl {
    pub(crate) url: String,
}

impl ContentPart {
    pub(crate) fn text(text: String) -> Self {
        ContentPart {
            kind: Some("text".to_owned()),
            text: Some(text),
            image_url: None,
            file: None,
        }
    }

    /// An image as a data URL.
    pub(crate) fn image(media_type: &str, data_base64: &str) -> Self {
        ContentPart {
            kind: Some("image_url".to_owned()),
            text: None,
            image_url: Some(ImageUrl {
                url: format!("data:{media_type};base64,{data_base64}"),
            }),
            file: None,
        }
    }

    /// A file (a PDF) as a data URL, the way Chat Completions takes files.
    pub(crate) fn file(name: &str, media_type: &str, data_base64: &str) -> Self {
        ContentPart {
            kind: Some("file".to_owned()),
            text: None,
            image_url: None,
            file: Some(FileData {
                filename: name.to_owned(),
                file_data: format!("data:{media_type};base64,{data_base64}"),
            }),
        }
    }
}

impl Content {
    /// The text: the string, or the text parts joined.
    pub(crate) fn text(&self) -> String {
        match self {
            Content::Text(s) => s.clone(),
            Content::Parts(parts) => parts.iter().filter_map(|p| p.text.as_deref()).collect(),
        }
    }
}

/// The text of an optional content (`null` or absent is empty).
pub(crate) fn text_of(content: Option<&Content>) -> String {
    content.map(Content::text).unwrap_or_default()
}

fn function() -> String {
    "function".to_owned()
}

/// A tool call, in an assistant message or a response.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub(crate) struct ToolCall {
    /// A few servers omit it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) id: Option<String>,
    #[serde(rename = "type", default = "function")]
    pub(crate) kind: String,
    pub(crate) function: FunctionCall,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub(crate) struct FunctionCall {
    pub(crate) name: String,
    /// A JSON string on the wire; some servers send the object decoded,
    /// or nothing.
    #[serde(default)]
    pub(crate) arguments: Value,
}

/// A tool offered to the model.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub(crate) struct Tool {
    #[serde(rename = "type", default = "function")]
    pub(crate) kind: String,
    pub(crate) function: FunctionSpec,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub(crate) struct FunctionSpec {
    pub(crate) name: String,
    #[serde(default)]
    pub(crate) description: String,
    /// JSON Schema of the arguments object.
    #[serde(default = "empty_object")]
    pub(crate) parameters: Value,
}

/// The answer to a request.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub(crate) struct Response {
    /// Written by the mock; the client does not read it.
    #[serde(skip_deserializing, skip_serializing_if = "Option::is_none")]
    pub(crate) id: Option<String>,
    /// `chat.completion`; written by the mock, not read.
    #[serde(skip_deserializing, skip_serializing_if = "Option::is_none")]
    pub(crate) object: Option<String>,
    /// Unix seconds; written by the mock, not read.
    #[serde(skip_deserializing, skip_serializing_if = "Option::is_none")]
    pub(crate) created: Option<i64>,
    #[serde(default, deserialize_with = "null_as_default")]
    pub(crate) model: String,
    #[serde(default, deserialize_with = "null_as_default")]
    pub(crate) choices: Vec<Choice>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) usage: Option<Usage>,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub(crate) struct Choice {
    /// Written by the mock, not read.
    #[serde(skip_deserializing)]
    pub(crate) index: u32,
    #[serde(default)]
    pub(crate) message: Option<ResponseMessage>,
    #[serde(default)]
    pub(crate) finish_reason: Option<FinishReason>,
}

/// The assistant message of a choice.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub(crate) struct ResponseMessage {
    /// `assistant`; written by the mock, not read.
    #[serde(skip_deserializing, skip_serializing_if = "Option::is_none")]
    pub(crate) role: Option<String>,
    /// `null` (sent) when the answer is only tool calls.
    #[serde(default)]
    pub(crate) content: Option<Content>,
    #[serde(
        default,
        deserialize_with = "null_as_default",
        skip_serializing_if = "Vec::is_empty"
    )]
    pub(crate) tool_calls: Vec<ToolCall>,
}

open_enum! {
    /// Why the model stopped.
    FinishReason {
        Stop = "stop",
        Length = "length",
        ToolCalls = "tool_calls",
        ContentFilter = "content_filter",
    }
}

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct Usage {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) prompt_tokens: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) completion_tokens: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) total_tokens: Option<u64>,
}

/// An error answer: `{"error": {"message", "type", "code"}}`. (Some
/// servers put the fields at the top level or send a bare string; the
/// message is read by [`crate::http::error_text`], which knows them all.)
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub(crate) struct ErrorResponse {
    pub(crate) error: ErrorDetail,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub(crate) struct ErrorDetail {
    #[serde(default, deserialize_with = "null_as_default")]
    pub(crate) message: String,
    #[serde(rename = "type", default)]
    pub(crate) kind: Option<String>,
    /// A string (`context_length_exceeded`) at OpenAI, a number or
    /// nothing at some servers; sent as `null` when there is none.
    #[serde(default)]
    pub(crate) code: Option<Value>,
}

impl ErrorDetail {
    /// The code, when it is a string.
    pub(crate) fn code(&self) -> Option<&str> {
        self.code.as_ref().and_then(Value::as_str)
    }
}

/// One streamed piece of an answer (`chat.completion.chunk`), the data of
/// one server-sent event.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub(crate) struct Chunk {
    /// Written by the mock; the client does not read it.
    #[serde(skip_deserializing, skip_serializing_if = "Option::is_none")]
    pub(crate) id: Option<String>,
    /// `chat.completion.chunk`; written by the mock, not read.
    #[serde(skip_deserializing, skip_serializing_if = "Option::is_none")]
    pub(crate) object: Option<String>,
    #[serde(default, deserialize_with = "null_as_default")]
    pub(crate) model: String,
    #[serde(default, deserialize_with = "null_as_default")]
    pub(crate) choices: Vec<ChunkChoice>,
    /// On the last chunk only, when asked for; `null` before.
    #[serde(default)]
    pub(crate) usage: Option<Usage>,
    /// An error reported mid-stream (`{"error": {"message", "type"}}`),
    /// which some servers send instead of a chunk.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) error: Option<Value>,
}

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub(crate) struct ChunkChoice {
    #[serde(default)]
    pub(crate) index: u32,
    #[serde(default, deserialize_with = "null_as_default")]
    pub(crate) delta: Delta,
    #[serde(default)]
    pub(crate) finish_reason: Option<FinishReason>,
}

/// What a chunk adds to the message.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub(crate) struct Delta {
    /// `assistant` on the first chunk; written by the mock, not read.
    #[serde(skip_deserializing, skip_serializing_if = "Option::is_none")]
    pub(crate) role: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) content: Option<Content>,
    #[serde(
        default,
        deserialize_with = "null_as_default",
        skip_serializing_if = "Vec::is_empty"
    )]
    pub(crate) tool_calls: Vec<ToolCallDelta>,
}

/// A piece of a tool call: the first names it (`id`, `function.name`),
/// the next ones add to its `function.arguments`.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub(crate) struct ToolCallDelta {
    /// Which call of the message; a few servers leave it out.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) index: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) id: Option<String>,
    #[serde(rename = "type", default, skip_serializing_if = "Option::is_none")]
    pub(crate) kind: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) function: Option<FunctionDelta>,
}

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub(crate) struct FunctionDelta {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) name: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) arguments: Option<String>,
}
