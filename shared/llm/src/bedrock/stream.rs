//! Converse streamed (`ConverseStream`): the answer comes in the AWS event
//! stream framing (`application/vnd.amazon.eventstream`: binary messages,
//! each with a length prelude, headers, a JSON payload and CRC32 checks,
//! decoded by `aws-smithy-eventstream`). Each message's `:message-type`
//! header says what it is: an `event` named by `:event-type`
//! (`messageStart`, `contentBlockStart` for a tool call,
//! `contentBlockDelta` with text or a piece of a tool call's input,
//! `contentBlockStop`, `messageStop` with the stop reason, then `metadata`
//! with the usage), an `exception` named by `:exception-type`
//! (`throttlingException`, `modelStreamErrorException`, …), or an `error`.
//!
//! The blocks are put back together into the [`wire::Response`] the same
//! answer would have had unstreamed, and read by the same
//! [`super::decode_response`], so both ways give the same [`Completion`].

use super::{decode_response, map_error, wire};
use crate::http::{self, Chunks};
use aws_smithy_eventstream::frame::{DecodedFrame, MessageFrameDecoder};
use aws_smithy_types::event_stream::{HeaderValue, Message};
use baton_core::{Completion, DeltaSink, LlmError};
use bytes::BytesMut;
use reqwest::header::HeaderMap;
use serde_json::Value;
use wire::ContentBlock;

/// Reads a streamed answer, telling `sink` its text as it comes.
pub(super) async fn read(mut chunks: Chunks, sink: &dyn DeltaSink) -> Result<Completion, LlmError> {
    let mut frames = Frames::default();
    let mut answer = Accumulator::default();
    while let Some(bytes) = chunks.next().await? {
        frames.push(&bytes);
        while let Some(message) = frames.next()? {
            if answer.message(&message, sink)? {
                return decode_response(&answer.response());
            }
        }
    }
    Err(http::cut_short())
}

/// Event stream messages out of bytes that arrive in arbitrary pieces.
#[derive(Debug, Default)]
pub(super) struct Frames {
    buffer: BytesMut,
    decoder: MessageFrameDecoder,
}

impl Frames {
    pub(super) fn push(&mut self, bytes: &[u8]) {
        self.buffer.extend_from_slice(bytes);
    }

    /// The next whole message, `None` until more bytes come. A frame that
    /// fails its checks (length, CRC) is garbled, not retried.
    pub(super) fn next(&mut self) -> Result<Option<Message>, LlmError> {
        match self.decoder.decode_frame(&mut self.buffer) {
            Ok(DecodedFrame::Complete(message)) => Ok(Some(message)),
            Ok(DecodedFrame::Incomplete) => Ok(None),
            Err(e) => Err(LlmError::Decode(format!(
                "invalid event stream frame: {}",
                http::describe(&e)
            ))),
        }
    }
}

/// A string header of `message`.
fn header<'a>(message: &'a Message, name: &str) -> Option<&'a str> {
    message
        .headers()
        .iter()
        .find(|h| h.name().as_str() == name)
        .and_then(|h| match h.value() {
            HeaderValue::String(s) => Some(s.as_str()),
            _ => None,
        })
}

/// The answer so far.
#[derive(Debug, Default)]
pub(super) struct Accumulator {
    /// The blocks by index, in the order they began.
    blocks: Vec<(u32, Partial)>,
    stop: Option<wire::MessageStopEvent>,
    metadata: Option<wire::MetadataEvent>,
}

/// A block whose deltas are still coming.
#[derive(Debug)]
enum Partial {
    Text(String),
    ToolUse {
        id: String,
        name: String,
        /// The input's JSON text, from the deltas.
        json: String,
    },
    /// Reasoning and the like: not for us.
    Other,
}

