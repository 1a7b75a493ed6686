//! Messages streamed (`"stream": true`): server-sent events named by their
//! type. `message_start` brings the message (model, input usage) without
//! content; each content block comes as `content_block_start`, deltas
//! (`text_delta`, or `input_json_delta` pieces of a tool call's input) and
//! `content_block_stop`; `message_delta` brings the stop reason and the
//! output usage; `message_stop` ends the answer. `ping` keeps the
//! connection busy, and `error` reports a failure after the 200.
//!
//! The blocks are put back together into the [`wire::Response`] the same
//! answer would have had unstreamed, and read by the same
//! [`super::decode_response`], so both ways give the same [`Completion`].

use super::{decode_response, wire};
use crate::http::{self, Chunks};
use crate::secret::Secret;
use crate::sse::{self, SseEvent};
use baton_core::{Completion, DeltaSink, LlmError};
use serde_json::Value;
use wire::{Block, BlockDelta, StreamEvent};

/// Reads a streamed answer, telling `sink` its text as it comes.
pub(super) async fn read(
    chunks: Chunks,
    key: Option<&Secret>,
    sink: &dyn DeltaSink,
) -> Result<Completion, LlmError> {
    sse::read_answer::<Accumulator>(chunks, key, sink).await
}

/// The answer so far.
#[derive(Debug, Default)]
pub(super) struct Accumulator {
    /// From `message_start`; `None` before it.
    message: Option<wire::Response>,
    /// The blocks by index, in the order they began.
    blocks: Vec<(u32, Partial)>,
}

/// A block whose deltas are still coming.
#[derive(Debug)]
enum Partial {
    Text(String),
    ToolUse {
        id: String,
        name: String,
        /// The input `content_block_start` gave (`{}` normally).
        start: Value,
        /// The input's JSON text, from the deltas.
        json: String,
    },
    Other,
}

impl sse::StreamedAnswer for Accumulator {
    type Whole = wire::Response;

    fn event(
        &mut self,
        event: &SseEvent,
        key: Option<&Secret>,
        sink: &dyn DeltaSink,
    ) -> Result<bool, LlmError> {
        Accumulator::event(self, event, key, sink)
    }

    fn finish(self) -> Result<Completion, LlmError> {
        decode_response(&self.response())
    }

    fn decode_whole(whole: &wire::Response) -> Result<Completion, LlmError> {
        decode_response(whole)
    }
}

impl Accumulator {
    /// Reads one event; `Ok(true)` at `message_stop`.
    pub(super) fn event(
        &mut self,
        event: &SseEvent,
        key: Option<&Secret>,
        sink: &dyn DeltaSink,
    ) -> Result<bool, LlmError> {
        let parsed: StreamEvent = http::decode_json(event.data.as_bytes())?;
        match parsed {
            StreamEvent::MessageStart { message } => self.message = Some(message),
            StreamEvent::ContentBlockStart {
                index,
                content_block,
            } => {
                let partial = match content_block {
                    Block::Text { text } => {
                        if !text.is_empty() {
                            sink.text(&text);
                        }
                        Partial::Text(text)
                    }
                    Block::ToolUse { id, name, input } => Partial::ToolUse {
                        id,
                        name,
                        start: input,
                        json: String::new(),
                    },
                    _ => Partial::Other,
                };
                self.blocks.push((index, partial));
            }
            StreamEvent::ContentBlockDelta { index, delta } => self.delta(index, delta, sink),
            StreamEvent::MessageDelta { delta, usage } => {
                let message = self.message.get_or_insert_with(empty_message);
                if delta.stop_reason.is_some() {
                    message.stop_reason = delta.stop_reason;
                }
                if let Some(usage) = usage {
                    message.usage = Some(merge(message.usage.unwrap_or_default(), usage));
                }
            }
            StreamEvent::MessageStop => return Ok(true),
            StreamEvent::Error { .. } => return Err(stream_error(&event.data, key)),
            StreamEvent::ContentBlockStop { .. } | StreamEvent::Ping | StreamEvent::Other => {}
        }
        Ok(false)
    }

    fn delta(&mut self, index: u32, delta: BlockDelta, sink: &dyn DeltaSink) {
        let block = self.blocks.iter_mut().rev().find(|(i, _)| *i == index);
        match (block, delta) {
            (Some((_, Partial::Text(text))), BlockDelta::TextDelta { text: piece })
                if !piece.is_empty() =>
            {
                sink.text(&piece);
                text.push_str(&piece);
            }
            // A text delta for a block never begun: a text block still.
            (None, BlockDelta::TextDelta { text }) => {
                if !text.is_empty() {
                    sink.text(&text);
                }
                self.blocks.push((index, Partial::Text(text)));
            }
            (
                Some((_, Partial::ToolUse { json, .. })),
                BlockDelta::InputJsonDelta { partial_json },
            ) => {
                json.push_str(&partial_json);
            }
            _ => {}
        }
    }

