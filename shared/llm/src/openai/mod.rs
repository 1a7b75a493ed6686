//! OpenAI-compatible Chat Completions (`POST {base}/chat/completions`),
//! answered whole or streamed (`stream`).
//!
//! Works with OpenAI and the many servers that copy its API (vLLM, Ollama,
//! LM Studio, llama.cpp, LiteLLM, OpenRouter, …). The bodies are typed in
//! [`wire`]; the mapping to and from the neutral types lives in plain
//! functions, and the mock server runs it backwards ([`server`]).

#[cfg(any(test, feature = "mock-server"))]
mod server;
mod stream;
pub(crate) mod wire;

#[cfg(any(test, feature = "mock-server"))]
pub use server::{decode_request, encode_response};
#[cfg(any(test, feature = "mock-server"))]
pub(crate) use server::{from_wire_request, to_wire_chunks, to_wire_response};

use crate::http;
use crate::mapping::{self, messages_to_send};
use crate::secret::Secret;
use async_trait::async_trait;
use baton_core::{
    AttachmentContent, Completion, CompletionRequest, DeltaSink, LlmError, LlmProvider, Message,
    ToolCall, Usage,
};
use serde_json::{json, Value};
use std::time::Duration;
use wire::Content;

/// Which field carries the output token limit.
///
/// `max_tokens` is the default because every OpenAI-compatible server
/// accepts it, while `max_completion_tokens` is newer and many servers
/// ignore or reject it. OpenAI's reasoning models (o1, o3, …) refuse
/// `max_tokens`; select [`MaxTokensField::MaxCompletionTokens`] for them.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum MaxTokensField {
    #[default]
    MaxTokens,
    MaxCompletionTokens,
}

/// A client of an OpenAI-compatible Chat Completions endpoint.
#[derive(Clone, Debug)]
pub struct OpenAiProvider {
    client: reqwest::Client,
    base_url: String,
    api_key: Option<Secret>,
    model: String,
    max_tokens_field: MaxTokensField,
    file_inputs: bool,
    timeout: Duration,
    idle_timeout: Duration,
}

impl OpenAiProvider {
    /// OpenAI's own endpoint.
    pub const DEFAULT_BASE_URL: &'static str = "https://api.openai.com/v1";

    /// A provider for `base_url` (default [`Self::DEFAULT_BASE_URL`]; include
    /// the `/v1`, as `OPENAI_BASE_URL` does). `model` is used when a request
    /// names none. The key, when given, is sent as `Authorization: Bearer`.
    pub fn new(
        base_url: Option<&str>,
        api_key: Option<Secret>,
        model: impl Into<String>,
    ) -> Result<Self, LlmError> {
        Ok(OpenAiProvider {
            client: http::build_client()?,
            base_url: http::normalize_base_url(base_url.unwrap_or(Self::DEFAULT_BASE_URL))?,
            api_key,
            model: model.into(),
            max_tokens_field: MaxTokensField::default(),
            file_inputs: true,
            timeout: Duration::from_secs(300),
            idle_timeout: http::DEFAULT_IDLE_TIMEOUT,
        })
    }

    /// Chooses the field that carries the token limit.
    pub fn with_max_tokens_field(mut self, field: MaxTokensField) -> Self {
        self.max_tokens_field = field;
        self
    }

    /// Whether PDFs go as `file` parts (OpenAI's Chat Completions takes
    /// them; default). Off for compatible servers that refuse them: PDFs
    /// are then named to the model as files it cannot read.
    pub fn with_file_inputs(mut self, on: bool) -> Self {
        self.file_inputs = on;
        self
    }

    /// The whole-request timeout (default 300 s).
    pub fn with_timeout(mut self, timeout: Duration) -> Self {
        self.timeout = timeout;
        self
    }

    /// The longest wait for the next piece of a streamed answer (default
    /// 60 s); the whole-request timeout bounds the lot.
    pub fn with_idle_timeout(mut self, idle: Duration) -> Self {
        self.idle_timeout = idle;
        self
    }

    /// The base URL in use, without a trailing slash.
    pub fn base_url(&self) -> &str {
        &self.base_url
    }

    /// A POST to the Chat Completions endpoint, with the key.
    fn post(&self) -> reqwest::RequestBuilder {
        let builder = self
            .client
            .post(format!("{}/chat/completions", self.base_url));
        match &self.api_key {
            Some(key) => builder.bearer_auth(key.expose()),
            None => builder,
        }
    }
}

