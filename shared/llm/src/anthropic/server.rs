//! The Messages mapping run backwards, for the mock server: a request body
//! read into the neutral request, a completion written as a response body.

use super::{text_block, wire};
use crate::mapping::{check_forced, find_call_name};
use crate::script::{pieces, ARGUMENT_PIECE_CHARS, TEXT_PIECE_CHARS};
use baton_core::{
    AttachmentContent, Completion, CompletionRequest, Message, ToolCall, ToolChoice, ToolSpec,
};
use serde_json::Value;
use wire::{Block, BlockDelta, Content, Role, StreamEvent};

/// Reads a Messages request body (JSON) back into a [`CompletionRequest`]:
/// the inverse of what the provider sends, for tests that play the server.
pub fn decode_request(body: &Value) -> Result<CompletionRequest, String> {
    let body = serde_json::from_value(body.clone()).map_err(|e| format!("invalid request: {e}"))?;
    from_wire_request(&body)
}

/// A Messages response body (JSON) for `completion`, for tests that play
/// the server.
pub fn encode_response(completion: &Completion, id: &str) -> Value {
    serde_json::to_value(to_wire_response(completion, id)).unwrap_or_default()
}

/// Reads a Messages request body back into a [`CompletionRequest`] (the
/// inverse of [`super::encode_request`]). A user message holding tool
/// results becomes one `Tool` message per result.
pub(crate) fn from_wire_request(body: &wire::Request) -> Result<CompletionRequest, String> {
    let mut messages = Vec::new();
    for m in &body.messages {
        let blocks = match &m.content {
            Content::Text(s) => vec![Block::Text { text: s.clone() }],
            Content::Blocks(blocks) => blocks.clone(),
        };
        match m.role {
            Role::User => {
                let mut text = Vec::new();
                for b in blocks {
                    match b {
                        Block::Text { text: t } => text.push(t),
                        Block::ToolResult {
                            tool_use_id,
                            content,
                            is_error,
                        } => {
                            let name = find_call_name(&messages, &tool_use_id);
                            messages.push(Message::Tool {
                                call_id: tool_use_id,
                                name,
                                content: content.as_ref().map(Content::text).unwrap_or_default(),
                                is_error,
                            });
                        }
                        Block::Image { source } => {
                            flush_text(&mut messages, &mut text);
                            messages.push(Message::Attachment {
                                name: String::new(),
                                media_type: source.media_type,
                                content: AttachmentContent::Image {
                                    data_base64: source.data,
                                },
                            });
                        }
                        Block::Document { source, title } => {
                            flush_text(&mut messages, &mut text);
                            messages.push(Message::Attachment {
                                name: title.unwrap_or_default(),
                                media_type: source.media_type,
                                content: AttachmentContent::Document {
                                    data_base64: source.data,
                                },
                            });
                        }
                        Block::ToolUse { .. } | Block::Other => {}
                    }
                }
                if !text.is_empty() {
                    messages.push(Message::User {
                        content: text.join("\n"),
                    });
                }
            }
            Role::Assistant => {
                let mut text = String::new();
                let mut tool_calls = Vec::new();
                for b in blocks {
                    match b {
                        Block::Text { text: t } => text.push_str(&t),
                        Block::ToolUse { id, name, input } => tool_calls.push(ToolCall {
                            id,
                            name,
                            arguments: input,
                        }),
                        Block::ToolResult { .. }
                        | Block::Image { .. }
                        | Block::Document { .. }
                        | Block::Other => {}
                    }
                }
                messages.push(Message::Assistant {
                    content: text,
                    tool_calls,
                });
            }
        }
    }
    let tools = body
        .tools
        .iter()
        .map(|t| ToolSpec {
            name: t.name.clone(),
            description: t.description.clone(),
            input_schema: t.input_schema.clone(),
        })
        .collect();
    let tool_choice = match &body.tool_choice {
        None | Some(wire::ToolChoice::Auto) => ToolChoice::Auto,
        Some(wire::ToolChoice::Tool { name }) => ToolChoice::tool(name.clone()),
        Some(other) => {
            return Err(format!(
                "tool_choice {other:?} is not supported by the mock"
            ))
        }
    };
    let request = CompletionRequest {
        model: body.model.clone(),
        system: body.system.as_ref().map(Content::text).unwrap_or_default(),
        messages,
        tools,
        max_tokens: body.max_tokens,
        tool_choice,
    };
    check_forced(&request)?;
    Ok(request)
}

