//! The Converse mapping run backwards, for the mock server: a request body
//! read into the neutral request (refused like Converse refuses it when a
//! text block is blank, or tool blocks come without a `toolConfig`), a
//! completion written as a response body.

use super::{text_block, wire};
use crate::mapping::{check_forced, find_call_name};
use crate::script::{pieces, ARGUMENT_PIECE_CHARS, TEXT_PIECE_CHARS};
use aws_smithy_types::event_stream::{Header, HeaderValue, Message as Frame};
use baton_core::{
    AttachmentContent, Completion, CompletionRequest, Message, ToolCall, ToolChoice, ToolSpec,
};
use serde_json::{json, Value};
use wire::{ContentBlock, Role};

/// Reads a Converse request body (JSON), for `model` (from the URL,
/// decoded), back into a [`CompletionRequest`]: the inverse of what the
/// provider sends, for tests that play the server.
pub fn decode_request(body: &Value, model: &str) -> Result<CompletionRequest, String> {
    let body = serde_json::from_value(body.clone()).map_err(|e| format!("invalid request: {e}"))?;
    from_wire_request(&body, model)
}

/// A Converse response body (JSON) for `completion`, for tests that play
/// the server.
pub fn encode_response(completion: &Completion) -> Value {
    serde_json::to_value(to_wire_response(completion)).unwrap_or_default()
}

/// The text of a tool result's content blocks (JSON blocks as JSON text).
fn tool_result_text(content: &[wire::ToolResultBlock]) -> String {
    content
        .iter()
        .filter_map(|b| match b {
            wire::ToolResultBlock::Text(t) => Some(t.clone()),
            wire::ToolResultBlock::Json(j) => Some(j.to_string()),
            wire::ToolResultBlock::Other => None,
        })
        .collect::<Vec<_>>()
        .join("\n")
}

/// A text block's text, refused when blank as Converse refuses it.
fn nonblank(text: &str) -> Result<&str, String> {
    if text.trim().is_empty() {
        Err("a text content block is blank".into())
    } else {
        Ok(text)
    }
}