    /// The answer as the unstreamed response would have had it; without
    /// a `message_start`, a response without content (undecodable).
    pub(super) fn response(self) -> wire::Response {
        let Some(mut message) = self.message else {
            return empty_message();
        };
        let blocks = self.blocks.into_iter().map(|(_, partial)| match partial {
            Partial::Text(text) => Block::Text { text },
            Partial::ToolUse {
                id,
                name,
                start,
                json,
            } => Block::ToolUse {
                id,
                name,
                input: input(start, &json),
            },
            Partial::Other => Block::Other,
        });
        message.content = Some(blocks.collect());
        message
    }
}

/// A message with nothing yet (content `None`).
fn empty_message() -> wire::Response {
    wire::Response {
        id: None,
        kind: None,
        role: None,
        model: String::new(),
        content: None,
        stop_reason: None,
        stop_sequence: None,
        usage: None,
    }
}

/// A tool call's input: the JSON its deltas made (the input that
/// `content_block_start` gave when there were none), kept as text when it
/// is not JSON so the tool, not the provider, reports the problem.
fn input(start: Value, json: &str) -> Value {
    if json.trim().is_empty() {
        return start;
    }
    serde_json::from_str(json).unwrap_or_else(|_| Value::String(json.to_owned()))
}

/// The usage so far with what `message_delta` says (its counts are
/// cumulative: each replaces the one before).
fn merge(before: wire::Usage, update: wire::Usage) -> wire::Usage {
    wire::Usage {
        input_tokens: update.input_tokens.or(before.input_tokens),
        output_tokens: update.output_tokens.or(before.output_tokens),
        cache_creation_input_tokens: update
            .cache_creation_input_tokens
            .or(before.cache_creation_input_tokens),
        cache_read_input_tokens: update
            .cache_read_input_tokens
            .or(before.cache_read_input_tokens),
    }
}