/// The text read so far as a user message, before an image or document.
fn flush_text(messages: &mut Vec<Message>, text: &mut Vec<String>) {
    if !text.is_empty() {
        messages.push(Message::User {
            content: std::mem::take(text).join("\n"),
        });
    }
}

/// A Messages response body for `completion` (the inverse of
/// [`super::decode_response`]).
pub(crate) fn to_wire_response(completion: &Completion, id: &str) -> wire::Response {
    let mut content = text_block(&completion.content);
    // As the model sent them: no wrapping of arguments that are not an object.
    content.extend(completion.tool_calls.iter().map(|c| Block::ToolUse {
        id: c.id.clone(),
        name: c.name.clone(),
        input: c.arguments.clone(),
    }));
    let stop_reason = match completion.stop_reason.as_deref() {
        Some("tool_use") | Some("tool_calls") => wire::StopReason::ToolUse,
        Some("max_tokens") | Some("length") => wire::StopReason::MaxTokens,
        _ => wire::StopReason::EndTurn,
    };
    wire::Response {
        id: Some(id.to_owned()),
        kind: Some("message".to_owned()),
        role: Some(Role::Assistant),
        model: completion.model.clone(),
        content: Some(content),
        stop_reason: Some(stop_reason),
        stop_sequence: None,
        usage: Some(wire::Usage {
            input_tokens: Some(completion.usage.input_tokens),
            output_tokens: Some(completion.usage.output_tokens),
            cache_creation_input_tokens: None,
            cache_read_input_tokens: None,
        }),
    }
}

/// The events of a streamed Messages answer for `completion` (the inverse
/// of [`super::stream`]): `message_start` with the input usage, a text
/// block in pieces, each tool call with its input in pieces,
/// `message_delta` with the stop reason and output usage, `message_stop`.
pub(crate) fn to_wire_events(completion: &Completion, id: &str) -> Vec<StreamEvent> {
    let whole = to_wire_response(completion, id);
    let usage = whole.usage.unwrap_or_default();
    let start = wire::Response {
        content: Some(Vec::new()),
        stop_reason: None,
        usage: Some(wire::Usage {
            output_tokens: Some(1),
            ..usage
        }),
        ..whole.clone()
    };
    let mut events = vec![
        StreamEvent::MessageStart { message: start },
        StreamEvent::Ping,
    ];
    let mut index = 0;
    if !completion.content.is_empty() {
        events.push(StreamEvent::ContentBlockStart {
            index,
            content_block: Block::Text {
                text: String::new(),
            },
        });
        events.extend(
            pieces(&completion.content, TEXT_PIECE_CHARS)
                .into_iter()
                .map(|text| StreamEvent::ContentBlockDelta {
                    index,
                    delta: BlockDelta::TextDelta {
                        text: text.to_owned(),
                    },
                }),
        );
        events.push(StreamEvent::ContentBlockStop { index });
        index += 1;
    }
    for call in &completion.tool_calls {
        events.push(StreamEvent::ContentBlockStart {
            index,
            content_block: Block::ToolUse {
                id: call.id.clone(),
                name: call.name.clone(),
                input: serde_json::json!({}),
            },
        });
        let input = call.arguments.to_string();
        events.extend(
            pieces(&input, ARGUMENT_PIECE_CHARS)
                .into_iter()
                .map(|json| StreamEvent::ContentBlockDelta {
                    index,
                    delta: BlockDelta::InputJsonDelta {
                        partial_json: json.to_owned(),
                    },
                }),
        );
        events.push(StreamEvent::ContentBlockStop { index });
        index += 1;
    }
    events.push(StreamEvent::MessageDelta {
        delta: wire::MessageDelta {
            stop_reason: whole.stop_reason,
            stop_sequence: None,
        },
        usage: Some(wire::Usage {
            input_tokens: None,
            output_tokens: usage.output_tokens,
            cache_creation_input_tokens: None,
            cache_read_input_tokens: None,
        }),
    });
    events.push(StreamEvent::MessageStop);
    events
}
