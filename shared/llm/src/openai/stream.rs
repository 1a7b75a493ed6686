//! Chat Completions streamed (`"stream": true`): server-sent events whose
//! data are [`wire::Chunk`]s, ended by `data: [DONE]`. Text arrives in
//! `delta.content`; a tool call arrives in pieces sharing its `index`, the
//! first naming it, the next ones adding to its arguments; the usage comes
//! in a last chunk without choices (`stream_options.include_usage`).
//!
//! The pieces are put back together into the [`wire::Response`] the same
//! answer would have had unstreamed, and read by the same
//! [`super::decode_response`], so both ways give the same [`Completion`].

use super::{decode_response, wire};
use crate::http::{self, Chunks};
use crate::secret::Secret;
use crate::sse::{self, SseEvent};
use baton_core::{Completion, DeltaSink, LlmError};
use serde_json::Value;

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
    model: String,
    /// Whether any chunk had a choice (a stream without one is no answer).
    choices: bool,
    content: String,
    calls: Vec<PartialCall>,
    finish_reason: Option<wire::FinishReason>,
    usage: Option<wire::Usage>,
}

/// A tool call whose pieces are still coming.
#[derive(Debug)]
struct PartialCall {
    index: u32,
    id: Option<String>,
    name: String,
    arguments: String,
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
    /// Reads one event; `Ok(true)` at `[DONE]`.
    pub(super) fn event(
        &mut self,
        event: &SseEvent,
        key: Option<&Secret>,
        sink: &dyn DeltaSink,
    ) -> Result<bool, LlmError> {
        let data = event.data.trim();
        if data == "[DONE]" {
            return Ok(true);
        }
        if event.event.as_deref() == Some("error") {
            let error = serde_json::from_str(data).unwrap_or_else(|_| Value::String(data.into()));
            return Err(stream_error(error, key));
        }
        let chunk: wire::Chunk = http::decode_json(data.as_bytes())?;
        if let Some(error) = chunk.error {
            return Err(stream_error(error, key));
        }
        self.chunk(chunk, sink);
        Ok(false)
    }

    fn chunk(&mut self, chunk: wire::Chunk, sink: &dyn DeltaSink) {
        if self.model.is_empty() {
            self.model = chunk.model;
        }
        if chunk.usage.is_some() {
            self.usage = chunk.usage;
        }
        // One choice is asked for; any other is not ours.
        let Some(choice) = chunk.choices.into_iter().find(|c| c.index == 0) else {
            return;
        };
        self.choices = true;
        if let Some(text) = choice.delta.content.as_ref().map(wire::Content::text) {
            if !text.is_empty() {
                sink.text(&text);
                self.content.push_str(&text);
            }
        }
        for piece in choice.delta.tool_calls {
            self.tool_call(piece);
        }
        // Some servers send `""` on the chunks before the last.
        let blank =
            matches!(&choice.finish_reason, Some(wire::FinishReason::Other(r)) if r.is_empty());
        if choice.finish_reason.is_some() && !blank {
            self.finish_reason = choice.finish_reason;
        }
    }

    /// Adds a piece of a tool call to its call: the one of its `index`, or
    /// (from servers that send none) a new call when the piece has a new
    /// id, else the last call.
    fn tool_call(&mut self, piece: wire::ToolCallDelta) {
        let id = piece.id.filter(|id| !id.is_empty());
        let at = match piece.index {
            Some(index) => self.calls.iter().position(|c| c.index == index),
            None => match (&id, self.calls.last()) {
                (Some(id), Some(last)) if last.id.as_ref() != Some(id) => None,
                (_, Some(_)) => Some(self.calls.len() - 1),
                (_, None) => None,
            },
        };
        let call = match at {
            Some(at) => &mut self.calls[at],
            None => {
                let index = piece
                    .index
                    .unwrap_or_else(|| u32::try_from(self.calls.len()).unwrap_or(u32::MAX));
                self.calls.push(PartialCall {
                    index,
                    id: None,
                    name: String::new(),
                    arguments: String::new(),
                });
                let last = self.calls.len() - 1;
                &mut self.calls[last]
            }
        };
        if call.id.is_none() {
            call.id = id;
        }
        if let Some(function) = piece.function {
            // Appended, as OpenAI's own SDKs do; the name comes whole once.
            call.name
                .push_str(function.name.as_deref().unwrap_or_default());
            call.arguments
                .push_str(function.arguments.as_deref().unwrap_or_default());
        }
    }

