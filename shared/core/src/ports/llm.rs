//! The LLM port: the provider trait, and the conversation a model sees
//! (messages, tool calls, completions, usage).
//!
//! These types are provider-neutral: `baton-llm` maps them to the OpenAI
//! Chat Completions, Anthropic Messages and Bedrock Converse wire formats.

use async_trait::async_trait;
use serde::{Deserialize, Serialize};
use std::time::Duration;

/// A tool invocation requested by the model.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ToolCall {
    /// The provider's id for the call; tool results refer to it.
    pub id: String,
    pub name: String,
    /// The arguments as the model sent them (a JSON object, normally).
    pub arguments: serde_json::Value,
}

/// One message of the conversation.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "role", rename_all = "snake_case")]
pub enum Message {
    User {
        content: String,
    },
    Assistant {
        #[serde(default)]
        content: String,
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        tool_calls: Vec<ToolCall>,
    },
    Tool {
        call_id: String,
        name: String,
        content: String,
        #[serde(default)]
        is_error: bool,
    },
    /// A file the user gave with their message (it follows that message).
    /// Providers send it as a user content block of their own kind, or
    /// name it when they cannot take it ([`AttachmentContent::as_text`]).
    Attachment {
        name: String,
        media_type: String,
        content: AttachmentContent,
    },
}

/// What of an attached file reaches the model.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum AttachmentContent {
    /// A text-like file (plain text, Markdown, CSV, JSON, logs, source).
    Text { text: String },
    /// A PNG, JPEG, GIF or WebP image, base64-encoded.
    Image { data_base64: String },
    /// A PDF, base64-encoded: a document block where the provider takes
    /// one, named as unreadable elsewhere.
    Document { data_base64: String },
    /// Named to the model only, with why it cannot read it.
    Unreadable { reason: String },
}

impl AttachmentContent {
    /// The attachment as text, for a provider (or a summary) that cannot
    /// take its kind: text files in full, anything else named.
    pub fn as_text(&self, name: &str, media_type: &str) -> String {
        match self {
            AttachmentContent::Text { text } => format!("[file {name}]\n{text}"),
            AttachmentContent::Image { .. } | AttachmentContent::Document { .. } => format!(
                "[file {name} ({media_type}) is attached, but this model cannot read files of this kind]"
            ),
            AttachmentContent::Unreadable { reason } => {
                format!("[file {name} ({media_type}) is attached, but cannot be read: {reason}]")
            }
        }
    }

    /// The label put before an image or document block.
    pub fn label(name: &str) -> String {
        format!("[file {name}]")
    }
}

/// A tool as the model is told about it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ToolSpec {
    pub name: String,
    pub description: String,
    /// JSON Schema of the arguments object.
    pub input_schema: serde_json::Value,
}

/// Token usage of one or more LLM calls.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Usage {
    pub input_tokens: u64,
    pub output_tokens: u64,
}

impl Usage {
    pub fn add(&mut self, other: Usage) {
        self.input_tokens = self.input_tokens.saturating_add(other.input_tokens);
        self.output_tokens = self.output_tokens.saturating_add(other.output_tokens);
    }

    pub fn total(&self) -> u64 {
        self.input_tokens.saturating_add(self.output_tokens)
    }
}

/// One request to a model.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct CompletionRequest {
    pub model: String,
    pub system: String,
    pub messages: Vec<Message>,
    pub tools: Vec<ToolSpec>,
    pub max_tokens: u32,
    /// Whether the model may answer as it likes or must call one tool.
    /// Left out of the JSON when `Auto`, so requests recorded before it
    /// existed keep their shape.
    #[serde(default, skip_serializing_if = "ToolChoice::is_auto")]
    pub tool_choice: ToolChoice,
}

/// How the model must answer a request.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ToolChoice {
    /// Text, tool calls or both, as the model decides.
    #[default]
    Auto,
    /// A call of this tool, which must be among the request's `tools`
    /// (providers refuse a request forcing a tool it does not offer with
    /// [`LlmError::Config`]: a programming error, not the model's).
    Tool(String),
}

