//! Anthropic Messages (`POST {base}/v1/messages`).
//!
//! The wire mapping lives in plain functions so the mock server can run it
//! backwards.

use crate::http;
use crate::secret::Secret;
use async_trait::async_trait;
use baton_core::{
    Completion, CompletionRequest, LlmError, LlmProvider, Message, ToolCall, ToolSpec, Usage,
};
use serde_json::{json, Map, Value};
use std::time::Duration;

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
        })
    }

    /// The whole-request timeout (default 300 s).
    pub fn with_timeout(mut self, timeout: Duration) -> Self {
        self.timeout = timeout;
        self
    }

    /// The base URL in use, without a trailing slash.
    pub fn base_url(&self) -> &str {
        &self.base_url
    }
}

#[async_trait]
impl LlmProvider for AnthropicProvider {
    fn name(&self) -> &str {
        "anthropic"
    }

    async fn complete(&self, request: &CompletionRequest) -> Result<Completion, LlmError> {
        let model = http::pick_model(request, &self.model)?;
        let body = encode_request(request, model);
        let mut builder = self
            .client
            .post(format!("{}/v1/messages", self.base_url))
            .header("anthropic-version", ANTHROPIC_VERSION);
        if let Some(key) = &self.api_key {
            builder = builder.header("x-api-key", key.expose());
        }
        let answer = http::post_json(builder, &body, self.timeout, self.api_key.as_ref()).await?;
        let mut completion = decode_response(&answer)?;
        if completion.model.is_empty() {
            completion.model = model.to_string();
        }
        Ok(completion)
    }
}

/// The content blocks of one neutral message, and the role they go under.
fn blocks(message: &Message) -> (&'static str, Vec<Value>) {
    match message {
        Message::User { content } => ("user", text_block(content)),
        Message::Assistant {
            content,
            tool_calls,
        } => {
            let mut out = text_block(content);
            out.extend(tool_calls.iter().map(|c| {
                // `input` must be an object; arguments kept raw (invalid
                // JSON) are wrapped rather than dropped.
                let input = if c.arguments.is_object() {
                    c.arguments.clone()
                } else {
                    json!({"_raw_arguments": c.arguments})
                };
                json!({"type": "tool_use", "id": c.id, "name": c.name, "input": input})
            }));
            ("assistant", out)
        }
        Message::Tool {
            call_id,
            content,
            is_error,
            ..
        } => {
            let mut block =
                json!({"type": "tool_result", "tool_use_id": call_id, "is_error": is_error});
            // An empty result goes without content: empty text is refused.
            if !content.is_empty() {
                block["content"] = json!(content);
            }
            ("user", vec![block])
        }
    }
}

/// Anthropic rejects empty text blocks, so empty text becomes no block.
fn text_block(text: &str) -> Vec<Value> {
    if text.is_empty() {
        Vec::new()
    } else {
        vec![json!({"type": "text", "text": text})]
    }
}

