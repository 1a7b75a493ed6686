//! OpenAI-compatible Chat Completions (`POST {base}/chat/completions`).
//!
//! Works with OpenAI and the many servers that copy its API (vLLM, Ollama,
//! LM Studio, llama.cpp, LiteLLM, OpenRouter, …). The wire mapping lives in
//! plain functions so the mock server can run it backwards.

use crate::http;
use crate::secret::Secret;
use async_trait::async_trait;
use baton_core::{Completion, CompletionRequest, LlmError, LlmProvider, Message, ToolCall, Usage};
use serde_json::{json, Map, Value};
use std::time::Duration;

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
    timeout: Duration,
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
            timeout: Duration::from_secs(300),
        })
    }

    /// Chooses the field that carries the token limit.
    pub fn with_max_tokens_field(mut self, field: MaxTokensField) -> Self {
        self.max_tokens_field = field;
        self
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
impl LlmProvider for OpenAiProvider {
    fn name(&self) -> &str {
        "openai"
    }

    async fn complete(&self, request: &CompletionRequest) -> Result<Completion, LlmError> {
        let model = http::pick_model(request, &self.model)?;
        let body = encode_request(request, model, self.max_tokens_field);
        let mut builder = self
            .client
            .post(format!("{}/chat/completions", self.base_url));
        if let Some(key) = &self.api_key {
            builder = builder.bearer_auth(key.expose());
        }
        let answer = http::post_json(builder, &body, self.timeout, self.api_key.as_ref()).await?;
        let mut completion = decode_response(&answer)?;
        if completion.model.is_empty() {
            completion.model = model.to_string();
        }
        Ok(completion)
    }
}

/// The Chat Completions request body for `request`, asking `model`.
pub fn encode_request(request: &CompletionRequest, model: &str, field: MaxTokensField) -> Value {
    let mut messages = Vec::with_capacity(request.messages.len() + 1);
    if !request.system.is_empty() {
        messages.push(json!({"role": "system", "content": request.system}));
    }
    for message in &request.messages {
        messages.push(match message {
            Message::User { content } => json!({"role": "user", "content": content}),
            Message::Assistant {
                content,
                tool_calls,
            } => {
                let mut m = Map::new();
                m.insert("role".into(), json!("assistant"));
                // Content may be null only when the message has tool calls.
                let content = if content.is_empty() && !tool_calls.is_empty() {
                    Value::Null
                } else {
                    json!(content)
                };
                m.insert("content".into(), content);
                if !tool_calls.is_empty() {
                    let calls: Vec<Value> = tool_calls
                        .iter()
                        .map(|c| {
                            json!({
                                "id": c.id,
                                "type": "function",
                                "function": {"name": c.name, "arguments": arguments_string(&c.arguments)},
                            })
                        })
                        .collect();
                    m.insert("tool_calls".into(), Value::Array(calls));
                }
                Value::Object(m)
            }
            Message::Tool {
                call_id, content, ..
            } => json!({"role": "tool", "tool_call_id": call_id, "content": content}),
        });
    }
    let mut body = Map::new();
    body.insert("model".into(), json!(model));
    body.insert("messages".into(), Value::Array(messages));
    if !request.tools.is_empty() {
        let tools: Vec<Value> = request
            .tools
            .iter()
            .map(|t| {
                json!({
                    "type": "function",
                    "function": {"name": t.name, "description": t.description, "parameters": t.input_schema},
                })
            })
            .collect();
        body.insert("tools".into(), Value::Array(tools));
    }
    if request.max_tokens > 0 {
        let key = match field {
            MaxTokensField::MaxTokens => "max_tokens",
            MaxTokensField::MaxCompletionTokens => "max_completion_tokens",
        };
        body.insert(key.into(), json!(request.max_tokens));
    }
    Value::Object(body)
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
fn parse_arguments(arguments: Option<&Value>) -> Value {
    match arguments {
        None | Some(Value::Null) => json!({}),
        Some(Value::String(raw)) if raw.trim().is_empty() => json!({}),
        Some(Value::String(raw)) => {
            serde_json::from_str(raw).unwrap_or_else(|_| Value::String(raw.clone()))
        }
        // Some servers send the arguments already decoded.
        Some(other) => other.clone(),
    }
}

/// Text content: a string, null, or (some servers) an array of text parts.
fn content_text(content: Option<&Value>) -> String {
    match content {
        Some(Value::String(s)) => s.clone(),
        Some(Value::Array(parts)) => parts
            .iter()
            .filter_map(|p| p.get("text").and_then(Value::as_str))
            .collect(),
        _ => String::new(),
    }
}

fn decode_tool_calls(calls: Option<&Value>, prefix: &str) -> Result<Vec<ToolCall>, String> {
    let Some(calls) = calls.filter(|c| !c.is_null()) else {
        return Ok(Vec::new());
    };
    let calls = calls.as_array().ok_or("tool_calls is not an array")?;
    calls
        .iter()
        .enumerate()
        .map(|(i, call)| {
            let function = call.get("function").ok_or("tool call without function")?;
            let name = function
                .get("name")
                .and_then(Value::as_str)
                .ok_or("tool call without a name")?;
            let id = call
                .get("id")
                .and_then(Value::as_str)
                .filter(|id| !id.is_empty())
                .map(str::to_string)
                // A few servers omit ids; results must still refer to something.
                .unwrap_or_else(|| format!("{prefix}{i}"));
            Ok(ToolCall {
                id,
                name: name.to_string(),
                arguments: parse_arguments(function.get("arguments")),
            })
        })
        .collect()
}

fn u64_at(v: &Value, key: &str) -> u64 {
    v.get(key).and_then(Value::as_u64).unwrap_or(0)
}

/// Reads a Chat Completions response body.
pub fn decode_response(body: &Value) -> Result<Completion, LlmError> {
    let choice = body
        .get("choices")
        .and_then(|c| c.get(0))
        .ok_or_else(|| LlmError::Decode("response has no choices".into()))?;
    let message = choice
        .get("message")
        .ok_or_else(|| LlmError::Decode("choice has no message".into()))?;
    let tool_calls =
        decode_tool_calls(message.get("tool_calls"), "call_").map_err(LlmError::Decode)?;
    let usage = body
        .get("usage")
        .map(|u| Usage {
            input_tokens: u64_at(u, "prompt_tokens"),
            output_tokens: u64_at(u, "completion_tokens"),
        })
        .unwrap_or_default();
    Ok(Completion {
        content: content_text(message.get("content")),
        tool_calls,
        usage,
        stop_reason: choice
            .get("finish_reason")
            .and_then(Value::as_str)
            .map(str::to_string),
        model: body
            .get("model")
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_string(),
    })
}

/// Reads a Chat Completions request body back into a [`CompletionRequest`]
/// (the inverse of [`encode_request`]; used by the mock server).
pub fn decode_request(body: &Value) -> Result<CompletionRequest, String> {
    let model = body
        .get("model")
        .and_then(Value::as_str)
        .ok_or("missing model")?
        .to_string();
    let raw_messages = body
        .get("messages")
        .and_then(Value::as_array)
        .ok_or("missing messages")?;
    let mut system = Vec::new();
    let mut messages = Vec::new();
    for (i, m) in raw_messages.iter().enumerate() {
        let role = m
            .get("role")
            .and_then(Value::as_str)
            .ok_or("message without role")?;
        let content = content_text(m.get("content"));
        match role {
            "system" | "developer" => system.push(content),
            "user" => messages.push(Message::User { content }),
            "assistant" => messages.push(Message::Assistant {
                content,
                tool_calls: decode_tool_calls(m.get("tool_calls"), &format!("call_m{i}_"))?,
            }),
            "tool" => {
                let call_id = m
                    .get("tool_call_id")
                    .and_then(Value::as_str)
                    .ok_or("tool message without tool_call_id")?
                    .to_string();
                // The wire format has no tool name; recover it from the call.
                let name = messages
                    .iter()
                    .rev()
                    .find_map(|prev| match prev {
                        Message::Assistant { tool_calls, .. } => tool_calls
                            .iter()
                            .find(|c| c.id == call_id)
                            .map(|c| c.name.clone()),
                        _ => None,
                    })
                    .unwrap_or_default();
                messages.push(Message::Tool {
                    call_id,
                    name,
                    content,
                    is_error: false,
                });
            }
            other => return Err(format!("unknown role {other}")),
        }
    }
    let tools = match body.get("tools") {
        None | Some(Value::Null) => Vec::new(),
        Some(tools) => tools
            .as_array()
            .ok_or("tools is not an array")?
            .iter()
            .map(|t| {
                let f = t.get("function").ok_or("tool without function")?;
                Ok(baton_core::ToolSpec {
                    name: f
                        .get("name")
                        .and_then(Value::as_str)
                        .ok_or("tool without name")?
                        .to_string(),
                    description: f
                        .get("description")
                        .and_then(Value::as_str)
                        .unwrap_or_default()
                        .to_string(),
                    input_schema: f.get("parameters").cloned().unwrap_or_else(|| json!({})),
                })
            })
            .collect::<Result<_, String>>()?,
    };
    let max_tokens = body
        .get("max_tokens")
        .or_else(|| body.get("max_completion_tokens"))
        .and_then(Value::as_u64)
        .map(|n| u32::try_from(n).unwrap_or(u32::MAX))
        .unwrap_or(0);
    Ok(CompletionRequest {
        model,
        system: system.join("\n\n"),
        messages,
        tools,
        max_tokens,
    })
}

/// A Chat Completions response body for `completion` (the inverse of
/// [`decode_response`]; used by the mock server).
pub fn encode_response(completion: &Completion, id: &str) -> Value {
    let mut message = Map::new();
    message.insert("role".into(), json!("assistant"));
    let content = if completion.content.is_empty() && !completion.tool_calls.is_empty() {
        Value::Null
    } else {
        json!(completion.content)
    };
    message.insert("content".into(), content);
    if !completion.tool_calls.is_empty() {
        let calls: Vec<Value> = completion
            .tool_calls
            .iter()
            .map(|c| {
                json!({"id": c.id, "type": "function",
                       "function": {"name": c.name, "arguments": arguments_string(&c.arguments)}})
            })
            .collect();
        message.insert("tool_calls".into(), Value::Array(calls));
    }
    let finish_reason = match completion.stop_reason.as_deref() {
        Some("tool_use") | Some("tool_calls") => "tool_calls",
        Some("max_tokens") | Some("length") => "length",
        _ => "stop",
    };
    json!({
        "id": id,
        "object": "chat.completion",
        "created": chrono::Utc::now().timestamp(),
        "model": completion.model,
        "choices": [{"index": 0, "message": Value::Object(message), "finish_reason": finish_reason}],
        "usage": {
            "prompt_tokens": completion.usage.input_tokens,
            "completion_tokens": completion.usage.output_tokens,
            "total_tokens": completion.usage.total(),
        },
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{RetryPolicy, Retrying};
    use baton_core::ToolSpec;
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

    #[test]
    fn request_decoder_inverts_the_encoder() {
        let mut req = conversation();
        req.model = "m".into();
        let decoded =
            decode_request(&encode_request(&req, "m", MaxTokensField::MaxTokens)).unwrap();
        assert_eq!(decoded, req);
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
        assert_eq!(decode_response(&encode_response(&c, "id")).unwrap(), c);
        assert!(matches!(
            decode_response(&json!({"choices": []})),
            Err(LlmError::Decode(_))
        ));
    }
}