/// An `error` event, mapped as the same error body answered with the
/// status Anthropic documents for its type (`overloaded_error` 529,
/// `api_error` 500, …).
fn stream_error(data: &str, key: Option<&Secret>) -> LlmError {
    let kind = serde_json::from_str::<wire::ErrorResponse>(data)
        .map(|e| e.error.kind)
        .unwrap_or_default();
    let status = match kind.as_str() {
        "invalid_request_error" => 400,
        "authentication_error" => 401,
        "permission_error" => 403,
        "not_found_error" => 404,
        "request_too_large" => 413,
        "rate_limit_error" => 429,
        "overloaded_error" => 529,
        _ => 500,
    };
    http::stream_error(status, data.as_bytes(), key, super::is_context_overflow)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::anthropic::{encode_response, to_wire_events, AnthropicProvider};
    use crate::fixtures::Deltas;
    use crate::sse::SseParser;
    use baton_core::{LlmProvider, ToolCall, Usage};
    use serde_json::json;
    use std::time::Duration;
    use wiremock::matchers::{body_partial_json, header, method, path};
    use wiremock::{Mock, MockServer, ResponseTemplate};

    /// An answer as Anthropic streams it: thinking (ignored), text in
    /// pieces around a tool call whose input comes in pieces, pings.
    const STREAM: &str = concat!(
        "event: message_start\n",
        "data: {\"type\":\"message_start\",\"message\":{\"id\":\"msg_1\",\"type\":\"message\",\"role\":\"assistant\",\"model\":\"claude-test-1\",\"content\":[],\"stop_reason\":null,\"stop_sequence\":null,\"usage\":{\"input_tokens\":30,\"cache_read_input_tokens\":10,\"output_tokens\":1}}}\n\n",
        "event: content_block_start\n",
        "data: {\"type\":\"content_block_start\",\"index\":0,\"content_block\":{\"type\":\"thinking\",\"thinking\":\"\"}}\n\n",
        "event: content_block_delta\n",
        "data: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"thinking_delta\",\"thinking\":\"hmm\"}}\n\n",
        "event: content_block_stop\n",
        "data: {\"type\":\"content_block_stop\",\"index\":0}\n\n",
        "event: content_block_start\n",
        "data: {\"type\":\"content_block_start\",\"index\":1,\"content_block\":{\"type\":\"text\",\"text\":\"\"}}\n\n",
        "event: ping\n",
        "data: {\"type\": \"ping\"}\n\n",
        "event: content_block_delta\n",
        "data: {\"type\":\"content_block_delta\",\"index\":1,\"delta\":{\"type\":\"text_delta\",\"text\":\"It is \"}}\n\n",
        "event: content_block_stop\n",
        "data: {\"type\":\"content_block_stop\",\"index\":1}\n\n",
        "event: content_block_start\n",
        "data: {\"type\":\"content_block_start\",\"index\":2,\"content_block\":{\"type\":\"tool_use\",\"id\":\"toolu_9\",\"name\":\"lookup\",\"input\":{}}}\n\n",
        "event: content_block_delta\n",
        "data: {\"type\":\"content_block_delta\",\"index\":2,\"delta\":{\"type\":\"input_json_delta\",\"partial_json\":\"\"}}\n\n",
        "event: content_block_delta\n",
        "data: {\"type\":\"content_block_delta\",\"index\":2,\"delta\":{\"type\":\"input_json_delta\",\"partial_json\":\"{\\\"q\\\": \\\"é\"}}\n\n",
        "event: content_block_delta\n",
        "data: {\"type\":\"content_block_delta\",\"index\":2,\"delta\":{\"type\":\"input_json_delta\",\"partial_json\":\"x\\\"}\"}}\n\n",
        "event: content_block_stop\n",
        "data: {\"type\":\"content_block_stop\",\"index\":2}\n\n",
        "event: content_block_start\n",
        "data: {\"type\":\"content_block_start\",\"index\":3,\"content_block\":{\"type\":\"tool_use\",\"id\":\"toolu_10\",\"name\":\"now\",\"input\":{}}}\n\n",
        "event: content_block_stop\n",
        "data: {\"type\":\"content_block_stop\",\"index\":3}\n\n",
        "event: content_block_start\n",
        "data: {\"type\":\"content_block_start\",\"index\":4,\"content_block\":{\"type\":\"text\",\"text\":\"\"}}\n\n",
        "event: content_block_delta\n",
        "data: {\"type\":\"content_block_delta\",\"index\":4,\"delta\":{\"type\":\"text_delta\",\"text\":\"noon 😀\"}}\n\n",
        "event: content_block_delta\n",
        "data: {\"type\":\"content_block_delta\",\"index\":4,\"delta\":{\"type\":\"text_delta\",\"text\":\".\"}}\n\n",
        "event: content_block_stop\n",
        "data: {\"type\":\"content_block_stop\",\"index\":4}\n\n",
        "event: message_delta\n",
        "data: {\"type\":\"message_delta\",\"delta\":{\"stop_reason\":\"tool_use\",\"stop_sequence\":null},\"usage\":{\"output_tokens\":15}}\n\n",
        "event: message_stop\n",
        "data: {\"type\":\"message_stop\"}\n\n",
    );

    /// The same answer unstreamed.
    fn whole() -> Completion {
        Completion {
            content: "It is noon 😀.".into(),
            tool_calls: vec![
                ToolCall {
                    id: "toolu_9".into(),
                    name: "lookup".into(),
                    arguments: json!({"q": "éx"}),
                },
                ToolCall {
                    id: "toolu_10".into(),
                    name: "now".into(),
                    arguments: json!({}),
                },
            ],
            usage: Usage {
                input_tokens: 40,
                output_tokens: 15,
            },
            stop_reason: Some("tool_use".into()),
            model: "claude-test-1".into(),
        }
    }

    /// Reads `body` fed in pieces of `size` bytes; whether it ended.
    fn read_in_pieces(
        body: &[u8],
        size: usize,
        sink: &Deltas,
    ) -> (Result<Completion, LlmError>, bool) {
        let mut parser = SseParser::default();
        let mut answer = Accumulator::default();
        let mut events: Vec<_> = body
            .chunks(size)
            .flat_map(|piece| parser.push(piece))
            .collect();
        events.extend(parser.finish());
        for event in events {
            match answer.event(&event, None, sink) {
                Ok(true) => return (decode_response(&answer.response()), true),
                Ok(false) => {}
                Err(e) => return (Err(e), false),
            }
        }
        (decode_response(&answer.response()), false)
    }

    #[test]
    fn blocks_make_the_unstreamed_answer_however_the_bytes_are_cut() {
        for size in [1, 2, 3, 7, 100, STREAM.len()] {
            let sink = Deltas::default();
            let (completion, done) = read_in_pieces(STREAM.as_bytes(), size, &sink);
            assert!(done);
            assert_eq!(completion.unwrap(), whole(), "pieces of {size}");
            assert_eq!(sink.pieces(), ["It is ", "noon 😀", "."]);
        }
    }

    #[test]
    fn the_mock_stream_reads_back_as_the_mock_answer() {
        let mut completion = whole();
        completion.content =
            "A longer answer, with ünïcödé 😀 and more than twenty characters.".into();
        let unstreamed =
            decode_response(&serde_json::from_value(encode_response(&completion, "m")).unwrap())
                .unwrap();
        let body: String = to_wire_events(&completion, "m")
            .iter()
            .map(|e| {
                let data = serde_json::to_value(e).unwrap();
                format!(
                    "event: {}\ndata: {data}\n\n",
                    data["type"].as_str().unwrap()
                )
            })
            .collect();
        let sink = Deltas::default();
        let (streamed, done) = read_in_pieces(body.as_bytes(), 5, &sink);
        assert!(done);
        assert_eq!(streamed.unwrap(), unstreamed);
        assert_eq!(sink.joined(), completion.content);
        assert!(sink.pieces().len() > 2, "{:?}", sink.pieces());
    }

    #[test]
    fn error_events_map_to_their_kinds() {
        let cases = [
            (
                r#"{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}"#,
                LlmError::Overloaded { retry_after: None },
            ),
            (
                r#"{"type":"error","error":{"type":"api_error","message":"Internal server error"}}"#,
                LlmError::Server {
                    status: 500,
                    message: "Internal server error".into(),
                    retry_after: None,
                },
            ),
            (
                r#"{"type":"error","error":{"type":"invalid_request_error","message":"prompt is too long: 210000 tokens > 200000 maximum"}}"#,
                LlmError::ContextOverflow {
                    status: 400,
                    message: "prompt is too long: 210000 tokens > 200000 maximum".into(),
                },
            ),
        ];
        let start = &STREAM[..STREAM.find("event: content_block_stop").unwrap()];
        for (data, expected) in cases {
            let body = format!("{start}event: error\ndata: {data}\n\n");
            let sink = Deltas::default();
            let (result, _) = read_in_pieces(body.as_bytes(), 11, &sink);
            assert_eq!(result, Err(expected), "{data}");
        }
        // Events added since are ignored; a stream without message_start
        // is no answer.
        let (result, done) = read_in_pieces(
            b"event: brand_new\ndata: {\"type\":\"brand_new\"}\n\nevent: message_stop\ndata: {\"type\":\"message_stop\"}\n\n",
            4,
            &Deltas::default(),
        );
        assert!(done);
        assert!(matches!(result, Err(LlmError::Decode(_))), "{result:?}");
    }

    const KEY: &str = "sk-ant-stream-test-0123456789";

    fn provider(server: &MockServer) -> AnthropicProvider {
        AnthropicProvider::new(Some(&server.uri()), Some(Secret::new(KEY)), "claude-test").unwrap()
    }

    fn sse(body: &str) -> ResponseTemplate {
        ResponseTemplate::new(200).set_body_raw(body.as_bytes().to_vec(), "text/event-stream")
    }

    #[tokio::test]
    async fn asks_for_a_stream_and_reads_it() {
        let server = MockServer::start().await;
        Mock::given(method("POST"))
            .and(path("/v1/messages"))
            .and(header("x-api-key", KEY))
            .and(header("anthropic-version", "2023-06-01"))
            .and(body_partial_json(
                json!({"stream": true, "model": "claude-test"}),
            ))
            .respond_with(sse(STREAM))
            .expect(1)
            .mount(&server)
            .await;
        let sink = Deltas::default();
        let request = crate::fixtures::conversation("toolu_");
        let c = provider(&server)
            .complete_streaming(&request, &sink)
            .await
            .unwrap();
        assert_eq!(c, whole());
        assert_eq!(sink.joined(), c.content);
    }

    #[tokio::test]
    async fn a_stream_cut_short_is_transient_and_a_refusal_is_mapped() {
        let server = MockServer::start().await;
        let cut = &STREAM[..STREAM.find("event: message_stop").unwrap()];
        Mock::given(method("POST"))
            .respond_with(sse(cut))
            .up_to_n_times(1)
            .mount(&server)
            .await;
        Mock::given(method("POST"))
            .respond_with(
                ResponseTemplate::new(529)
                    .insert_header("retry-after", "3")
                    .set_body_json(json!({"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}})),
            )
            .mount(&server)
            .await;
        let request = crate::fixtures::conversation("toolu_");
        let p = provider(&server);
        let err = p
            .complete_streaming(&request, &Deltas::default())
            .await
            .unwrap_err();
        assert!(
            matches!(err, LlmError::Transport(_)) && err.is_retryable(),
            "{err:?}"
        );
        let err = p
            .complete_streaming(&request, &Deltas::default())
            .await
            .unwrap_err();
        assert_eq!(
            err,
            LlmError::Overloaded {
                retry_after: Some(Duration::from_secs(3))
            }
        );
    }
}
