//! Token estimates per model.
//!
//! These are **estimates**, not tokenizer counts: Baton does not ship the
//! providers' tokenizers (they differ per model family and some are not
//! public). The estimate is characters divided by a per-family ratio, with
//! every non-ASCII character counted as a whole token (CJK text and emoji
//! take about one token per character or more), plus a small framing cost
//! per message. It errs on the high side, which is the safe side for the
//! context thresholds it feeds (pruning and compaction trigger a little
//! early rather than too late). Real counts arrive afterwards in
//! [`baton_core::Usage`].

use baton_core::{AttachmentContent, CompletionRequest, Message, ToolCall, ToolSpec};

/// The context window assumed for a model this table does not know.
pub const DEFAULT_CONTEXT_WINDOW: u64 = 128_000;

/// Tokens for the role marker and framing of one message.
pub const MESSAGE_OVERHEAD_TOKENS: u64 = 4;

/// Tokens for the framing of one tool call or tool definition.
const TOOL_OVERHEAD_TOKENS: u64 = 8;
/// Estimated tokens of an attached image, whatever its size.
pub const IMAGE_TOKENS: u64 = 1_600;
/// The fewest tokens an attached PDF is estimated at.
const DOCUMENT_MIN_TOKENS: u64 = 1_500;

/// What the estimator knows about a model.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct ModelProfile {
    /// Context window in tokens (input and output together).
    pub context_window: u64,
    /// Average ASCII characters per token for this model family's
    /// tokenizer on English text and code.
    pub chars_per_token: f64,
}

/// Claude's tokenizer yields slightly more tokens per character than
/// OpenAI's o200k on English and code.
const CLAUDE_CHARS_PER_TOKEN: f64 = 3.5;
const DEFAULT_CHARS_PER_TOKEN: f64 = 4.0;

impl ModelProfile {
    /// The profile of a model id as any provider spells it: plain
    /// (`claude-sonnet-4-5`, `gpt-4o`), with a Bedrock provider prefix or
    /// cross-region prefix (`us.anthropic.claude-3-5-sonnet-20240620-v1:0`),
    /// a Bedrock ARN, or a router prefix (`anthropic/claude-3-haiku`).
    /// Unknown models get [`DEFAULT_CONTEXT_WINDOW`].
    pub fn for_model(model: &str) -> ModelProfile {
        let id = normalize(model);
        let (window, cpt) = lookup(&id);
        ModelProfile {
            context_window: window,
            chars_per_token: cpt,
        }
    }

    /// Estimated tokens of a piece of text.
    pub fn text(&self, text: &str) -> u64 {
        let mut ascii: u64 = 0;
        let mut other: u64 = 0;
        for c in text.chars() {
            if c.is_ascii() {
                ascii += 1;
            } else {
                other += 1;
            }
        }
        let ascii_tokens = (ascii as f64 / self.chars_per_token).ceil() as u64;
        ascii_tokens.saturating_add(other)
    }

    /// Estimated tokens of one tool call as the model wrote it.
    pub fn tool_call(&self, call: &ToolCall) -> u64 {
        let args = serde_json::to_string(&call.arguments).unwrap_or_default();
        TOOL_OVERHEAD_TOKENS + self.text(&call.id) + self.text(&call.name) + self.text(&args)
    }

    /// Estimated tokens of one message, framing included. An image counts
    /// [`IMAGE_TOKENS`] (what a large image costs at Anthropic and OpenAI).
    pub fn message(&self, message: &Message) -> u64 {
        MESSAGE_OVERHEAD_TOKENS
            + match message {
                Message::User { content } => self.text(content),
                Message::Assistant {
                    content,
                    tool_calls,
                } => self.text(content) + tool_calls.iter().map(|c| self.tool_call(c)).sum::<u64>(),
                Message::Tool {
                    call_id,
                    name,
                    content,
                    ..
                } => self.text(call_id) + self.text(name) + self.text(content),
                Message::Attachment {
                    name,
                    media_type,
                    content,
                } => match content {
                    AttachmentContent::Image { .. } => IMAGE_TOKENS,
                    // A page of a PDF is some 1,500 to 3,000 tokens; pages
                    // run to tens of kilobytes.
                    AttachmentContent::Document { data_base64 } => {
                        DOCUMENT_MIN_TOKENS.max(data_base64.len() as u64 / 40)
                    }
                    other => self.text(&other.as_text(name, media_type)),
                },
            }
    }

