//! The Chat Completions mapping run backwards, for the mock server: a
//! request body read into the neutral request, a completion written as a
//! response body.

use super::arguments_string;
use super::{assistant_content, decode_tool_calls, wire, wire_call};
use crate::mapping::{check_forced, find_call_name};
use crate::script::{pieces, ARGUMENT_PIECE_CHARS, TEXT_PIECE_CHARS};
use baton_core::{AttachmentContent, Completion, CompletionRequest, Message, ToolChoice, ToolSpec};
use serde_json::Value;

/// Reads a Chat Completions request body (JSON) back into a
/// [`CompletionRequest`]: the inverse of what the provider sends, for
/// tests that play the server.
pub fn decode_request(body: &Value) -> Result<CompletionRequest, String> {
    let body = serde_json::from_value(body.clone()).map_err(|e| format!("invalid request: {e}"))?;
    from_wire_request(&body)
}

/// A Chat Completions response body (JSON) for `completion`, for tests
/// that play the server.
pub fn encode_response(completion: &Completion, id: &str) -> Value {
    serde_json::to_value(to_wire_response(completion, id)).unwrap_or_default()
}

/// Reads a Chat Completions request body back into a [`CompletionRequest`]
/// (the inverse of [`super::encode_request`]).
pub(crate) fn from_wire_request(body: &wire::Request) -> Result<CompletionRequest, String> {
    let mut system = Vec::new();
    let mut messages = Vec::new();
    for (i, m) in body.messages.iter().enumerate() {
        match m {
            wire::ChatMessage::System { content } => system.push(wire::text_of(content.as_ref())),
            wire::ChatMessage::User { content } => {
                messages.push(Message::User {
                    content: wire::text_of(content.as_ref()),
                });
                // Image and file parts follow as attachments (the label
                // stays text).
                if let Some(wire::Content::Parts(parts)) = content {
                    messages.extend(parts.iter().filter_map(part_attachment));
                }
            }
            wire::ChatMessage::Assistant {
                content,
                tool_calls,
            } => messages.push(Message::Assistant {
                content: wire::text_of(content.as_ref()),
                tool_calls: decode_tool_calls(tool_calls, &format!("call_m{i}_")),
            }),
            wire::ChatMessage::Tool {
                tool_call_id,
                content,
            } => {
                // The wire format has no tool name; recover it from the call.
                let name = find_call_name(&messages, tool_call_id);
                messages.push(Message::Tool {
                    call_id: tool_call_id.clone(),
                    name,
                    content: wire::text_of(content.as_ref()),
                    is_error: false,
                });
            }
        }
    }
    let tools = body
        .tools
        .iter()
        .map(|t| ToolSpec {
            name: t.function.name.clone(),
            description: t.function.description.clone(),
            input_schema: t.function.parameters.clone(),
        })
        .collect();
    let request = CompletionRequest {
        model: body.model.clone(),
        system: system.join("\n\n"),
        messages,
        tools,
        max_tokens: body.max_tokens.or(body.max_completion_tokens).unwrap_or(0),
        tool_choice: tool_choice(body.tool_choice.as_ref())?,
    };
    check_forced(&request)?;
    Ok(request)
}

/// `tool_choice` as the neutral choice: `"auto"` (or none) and a named
/// function; the other modes are not played by the mock.
fn tool_choice(choice: Option<&wire::ToolChoice>) -> Result<ToolChoice, String> {
    match choice {
        None => Ok(ToolChoice::Auto),
        Some(wire::ToolChoice::Mode(mode)) if mode == "auto" => Ok(ToolChoice::Auto),
        Some(wire::ToolChoice::Mode(mode)) => {
            Err(format!("tool_choice `{mode}` is not supported by the mock"))
        }
        Some(wire::ToolChoice::Named(named)) if named.kind == "function" => {
            Ok(ToolChoice::tool(named.function.name.clone()))
        }
        Some(wire::ToolChoice::Named(named)) => Err(format!(
            "tool_choice of type `{}` is not supported by the mock",
            named.kind
        )),
    }
}