#[async_trait]
impl LlmProvider for OpenAiProvider {
    fn name(&self) -> &str {
        "openai"
    }

    async fn complete(&self, request: &CompletionRequest) -> Result<Completion, LlmError> {
        let model = http::pick_model(request, &self.model)?;
        let body = encode_request(request, model, self.max_tokens_field, self.file_inputs)?;
        let answer: wire::Response = http::post_json(
            self.post(),
            &body,
            self.timeout,
            self.api_key.as_ref(),
            is_context_overflow,
        )
        .await?;
        let mut completion = decode_response(&answer)?;
        if completion.model.is_empty() {
            completion.model = model.to_string();
        }
        Ok(completion)
    }

    /// Streams the answer as server-sent events (`"stream": true`, usage
    /// included).
    async fn complete_streaming(
        &self,
        request: &CompletionRequest,
        sink: &dyn DeltaSink,
    ) -> Result<Completion, LlmError> {
        let model = http::pick_model(request, &self.model)?;
        let mut body = encode_request(request, model, self.max_tokens_field, self.file_inputs)?;
        body.stream = Some(true);
        body.stream_options = Some(wire::StreamOptions {
            include_usage: true,
        });
        let chunks = http::open_json_stream(
            self.post(),
            &body,
            self.timeout,
            self.idle_timeout,
            self.api_key.as_ref(),
            is_context_overflow,
        )
        .await?;
        let mut completion = stream::read(chunks, self.api_key.as_ref(), sink).await?;
        if completion.model.is_empty() {
            completion.model = model.to_string();
        }
        Ok(completion)
    }
}

fn text(s: &str) -> Option<Content> {
    Some(Content::Text(s.to_owned()))
}

/// A neutral tool call as the wire's.
fn wire_call(call: &ToolCall) -> wire::ToolCall {
    wire::ToolCall {
        id: Some(call.id.clone()),
        kind: "function".to_owned(),
        function: wire::FunctionCall {
            name: call.name.clone(),
            arguments: Value::String(arguments_string(&call.arguments)),
        },
    }
}

/// An assistant turn's content: `null` only when the turn has tool calls
/// and no text.
fn assistant_content(content: &str, has_calls: bool) -> Option<Content> {
    if content.is_empty() && has_calls {
        None
    } else {
        text(content)
    }
}

/// An attached file as a user message's content: a labelled `image_url`
/// part (a data URL) for an image, a `file` part for a PDF when
/// `file_inputs` (not every OpenAI-compatible server takes them), text
/// otherwise.
fn attachment_content(
    name: &str,
    media_type: &str,
    content: &AttachmentContent,
    file_inputs: bool,
) -> Content {
    match content {
        AttachmentContent::Image { data_base64 } => Content::Parts(vec![
            wire::ContentPart::text(AttachmentContent::label(name)),
            wire::ContentPart::image(media_type, data_base64),
        ]),
        AttachmentContent::Document { data_base64 } if file_inputs => Content::Parts(vec![
            wire::ContentPart::text(AttachmentContent::label(name)),
            wire::ContentPart::file(name, media_type, data_base64),
        ]),
        other => Content::Text(other.as_text(name, media_type)),
    }
}