impl ToolChoice {
    /// A choice forcing a call of `name`.
    pub fn tool(name: impl Into<String>) -> Self {
        ToolChoice::Tool(name.into())
    }

    pub fn is_auto(&self) -> bool {
        matches!(self, ToolChoice::Auto)
    }

    /// The tool the model must call, if any.
    pub fn forced(&self) -> Option<&str> {
        match self {
            ToolChoice::Auto => None,
            ToolChoice::Tool(name) => Some(name),
        }
    }
}

/// The model's answer: text, tool calls, or both.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Completion {
    pub content: String,
    pub tool_calls: Vec<ToolCall>,
    pub usage: Usage,
    /// The provider's stop reason as it sent it (`end_turn`, `tool_calls`, …).
    pub stop_reason: Option<String>,
    /// The model that answered (may differ from the one asked, after fallback).
    pub model: String,
}

/// Why an LLM call failed. Messages never contain credentials.
#[derive(Debug, Clone, thiserror::Error, PartialEq)]
pub enum LlmError {
    #[error("rate limited by the provider")]
    RateLimited { retry_after: Option<Duration> },
    #[error("the provider is overloaded")]
    Overloaded { retry_after: Option<Duration> },
    #[error("provider server error (HTTP {status}): {message}")]
    Server {
        status: u16,
        message: String,
        retry_after: Option<Duration>,
    },
    #[error("provider rejected the request (HTTP {status}): {message}")]
    Rejected { status: u16, message: String },
    /// A rejection of a request longer than the model's context window,
    /// recognised by the provider from its error response: the one
    /// refusal a shorter request fixes. Worded like any rejection.
    #[error("provider rejected the request (HTTP {status}): {message}")]
    ContextOverflow { status: u16, message: String },
    #[error("could not reach the provider: {0}")]
    Transport(String),
    #[error("could not read the provider's answer: {0}")]
    Decode(String),
    #[error("provider misconfigured: {0}")]
    Config(String),
}

impl LlmError {
    /// Whether the provider refused the request for being longer than the
    /// model's context window (the one refusal a shorter request fixes).
    /// The provider decides, from its error response
    /// ([`LlmError::ContextOverflow`]).
    pub fn is_context_overflow(&self) -> bool {
        matches!(self, LlmError::ContextOverflow { .. })
    }

    /// Whether trying again later may succeed.
    pub fn is_retryable(&self) -> bool {
        matches!(
            self,
            LlmError::RateLimited { .. }
                | LlmError::Overloaded { .. }
                | LlmError::Server { .. }
                | LlmError::Transport(_)
        )
    }

    /// The wait the provider asked for, if it asked.
    pub fn retry_after(&self) -> Option<Duration> {
        match self {
            LlmError::RateLimited { retry_after }
            | LlmError::Overloaded { retry_after }
            | LlmError::Server { retry_after, .. } => *retry_after,
            _ => None,
        }
    }
}

/// Receives an answer's text as the model writes it.
pub trait DeltaSink: Send + Sync {
    /// More text of the answer.
    fn text(&self, delta: &str);
    /// The call is being retried from scratch: forget the text so far.
    fn restart(&self) {}
}

/// A large language model behind some API.
#[async_trait]
pub trait LlmProvider: Send + Sync {
    /// A short label for logs and traces (`anthropic`, `openai`, `scripted`).
    fn name(&self) -> &str;
    async fn complete(&self, request: &CompletionRequest) -> Result<Completion, LlmError>;