/// Reads a Converse request body, for `model` (from the URL, decoded),
/// back into a [`CompletionRequest`] (the inverse of
/// [`super::encode_request`]). A user message holding tool results becomes
/// one `Tool` message per result.
pub(crate) fn from_wire_request(
    body: &wire::Request,
    model: &str,
) -> Result<CompletionRequest, String> {
    let tool_blocks = body
        .messages
        .iter()
        .flat_map(|m| &m.content)
        .any(|b| matches!(b, ContentBlock::ToolUse(_) | ContentBlock::ToolResult(_)));
    if tool_blocks && body.tool_config.is_none() {
        // As Converse refuses it.
        return Err("The toolConfig field must be defined when using toolUse and toolResult content blocks.".into());
    }
    let mut messages = Vec::new();
    for m in &body.messages {
        match m.role {
            Role::User => {
                let mut text = Vec::new();
                for b in &m.content {
                    match b {
                        ContentBlock::Text(t) => text.push(nonblank(t)?),
                        ContentBlock::ToolResult(r) => {
                            let name = find_call_name(&messages, &r.tool_use_id);
                            messages.push(Message::Tool {
                                call_id: r.tool_use_id.clone(),
                                name,
                                content: tool_result_text(&r.content),
                                is_error: r.status == Some(wire::ToolResultStatus::Error),
                            });
                        }
                        ContentBlock::Image(i) => {
                            flush_text(&mut messages, &mut text);
                            messages.push(Message::Attachment {
                                name: String::new(),
                                media_type: format!("image/{}", i.format),
                                content: AttachmentContent::Image {
                                    data_base64: i.source.bytes.clone(),
                                },
                            });
                        }
                        ContentBlock::Document(d) => {
                            flush_text(&mut messages, &mut text);
                            messages.push(Message::Attachment {
                                name: d.name.clone(),
                                media_type: format!("application/{}", d.format),
                                content: AttachmentContent::Document {
                                    data_base64: d.source.bytes.clone(),
                                },
                            });
                        }
                        ContentBlock::ToolUse(_) | ContentBlock::Other => {}
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
                for b in &m.content {
                    match b {
                        ContentBlock::Text(t) => text.push_str(nonblank(t)?),
                        ContentBlock::ToolUse(c) => tool_calls.push(ToolCall {
                            id: c.tool_use_id.clone(),
                            name: c.name.clone(),
                            arguments: c.input.clone(),
                        }),
                        ContentBlock::ToolResult(_)
                        | ContentBlock::Image(_)
                        | ContentBlock::Document(_)
                        | ContentBlock::Other => {}
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
        .tool_config
        .iter()
        .flat_map(|c| &c.tools)
        .map(|t| ToolSpec {
            name: t.tool_spec.name.clone(),
            description: t.tool_spec.description.clone().unwrap_or_default(),
            input_schema: t.tool_spec.input_schema.json.clone(),
        })
        .collect();
    let system = body
        .system
        .iter()
        .filter_map(|b| b.text.as_deref())
        .collect::<Vec<_>>()
        .join("\n");
    let choice = body
        .tool_config
        .as_ref()
        .and_then(|c| c.tool_choice.as_ref());
    let tool_choice = match choice {
        Some(wire::ToolChoice {
            tool: Some(tool), ..
        }) => ToolChoice::tool(tool.name.clone()),
        Some(wire::ToolChoice { any: Some(_), .. }) => {
            return Err("toolChoice `any` is not supported by the mock".into())
        }
        _ => ToolChoice::Auto,
    };
    let request = CompletionRequest {
        model: model.to_string(),
        system,
        messages,
        tools,
        max_tokens: body
            .inference_config
            .and_then(|c| c.max_tokens)
            .unwrap_or(0),
        tool_choice,
    };
    check_forced(&request)?;
    Ok(request)
}

/// The text read so far as a user message, before an image or document.
fn flush_text(messages: &mut Vec<Message>, text: &mut Vec<&str>) {
    if !text.is_empty() {
        messages.push(Message::User {
            content: std::mem::take(text).join("\n"),
        });
    }
}

/// A Converse response body for `completion` (the inverse of
/// [`super::decode_response`]).
pub(crate) fn to_wire_response(completion: &Completion) -> wire::Response {
    let mut content = text_block(&completion.content);
    // As the model sent them: no wrapping of arguments that are not an object.
    content.extend(completion.tool_calls.iter().map(|c| {
        ContentBlock::ToolUse(wire::ToolUse {
            tool_use_id: c.id.clone(),
            name: c.name.clone(),
            input: c.arguments.clone(),
        })
    }));
    let stop_reason = match completion.stop_reason.as_deref() {
        Some("tool_use") | Some("tool_calls") => wire::StopReason::ToolUse,
        Some("max_tokens") | Some("length") => wire::StopReason::MaxTokens,
        _ => wire::StopReason::EndTurn,
    };
    let usage = completion.usage;
    wire::Response {
        output: Some(wire::Output {
            message: Some(wire::OutputMessage {
                role: Some(Role::Assistant),
                content: Some(content),
            }),
        }),
        stop_reason: Some(stop_reason),
        usage: Some(wire::Usage {
            input_tokens: Some(usage.input_tokens),
            output_tokens: Some(usage.output_tokens),
            total_tokens: Some(usage.total()),
            cache_read_input_tokens: None,
            cache_write_input_tokens: None,
        }),
        metrics: Some(wire::Metrics { latency_ms: 1 }),
    }
}

/// The events of a `ConverseStream` answer for `completion` (the inverse
/// of [`super::stream`]), each its `:event-type` and JSON payload:
/// `messageStart`, the text in pieces (a text block has no start event),
/// each tool call started then its input in pieces, `messageStop`, and
/// `metadata` with the usage.
pub(crate) fn to_wire_events(completion: &Completion) -> Vec<(&'static str, Value)> {
    let whole = to_wire_response(completion);
    let mut events = vec![("messageStart", json!({"role": "assistant"}))];
    let mut index = 0;
    let stop = |index: u32, events: &mut Vec<(&'static str, Value)>| {
        events.push(("contentBlockStop", json!({ "contentBlockIndex": index })));
    };
    if !completion.content.is_empty() {
        for piece in pieces(&completion.content, TEXT_PIECE_CHARS) {
            events.push((
                "contentBlockDelta",
                json!({"contentBlockIndex": index, "delta": {"text": piece}}),
            ));
        }
        stop(index, &mut events);
        index += 1;
    }
    for call in &completion.tool_calls {
        events.push((
            "contentBlockStart",
            json!({"contentBlockIndex": index, "start": {"toolUse": {"toolUseId": call.id, "name": call.name}}}),
        ));
        let input = call.arguments.to_string();
        for piece in pieces(&input, ARGUMENT_PIECE_CHARS) {
            events.push((
                "contentBlockDelta",
                json!({"contentBlockIndex": index, "delta": {"toolUse": {"input": piece}}}),
            ));
        }
        stop(index, &mut events);
        index += 1;
    }
    let message_stop = wire::MessageStopEvent {
        stop_reason: whole.stop_reason,
    };
    let metadata = wire::MetadataEvent {
        usage: whole.usage,
        metrics: whole.metrics,
    };
    events.push((
        "messageStop",
        serde_json::to_value(message_stop).unwrap_or_default(),
    ));
    events.push((
        "metadata",
        serde_json::to_value(metadata).unwrap_or_default(),
    ));
    events
}

/// One event stream message (an `event` of type `kind`, JSON payload).
pub(crate) fn event_frame(kind: &str, payload: &[u8]) -> Vec<u8> {
    frame(
        vec![
            Header::new(":message-type", HeaderValue::String("event".into())),
            Header::new(":event-type", HeaderValue::String(kind.to_owned().into())),
            Header::new(
                ":content-type",
                HeaderValue::String("application/json".into()),
            ),
        ],
        payload,
    )
}

/// An event stream `exception` message (`throttlingException`, …).
pub(crate) fn exception_frame(kind: &str, message: &str) -> Vec<u8> {
    let payload = json!({ "message": message }).to_string();
    frame(
        vec![
            Header::new(":message-type", HeaderValue::String("exception".into())),
            Header::new(
                ":exception-type",
                HeaderValue::String(kind.to_owned().into()),
            ),
            Header::new(
                ":content-type",
                HeaderValue::String("application/json".into()),
            ),
        ],
        payload.as_bytes(),
    )
}

fn frame(headers: Vec<Header>, payload: &[u8]) -> Vec<u8> {
    let message = Frame::new_from_parts(headers, payload.to_vec());
    let mut out = Vec::new();
    // Fails only for headers or payloads past the format's limits.
    if let Err(e) = aws_smithy_eventstream::frame::write_message_to(&message, &mut out) {
        tracing::warn!(error = %e, "mock: cannot frame an event");
        out.clear();
    }
    out
}