/// The Chat Completions request body for `request`, asking `model`. A
/// request without tools gets its tool turns as text
/// ([`mapping::messages_to_send`]); a forced tool goes as a named
/// `tool_choice`, and must be among the tools ([`mapping::forced_tool`]).
pub(crate) fn encode_request(
    request: &CompletionRequest,
    model: &str,
    field: MaxTokensField,
    file_inputs: bool,
) -> Result<wire::Request, LlmError> {
    let tool_choice = mapping::forced_tool(request)?.map(wire::ToolChoice::function);
    let history = messages_to_send(request);
    let mut messages = Vec::with_capacity(history.len() + 1);
    if !request.system.is_empty() {
        messages.push(wire::ChatMessage::System {
            content: text(&request.system),
        });
    }
    messages.extend(history.iter().map(|message| match message {
        Message::User { content } => wire::ChatMessage::User {
            content: text(content),
        },
        Message::Assistant {
            content,
            tool_calls,
        } => wire::ChatMessage::Assistant {
            content: assistant_content(content, !tool_calls.is_empty()),
            tool_calls: tool_calls.iter().map(wire_call).collect(),
        },
        Message::Tool {
            call_id, content, ..
        } => wire::ChatMessage::Tool {
            tool_call_id: call_id.clone(),
            content: text(content),
        },
        Message::Attachment {
            name,
            media_type,
            content,
        } => wire::ChatMessage::User {
            content: Some(attachment_content(name, media_type, content, file_inputs)),
        },
    }));
    let tools = request
        .tools
        .iter()
        .map(|t| wire::Tool {
            kind: "function".to_owned(),
            function: wire::FunctionSpec {
                name: t.name.clone(),
                description: t.description.clone(),
                parameters: t.input_schema.clone(),
            },
        })
        .collect();
    let limit = (request.max_tokens > 0).then_some(request.max_tokens);
    Ok(wire::Request {
        model: model.to_owned(),
        messages,
        tools,
        tool_choice,
        max_tokens: limit.filter(|_| field == MaxTokensField::MaxTokens),
        max_completion_tokens: limit.filter(|_| field == MaxTokensField::MaxCompletionTokens),
        stream: None,
        stream_options: None,
    })
}

/// Arguments go on the wire as a JSON string. Arguments that were kept as a
/// raw string (the model sent invalid JSON) go back exactly as received.
fn arguments_string(arguments: &Value) -> String {
    match arguments {
        Value::String(raw) => raw.clone(),
        other => other.to_string(),
    }
}

/// Arguments as received: valid JSON is parsed; anything else is kept as a
/// JSON string so the tool, not the provider, reports the problem.
fn parse_arguments(arguments: &Value) -> Value {
    match arguments {
        Value::Null => json!({}),
        Value::String(raw) if raw.trim().is_empty() => json!({}),
        Value::String(raw) => {
            serde_json::from_str(raw).unwrap_or_else(|_| Value::String(raw.clone()))
        }
        // Some servers send the arguments already decoded.
        other => other.clone(),
    }
}

/// Wire tool calls as neutral ones; calls without an id get
/// `{prefix}{index}`.
fn decode_tool_calls(calls: &[wire::ToolCall], prefix: &str) -> Vec<ToolCall> {
    calls
        .iter()
        .enumerate()
        .map(|(i, call)| ToolCall {
            id: call
                .id
                .clone()
                .filter(|id| !id.is_empty())
                // A few servers omit ids; results must still refer to something.
                .unwrap_or_else(|| format!("{prefix}{i}")),
            name: call.function.name.clone(),
            arguments: parse_arguments(&call.function.arguments),
        })
        .collect()
}

/// Reads a Chat Completions response body.
pub(crate) fn decode_response(body: &wire::Response) -> Result<Completion, LlmError> {
    let choice = body
        .choices
        .first()
        .ok_or_else(|| LlmError::Decode("response has no choices".into()))?;
    let message = choice
        .message
        .as_ref()
        .ok_or_else(|| LlmError::Decode("choice has no message".into()))?;
    let usage = body
        .usage
        .map(|u| Usage {
            input_tokens: u.prompt_tokens.unwrap_or(0),
            output_tokens: u.completion_tokens.unwrap_or(0),
        })
        .unwrap_or_default();
    Ok(Completion {
        content: wire::text_of(message.content.as_ref()),
        tool_calls: decode_tool_calls(&message.tool_calls, "call_"),
        usage,
        stop_reason: choice.finish_reason.clone().map(String::from),
        model: body.model.clone(),
    })
}

