//! LLM providers for Baton, implementing [`baton_core::LlmProvider`]:
//!
//! * [`OpenAiProvider`]: any OpenAI-compatible Chat Completions server;
//! * [`AnthropicProvider`]: Anthropic Messages;
//! * [`BedrockProvider`]: Amazon Bedrock Converse, signed with SigV4 from
//!   [`AwsCredentials`] (no API key);
//! * [`ScriptedProvider`]: a deterministic offline model for demos and
//!   tests, driven by directives in the conversation ([`script`]);
//! * [`Retrying`]: retries with backoff that honours `retry-after`
//!   (fallback models are the agent loop's business, chosen per agent);
//! * [`build_provider`]: all of the above from an [`LlmConfig`];
//! * `mock` (feature `mock-server`): an HTTP server speaking all three wire
//!   formats, for end-to-end tests. The mappings run backwards for it
//!   (reading requests, writing responses) are compiled only with that
//!   feature, not into the Lambdas.
//!
//! Every provider also streams ([`baton_core::LlmProvider::complete_streaming`]):
//! OpenAI and Anthropic as server-sent events (parsed by `sse`), Bedrock
//! as `ConverseStream`'s AWS event stream; the text goes to a
//! [`baton_core::DeltaSink`] as it comes, and the completion returned is
//! the one `complete` would return for the same answer. A stream that
//! breaks or stalls (no piece for the idle timeout, 60 s by default) is a
//! transient [`baton_core::LlmError::Transport`]; [`Retrying`] restarts
//! the sink before retrying an attempt that had streamed text.
//!
//! Each wire format's bodies are serde types (`openai::wire`, …) shared by
//! the client and the mock server. A provider that recognises a refusal of
//! a request too long for the model's context window reports it as
//! [`baton_core::LlmError::ContextOverflow`].
//!
//! ```
//! use baton_llm::{build_provider, LlmConfig, RetryPolicy};
//! let provider = build_provider(&LlmConfig::Scripted, RetryPolicy::default()).unwrap();
//! assert_eq!(provider.name(), "scripted");
//! ```

pub mod anthropic;
pub mod bedrock;
mod config;
#[cfg(test)]
mod fixtures;
mod http;
mod mapping;
#[cfg(feature = "mock-server")]
pub mod mock;
pub mod openai;
mod retry;
pub mod script;
mod scripted;
mod secret;
mod sse;

pub use anthropic::AnthropicProvider;
pub use bedrock::{AwsCredentials, BedrockProvider};
pub use config::{build_provider, LlmConfig};
pub use openai::{MaxTokensField, OpenAiProvider};
pub use retry::{RetryPolicy, Retrying};
pub use scripted::ScriptedProvider;
pub use secret::Secret;
