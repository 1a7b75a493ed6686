//! Anthropic Messages (`POST {base}/v1/messages`), answered whole or
//! streamed (`stream`).
//!
//! The bodies are typed in [`wire`]; the mapping to and from the neutral
//! types lives in plain functions, and the mock server runs it backwards
//! ([`server`]).

#[cfg(any(test, feature = "mock-server"))]
mod server;
mod stream;
pub(crate) mod wire;

#[cfg(any(test, feature = "mock-server"))]
pub use server::{decode_request, encode_response};
#[cfg(any(test, feature = "mock-server"))]
pub(crate) use server::{from_wire_request, to_wire_events, to_wire_response};

use crate::http;
use crate::mapping::{self, messages_to_send, object_arguments};
use crate::secret::Secret;
use async_trait::async_trait;
use baton_core::{
    AttachmentContent, Completion, CompletionRequest, DeltaSink, LlmError, LlmProvider, Message,
    ToolCall, Usage,
};
use std::time::Duration;
use wire::{Block, Content, Role};

/// The API version this mapping is written against.
pub const ANTHROPIC_VERSION: &str = "2023-06-01";

/// Anthropic requires `max_tokens`; used when a request leaves it 0.
pub const DEFAULT_MAX_TOKENS: u32 = 4096;

/// A client of the Anthropic Messages API.
#[derive(Clone, Debug)]
pub struct AnthropicProvider {
    client: reqwest::Client,
    base_url: String,
    api_key: Option<Secret>,
    model: String,
    timeout: Duration,
    idle_timeout: Duration,
}

impl AnthropicProvider {
    /// Anthropic's own endpoint.
    pub const DEFAULT_BASE_URL: &'static str = "https://api.anthropic.com";

    /// A provider for `base_url` (default [`Self::DEFAULT_BASE_URL`]; without
    /// `/v1`, as `ANTHROPIC_BASE_URL` is). `model` is used when a request
    /// names none. The key, when given, is sent as `x-api-key`.
    pub fn new(
        base_url: Option<&str>,
        api_key: Option<Secret>,
        model: impl Into<String>,
    ) -> Result<Self, LlmError> {
        Ok(AnthropicProvider {
            client: http::build_client()?,
            base_url: http::normalize_base_url(base_url.unwrap_or(Self::DEFAULT_BASE_URL))?,
            api_key,
            model: model.into(),
            timeout: Duration::from_secs(300),
            idle_timeout: http::DEFAULT_IDLE_TIMEOUT,
        })
    }

    /// The whole-request timeout (default 300 s).
    pub fn with_timeout(mut self, timeout: Duration) -> Self {
        self.timeout = timeout;
        self
    }

    /// The longest wait for the next piece of a streamed answer (default
    /// 60 s; Anthropic pings meanwhile); the whole-request timeout bounds
    /// the lot.
    pub fn with_idle_timeout(mut self, idle: Duration) -> Self {
        self.idle_timeout = idle;
        self
    }

    /// The base URL in use, without a trailing slash.
    pub fn base_url(&self) -> &str {
        &self.base_url
    }

    /// A POST to the Messages endpoint, with the version and the key.
    fn post(&self) -> reqwest::RequestBuilder {
        let builder = self
            .client
            .post(format!("{}/v1/messages", self.base_url))
            .header("anthropic-version", ANTHROPIC_VERSION);
        match &self.api_key {
            Some(key) => builder.header("x-api-key", key.expose()),
            None => builder,
        }
    }
}

#[async_trait]
impl LlmProvider for AnthropicProvider {
    fn name(&self) -> &str {
        "anthropic"
    }

