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
        let model = if request.model.is_empty() {
            self.model.as_str()
        } else {
            request.model.as_str()
        };
        if model.is_empty() {
            return Err(LlmError::Config("no model configured".into()));
        }
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
        let role = m.get("role").and_then(Value::as_str).ok_or("message without role")?;
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
