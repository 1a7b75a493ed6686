//! `BATON_LLM_PROVIDER` and the variables of each provider, read into
//! plain data that both handlers can hold: the ingest needs the model (the
//! default agent's) and checks the provider's settings like the worker
//! does, but never talks to a model, so it links no provider. The worker
//! turns them into the providers' own configuration
//! ([`LlmSettings::config`], the `worker` feature).

use crate::source::{invalid, SettingsError, Source};
use secrecy::SecretString;

/// `BATON_LLM_MODEL` for `bedrock` when unset: Claude Haiku 4.5 through
/// the global cross-region inference profile, which every commercial region
/// offers (newer Claude models are not invocable by bare model id).
pub(crate) const DEFAULT_BEDROCK_MODEL: &str = "global.anthropic.claude-haiku-4-5-20251001-v1:0";

/// Which model answers, and how it is reached. Keys are held as secrets
/// (redacted `Debug`, zeroed on drop).
///
/// Fallback models are not here: they go to the agents, whose loop asks
/// the one provider for each in turn.
#[derive(Clone, Debug)]
pub enum LlmSettings {
    /// `openai`: an OpenAI-compatible Chat Completions server.
    OpenAi {
        /// `OPENAI_BASE_URL`.
        base_url: Option<String>,
        /// `OPENAI_API_KEY`.
        api_key: Option<SecretString>,
        model: String,
        /// `OPENAI_FILE_INPUTS` (default true): PDFs go as `file` parts.
        file_inputs: bool,
    },
    /// `anthropic`: Anthropic Messages.
    Anthropic {
        /// `ANTHROPIC_BASE_URL`.
        base_url: Option<String>,
        /// `ANTHROPIC_API_KEY`.
        api_key: Option<SecretString>,
        model: String,
    },
    /// `bedrock`: Amazon Bedrock Converse, signed with the default AWS
    /// credential chain.
    Bedrock {
        /// `AWS_REGION` (or `AWS_DEFAULT_REGION`).
        region: String,
        /// `AWS_ENDPOINT_URL_BEDROCK_RUNTIME` or `BEDROCK_ENDPOINT_URL`.
        endpoint_url: Option<String>,
        model: String,
    },
    /// `scripted` (the default): the offline scripted model.
    Scripted,
}

impl LlmSettings {
    /// The provider's settings and the model a request naming none uses.
    pub(crate) fn load(src: &Source<'_>) -> Result<(Self, String), SettingsError> {
        let var = |name: &str| src.var(name);
        let provider = var("BATON_LLM_PROVIDER").unwrap_or_else(|| "scripted".to_owned());
        let model_var = var("BATON_LLM_MODEL");
        Ok(match provider.as_str() {
            "scripted" => (
                LlmSettings::Scripted,
                model_var.unwrap_or_else(|| "scripted".to_owned()),
            ),
            "openai" => {
                let model = model_var.unwrap_or_else(|| "gpt-4o-mini".to_owned());
                let file_inputs = match var("OPENAI_FILE_INPUTS").as_deref() {
                    None | Some("true") => true,
                    Some("false") => false,
                    Some(other) => {
                        return Err(invalid(
                            "OPENAI_FILE_INPUTS",
                            format!("`{other}` is not `true` or `false`"),
                        ))
                    }
                };
                let llm = LlmSettings::OpenAi {
                    base_url: var("OPENAI_BASE_URL"),
                    api_key: var("OPENAI_API_KEY").map(SecretString::from),
                    model: model.clone(),
                    file_inputs,
                };
                (llm, model)
            }
            "anthropic" => {
                let model = model_var.unwrap_or_else(|| "claude-sonnet-4-5".to_owned());
                let llm = LlmSettings::Anthropic {
                    base_url: var("ANTHROPIC_BASE_URL"),
                    api_key: var("ANTHROPIC_API_KEY").map(SecretString::from),
                    model: model.clone(),
                };
                (llm, model)
            }
            "bedrock" => {
                let model = model_var.unwrap_or_else(|| DEFAULT_BEDROCK_MODEL.to_owned());
                let region = var("AWS_REGION")
                    .or_else(|| var("AWS_DEFAULT_REGION"))
                    .ok_or(SettingsError::Missing("AWS_REGION"))?;
                // Not AWS_ENDPOINT_URL: that one redirects every AWS client
                // (moto in tests, LocalStack), which do not speak Converse.
                let endpoint_url =
                    var("AWS_ENDPOINT_URL_BEDROCK_RUNTIME").or_else(|| var("BEDROCK_ENDPOINT_URL"));
                let llm = LlmSettings::Bedrock {
                    region,
                    endpoint_url,
                    model: model.clone(),
                };
                (llm, model)
            }
            other => {
                let expected = "expected anthropic, openai, bedrock or scripted";
                let message = format!("unknown provider `{other}`; {expected}");
                return Err(invalid("BATON_LLM_PROVIDER", message));
            }
        })
    }