    async fn complete(&self, request: &CompletionRequest) -> Result<Completion, LlmError> {
        let model = http::pick_model(request, &self.model)?;
        let body = encode_request(request, model)?;
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

    /// Streams the answer as server-sent events (`"stream": true`).
    async fn complete_streaming(
        &self,
        request: &CompletionRequest,
        sink: &dyn DeltaSink,
    ) -> Result<Completion, LlmError> {
        let model = http::pick_model(request, &self.model)?;
        let mut body = encode_request(request, model)?;
        body.stream = Some(true);
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

/// A call as a `tool_use` block.
fn tool_use(call: &ToolCall) -> Block {
    Block::ToolUse {
        id: call.id.clone(),
        name: call.name.clone(),
        input: object_arguments(&call.arguments),
    }
}

/// The content blocks of one neutral message, and the role they go under.
fn blocks(message: &Message) -> (Role, Vec<Block>) {
    match message {
        Message::User { content } => (Role::User, text_block(content)),
        Message::Assistant {
            content,
            tool_calls,
        } => {
            let mut out = text_block(content);
            out.extend(tool_calls.iter().map(tool_use));
            (Role::Assistant, out)
        }
        Message::Tool {
            call_id,
            content,
            is_error,
            ..
        } => {
            let block = Block::ToolResult {
                tool_use_id: call_id.clone(),
                // An empty result goes without content: empty text is refused.
                content: (!content.is_empty()).then(|| Content::Text(content.clone())),
                is_error: *is_error,
            };
            (Role::User, vec![block])
        }
        Message::Attachment {
            name,
            media_type,
            content,
        } => (Role::User, attachment_blocks(name, media_type, content)),
    }
}

/// An attached file: a labelled image or document block, or text.
fn attachment_blocks(name: &str, media_type: &str, content: &AttachmentContent) -> Vec<Block> {
    let source = |data: &String| wire::Source {
        kind: "base64".to_owned(),
        media_type: media_type.to_owned(),
        data: data.clone(),
    };
    let label = Block::Text {
        text: AttachmentContent::label(name),
    };
    match content {
        AttachmentContent::Image { data_base64 } => vec![
            label,
            Block::Image {
                source: source(data_base64),
            },
        ],
        AttachmentContent::Document { data_base64 } => vec![
            label,
            Block::Document {
                source: source(data_base64),
                title: Some(name.to_owned()),
            },
        ],
        other => text_block(&other.as_text(name, media_type)),
    }
}

/// Anthropic rejects empty text blocks, so empty text becomes no block.
fn text_block(text: &str) -> Vec<Block> {
    if text.is_empty() {
        Vec::new()
    } else {
        vec![Block::Text {
            text: text.to_owned(),
        }]
    }
}

/// The Messages request body for `request`, asking `model`. Tool results
/// travel in user messages, and consecutive same-role messages are merged
/// because the API wants roles to alternate. A request without tools gets
/// its tool turns as text ([`mapping::messages_to_send`]); a forced tool
/// goes as `tool_choice` `{"type": "tool"}`, and must be among the tools
/// ([`mapping::forced_tool`]).
pub(crate) fn encode_request(
    request: &CompletionRequest,
    model: &str,
) -> Result<wire::Request, LlmError> {
    let tool_choice = mapping::forced_tool(request)?.map(|name| wire::ToolChoice::Tool {
        name: name.to_owned(),
    });
    let mut messages: Vec<wire::MessageParam> = Vec::new();
    for message in messages_to_send(request).iter() {
        let (role, content) = blocks(message);
        if content.is_empty() {
            continue;
        }
        match messages.last_mut() {
            Some(wire::MessageParam {
                role: last_role,
                content: Content::Blocks(last),
            }) if *last_role == role => last.extend(content),
            _ => messages.push(wire::MessageParam {
                role,
                content: Content::Blocks(content),
            }),
        }
    }
    let max_tokens = if request.max_tokens == 0 {
        DEFAULT_MAX_TOKENS
    } else {
        request.max_tokens
    };
    Ok(wire::Request {
        model: model.to_owned(),
        max_tokens,
        system: (!request.system.is_empty()).then(|| Content::Text(request.system.clone())),
        messages,
        tools: request
            .tools
            .iter()
            .map(|t| wire::Tool {
                name: t.name.clone(),
                description: t.description.clone(),
                input_schema: t.input_schema.clone(),
            })
            .collect(),
        tool_choice,
        stream: None,
    })
}

/// Reads a Messages response body.
pub(crate) fn decode_response(body: &wire::Response) -> Result<Completion, LlmError> {
    let content = body
        .content
        .as_ref()
        .ok_or_else(|| LlmError::Decode("response has no content array".into()))?;
    let mut text = String::new();
    let mut tool_calls = Vec::new();
    for block in content {
        match block {
            Block::Text { text: t } => text.push_str(t),
            Block::ToolUse { id, name, input } => tool_calls.push(ToolCall {
                id: id.clone(),
                name: name.clone(),
                arguments: input.clone(),
            }),
            // Tool results are not for responses; thinking and the like
            // are not for us.
            Block::ToolResult { .. }
            | Block::Image { .. }
            | Block::Document { .. }
            | Block::Other => {}
        }
    }
    let usage = body
        .usage
        .map(|u| Usage {
            // Cached prompt tokens are input too, for budgets.
            input_tokens: u
                .input_tokens
                .unwrap_or(0)
                .saturating_add(u.cache_creation_input_tokens.unwrap_or(0))
                .saturating_add(u.cache_read_input_tokens.unwrap_or(0)),
            output_tokens: u.output_tokens.unwrap_or(0),
        })
        .unwrap_or_default();
    Ok(Completion {
        content: text,
        tool_calls,
        usage,
        stop_reason: body.stop_reason.clone().map(String::from),
        model: body.model.clone(),
    })
}

/// Whether a refusal is for a prompt longer than the model's context
/// window: an `invalid_request_error` saying "prompt is too long" (or that
/// input and `max_tokens` exceed the context limit).
fn is_context_overflow(body: &[u8], message: &str) -> bool {
    serde_json::from_slice::<wire::ErrorResponse>(body).is_ok_and(|e| {
        e.error.kind == "invalid_request_error" && mapping::mentions_context_overflow(message)
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fixtures::call;
    use crate::{RetryPolicy, Retrying};
    use baton_core::ToolChoice;
    use serde_json::{json, Value};
    use wiremock::matchers::{header, method, path};
    use wiremock::{Mock, MockServer, ResponseTemplate};

    const KEY: &str = "sk-ant-test-0123456789";

    fn conversation() -> CompletionRequest {
        crate::fixtures::conversation("toolu_")
    }

    fn answer() -> Value {
        json!({
            "id": "msg_1", "type": "message", "role": "assistant", "model": "claude-test-1",
            "content": [
                {"type": "thinking", "thinking": "hmm", "signature": "x"},
                {"type": "text", "text": "It is "},
                {"type": "tool_use", "id": "toolu_9", "name": "lookup", "input": {"q": "x"}},
                {"type": "text", "text": "noon."}
            ],
            "stop_reason": "tool_use", "stop_sequence": null,
            "usage": {"input_tokens": 30, "cache_read_input_tokens": 10, "output_tokens": 5}
        })
    }

    async fn provider(server: &MockServer) -> AnthropicProvider {
        AnthropicProvider::new(Some(&server.uri()), Some(Secret::new(KEY)), "claude-test").unwrap()
    }

    #[tokio::test]
    async fn sends_the_messages_shape_and_reads_the_answer() {
        let server = MockServer::start().await;
        Mock::given(method("POST"))
            .and(path("/v1/messages"))
            .and(header("x-api-key", KEY))
            .and(header("anthropic-version", "2023-06-01"))
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
        assert!(received[0].headers.get("authorization").is_none());
        let body: Value = serde_json::from_slice(&received[0].body).unwrap();
        assert_eq!(
            body,
            json!({
                "model": "claude-test",
                "max_tokens": DEFAULT_MAX_TOKENS,
                "system": "You are terse.",
                "messages": [
                    {"role": "user", "content": [{"type": "text", "text": "time twice?"}]},
                    {"role": "assistant", "content": [
                        {"type": "text", "text": "Checking."},
                        {"type": "tool_use", "id": "toolu_1", "name": "current_time", "input": {}},
                        {"type": "tool_use", "id": "toolu_2", "name": "current_time", "input": {}}
                    ]},
                    {"role": "user", "content": [
                        {"type": "tool_result", "tool_use_id": "toolu_1", "content": "12:00", "is_error": false},
                        {"type": "tool_result", "tool_use_id": "toolu_2", "content": "bad zone", "is_error": true},
                        {"type": "text", "text": "hurry"}
                    ]}
                ],
                "tools": [{"name": "current_time", "description": "The time", "input_schema": {"type": "object"}}]
            })
        );

        assert_eq!(c.content, "It is noon.");
        assert_eq!(
            c.tool_calls,
            vec![ToolCall {
                id: "toolu_9".into(),
                name: "lookup".into(),
                arguments: json!({"q": "x"})
            }]
        );
        assert_eq!(
            c.usage,
            Usage {
                input_tokens: 40,
                output_tokens: 5
            }
        );
        assert_eq!(c.stop_reason.as_deref(), Some("tool_use"));
        assert_eq!(c.model, "claude-test-1");
    }

    #[tokio::test]
    async fn maps_errors_without_leaking_the_key() {
        let server = MockServer::start().await;
        let p = provider(&server).await;
        let overloaded = json!({"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}});
        let cases = [
            (
                ResponseTemplate::new(529).set_body_json(overloaded.clone()),
                LlmError::Overloaded { retry_after: None },
            ),
            (
                ResponseTemplate::new(503).set_body_json(overloaded),
                LlmError::Overloaded { retry_after: None },
            ),
            (
                ResponseTemplate::new(429)
                    .insert_header("retry-after", "2")
                    .set_body_json(json!({"type": "error", "error": {"type": "rate_limit_error", "message": "slow down"}})),
                LlmError::RateLimited { retry_after: Some(Duration::from_secs(2)) },
            ),
            (
                ResponseTemplate::new(500).set_body_json(json!({"type": "error", "error": {"type": "api_error", "message": "Internal"}})),
                LlmError::Server { status: 500, message: "Internal".into(), retry_after: None },
            ),
            (
                ResponseTemplate::new(400).set_body_json(json!({"type": "error", "error": {"type": "invalid_request_error", "message": "messages: roles must alternate"}})),
                LlmError::Rejected { status: 400, message: "messages: roles must alternate".into() },
            ),
            (
                ResponseTemplate::new(200).set_body_json(json!({"type": "message"})),
                LlmError::Decode("response has no content array".into()),
            ),
            (
                ResponseTemplate::new(400).set_body_json(json!({"type": "error", "error": {"type": "invalid_request_error", "message": "prompt is too long: 210000 tokens > 200000 maximum"}})),
                LlmError::ContextOverflow { status: 400, message: "prompt is too long: 210000 tokens > 200000 maximum".into() },
            ),
            (
                // The words alone are not enough: not an invalid request.
                ResponseTemplate::new(403).set_body_json(json!({"type": "error", "error": {"type": "permission_error", "message": "prompt is too long for your plan"}})),
                LlmError::Rejected { status: 403, message: "prompt is too long for your plan".into() },
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
    async fn retries_overload_then_succeeds() {
        let server = MockServer::start().await;
        Mock::given(method("POST"))
            .respond_with(ResponseTemplate::new(529).insert_header("retry-after", "0"))
            .up_to_n_times(3)
            .with_priority(1)
            .mount(&server)
            .await;
        Mock::given(method("POST"))
            .respond_with(ResponseTemplate::new(200).set_body_json(answer()))
            .mount(&server)
            .await;
        let p = Retrying::new(provider(&server).await, RetryPolicy::default());
        let c = p.complete(&conversation()).await.unwrap();
        assert_eq!(c.model, "claude-test-1");
        assert_eq!(server.received_requests().await.unwrap().len(), 4);
    }

    #[tokio::test]
    async fn gives_up_after_the_policy_attempts() {
        let server = MockServer::start().await;
        Mock::given(method("POST"))
            .respond_with(ResponseTemplate::new(500).insert_header("retry-after", "0"))
            .mount(&server)
            .await;
        let policy = RetryPolicy {
            max_attempts: 3,
            ..RetryPolicy::default()
        };
        let p = Retrying::new(provider(&server).await, policy);
        assert!(matches!(
            p.complete(&conversation()).await,
            Err(LlmError::Server { status: 500, .. })
        ));
        assert_eq!(server.received_requests().await.unwrap().len(), 3);
    }

    /// The bodies sent for `request`, whole then streamed, to a server
    /// that refuses both (the answer does not matter here).
    async fn bodies_sent(request: &CompletionRequest) -> (Result<(), LlmError>, Vec<Value>) {
        let server = MockServer::start().await;
        Mock::given(method("POST"))
            .and(path("/v1/messages"))
            .respond_with(
                ResponseTemplate::new(400).set_body_json(json!({"type": "error",
                "error": {"type": "invalid_request_error", "message": "no"}})),
            )
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
    async fn a_forced_tool_is_a_tool_choice_of_type_tool_whole_and_streamed() {
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
                json!({"type": "tool", "name": "current_time"})
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
        req.max_tokens = 100;
        let decoded = decode_request(&json!(encode_request(&req, "m").unwrap())).unwrap();
        assert_eq!(decoded, req);
        req.tool_choice = ToolChoice::tool("current_time");
        let mut body = json!(encode_request(&req, "m").unwrap());
        assert_eq!(decode_request(&body).unwrap(), req);
        // The mock refuses what the API refuses, and kinds it does not play.
        body["tool_choice"]["name"] = json!("route");
        assert!(decode_request(&body).unwrap_err().contains("`route`"));
        body["tool_choice"] = json!({"type": "any"});
        assert!(decode_request(&body).is_err());
        body["tool_choice"] = json!({"type": "auto"});
        assert_eq!(decode_request(&body).unwrap().tool_choice, ToolChoice::Auto);
    }

    #[test]
    fn response_decoder_inverts_the_encoder() {
        let c = Completion {
            content: "see".into(),
            tool_calls: vec![call("toolu_5")],
            usage: Usage {
                input_tokens: 3,
                output_tokens: 4,
            },
            stop_reason: Some("tool_use".into()),
            model: "m".into(),
        };
        let body = serde_json::from_value(encode_response(&c, "id")).unwrap();
        assert_eq!(decode_response(&body).unwrap(), c);
    }

    #[test]
    fn empty_tool_result_has_no_content() {
        let req = CompletionRequest {
            model: "m".into(),
            system: String::new(),
            messages: vec![
                Message::User {
                    content: "a".into(),
                },
                Message::Assistant {
                    content: String::new(),
                    tool_calls: vec![call("t1")],
                },
                Message::Tool {
                    call_id: "t1".into(),
                    name: "current_time".into(),
                    content: String::new(),
                    is_error: false,
                },
            ],
            tools: conversation().tools,
            max_tokens: 10,
            tool_choice: ToolChoice::Auto,
        };
        let body = json!(encode_request(&req, "m").unwrap());
        assert_eq!(
            body["messages"][2]["content"],
            json!([{"type": "tool_result", "tool_use_id": "t1", "is_error": false}])
        );
        assert_eq!(decode_request(&body).unwrap(), req);
    }

    #[test]
    fn empty_messages_are_skipped_so_roles_still_alternate() {
        let req = CompletionRequest {
            model: "m".into(),
            system: String::new(),
            messages: vec![
                Message::User {
                    content: "a".into(),
                },
                Message::Assistant {
                    content: String::new(),
                    tool_calls: vec![],
                },
                Message::User {
                    content: "b".into(),
                },
            ],
            tools: vec![],
            max_tokens: 10,
            tool_choice: ToolChoice::Auto,
        };
        let body = serde_json::to_value(encode_request(&req, "m").unwrap()).unwrap();
        assert!(body.get("system").is_none());
        assert!(body.get("tools").is_none());
        assert_eq!(
            body["messages"],
            json!([{"role": "user", "content": [{"type": "text", "text": "a"}, {"type": "text", "text": "b"}]}])
        );
    }

    #[test]
    fn without_tools_the_tool_turns_go_as_text() {
        let mut req = conversation();
        req.tools.clear();
        let body = serde_json::to_value(encode_request(&req, "m").unwrap()).unwrap();
        assert_eq!(
            body["messages"],
            json!([
                {"role": "user", "content": [{"type": "text", "text": "time twice?"}]},
                {"role": "assistant", "content": [{"type": "text", "text":
                    "Checking.\n[called tool current_time with {}]\n[called tool current_time with {}]"}]},
                {"role": "user", "content": [
                    {"type": "text", "text": "[result of current_time: 12:00]"},
                    {"type": "text", "text": "[error from current_time: bad zone]"},
                    {"type": "text", "text": "hurry"}
                ]}
            ])
        );
        assert!(body.get("tools").is_none());
        let shown = body.to_string();
        assert!(
            !shown.contains("tool_use") && !shown.contains("tool_result"),
            "{shown}"
        );
    }

    #[test]
    fn unknown_blocks_and_stop_reasons_are_tolerated() {
        let body = json!({
            "content": [
                {"type": "server_tool_use", "id": "s1", "name": "web_search", "input": {}},
                {"type": "text", "text": "hi", "citations": null}
            ],
            "stop_reason": "pause_turn", "model": "m", "container": null,
            "usage": {"input_tokens": 1, "cache_creation_input_tokens": null, "output_tokens": 2}
        });
        let c = decode_response(&serde_json::from_value(body).unwrap()).unwrap();
        assert_eq!(c.content, "hi");
        assert_eq!(c.stop_reason.as_deref(), Some("pause_turn"));
        assert_eq!(
            c.usage,
            Usage {
                input_tokens: 1,
                output_tokens: 2
            }
        );
    }
}