impl Accumulator {
    /// Reads one message; `Ok(true)` once `messageStop` and `metadata`
    /// both came (the answer and its usage).
    pub(super) fn message(
        &mut self,
        message: &Message,
        sink: &dyn DeltaSink,
    ) -> Result<bool, LlmError> {
        match header(message, ":message-type") {
            Some("event") => {}
            Some("exception") => {
                let kind = header(message, ":exception-type").unwrap_or_default();
                return Err(stream_error(kind, message.payload()));
            }
            Some("error") => {
                let kind = header(message, ":error-code").unwrap_or_default();
                let text = header(message, ":error-message").unwrap_or_default();
                let body = serde_json::json!({ "message": text }).to_string();
                return Err(stream_error(kind, body.as_bytes()));
            }
            other => {
                return Err(LlmError::Decode(format!(
                    "event stream message of unknown type {other:?}"
                )))
            }
        }
        let payload = message.payload();
        match header(message, ":event-type").unwrap_or_default() {
            "contentBlockStart" => {
                let event: wire::ContentBlockStartEvent = http::decode_json(payload)?;
                let partial = match event.start.tool_use {
                    Some(start) => Partial::ToolUse {
                        id: start.tool_use_id,
                        name: start.name,
                        json: String::new(),
                    },
                    None => Partial::Other,
                };
                self.blocks.push((event.content_block_index, partial));
            }
            "contentBlockDelta" => {
                let event: wire::ContentBlockDeltaEvent = http::decode_json(payload)?;
                self.delta(event, sink);
            }
            "messageStop" => self.stop = Some(http::decode_json(payload)?),
            "metadata" => self.metadata = Some(http::decode_json(payload)?),
            // messageStart, contentBlockStop, and events added since.
            _ => {}
        }
        Ok(self.stop.is_some() && self.metadata.is_some())
    }

    fn delta(&mut self, event: wire::ContentBlockDeltaEvent, sink: &dyn DeltaSink) {
        let index = event.content_block_index;
        let at = self.blocks.iter().rposition(|(i, _)| *i == index);
        let at = match (at, &event.delta) {
            (Some(at), _) => at,
            // A text block begins with its first delta.
            (None, wire::BlockDelta { text: Some(_), .. }) => {
                self.blocks.push((index, Partial::Text(String::new())));
                self.blocks.len() - 1
            }
            (None, _) => {
                self.blocks.push((index, Partial::Other));
                return;
            }
        };
        match (&mut self.blocks[at].1, event.delta) {
            (
                Partial::Text(text),
                wire::BlockDelta {
                    text: Some(piece), ..
                },
            ) if !piece.is_empty() => {
                sink.text(&piece);
                text.push_str(&piece);
            }
            (
                Partial::ToolUse { json, .. },
                wire::BlockDelta {
                    tool_use: Some(piece),
                    ..
                },
            ) => json.push_str(&piece.input),
            _ => {}
        }
    }

    /// The answer as the unstreamed response would have had it.
    pub(super) fn response(self) -> wire::Response {
        let content = self
            .blocks
            .into_iter()
            .map(|(_, partial)| match partial {
                Partial::Text(text) => ContentBlock::Text(text),
                Partial::ToolUse { id, name, json } => ContentBlock::ToolUse(wire::ToolUse {
                    tool_use_id: id,
                    name,
                    input: input(&json),
                }),
                Partial::Other => ContentBlock::Other,
            })
            .collect();
        wire::Response {
            output: Some(wire::Output {
                message: Some(wire::OutputMessage {
                    role: None,
                    content: Some(content),
                }),
            }),
            stop_reason: self.stop.and_then(|s| s.stop_reason),
            usage: self.metadata.and_then(|m| m.usage),
            metrics: None,
        }
    }
}

/// A tool call's input from its JSON text (`{}` when there was none),
/// kept as text when it is not JSON so the tool, not the provider,
/// reports the problem.
fn input(json: &str) -> Value {
    if json.trim().is_empty() {
        return serde_json::json!({});
    }
    serde_json::from_str(json).unwrap_or_else(|_| Value::String(json.to_owned()))
}