/// The Messages request body for `request`, asking `model`. Tool results
/// travel in user messages, and consecutive same-role messages are merged
/// because the API wants roles to alternate.
pub fn encode_request(request: &CompletionRequest, model: &str) -> Value {
    let mut messages: Vec<(&'static str, Vec<Value>)> = Vec::new();
    for message in &request.messages {
        let (role, content) = blocks(message);
        if content.is_empty() {
            continue;
        }
        match messages.last_mut() {
            Some((last_role, last)) if *last_role == role => last.extend(content),
            _ => messages.push((role, content)),
        }
    }
    let messages: Vec<Value> = messages
        .into_iter()
        .map(|(role, content)| json!({"role": role, "content": content}))
        .collect();
    let mut body = Map::new();
    body.insert("model".into(), json!(model));
    let max_tokens = if request.max_tokens == 0 {
        DEFAULT_MAX_TOKENS
    } else {
        request.max_tokens
    };
    body.insert("max_tokens".into(), json!(max_tokens));
    if !request.system.is_empty() {
        body.insert("system".into(), json!(request.system));
    }
    body.insert("messages".into(), Value::Array(messages));
    if !request.tools.is_empty() {
        let tools: Vec<Value> = request
            .tools
            .iter()
            .map(|t| json!({"name": t.name, "description": t.description, "input_schema": t.input_schema}))
            .collect();
        body.insert("tools".into(), Value::Array(tools));
    }
    Value::Object(body)
}

fn u64_at(v: &Value, key: &str) -> u64 {
    v.get(key).and_then(Value::as_u64).unwrap_or(0)
}

/// Reads a Messages response body.
pub fn decode_response(body: &Value) -> Result<Completion, LlmError> {
    let content = body
        .get("content")
        .and_then(Value::as_array)
        .ok_or_else(|| LlmError::Decode("response has no content array".into()))?;
    let mut text = String::new();
    let mut tool_calls = Vec::new();
    for block in content {
        match block.get("type").and_then(Value::as_str) {
            Some("text") => {
                if let Some(t) = block.get("text").and_then(Value::as_str) {
                    text.push_str(t);
                }
            }
            Some("tool_use") => {
                let id = block.get("id").and_then(Value::as_str);
                let name = block.get("name").and_then(Value::as_str);
                let (Some(id), Some(name)) = (id, name) else {
                    return Err(LlmError::Decode("tool_use block without id or name".into()));
                };
                tool_calls.push(ToolCall {
                    id: id.to_string(),
                    name: name.to_string(),
                    arguments: block.get("input").cloned().unwrap_or_else(|| json!({})),
                });
            }
            // thinking, redacted_thinking, server tool blocks: not for us.
            _ => {}
        }
    }
    let usage = body
        .get("usage")
        .map(|u| Usage {
            // Cached prompt tokens are input too, for budgets.
            input_tokens: u64_at(u, "input_tokens")
                .saturating_add(u64_at(u, "cache_creation_input_tokens"))
                .saturating_add(u64_at(u, "cache_read_input_tokens")),
            output_tokens: u64_at(u, "output_tokens"),
        })
        .unwrap_or_default();
    Ok(Completion {
        content: text,
        tool_calls,
        usage,
        stop_reason: body
            .get("stop_reason")
            .and_then(Value::as_str)
            .map(str::to_string),
        model: body
            .get("model")
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_string(),
    })
}

/// Content as a string or an array of text blocks.
fn text_of(content: Option<&Value>) -> String {
    match content {
        Some(Value::String(s)) => s.clone(),
        Some(Value::Array(blocks)) => blocks
            .iter()
            .filter_map(|b| b.get("text").and_then(Value::as_str))
            .collect::<Vec<_>>()
            .join("\n"),
        _ => String::new(),
    }
}

/// Reads a Messages request body back into a [`CompletionRequest`] (the
/// inverse of [`encode_request`]; used by the mock server). A user message
/// holding tool results becomes one `Tool` message per result.
pub fn decode_request(body: &Value) -> Result<CompletionRequest, String> {
    let model = body
        .get("model")
        .and_then(Value::as_str)
        .ok_or("missing model")?
        .to_string();
    let max_tokens = body
        .get("max_tokens")
        .and_then(Value::as_u64)
        .ok_or("missing max_tokens")?;
    let raw = body
        .get("messages")
        .and_then(Value::as_array)
        .ok_or("missing messages")?;
    let mut messages = Vec::new();
    for m in raw {
        let role = m
            .get("role")
            .and_then(Value::as_str)
            .ok_or("message without role")?;
        let blocks: Vec<Value> = match m.get("content") {
            Some(Value::String(s)) => vec![json!({"type": "text", "text": s})],
            Some(Value::Array(a)) => a.clone(),
            _ => return Err("message content must be a string or an array".into()),
        };
        match role {
            "user" => {
                let mut text = Vec::new();
                for b in &blocks {
                    match b.get("type").and_then(Value::as_str) {
                        Some("text") => {
                            text.push(b.get("text").and_then(Value::as_str).unwrap_or_default())
                        }
                        Some("tool_result") => {
                            let call_id = b
                                .get("tool_use_id")
                                .and_then(Value::as_str)
                                .ok_or("tool_result without tool_use_id")?
                                .to_string();
                            let name = find_call_name(&messages, &call_id);
                            messages.push(Message::Tool {
                                call_id,
                                name,
                                content: text_of(b.get("content")),
                                is_error: b
                                    .get("is_error")
                                    .and_then(Value::as_bool)
                                    .unwrap_or(false),
                            });
                        }
                        _ => {}
                    }
                }
                if !text.is_empty() {
                    messages.push(Message::User {
                        content: text.join("\n"),
                    });
                }
            }
            "assistant" => {
                let mut text = String::new();
                let mut tool_calls = Vec::new();
                for b in &blocks {
                    match b.get("type").and_then(Value::as_str) {
                        Some("text") => {
                            text.push_str(b.get("text").and_then(Value::as_str).unwrap_or_default())
                        }
                        Some("tool_use") => tool_calls.push(ToolCall {
                            id: b
                                .get("id")
                                .and_then(Value::as_str)
                                .ok_or("tool_use without id")?
                                .to_string(),
                            name: b
                                .get("name")
                                .and_then(Value::as_str)
                                .ok_or("tool_use without name")?
                                .to_string(),
                            arguments: b.get("input").cloned().unwrap_or_else(|| json!({})),
                        }),
                        _ => {}
                    }
                }
                messages.push(Message::Assistant {
                    content: text,
                    tool_calls,
                });
            }
            other => return Err(format!("unknown role {other}")),
        }
    }
    let tools = match body.get("tools") {
        None | Some(Value::Null) => Vec::new(),
        Some(t) => t
            .as_array()
            .ok_or("tools is not an array")?
            .iter()
            .map(|t| {
                Ok(ToolSpec {
                    name: t
                        .get("name")
                        .and_then(Value::as_str)
                        .ok_or("tool without name")?
                        .to_string(),
                    description: t
                        .get("description")
                        .and_then(Value::as_str)
                        .unwrap_or_default()
                        .to_string(),
                    input_schema: t.get("input_schema").cloned().unwrap_or_else(|| json!({})),
                })
            })
            .collect::<Result<_, String>>()?,
    };
    Ok(CompletionRequest {
        model,
        system: text_of(body.get("system")),
        messages,
        tools,
        max_tokens: u32::try_from(max_tokens).unwrap_or(u32::MAX),
    })
}

/// The name of the tool call `call_id` among earlier assistant messages.
pub(crate) fn find_call_name(messages: &[Message], call_id: &str) -> String {
    messages
        .iter()
        .rev()
        .find_map(|m| match m {
            Message::Assistant { tool_calls, .. } => tool_calls
                .iter()
                .find(|c| c.id == call_id)
                .map(|c| c.name.clone()),
            _ => None,
        })
        .unwrap_or_default()
}

/// A Messages response body for `completion` (the inverse of
/// [`decode_response`]; used by the mock server).
pub fn encode_response(completion: &Completion, id: &str) -> Value {
    let mut content = text_block(&completion.content);
    content.extend(
        completion
            .tool_calls
            .iter()
            .map(|c| json!({"type": "tool_use", "id": c.id, "name": c.name, "input": c.arguments})),
    );
    let stop_reason = match completion.stop_reason.as_deref() {
        Some("tool_use") | Some("tool_calls") => "tool_use",
        Some("max_tokens") | Some("length") => "max_tokens",
        _ => "end_turn",
    };
    json!({
        "id": id,
        "type": "message",
        "role": "assistant",
        "model": completion.model,
        "content": content,
        "stop_reason": stop_reason,
        "stop_sequence": null,
        "usage": {"input_tokens": completion.usage.input_tokens, "output_tokens": completion.usage.output_tokens},
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fixtures::call;
    use crate::{RetryPolicy, Retrying};
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

    #[test]
    fn request_decoder_inverts_the_encoder() {
        let mut req = conversation();
        req.model = "m".into();
        req.max_tokens = 100;
        let decoded = decode_request(&encode_request(&req, "m")).unwrap();
        assert_eq!(decoded, req);
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
        assert_eq!(decode_response(&encode_response(&c, "id")).unwrap(), c);
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
            tools: vec![],
            max_tokens: 10,
        };
        let body = encode_request(&req, "m");
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
        };
        let body = encode_request(&req, "m");
        assert!(body.get("system").is_none());
        assert!(body.get("tools").is_none());
        assert_eq!(
            body["messages"],
            json!([{"role": "user", "content": [{"type": "text", "text": "a"}, {"type": "text", "text": "b"}]}])
        );
    }
}