    /// The answer as the unstreamed response would have had it.
    pub(super) fn response(self) -> wire::Response {
        let mut calls = self.calls;
        calls.sort_by_key(|c| c.index);
        let message = self.choices.then(|| wire::ResponseMessage {
            role: None,
            content: Some(wire::Content::Text(self.content)),
            tool_calls: calls
                .into_iter()
                .map(|c| wire::ToolCall {
                    id: c.id,
                    kind: "function".to_owned(),
                    function: wire::FunctionCall {
                        name: c.name,
                        arguments: Value::String(c.arguments),
                    },
                })
                .collect(),
        });
        wire::Response {
            id: None,
            object: None,
            created: None,
            model: self.model,
            choices: message
                .map(|message| wire::Choice {
                    index: 0,
                    message: Some(message),
                    finish_reason: self.finish_reason,
                })
                .into_iter()
                .collect(),
            usage: self.usage,
        }
    }
}

/// An error sent inside the stream, mapped as the same error answered
/// with the status OpenAI gives its kind: `rate_limit…` 429, invalid
/// requests 400, a numeric `code` (some servers) as it is, anything else
/// 500 (a server error, retried).
fn stream_error(error: Value, key: Option<&Secret>) -> LlmError {
    let error = match error {
        Value::Object(mut map) if map.contains_key("error") => {
            map.remove("error").unwrap_or_default()
        }
        other => other,
    };
    let word = |field: &str| {
        error
            .get(field)
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_owned()
    };
    let (kind, code) = (word("type"), word("code"));
    let numeric = error
        .get("code")
        .and_then(Value::as_u64)
        .and_then(|c| u16::try_from(c).ok())
        .filter(|c| (400..600).contains(c));
    let status = if let Some(status) = numeric {
        status
    } else if kind.contains("rate_limit") || code.contains("rate_limit") {
        429
    } else if kind == "invalid_request_error" || code == "context_length_exceeded" {
        400
    } else {
        500
    };
    let body = serde_json::json!({ "error": error }).to_string();
    http::stream_error(status, body.as_bytes(), key, super::is_context_overflow)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fixtures::Deltas;
    use crate::openai::{encode_response, to_wire_chunks, OpenAiProvider};
    use crate::sse::SseParser;
    use baton_core::{LlmProvider, ToolCall, Usage};
    use serde_json::json;
    use wiremock::matchers::{body_partial_json, method, path};
    use wiremock::{Mock, MockServer, ResponseTemplate};

    /// An answer as OpenAI streams it: text in pieces (an emoji and an
    /// accent among them), two tool calls in pieces, the usage last.
    const STREAM: &str = concat!(
        "data: {\"id\":\"c1\",\"object\":\"chat.completion.chunk\",\"model\":\"gpt-test-0613\",\"choices\":[{\"index\":0,\"delta\":{\"role\":\"assistant\",\"content\":\"\"},\"finish_reason\":null}],\"usage\":null}\n\n",
        "data: {\"id\":\"c1\",\"model\":\"gpt-test-0613\",\"choices\":[{\"index\":0,\"delta\":{\"content\":\"Ché\"},\"finish_reason\":null}],\"usage\":null}\n\n",
        ": keep-alive\n\n",
        "data: {\"id\":\"c1\",\"model\":\"gpt-test-0613\",\"choices\":[{\"index\":0,\"delta\":{\"content\":\"cking 😀.\"},\"finish_reason\":null}],\"usage\":null}\n\n",
        "data: {\"id\":\"c1\",\"model\":\"gpt-test-0613\",\"choices\":[{\"index\":0,\"delta\":{\"tool_calls\":[{\"index\":0,\"id\":\"call_a\",\"type\":\"function\",\"function\":{\"name\":\"lookup\",\"arguments\":\"\"}}]},\"finish_reason\":null}],\"usage\":null}\n\n",
        "data: {\"id\":\"c1\",\"model\":\"gpt-test-0613\",\"choices\":[{\"index\":0,\"delta\":{\"tool_calls\":[{\"index\":0,\"function\":{\"arguments\":\"{\\\"q\\\":\"}}]},\"finish_reason\":null}],\"usage\":null}\n\n",
        "data: {\"id\":\"c1\",\"model\":\"gpt-test-0613\",\"choices\":[{\"index\":0,\"delta\":{\"tool_calls\":[{\"index\":1,\"id\":\"call_b\",\"type\":\"function\",\"function\":{\"name\":\"lookup\",\"arguments\":\"{not\"}}]},\"finish_reason\":null}],\"usage\":null}\n\n",
        "data: {\"id\":\"c1\",\"model\":\"gpt-test-0613\",\"choices\":[{\"index\":0,\"delta\":{\"tool_calls\":[{\"index\":0,\"function\":{\"arguments\":\"\\\"x\\\"}\"}},{\"index\":1,\"function\":{\"arguments\":\" json\"}}]},\"finish_reason\":null}],\"usage\":null}\n\n",
        "data: {\"id\":\"c1\",\"model\":\"gpt-test-0613\",\"choices\":[{\"index\":0,\"delta\":{},\"finish_reason\":\"tool_calls\"}],\"usage\":null}\n\n",
        "data: {\"id\":\"c1\",\"model\":\"gpt-test-0613\",\"choices\":[],\"usage\":{\"prompt_tokens\":42,\"completion_tokens\":7,\"total_tokens\":49}}\n\n",
        "data: [DONE]\n\n",
    );

    /// The same answer unstreamed.
    fn whole() -> Completion {
        Completion {
            content: "Chécking 😀.".into(),
            tool_calls: vec![
                ToolCall {
                    id: "call_a".into(),
                    name: "lookup".into(),
                    arguments: json!({"q": "x"}),
                },
                ToolCall {
                    id: "call_b".into(),
                    name: "lookup".into(),
                    arguments: json!("{not json"),
                },
            ],
            usage: Usage {
                input_tokens: 42,
                output_tokens: 7,
            },
            stop_reason: Some("tool_calls".into()),
            model: "gpt-test-0613".into(),
        }
    }

    /// Reads `body` fed in pieces of `size` bytes; whether `[DONE]` came.
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
    fn pieces_make_the_unstreamed_answer_however_the_bytes_are_cut() {
        // Cuts fall inside `\n\n`, JSON strings, the emoji's four bytes.
        for size in [1, 2, 3, 5, 7, 64, STREAM.len()] {
            let sink = Deltas::default();
            let (completion, done) = read_in_pieces(STREAM.as_bytes(), size, &sink);
            assert!(done);
            assert_eq!(completion.unwrap(), whole(), "pieces of {size}");
            assert_eq!(sink.joined(), "Chécking 😀.");
            assert_eq!(sink.pieces(), ["Ché", "cking 😀."]);
        }
    }

    #[test]
    fn the_mock_stream_reads_back_as_the_mock_answer() {
        let mut completion = whole();
        completion.content =
            "A longer answer, with ünïcödé 😀 and more than twenty characters.".into();
        let unstreamed =
            decode_response(&serde_json::from_value(encode_response(&completion, "x")).unwrap())
                .unwrap();
        let body: String = to_wire_chunks(&completion, "x", true)
            .iter()
            .map(|c| format!("data: {}\n\n", serde_json::to_string(c).unwrap()))
            .chain(["data: [DONE]\n\n".to_owned()])
            .collect();
        let sink = Deltas::default();
        let (streamed, done) = read_in_pieces(body.as_bytes(), 3, &sink);
        assert!(done);
        assert_eq!(streamed.unwrap(), unstreamed);
        assert_eq!(sink.joined(), completion.content);
        assert!(sink.pieces().len() > 2, "{:?}", sink.pieces());
    }

    #[test]
    fn calls_without_an_index_are_told_apart_by_their_ids() {
        let body = concat!(
            "data: {\"choices\":[{\"delta\":{\"tool_calls\":[{\"id\":\"a\",\"function\":{\"name\":\"t\",\"arguments\":\"{\\\"n\\\"\"}}]}}]}\n\n",
            "data: {\"choices\":[{\"delta\":{\"tool_calls\":[{\"function\":{\"arguments\":\":1}\"}}]}}]}\n\n",
            "data: {\"choices\":[{\"delta\":{},\"finish_reason\":\"\"}]}\n\n",
            "data: {\"choices\":[{\"delta\":{\"tool_calls\":[{\"id\":\"b\",\"function\":{\"name\":\"u\"}}]}}]}\n\n",
            "data: {\"choices\":[{\"delta\":{},\"finish_reason\":\"tool_calls\"}]}\n\n",
            "data: [DONE]\n",
        );
        let (c, done) = read_in_pieces(body.as_bytes(), 9, &Deltas::default());
        assert!(done);
        let c = c.unwrap();
        let calls: Vec<_> = c
            .tool_calls
            .iter()
            .map(|c| (c.id.as_str(), c.name.as_str(), c.arguments.clone()))
            .collect();
        assert_eq!(calls, [("a", "t", json!({"n": 1})), ("b", "u", json!({}))]);
        assert_eq!(c.usage, Usage::default());
        assert_eq!(c.stop_reason.as_deref(), Some("tool_calls"));
    }

    #[test]
    fn errors_in_the_stream_map_to_their_kinds() {
        let cases = [
            (
                r#"{"error":{"message":"Rate limit reached","type":"requests","code":"rate_limit_exceeded"}}"#,
                LlmError::RateLimited { retry_after: None },
            ),
            (
                r#"{"error":{"message":"The server had an error","type":"server_error"}}"#,
                LlmError::Server {
                    status: 500,
                    message: "The server had an error".into(),
                    retry_after: None,
                },
            ),
            (
                r#"{"error":{"message":"bad tool schema","type":"BadRequestError","code":400}}"#,
                LlmError::Rejected {
                    status: 400,
                    message: "bad tool schema".into(),
                },
            ),
            (
                r#"{"error":{"message":"This model's maximum context length is 8192 tokens","type":"invalid_request_error","code":"context_length_exceeded"}}"#,
                LlmError::ContextOverflow {
                    status: 400,
                    message: "This model's maximum context length is 8192 tokens".into(),
                },
            ),
        ];
        for (data, expected) in cases {
            let body = format!("data: {{\"choices\":[{{\"index\":0,\"delta\":{{\"content\":\"par\"}}}}]}}\n\ndata: {data}\n\n");
            let sink = Deltas::default();
            let (result, _) = read_in_pieces(body.as_bytes(), 10, &sink);
            assert_eq!(result, Err(expected), "{data}");
            assert_eq!(sink.joined(), "par");
        }
        // An error event, named so.
        let body = "data: {\"choices\":[{\"delta\":{\"content\":\"par\"}}]}\n\nevent: error\ndata: {\"error\":{\"message\":\"boom\",\"type\":\"server_error\"}}\n\n";
        let (result, _) = read_in_pieces(body.as_bytes(), 6, &Deltas::default());
        assert_eq!(
            result,
            Err(LlmError::Server {
                status: 500,
                message: "boom".into(),
                retry_after: None
            })
        );
        // Undecodable data is not an answer.
        let (result, _) = read_in_pieces(b"data: {\"choices\": [\n\n", 4, &Deltas::default());
        assert!(matches!(result, Err(LlmError::Decode(_))), "{result:?}");
    }

    const KEY: &str = "sk-test-openai-stream-0123456789";

    fn provider(server: &MockServer) -> OpenAiProvider {
        OpenAiProvider::new(
            Some(&format!("{}/v1", server.uri())),
            Some(Secret::new(KEY)),
            "gpt-test",
        )
        .unwrap()
    }

    fn sse(body: &str) -> ResponseTemplate {
        ResponseTemplate::new(200).set_body_raw(body.as_bytes().to_vec(), "text/event-stream")
    }

    #[tokio::test]
    async fn asks_for_a_stream_with_usage_and_reads_it() {
        let server = MockServer::start().await;
        Mock::given(method("POST"))
            .and(path("/v1/chat/completions"))
            .and(body_partial_json(json!({"stream": true, "stream_options": {"include_usage": true}, "model": "gpt-test"})))
            .respond_with(sse(STREAM))
            .expect(1)
            .mount(&server)
            .await;
        let sink = Deltas::default();
        let request = crate::fixtures::conversation("call_");
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
        let cut = &STREAM[..STREAM.find("data: [DONE]").unwrap()];
        Mock::given(method("POST"))
            .respond_with(sse(cut))
            .up_to_n_times(1)
            .mount(&server)
            .await;
        Mock::given(method("POST"))
            .respond_with(ResponseTemplate::new(401).set_body_json(json!({"error": {"message": format!("Incorrect API key provided: {KEY}"), "type": "invalid_request_error"}})))
            .mount(&server)
            .await;
        let request = crate::fixtures::conversation("call_");
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
        assert!(
            matches!(err, LlmError::Rejected { status: 401, .. }),
            "{err:?}"
        );
        assert!(!err.to_string().contains(KEY), "{err}");
    }

    #[tokio::test]
    async fn a_server_that_does_not_stream_is_read_whole() {
        let server = MockServer::start().await;
        let expected = whole();
        Mock::given(method("POST"))
            .respond_with(ResponseTemplate::new(200).set_body_json(encode_response(&expected, "x")))
            .mount(&server)
            .await;
        let sink = Deltas::default();
        let c = provider(&server)
            .complete_streaming(&crate::fixtures::conversation("call_"), &sink)
            .await
            .unwrap();
        assert_eq!(c, expected);
        assert_eq!(sink.pieces(), [expected.content.as_str()]);
    }

    #[tokio::test]
    async fn the_whole_request_timeout_still_applies() {
        let server = MockServer::start().await;
        Mock::given(method("POST"))
            .respond_with(sse(STREAM).set_delay(std::time::Duration::from_millis(500)))
            .mount(&server)
            .await;
        // wiremock delays the headers too (the idle timeout between pieces
        // is tested through the mock LLM server).
        let p = provider(&server).with_timeout(std::time::Duration::from_millis(100));
        let err = p
            .complete_streaming(&crate::fixtures::conversation("call_"), &Deltas::default())
            .await
            .unwrap_err();
        assert!(matches!(err, LlmError::Transport(_)), "{err:?}");
    }
}