/// Whether a refusal is for a request longer than the model's context
/// window: OpenAI's `context_length_exceeded` code, llama.cpp's
/// `exceed_context_size_error` type, or the wording (`message` is the
/// error text, read whatever the body's shape): servers that copy the API
/// copy its errors loosely, and proxies pass on the words of the provider
/// behind them.
fn is_context_overflow(body: &[u8], message: &str) -> bool {
    let typed = serde_json::from_slice::<wire::ErrorResponse>(body).is_ok_and(|e| {
        e.error.code() == Some("context_length_exceeded")
            || e.error.kind.as_deref() == Some("exceed_context_size_error")
    });
    typed || mapping::mentions_context_overflow(message)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{RetryPolicy, Retrying};
    use baton_core::{ToolChoice, ToolSpec};
    use wiremock::matchers::{method, path};
    use wiremock::{Mock, MockServer, ResponseTemplate};

    const KEY: &str = "sk-test-openai-0123456789";

    fn conversation() -> CompletionRequest {
        CompletionRequest {
            model: String::new(),
            system: "You are terse.".into(),
            messages: vec![
                Message::User {
                    content: "what time is it?".into(),
                },
                Message::Assistant {
                    content: String::new(),
                    tool_calls: vec![ToolCall {
                        id: "call_1".into(),
                        name: "current_time".into(),
                        arguments: json!({"timezone": "UTC"}),
                    }],
                },
                Message::Tool {
                    call_id: "call_1".into(),
                    name: "current_time".into(),
                    content: "12:00".into(),
                    is_error: false,
                },
            ],
            tools: vec![ToolSpec {
                name: "current_time".into(),
                description: "The time".into(),
                input_schema: json!({"type": "object", "properties": {"timezone": {"type": "string"}}}),
            }],
            max_tokens: 256,
            tool_choice: ToolChoice::Auto,
        }
    }

    fn answer() -> Value {
        json!({
            "id": "chatcmpl-1", "object": "chat.completion", "model": "gpt-test-0613",
            "choices": [{"index": 0, "finish_reason": "tool_calls", "message": {
                "role": "assistant", "content": "Checking.",
                "tool_calls": [
                    {"id": "call_a", "type": "function", "function": {"name": "lookup", "arguments": "{\"q\":\"x\"}"}},
                    {"id": "call_b", "type": "function", "function": {"name": "lookup", "arguments": "{not json"}}
                ]}}],
            "usage": {"prompt_tokens": 42, "completion_tokens": 7, "total_tokens": 49}
        })
    }

    async fn provider(server: &MockServer) -> OpenAiProvider {
        OpenAiProvider::new(
            Some(&format!("{}/v1/", server.uri())),
            Some(Secret::new(KEY)),
            "gpt-test",
        )
        .unwrap()
    }

    #[tokio::test]
    async fn sends_the_chat_completions_shape_and_reads_the_answer() {
        let server = MockServer::start().await;
        Mock::given(method("POST"))
            .and(path("/v1/chat/completions"))
            .respond_with(ResponseTemplate::new(200).set_body_json(answer()))
            .expect(1)
            .mount(&server)
            .await;
        let c = provider(&server)
            .await
            .complete(&conversation())
            .await
            .unwrap();

        let received = server.received_requests().await.unwrap();
        let req = &received[0];
        assert_eq!(
            req.headers.get("authorization").unwrap().to_str().unwrap(),
            format!("Bearer {KEY}")
        );
        assert!(req
            .headers
            .get("content-type")
            .unwrap()
            .to_str()
            .unwrap()
            .starts_with("application/json"));
        let body: Value = serde_json::from_slice(&req.body).unwrap();
        assert_eq!(
            body,
            json!({
                "model": "gpt-test",
                "messages": [
                    {"role": "system", "content": "You are terse."},
                    {"role": "user", "content": "what time is it?"},
                    {"role": "assistant", "content": null, "tool_calls": [
                        {"id": "call_1", "type": "function", "function": {"name": "current_time", "arguments": "{\"timezone\":\"UTC\"}"}}
                    ]},
                    {"role": "tool", "tool_call_id": "call_1", "content": "12:00"}
                ],
                "tools": [{"type": "function", "function": {
                    "name": "current_time", "description": "The time",
                    "parameters": {"type": "object", "properties": {"timezone": {"type": "string"}}}}}],
                "max_tokens": 256
            })
        );

        assert_eq!(c.content, "Checking.");
        assert_eq!(c.tool_calls.len(), 2);
        assert_eq!(c.tool_calls[0].arguments, json!({"q": "x"}));
        // Invalid JSON arguments survive as a string for the tool to report.
        assert_eq!(c.tool_calls[1].arguments, json!("{not json"));
        assert_eq!(
            c.usage,
            Usage {
                input_tokens: 42,
                output_tokens: 7
            }
        );
        assert_eq!(c.stop_reason.as_deref(), Some("tool_calls"));
        assert_eq!(c.model, "gpt-test-0613");
    }

    #[tokio::test]
    async fn request_model_overrides_default_and_no_key_sends_no_header() {
        let server = MockServer::start().await;
        Mock::given(method("POST"))
            .respond_with(ResponseTemplate::new(200).set_body_json(json!({
                "choices": [{"message": {"role": "assistant", "content": "hi"}, "finish_reason": "stop"}]
            })))
            .mount(&server)
            .await;
        let p = OpenAiProvider::new(Some(&format!("{}/v1", server.uri())), None, "default")
            .unwrap()
            .with_max_tokens_field(MaxTokensField::MaxCompletionTokens);
        let mut req = conversation();
        req.model = "other".into();
        let c = p.complete(&req).await.unwrap();
        assert_eq!(c.model, "other", "falls back to the asked model");
        assert_eq!(c.usage, Usage::default());
        let received = server.received_requests().await.unwrap();
        assert!(received[0].headers.get("authorization").is_none());
        let body: Value = serde_json::from_slice(&received[0].body).unwrap();
        assert_eq!(body["model"], "other");
        assert_eq!(body["max_completion_tokens"], 256);
        assert!(body.get("max_tokens").is_none());
    }

    #[tokio::test]
    async fn maps_errors_without_leaking_the_key() {
        let server = MockServer::start().await;
        let p = provider(&server).await;
        let cases = [
            (
                ResponseTemplate::new(429).insert_header("retry-after", "7"),
                LlmError::RateLimited {
                    retry_after: Some(Duration::from_secs(7)),
                },
            ),
            (
                ResponseTemplate::new(500)
                    .set_body_json(json!({"error": {"message": "boom", "type": "server_error"}})),
                LlmError::Server {
                    status: 500,
                    message: "boom".into(),
                    retry_after: None,
                },
            ),
            (
                ResponseTemplate::new(401).set_body_json(
                    json!({"error": {"message": format!("Incorrect API key provided: {KEY}")}}),
                ),
                LlmError::Rejected {
                    status: 401,
                    message: "Incorrect API key provided: [redacted]".into(),
                },
            ),
            (
                ResponseTemplate::new(200).set_body_string("not json"),
                LlmError::Decode("invalid JSON: expected ident at line 1 column 2".into()),
            ),
            (
                ResponseTemplate::new(200).set_body_json(json!({"choices": "none"})),
                LlmError::Decode(
                    "unexpected JSON: invalid type: string \"none\", expected a sequence at line 1 column 17"
                        .into(),
                ),
            ),
            // Too long for the context window: by code, or by wording
            // (vLLM puts the fields at the top level).
            (
                ResponseTemplate::new(400).set_body_json(json!({"error": {
                    "message": "Your input exceeds the limit.", "type": "invalid_request_error",
                    "param": "messages", "code": "context_length_exceeded"}})),
                LlmError::ContextOverflow {
                    status: 400,
                    message: "Your input exceeds the limit.".into(),
                },
            ),
            (
                ResponseTemplate::new(400).set_body_json(json!({"object": "error",
                    "message": "This model's maximum context length is 4096 tokens.",
                    "type": "BadRequestError", "code": 400})),
                LlmError::ContextOverflow {
                    status: 400,
                    message: "This model's maximum context length is 4096 tokens.".into(),
                },
            ),
            (
                ResponseTemplate::new(400).set_body_json(json!({"error": {
                    "message": "Invalid schema for function 'f'", "type": "invalid_request_error",
                    "code": "invalid_function_parameters"}})),
                LlmError::Rejected {
                    status: 400,
                    message: "Invalid schema for function 'f'".into(),
                },
            ),
        ];
        for (template, expected) in cases {
            server.reset().await;
            Mock::given(method("POST"))
                .respond_with(template)
                .mount(&server)
                .await;
            let err = p.complete(&conversation()).await.unwrap_err();
            assert_eq!(err, expected);
            assert!(!format!("{err} {err:?}").contains(KEY));
        }
        assert!(!format!("{p:?}").contains(KEY));
    }

    #[tokio::test]
    async fn unreachable_server_is_a_transport_error() {
        // Port 9 (discard) on loopback is closed in test environments.
        let p = OpenAiProvider::new(Some("http://127.0.0.1:9/v1"), Some(Secret::new(KEY)), "m")
            .unwrap();
        let err = p.complete(&conversation()).await.unwrap_err();
        assert!(matches!(err, LlmError::Transport(_)), "{err:?}");
        assert!(!err.to_string().contains(KEY));
    }

    #[tokio::test]
    async fn retries_honour_retry_after() {
        let server = MockServer::start().await;
        Mock::given(method("POST"))
            .respond_with(ResponseTemplate::new(429).insert_header("retry-after-ms", "1"))
            .up_to_n_times(2)
            .with_priority(1)
            .mount(&server)
            .await;
        Mock::given(method("POST"))
            .respond_with(ResponseTemplate::new(200).set_body_json(answer()))
            .mount(&server)
            .await;
        // A backoff of an hour: only honouring retry-after lets this finish.
        let policy = RetryPolicy {
            base_delay: Duration::from_secs(3600),
            max_delay: Duration::from_secs(3600),
            ..RetryPolicy::default()
        };
        let p = Retrying::new(provider(&server).await, policy);
        let c = tokio::time::timeout(Duration::from_secs(30), p.complete(&conversation()))
            .await
            .expect("retry-after was not honoured")
            .unwrap();
        assert_eq!(c.content, "Checking.");
        assert_eq!(server.received_requests().await.unwrap().len(), 3);
    }

    /// The bodies sent for `request`, whole then streamed, to a server
    /// that refuses both (the answer does not matter here).
    async fn bodies_sent(request: &CompletionRequest) -> (Result<(), LlmError>, Vec<Value>) {
        let server = MockServer::start().await;
        Mock::given(method("POST"))
            .and(path("/v1/chat/completions"))
            .respond_with(ResponseTemplate::new(400).set_body_json(
                json!({"error": {"message": "no", "type": "invalid_request_error"}}),
            ))
            .mount(&server)
            .await;
        let p = provider(&server).await;
        let whole = p.complete(request).await.map(|_| ());
        let sink = crate::fixtures::Deltas::default();
        let streamed = p.complete_streaming(request, &sink).await.map(|_| ());
        assert_eq!(whole.is_ok(), streamed.is_ok());
        let bodies = server
            .received_requests()
            .await
            .unwrap()
            .iter()
            .map(|r| serde_json::from_slice(&r.body).unwrap())
            .collect();
        (whole.or(streamed), bodies)
    }

    #[tokio::test]
    async fn a_forced_tool_is_a_named_tool_choice_whole_and_streamed() {
        let mut req = conversation();
        let (_, bodies) = bodies_sent(&req).await;
        assert!(
            bodies.iter().all(|b| b.get("tool_choice").is_none()),
            "{bodies:?}"
        );

        req.tool_choice = ToolChoice::tool("current_time");
        let (_, bodies) = bodies_sent(&req).await;
        assert_eq!(bodies.len(), 2);
        for body in &bodies {
            assert_eq!(
                body["tool_choice"],
                json!({"type": "function", "function": {"name": "current_time"}})
            );
        }
        assert_eq!(bodies[1]["stream"], true);

        // Forcing a tool the request does not offer sends nothing.
        req.tool_choice = ToolChoice::tool("route");
        let (result, bodies) = bodies_sent(&req).await;
        assert!(
            matches!(result, Err(LlmError::Config(ref m)) if m.contains("`route`")),
            "{result:?}"
        );
        assert!(bodies.is_empty());
    }

    #[test]
    fn request_decoder_inverts_the_encoder() {
        let mut req = conversation();
        req.model = "m".into();
        let round_trip = |req: &CompletionRequest| {
            decode_request(&json!(encode_request(
                req,
                "m",
                MaxTokensField::MaxTokens,
                true
            )
            .unwrap()))
            .unwrap()
        };
        assert_eq!(round_trip(&req), req);
        req.tool_choice = ToolChoice::tool("current_time");
        assert_eq!(round_trip(&req), req);
        // The mock refuses what the API refuses, and modes it does not play.
        let mut body = json!(encode_request(&req, "m", MaxTokensField::MaxTokens, true).unwrap());
        body["tool_choice"]["function"]["name"] = json!("route");
        assert!(decode_request(&body).unwrap_err().contains("`route`"));
        body["tool_choice"] = json!("required");
        assert!(decode_request(&body).is_err());
        body["tool_choice"] = json!("auto");
        assert_eq!(decode_request(&body).unwrap().tool_choice, ToolChoice::Auto);
    }

    #[test]
    fn response_decoder_inverts_the_encoder() {
        let c = Completion {
            content: String::new(),
            tool_calls: vec![ToolCall {
                id: "c1".into(),
                name: "t".into(),
                arguments: json!({"a": 1}),
            }],
            usage: Usage {
                input_tokens: 3,
                output_tokens: 4,
            },
            stop_reason: Some("tool_calls".into()),
            model: "m".into(),
        };
        let body = serde_json::from_value(encode_response(&c, "id")).unwrap();
        assert_eq!(decode_response(&body).unwrap(), c);
        let no_choices = serde_json::from_value(json!({"choices": []})).unwrap();
        assert!(matches!(
            decode_response(&no_choices),
            Err(LlmError::Decode(_))
        ));
    }

    #[test]
    fn loose_answers_are_read() {
        // Nulls, missing ids, decoded or absent arguments, content parts,
        // unknown fields, a finish reason this crate does not know.
        let body = json!({
            "id": null, "created": "yesterday", "model": null, "system_fingerprint": "fp",
            "choices": [{"index": null, "finish_reason": "guarded", "message": {
                "role": "assistant",
                "content": [{"type": "text", "text": "a"}, {"type": "image_url"}, {"type": "text", "text": "b"}],
                "tool_calls": [
                    {"function": {"name": "f", "arguments": {"x": 1}}},
                    {"id": "", "type": "function", "function": {"name": "g"}}
                ],
                "refusal": null}}],
            "usage": {"prompt_tokens": 5, "completion_tokens": null, "prompt_tokens_details": {}}
        });
        let c = decode_response(&serde_json::from_value(body).unwrap()).unwrap();
        assert_eq!(c.content, "ab");
        assert_eq!(c.stop_reason.as_deref(), Some("guarded"));
        assert_eq!(c.model, "");
        assert_eq!(
            c.usage,
            Usage {
                input_tokens: 5,
                output_tokens: 0
            }
        );
        let calls: Vec<_> = c
            .tool_calls
            .iter()
            .map(|c| (c.id.as_str(), c.name.as_str(), c.arguments.clone()))
            .collect();
        assert_eq!(
            calls,
            [("call_0", "f", json!({"x": 1})), ("call_1", "g", json!({}))]
        );
        let body =
            json!({"choices": [{"message": {"content": null, "tool_calls": null}}], "usage": null});
        let c = decode_response(&serde_json::from_value(body).unwrap()).unwrap();
        assert_eq!((c.content.as_str(), c.tool_calls.len()), ("", 0));
        assert_eq!(c.stop_reason, None);
    }

    #[test]
    fn requests_from_other_clients_are_read() {
        let body = json!({
            "model": "m", "stream": false,
            "messages": [
                {"role": "developer", "content": "d"},
                {"role": "system", "content": [{"type": "text", "text": "s"}]},
                {"role": "user", "content": [{"type": "text", "text": "u"}, {"type": "image_url", "image_url": {"url": "x"}}]},
                {"role": "assistant", "content": null, "tool_calls": [{"function": {"name": "f", "arguments": ""}}]},
                {"role": "tool", "tool_call_id": "call_m3_0", "content": "r"}
            ],
            "tools": null, "max_completion_tokens": 7
        });
        let req = decode_request(&body).unwrap();
        assert_eq!(req.system, "d\n\ns");
        assert_eq!(req.max_tokens, 7);
        assert_eq!(
            req.messages[2],
            Message::Tool {
                call_id: "call_m3_0".into(),
                name: "f".into(),
                content: "r".into(),
                is_error: false
            }
        );
        assert!(decode_request(&json!({"model": "m", "messages": [{"role": "robot"}]})).is_err());
    }

    #[test]
    fn without_tools_the_tool_turns_go_as_text() {
        let mut req = conversation();
        req.tools.clear();
        let body = serde_json::to_value(
            encode_request(&req, "m", MaxTokensField::MaxTokens, true).unwrap(),
        )
        .unwrap();
        assert_eq!(
            body["messages"],
            json!([
                {"role": "system", "content": "You are terse."},
                {"role": "user", "content": "what time is it?"},
                {"role": "assistant", "content": "[called tool current_time with {\"timezone\":\"UTC\"}]"},
                {"role": "user", "content": "[result of current_time: 12:00]"}
            ])
        );
        assert!(body.get("tools").is_none());
        assert!(!body.to_string().contains("tool_call"), "{body}");
    }
}