    /// The provider's API key, where the provider needs one: checked where
    /// the model is called (the worker, `baton dev`), so a missing key
    /// stops the start rather than failing the first task. A server of
    /// your own (`ANTHROPIC_BASE_URL`, `OPENAI_BASE_URL`) may need none.
    pub(crate) fn require_key(&self) -> Result<(), SettingsError> {
        match self {
            LlmSettings::Anthropic {
                api_key: None,
                base_url: None,
                ..
            } => Err(invalid(
                "ANTHROPIC_API_KEY",
                "not set, and BATON_LLM_PROVIDER=anthropic needs it (unset BATON_LLM_PROVIDER for the offline scripted model)",
            )),
            LlmSettings::OpenAi {
                api_key: None,
                base_url: None,
                ..
            } => Err(invalid(
                "OPENAI_API_KEY",
                "not set, and BATON_LLM_PROVIDER=openai needs it (set OPENAI_BASE_URL for a compatible server that needs no key)",
            )),
            _ => Ok(()),
        }
    }

    /// The provider's name (`anthropic`), `None` for the scripted model.
    pub(crate) fn provider(&self) -> Option<&'static str> {
        match self {
            LlmSettings::Scripted => None,
            LlmSettings::Anthropic { .. } => Some("anthropic"),
            LlmSettings::OpenAi { .. } => Some("openai"),
            LlmSettings::Bedrock { .. } => Some("bedrock"),
        }
    }

    /// The API key, when one is set: a secret no span may carry.
    pub(crate) fn api_key(&self) -> Option<&SecretString> {
        match self {
            LlmSettings::OpenAi { api_key, .. } | LlmSettings::Anthropic { api_key, .. } => {
                api_key.as_ref()
            }
            LlmSettings::Bedrock { .. } | LlmSettings::Scripted => None,
        }
    }

    /// The providers' own configuration, for building the provider
    /// (Bedrock signs with the default AWS credential chain, loaded on its
    /// first request).
    #[cfg(feature = "worker")]
    pub fn config(&self) -> baton_llm::LlmConfig {
        use baton_llm::{LlmConfig, Secret};
        use secrecy::ExposeSecret;
        let secret = |k: &Option<SecretString>| k.as_ref().map(|k| Secret::new(k.expose_secret()));
        match self {
            LlmSettings::OpenAi {
                base_url,
                api_key,
                model,
                file_inputs,
            } => LlmConfig::OpenAi {
                base_url: base_url.clone(),
                api_key: secret(api_key),
                model: model.clone(),
                file_inputs: *file_inputs,
            },
            LlmSettings::Anthropic {
                base_url,
                api_key,
                model,
            } => LlmConfig::Anthropic {
                base_url: base_url.clone(),
                api_key: secret(api_key),
                model: model.clone(),
            },
            LlmSettings::Bedrock {
                region,
                endpoint_url,
                model,
            } => LlmConfig::Bedrock {
                region: region.clone(),
                endpoint_url: endpoint_url.clone(),
                model: model.clone(),
                credentials: crate::aws_credentials::default_chain(),
            },
            LlmSettings::Scripted => LlmConfig::Scripted,
        }
    }
}