    /// Estimated tokens of a list of messages.
    pub fn messages(&self, messages: &[Message]) -> u64 {
        messages.iter().map(|m| self.message(m)).sum()
    }

    /// Estimated tokens of one tool definition.
    pub fn tool_spec(&self, spec: &ToolSpec) -> u64 {
        let schema = serde_json::to_string(&spec.input_schema).unwrap_or_default();
        TOOL_OVERHEAD_TOKENS
            + self.text(&spec.name)
            + self.text(&spec.description)
            + self.text(&schema)
    }

    /// Estimated input tokens of a whole request: system prompt, tool
    /// definitions and messages.
    pub fn request(&self, request: &CompletionRequest) -> u64 {
        self.text(&request.system)
            + request.tools.iter().map(|t| self.tool_spec(t)).sum::<u64>()
            + self.messages(&request.messages)
    }

    /// `tokens` as a fraction of this model's window.
    pub fn ratio(&self, tokens: u64) -> f64 {
        if self.context_window == 0 {
            return f64::INFINITY;
        }
        tokens as f64 / self.context_window as f64
    }
}

/// The known context window of a model, in tokens.
pub fn context_window(model: &str) -> u64 {
    ModelProfile::for_model(model).context_window
}

/// Estimated tokens of `text` for `model`.
pub fn estimate_text(model: &str, text: &str) -> u64 {
    ModelProfile::for_model(model).text(text)
}

/// Estimated input tokens of a request, for its own model.
pub fn estimate_request(request: &CompletionRequest) -> u64 {
    ModelProfile::for_model(&request.model).request(request)
}

/// Lower-cases and strips ARN, router, cross-region and Bedrock provider
/// prefixes, leaving the bare model name.
fn normalize(model: &str) -> String {
    let lower = model.trim().to_ascii_lowercase();
    let mut id = lower.rsplit('/').next().unwrap_or(&lower);
    for region in [
        "us-gov.", "us.", "eu.", "apac.", "jp.", "au.", "ca.", "global.",
    ] {
        if let Some(rest) = id.strip_prefix(region) {
            id = rest;
            break;
        }
    }
    for provider in [
        "anthropic.",
        "amazon.",
        "meta.",
        "mistral.",
        "cohere.",
        "ai21.",
        "openai.",
        "deepseek.",
        "writer.",
        "qwen.",
    ] {
        if let Some(rest) = id.strip_prefix(provider) {
            id = rest;
            break;
        }
    }
    id.to_owned()
}