    /// Like `complete`, reporting the answer's text to `sink` as it is
    /// written. Default: `complete`, then the whole text at once.
    ///
    /// The returned completion is the one `complete` would return for the
    /// same answer, and the text given to `sink` (since its last
    /// [`DeltaSink::restart`]) is exactly its `content`.
    async fn complete_streaming(
        &self,
        request: &CompletionRequest,
        sink: &dyn DeltaSink,
    ) -> Result<Completion, LlmError> {
        let completion = self.complete(request).await?;
        if !completion.content.is_empty() {
            sink.text(&completion.content);
        }
        Ok(completion)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn message_json_is_tagged_by_role() {
        let m = Message::Assistant {
            content: String::new(),
            tool_calls: vec![ToolCall {
                id: "c1".into(),
                name: "t".into(),
                arguments: serde_json::json!({}),
            }],
        };
        let v = serde_json::to_value(&m).unwrap();
        assert_eq!(v["role"], "assistant");
        assert_eq!(serde_json::from_value::<Message>(v).unwrap(), m);
    }

    struct Collect(std::sync::Mutex<String>);

    impl DeltaSink for Collect {
        fn text(&self, delta: &str) {
            self.0.lock().unwrap().push_str(delta);
        }
    }

    struct Fixed;

    #[async_trait]
    impl LlmProvider for Fixed {
        fn name(&self) -> &str {
            "fixed"
        }
        async fn complete(&self, _: &CompletionRequest) -> Result<Completion, LlmError> {
            Ok(Completion {
                content: "héllo".into(),
                ..Completion::default()
            })
        }
    }

    #[tokio::test]
    async fn streaming_defaults_to_the_whole_answer_at_once() {
        let request = CompletionRequest {
            model: String::new(),
            system: String::new(),
            messages: vec![],
            tools: vec![],
            max_tokens: 1,
            tool_choice: ToolChoice::Auto,
        };
        let sink = Collect(std::sync::Mutex::new(String::new()));
        let c = Fixed.complete_streaming(&request, &sink).await.unwrap();
        assert_eq!(c, Fixed.complete(&request).await.unwrap());
        assert_eq!(*sink.0.lock().unwrap(), "héllo");
    }

    #[test]
    fn tool_choice_is_left_out_when_auto() {
        let mut request = CompletionRequest {
            model: "m".into(),
            system: String::new(),
            messages: vec![],
            tools: vec![],
            max_tokens: 1,
            tool_choice: ToolChoice::Auto,
        };
        let auto = serde_json::to_value(&request).unwrap();
        assert!(auto.get("tool_choice").is_none(), "{auto}");
        // A request recorded before the field existed reads as Auto.
        assert_eq!(
            serde_json::from_value::<CompletionRequest>(auto).unwrap(),
            request
        );
        request.tool_choice = ToolChoice::tool("route");
        let forced = serde_json::to_value(&request).unwrap();
        assert_eq!(forced["tool_choice"], serde_json::json!({"tool": "route"}));
        assert_eq!(
            serde_json::from_value::<CompletionRequest>(forced).unwrap(),
            request
        );
        assert_eq!(request.tool_choice.forced(), Some("route"));
        assert_eq!(ToolChoice::Auto.forced(), None);
    }

    #[test]
    fn only_transient_errors_retry() {
        assert!(LlmError::Overloaded { retry_after: None }.is_retryable());
        assert!(!LlmError::Rejected {
            status: 400,
            message: "bad".into()
        }
        .is_retryable());
    }

    #[test]
    fn context_overflow_is_a_final_rejection_known_by_its_type() {
        let overflow = LlmError::ContextOverflow {
            status: 400,
            message: "prompt is too long: 210000 tokens > 200000 maximum".into(),
        };
        assert!(overflow.is_context_overflow());
        assert!(!overflow.is_retryable());
        assert_eq!(
            overflow.to_string(),
            "provider rejected the request (HTTP 400): prompt is too long: 210000 tokens > 200000 maximum"
        );
        // The words alone decide nothing: the provider classifies.
        assert!(!LlmError::Rejected {
            status: 400,
            message: "prompt is too long".into()
        }
        .is_context_overflow());
        assert!(!LlmError::Transport("prompt is too long".into()).is_context_overflow());
    }
}
