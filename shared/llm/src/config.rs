//! Building a provider from configuration.

use crate::retry::{RetryPolicy, Retrying};
use crate::{
    AnthropicProvider, AwsCredentials, BedrockProvider, OpenAiProvider, ScriptedProvider, Secret,
};
use baton_core::{LlmError, LlmProvider};
use std::sync::Arc;

/// Which model to talk to, and how. The caller reads the environment
/// (`BATON_LLM_PROVIDER`, `BATON_LLM_MODEL`, `OPENAI_BASE_URL`, …) and fills
/// this in; this crate reads no environment variables.
///
/// Fallback models are not configured here: the agent loop picks them per
/// agent and asks this one provider for each in turn.
#[derive(Clone, Debug)]
pub enum LlmConfig {
    /// An OpenAI-compatible Chat Completions server.
    OpenAi {
        /// Default `https://api.openai.com/v1`.
        base_url: Option<String>,
        api_key: Option<Secret>,
        /// Used when a request names no model.
        model: String,
        /// PDFs go as `file` parts (`OPENAI_FILE_INPUTS`, default on).
        file_inputs: bool,
    },
    /// Anthropic Messages.
    Anthropic {
        /// Default `https://api.anthropic.com` (no `/v1`).
        base_url: Option<String>,
        api_key: Option<Secret>,
        model: String,
    },
    /// Amazon Bedrock Converse, signed with SigV4.
    Bedrock {
        /// The region requests go to and are signed for (`us-east-1`).
        region: String,
        /// Default `https://bedrock-runtime.{region}.amazonaws.com`.
        endpoint_url: Option<String>,
        /// A model id, inference profile id or ARN.
        model: String,
        credentials: AwsCredentials,
    },
    /// The offline scripted model.
    Scripted,
}

/// Builds the provider `config` describes, with retries by `policy`.
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
            file_inputs,
        } => {
            let p = OpenAiProvider::new(base_url.as_deref(), api_key.clone(), model.clone())?
                .with_file_inputs(*file_inputs);
            Ok(Arc::new(Retrying::new(p, policy)))
        }
        LlmConfig::Anthropic {
            base_url,
            api_key,
            model,
        } => {
            let p = AnthropicProvider::new(base_url.as_deref(), api_key.clone(), model.clone())?;
            Ok(Arc::new(Retrying::new(p, policy)))
        }
        LlmConfig::Bedrock {
            region,
            endpoint_url,
            model,
            credentials,
        } => {
            let p = BedrockProvider::new(
                region,
                endpoint_url.as_deref(),
                credentials.clone(),
                model.clone(),
            )?;
            Ok(Arc::new(Retrying::new(p, policy)))
        }
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
                file_inputs: true,
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
            },
            RetryPolicy::default(),
        )
        .unwrap();
        assert_eq!(p.name(), "anthropic");
        let p = build_provider(
            &LlmConfig::Bedrock {
                region: "eu-west-1".into(),
                endpoint_url: None,
                model: "anthropic.claude-3-5-haiku-20241022-v1:0".into(),
                credentials: AwsCredentials::from_keys("AKIDTEST", "secret-key-1234567", None),
            },
            RetryPolicy::default(),
        )
        .unwrap();
        assert_eq!(p.name(), "bedrock");
    }

    #[test]
    fn rejects_bad_base_urls() {
        let r = build_provider(
            &LlmConfig::OpenAi {
                base_url: Some("not a url".into()),
                api_key: None,
                model: "m".into(),
                file_inputs: true,
            },
            RetryPolicy::default(),
        );
        assert!(matches!(r, Err(LlmError::Config(_))));
        for (region, endpoint) in [
            ("", None),
            ("us-east-1.evil.com/", None),
            ("us-east-1", Some("ftp://x")),
        ] {
            let r = build_provider(
                &LlmConfig::Bedrock {
                    region: region.into(),
                    endpoint_url: endpoint.map(str::to_string),
                    model: "m".into(),
                    credentials: AwsCredentials::from_keys("AKIDTEST", "secret-key-1234567", None),
                },
                RetryPolicy::default(),
            );
            assert!(
                matches!(r, Err(LlmError::Config(_))),
                "{region} {endpoint:?}"
            );
        }
    }

    #[test]
    fn debug_hides_the_key() {
        let c = LlmConfig::Anthropic {
            base_url: None,
            api_key: Some(Secret::new("sk-ant-secret-999")),
            model: "m".into(),
        };
        assert!(!format!("{c:?}").contains("sk-ant-secret-999"));
        let c = LlmConfig::Bedrock {
            region: "us-east-1".into(),
            endpoint_url: None,
            model: "m".into(),
            credentials: AwsCredentials::from_keys(
                "AKIDSECRETID",
                "wJalrXUtnFEMI-secret-key",
                Some("session-token-xyz".into()),
            ),
        };
        let debug = format!("{c:?}");
        for secret in [
            "AKIDSECRETID",
            "wJalrXUtnFEMI-secret-key",
            "session-token-xyz",
        ] {
            assert!(!debug.contains(secret), "{debug}");
        }
    }
}