/// An exception sent inside the stream (`throttlingException`, …), mapped
/// as [`map_error`] maps the same exception answered with the status AWS
/// gives it. `modelStreamErrorException` (the model failed mid-answer)
/// is a server error: AWS says to retry it.
fn stream_error(kind: &str, payload: &[u8]) -> LlmError {
    let mut name = String::with_capacity(kind.len());
    let mut chars = kind.chars();
    if let Some(first) = chars.next() {
        name.extend(first.to_uppercase());
        name.push_str(chars.as_str());
    }
    let status = match name.as_str() {
        "ThrottlingException" => 429,
        "ValidationException" => 400,
        "AccessDeniedException" => 403,
        "ResourceNotFoundException" => 404,
        "ModelTimeoutException" => 408,
        "ServiceUnavailableException" => 503,
        _ => 500,
    };
    let mut headers = HeaderMap::new();
    if let Ok(value) = reqwest::header::HeaderValue::from_str(&name) {
        headers.insert("x-amzn-errortype", value);
    }
    map_error(status, &headers, payload)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::bedrock::{
        encode_response, event_frame, exception_frame, to_wire_events, BedrockProvider,
    };
    use crate::fixtures::Deltas;
    use crate::mock::MockLlmServer;
    use baton_core::{LlmProvider, ToolCall, Usage};
    use serde_json::json;
    use wiremock::matchers::{method, path};
    use wiremock::{Mock, MockServer, ResponseTemplate};

    /// An answer as ConverseStream sends it: reasoning (ignored), text in
    /// pieces with no block start, a tool call with its input in pieces.
    fn events() -> Vec<(&'static str, Value)> {
        vec![
            ("messageStart", json!({"role": "assistant", "p": "abcdef"})),
            (
                "contentBlockDelta",
                json!({"contentBlockIndex": 0, "delta": {"reasoningContent": {"text": "hmm"}}}),
            ),
            ("contentBlockStop", json!({"contentBlockIndex": 0})),
            (
                "contentBlockDelta",
                json!({"contentBlockIndex": 1, "delta": {"text": "It is "}}),
            ),
            (
                "contentBlockDelta",
                json!({"contentBlockIndex": 1, "delta": {"text": "noon 😀."}}),
            ),
            ("contentBlockStop", json!({"contentBlockIndex": 1})),
            (
                "contentBlockStart",
                json!({"contentBlockIndex": 2, "start": {"toolUse": {"toolUseId": "tooluse_9", "name": "lookup"}}}),
            ),
            (
                "contentBlockDelta",
                json!({"contentBlockIndex": 2, "delta": {"toolUse": {"input": "{\"q\": \"é"}}}),
            ),
            (
                "contentBlockDelta",
                json!({"contentBlockIndex": 2, "delta": {"toolUse": {"input": "x\"}"}}}),
            ),
            ("contentBlockStop", json!({"contentBlockIndex": 2})),
            (
                "contentBlockStart",
                json!({"contentBlockIndex": 3, "start": {"toolUse": {"toolUseId": "tooluse_10", "name": "now"}}}),
            ),
            ("contentBlockStop", json!({"contentBlockIndex": 3})),
            ("messageStop", json!({"stopReason": "tool_use"})),
            (
                "metadata",
                json!({"usage": {"inputTokens": 30, "cacheReadInputTokens": 10, "outputTokens": 5, "totalTokens": 45}, "metrics": {"latencyMs": 120}}),
            ),
        ]
    }

    fn frames_of(events: &[(&str, Value)]) -> Vec<u8> {
        events
            .iter()
            .flat_map(|(kind, payload)| event_frame(kind, payload.to_string().as_bytes()))
            .collect()
    }

    fn stream() -> Vec<u8> {
        frames_of(&events())
    }

    /// The same answer unstreamed.
    fn whole() -> Completion {
        Completion {
            content: "It is noon 😀.".into(),
            tool_calls: vec![
                ToolCall {
                    id: "tooluse_9".into(),
                    name: "lookup".into(),
                    arguments: json!({"q": "éx"}),
                },
                ToolCall {
                    id: "tooluse_10".into(),
                    name: "now".into(),
                    arguments: json!({}),
                },
            ],
            usage: Usage {
                input_tokens: 40,
                output_tokens: 5,
            },
            stop_reason: Some("tool_use".into()),
            model: String::new(),
        }
    }

    /// Reads `body` fed in pieces of `size` bytes; whether it ended.
    fn read_in_pieces(
        body: &[u8],
        size: usize,
        sink: &Deltas,
    ) -> (Result<Completion, LlmError>, bool) {
        let mut frames = Frames::default();
        let mut answer = Accumulator::default();
        for piece in body.chunks(size) {
            frames.push(piece);
            loop {
                match frames.next() {
                    Ok(Some(message)) => match answer.message(&message, sink) {
                        Ok(true) => return (decode_response(&answer.response()), true),
                        Ok(false) => {}
                        Err(e) => return (Err(e), false),
                    },
                    Ok(None) => break,
                    Err(e) => return (Err(e), false),
                }
            }
        }
        (decode_response(&answer.response()), false)
    }

    #[test]
    fn frames_make_the_unstreamed_answer_however_the_bytes_are_cut() {
        let body = stream();
        for size in [1, 2, 5, 13, 100, body.len()] {
            let sink = Deltas::default();
            let (completion, done) = read_in_pieces(&body, size, &sink);
            assert!(done);
            assert_eq!(completion.unwrap(), whole(), "pieces of {size}");
            assert_eq!(sink.pieces(), ["It is ", "noon 😀."]);
        }
    }

    #[test]
    fn the_mock_stream_reads_back_as_the_mock_answer() {
        let mut completion = whole();
        completion.content =
            "A longer answer, with ünïcödé 😀 and more than twenty characters.".into();
        let unstreamed =
            decode_response(&serde_json::from_value(encode_response(&completion)).unwrap())
                .unwrap();
        let body = frames_of(&to_wire_events(&completion));
        let sink = Deltas::default();
        let (streamed, done) = read_in_pieces(&body, 7, &sink);
        assert!(done);
        assert_eq!(streamed.unwrap(), unstreamed);
        assert_eq!(sink.joined(), completion.content);
        assert!(sink.pieces().len() > 2, "{:?}", sink.pieces());
    }

    #[test]
    fn a_garbled_frame_fails_its_crc() {
        let mut body = stream();
        // A byte of the first frame's payload.
        body[40] ^= 0x20;
        let (result, _) = read_in_pieces(&body, 16, &Deltas::default());
        match result {
            Err(LlmError::Decode(message)) => {
                assert!(message.contains("event stream"), "{message}")
            }
            other => panic!("expected a decode error, got {other:?}"),
        }
    }

    #[test]
    fn exceptions_in_the_stream_map_to_their_kinds() {
        let cases = [
            (
                "throttlingException",
                LlmError::RateLimited { retry_after: None },
            ),
            (
                "serviceUnavailableException",
                LlmError::Overloaded { retry_after: None },
            ),
            (
                "modelStreamErrorException",
                LlmError::Server {
                    status: 500,
                    message: "ModelStreamErrorException: boom".into(),
                    retry_after: None,
                },
            ),
            (
                "validationException",
                LlmError::Rejected {
                    status: 400,
                    message: "ValidationException: boom".into(),
                },
            ),
        ];
        for (kind, expected) in cases {
            // The text, then the exception.
            let mut bytes = frames_of(&events()[..6]);
            bytes.extend(exception_frame(kind, "boom"));
            let sink = Deltas::default();
            let (result, _) = read_in_pieces(&bytes, 9, &sink);
            assert_eq!(result, Err(expected), "{kind}");
            assert_eq!(sink.joined(), "It is noon 😀.");
        }
    }

    #[tokio::test]
    async fn a_stream_cut_short_is_transient() {
        let server = MockServer::start().await;
        let body = stream();
        let cut = body[..body.len() - 10].to_vec();
        Mock::given(method("POST"))
            .and(path("/model/m.test-v1%3A0/converse-stream"))
            .respond_with(
                ResponseTemplate::new(200).set_body_raw(cut, "application/vnd.amazon.eventstream"),
            )
            .mount(&server)
            .await;
        let p = BedrockProvider::new(
            "eu-west-3",
            Some(&server.uri()),
            MockLlmServer::bedrock_credentials(),
            "m.test-v1:0",
        )
        .unwrap();
        let err = p
            .complete_streaming(&crate::fixtures::conversation("t"), &Deltas::default())
            .await
            .unwrap_err();
        assert!(
            matches!(err, LlmError::Transport(_)) && err.is_retryable(),
            "{err:?}"
        );
    }
}
