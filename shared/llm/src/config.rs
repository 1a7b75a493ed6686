//! Building a provider from configuration.

use crate::retry::{Fallback, FallbackEntry, RetryPolicy, Retrying};
use crate::{AnthropicProvider, OpenAiProvider, ScriptedProvider, Secret};
use baton_core::{LlmError, LlmProvider};
use std::sync::Arc;

/// Which model to talk to, and how. The caller reads the environment
/// (`BATON_LLM_PROVIDER`, `BATON_LLM_MODEL`, `OPENAI_BASE_URL`, …) and fills
/// this in; this crate reads no environment variables.
#[derive(Clone, Debug)]
pub enum LlmConfig {
    /// An OpenAI-compatible Chat Completions server.
    OpenAi {
        /// Default `https://api.openai.com/v1`.
        base_url: Option<String>,
        api_key: Option<Secret>,
        /// Used when a request names no model.
        model: String,
        /// Models tried in order, on the same server, when `model` keeps
        /// failing with retryable errors.
        fallback_models: Vec<String>,
    },
    /// Anthropic Messages.
    Anthropic {
        /// Default `https://api.anthropic.com` (no `/v1`).
        base_url: Option<String>,
        api_key: Option<Secret>,
        model: String,
        fallback_models: Vec<String>,
    },
    /// The offline scripted model.
    Scripted,
}

/// Builds the provider `config` describes, with retries by `policy` and,
/// when fallback models are given, a [`Fallback`] chain over them.
pub fn build_provider(
    config: &LlmConfig,
    policy: RetryPolicy,
) -> Result<Arc<dyn LlmProvider>, LlmError> {
    match config {
        LlmConfig::Scripted => Ok(Arc::new(ScriptedProvider::new())),
        LlmConfig::OpenAi {
            base_url,
            api_key,
            model,
            fallback_models,
        } => {
            let p = OpenAiProvider::new(base_url.as_deref(), api_key.clone(), model.clone())?;
            Ok(chain(
                Arc::new(Retrying::new(p, policy)),
                model,
                fallback_models,
            ))
        }
        LlmConfig::Anthropic {
            base_url,
            api_key,
            model,
            fallback_models,
        } => {
            let p = AnthropicProvider::new(base_url.as_deref(), api_key.clone(), model.clone())?;
            Ok(chain(
                Arc::new(Retrying::new(p, policy)),
                model,
                fallback_models,
            ))
        }
    }
}

fn chain(
    provider: Arc<dyn LlmProvider>,
    model: &str,
    fallback_models: &[String],
) -> Arc<dyn LlmProvider> {
    if fallback_models.is_empty() {
        return provider;
    }
    let mut entries = vec![FallbackEntry {
        provider: provider.clone(),
        model: (!model.is_empty()).then(|| model.to_string()),
    }];
    entries.extend(fallback_models.iter().map(|m| FallbackEntry {
        provider: provider.clone(),
        model: Some(m.clone()),
    }));
    match Fallback::new(entries) {
        Ok(f) => Arc::new(f),
        // Unreachable: the chain has at least one entry.
        Err(_) => provider,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn builds_every_kind() {
        let p = build_provider(&LlmConfig::Scripted, RetryPolicy::default()).unwrap();
        assert_eq!(p.name(), "scripted");
        let p = build_provider(
            &LlmConfig::OpenAi {
                base_url: None,
                api_key: Some(Secret::new("sk-test-key-123")),
                model: "gpt-4o-mini".into(),
                fallback_models: vec![],
            },
            RetryPolicy::default(),
        )
        .unwrap();
        assert_eq!(p.name(), "openai");
        let p = build_provider(
            &LlmConfig::Anthropic {
                base_url: Some("http://127.0.0.1:9".into()),
                api_key: None,
                model: "claude".into(),
                fallback_models: vec!["claude-small".into()],
            },
            RetryPolicy::default(),
        )
        .unwrap();
        assert_eq!(p.name(), "anthropic,anthropic");
    }

    #[test]
    fn rejects_bad_base_urls() {
        let r = build_provider(
            &LlmConfig::OpenAi {
                base_url: Some("not a url".into()),
                api_key: None,
                model: "m".into(),
                fallback_models: vec![],
            },
            RetryPolicy::default(),
        );
        assert!(matches!(r, Err(LlmError::Config(_))));
    }

    #[test]
    fn debug_hides_the_key() {
        let c = LlmConfig::Anthropic {
            base_url: None,
            api_key: Some(Secret::new("sk-ant-secret-999")),
            model: "m".into(),
            fallback_models: vec![],
        };
        assert!(!format!("{c:?}").contains("sk-ant-secret-999"));
    }
}