/// Context window and characters per token of a normalised model id.
fn lookup(id: &str) -> (u64, f64) {
    let d = DEFAULT_CHARS_PER_TOKEN;
    if id.contains("claude") {
        // Claude 2.0 and Instant had 100k; everything since has 200k.
        let old = id.contains("claude-instant")
            || id == "claude-2"
            || id.starts_with("claude-2.0")
            || (id.starts_with("claude-v2") && !id.starts_with("claude-v2:1"));
        let window = if old { 100_000 } else { 200_000 };
        return (window, CLAUDE_CHARS_PER_TOKEN);
    }
    let window = if id.starts_with("gpt-4.1") {
        1_047_576
    } else if id.starts_with("gpt-5") {
        400_000
    } else if id.starts_with("gpt-4o") || id.starts_with("gpt-4-turbo") || id.starts_with("gpt-oss")
    {
        128_000
    } else if id.starts_with("gpt-4-32k") {
        32_768
    } else if id.starts_with("gpt-4") {
        8_192
    } else if id.starts_with("gpt-3.5-turbo") {
        16_385
    } else if id.starts_with("o1-mini") {
        128_000
    } else if id.starts_with("o1") || id.starts_with("o3") || id.starts_with("o4") {
        200_000
    } else if id.starts_with("nova-premier") {
        1_000_000
    } else if id.starts_with("nova-pro") || id.starts_with("nova-lite") {
        300_000
    } else if id.starts_with("nova-micro") {
        128_000
    } else if id.starts_with("titan-text-premier") {
        32_000
    } else if id.starts_with("titan-text") {
        8_000
    } else if id.starts_with("llama3-1") || id.starts_with("llama3-2") || id.starts_with("llama3-3")
    {
        128_000
    } else if id.starts_with("llama3") {
        8_000
    } else if id.starts_with("mistral-large") || id.starts_with("command-r") {
        128_000
    } else if id.starts_with("mistral") || id.starts_with("mixtral") {
        32_000
    } else if id.starts_with("gemini-1.5-pro") {
        2_000_000
    } else if id.starts_with("gemini") {
        1_000_000
    } else {
        DEFAULT_CONTEXT_WINDOW
    };
    (window, d)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn known_windows_across_spellings() {
        for (model, window) in [
            ("claude-sonnet-4-5", 200_000),
            ("claude-3-5-haiku-latest", 200_000),
            ("us.anthropic.claude-3-5-sonnet-20240620-v1:0", 200_000),
            ("anthropic.claude-v2", 100_000),
            ("anthropic.claude-v2:1", 200_000),
            ("arn:aws:bedrock:us-east-1::foundation-model/anthropic.claude-3-haiku-20240307-v1:0", 200_000),
            ("anthropic/claude-3-opus", 200_000),
            ("gpt-4o-mini", 128_000),
            ("gpt-4.1-mini", 1_047_576),
            ("gpt-4", 8_192),
            ("gpt-3.5-turbo", 16_385),
            ("o3-mini", 200_000),
            ("amazon.nova-pro-v1:0", 300_000),
            ("us.amazon.nova-micro-v1:0", 128_000),
            ("meta.llama3-1-70b-instruct-v1:0", 128_000),
            ("meta.llama3-8b-instruct-v1:0", 8_000),
            ("some-local-model", DEFAULT_CONTEXT_WINDOW),
            ("", DEFAULT_CONTEXT_WINDOW),
        ] {
            assert_eq!(context_window(model), window, "{model}");
        }
    }

    #[test]
    fn text_estimate_is_chars_over_ratio_rounded_up() {
        let gpt = ModelProfile::for_model("gpt-4o");
        assert_eq!(gpt.text(""), 0);
        assert_eq!(gpt.text("abcd"), 1);
        assert_eq!(gpt.text("abcde"), 2);
        assert_eq!(gpt.text(&"x".repeat(4000)), 1000);
        // Claude's tokenizer is denser: more tokens for the same text.
        let claude = ModelProfile::for_model("claude-sonnet-4-5");
        assert_eq!(claude.text(&"x".repeat(3500)), 1000);
        assert!(claude.text("hello world") >= gpt.text("hello world"));
    }

    #[test]
    fn non_ascii_counts_a_token_per_character() {
        let p = ModelProfile::for_model("gpt-4o");
        assert_eq!(p.text("日本語のテキスト"), 8);
        assert_eq!(p.text("abcd日本"), 3);
    }

    #[test]
    fn messages_and_requests_include_framing_and_tool_calls() {
        let p = ModelProfile::for_model("gpt-4o");
        let user = Message::User {
            content: "abcd".into(),
        };
        assert_eq!(p.message(&user), MESSAGE_OVERHEAD_TOKENS + 1);
        let call = ToolCall {
            id: "c1".into(),
            name: "http_request".into(),
            arguments: serde_json::json!({"url": "https://example.com/a/long/path"}),
        };
        let with_call = Message::Assistant {
            content: String::new(),
            tool_calls: vec![call.clone()],
        };
        assert!(p.message(&with_call) > MESSAGE_OVERHEAD_TOKENS + 10);
        let request = CompletionRequest {
            model: "gpt-4o".into(),
            system: "s".repeat(400),
            messages: vec![user.clone(), with_call.clone()],
            tools: vec![ToolSpec {
                name: "http_request".into(),
                description: "d".repeat(40),
                input_schema: serde_json::json!({"type": "object"}),
            }],
            max_tokens: 100,
            tool_choice: baton_core::ToolChoice::Auto,
        };
        let total = estimate_request(&request);
        assert_eq!(
            total,
            100 + p.tool_spec(&request.tools[0]) + p.message(&user) + p.message(&with_call)
        );
        assert!((p.ratio(64_000) - 0.5).abs() < 1e-9);
    }
}