/// An `image_url` or `file` part with a base64 data URL, as an attachment.
fn part_attachment(part: &wire::ContentPart) -> Option<Message> {
    let (name, url, image) = match (&part.image_url, &part.file) {
        (Some(image), _) => (String::new(), &image.url, true),
        (None, Some(file)) => (file.filename.clone(), &file.file_data, false),
        (None, None) => return None,
    };
    let (head, data) = url.strip_prefix("data:")?.split_once(";base64,")?;
    let data_base64 = data.to_owned();
    Some(Message::Attachment {
        name,
        media_type: head.to_owned(),
        content: if image {
            AttachmentContent::Image { data_base64 }
        } else {
            AttachmentContent::Document { data_base64 }
        },
    })
}

/// A Chat Completions response body for `completion` (the inverse of
/// [`super::decode_response`]).
pub(crate) fn to_wire_response(completion: &Completion, id: &str) -> wire::Response {
    let finish_reason = match completion.stop_reason.as_deref() {
        Some("tool_use") | Some("tool_calls") => wire::FinishReason::ToolCalls,
        Some("max_tokens") | Some("length") => wire::FinishReason::Length,
        _ => wire::FinishReason::Stop,
    };
    let message = wire::ResponseMessage {
        role: Some("assistant".to_owned()),
        content: assistant_content(&completion.content, !completion.tool_calls.is_empty()),
        tool_calls: completion.tool_calls.iter().map(wire_call).collect(),
    };
    wire::Response {
        id: Some(id.to_owned()),
        object: Some("chat.completion".to_owned()),
        created: Some(chrono::Utc::now().timestamp()),
        model: completion.model.clone(),
        choices: vec![wire::Choice {
            index: 0,
            message: Some(message),
            finish_reason: Some(finish_reason),
        }],
        usage: Some(wire::Usage {
            prompt_tokens: Some(completion.usage.input_tokens),
            completion_tokens: Some(completion.usage.output_tokens),
            total_tokens: Some(completion.usage.total()),
        }),
    }
}

/// The chunks of a streamed Chat Completions answer for `completion` (the
/// inverse of [`super::stream`]): the role, the text in pieces, each tool
/// call named then its arguments in pieces, the finish reason, and the
/// usage when `include_usage`. The caller sends each as an event and
/// `[DONE]` after them.
pub(crate) fn to_wire_chunks(
    completion: &Completion,
    id: &str,
    include_usage: bool,
) -> Vec<wire::Chunk> {
    let whole = to_wire_response(completion, id);
    let finish_reason = whole
        .choices
        .into_iter()
        .next()
        .and_then(|c| c.finish_reason);
    let chunk = |delta: wire::Delta| wire::Chunk {
        id: Some(id.to_owned()),
        object: Some("chat.completion.chunk".to_owned()),
        model: completion.model.clone(),
        choices: vec![wire::ChunkChoice {
            index: 0,
            delta,
            finish_reason: None,
        }],
        usage: None,
        error: None,
    };
    let text = |t: &str| wire::Delta {
        content: Some(wire::Content::Text(t.to_owned())),
        ..wire::Delta::default()
    };
    let mut chunks = vec![chunk(wire::Delta {
        role: Some("assistant".to_owned()),
        ..text("")
    })];
    chunks.extend(
        pieces(&completion.content, TEXT_PIECE_CHARS)
            .into_iter()
            .map(|t| chunk(text(t))),
    );
    for (i, call) in completion.tool_calls.iter().enumerate() {
        let index = u32::try_from(i).ok();
        let piece = |function| wire::Delta {
            tool_calls: vec![wire::ToolCallDelta {
                index,
                id: None,
                kind: None,
                function: Some(function),
            }],
            ..wire::Delta::default()
        };
        let mut first = piece(wire::FunctionDelta {
            name: Some(call.name.clone()),
            arguments: Some(String::new()),
        });
        first.tool_calls[0].id = Some(call.id.clone());
        first.tool_calls[0].kind = Some("function".to_owned());
        chunks.push(chunk(first));
        let arguments = arguments_string(&call.arguments);
        chunks.extend(
            pieces(&arguments, ARGUMENT_PIECE_CHARS)
                .into_iter()
                .map(|a| {
                    chunk(piece(wire::FunctionDelta {
                        name: None,
                        arguments: Some(a.to_owned()),
                    }))
                }),
        );
    }
    let mut last = chunk(wire::Delta::default());
    last.choices[0].finish_reason = finish_reason;
    chunks.push(last);
    if include_usage {
        let mut usage = chunk(wire::Delta::default());
        usage.choices.clear();
        usage.usage = whole.usage;
        chunks.push(usage);
    }
    chunks
}
