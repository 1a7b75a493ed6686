//! Typed configuration from the environment (see `docs/configuration.md`).

use baton_agent::config_file::{AgentsConfig, AgentsSource, ConfigFileError, GlobalSettings};
use baton_agent::{AgentConfig, Agents};
use baton_ingest::ApiToken;
use baton_llm::{LlmConfig, Secret};
use baton_slack::signature::SigningSecret;
use baton_slack::web::BotToken;
use baton_tools::AllowList;
use std::collections::HashMap;
use std::time::Duration;

#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    #[error("{name}: {message}")]
    Invalid { name: &'static str, message: String },
    #[error("{0} is required")]
    Missing(&'static str),
    #[error("agents file: {0}")]
    Agents(#[from] ConfigFileError),
}

fn invalid(name: &'static str, message: impl Into<String>) -> ConfigError {
    ConfigError::Invalid {
        name,
        message: message.into(),
    }
}

/// Slack app credentials.
#[derive(Clone, Debug)]
pub struct SlackConfig {
    pub signing_secret: SigningSecret,
    pub bot_token: Option<BotToken>,
    pub api_url: String,
    pub bot_user_id: Option<String>,
}

/// Everything Baton reads from its environment.
#[derive(Clone, Debug)]
pub struct Config {
    pub llm: LlmConfig,
    pub model: String,
    pub api_token: Option<ApiToken>,
    pub slack: Option<SlackConfig>,
    /// `BATON_SEGMENT_BUDGET_MS`: overrides the time a segment may use.
    pub segment_budget: Option<Duration>,
    pub http_allow: AllowList,
    /// `BATON_MAX_STEPS`: per-task step limit of the default agent.
    pub max_steps: u32,
    /// `BATON_MAX_SEGMENTS`: per-task hop budget.
    pub max_segments: u32,
    /// `BATON_SYSTEM_PROMPT`: the default agent's instructions.
    pub system_prompt: Option<String>,
    /// The agents: from the agents file (`BATON_AGENTS_TOML`,
    /// `BATON_AGENTS_FILE` or `./baton.toml`) over the settings above.
    pub agents: Agents,
    /// The agents file's global settings (input guard, monthly budgets).
    pub settings: GlobalSettings,
}

/// Tool names an agents file may name.
pub const KNOWN_TOOLS: &[&str] = &[
    "http_request",
    "current_time",
    "sleep",
    "schedule_create",
    "schedule_list",
    "schedule_delete",
    "remember",
    "recall",
    "forget",
];

/// Where configuration values come from: the process environment, with
/// secrets loaded from SSM Parameter Store layered underneath.
struct Source<'a> {
    secrets: &'a HashMap<String, String>,
}

impl Source<'_> {
    /// A variable's value, with unset and empty treated alike. The process
    /// environment wins over a stored secret of the same name.
    fn var(&self, name: &str) -> Option<String> {
        std::env::var(name)
            .ok()
            .or_else(|| self.secrets.get(name).cloned())
            .map(|v| v.trim().to_owned())
            .filter(|v| !v.is_empty())
    }

    fn num<T: std::str::FromStr>(&self, name: &'static str) -> Result<Option<T>, ConfigError> {
        self.var(name)
            .map(|v| {
                v.parse::<T>()
                    .map_err(|_| invalid(name, format!("`{v}` is not a valid number")))
            })
            .transpose()
    }
}

impl Config {
    /// Reads the environment. Errors name the variable at fault.
    pub fn from_env() -> Result<Self, ConfigError> {
        Self::from_env_and_secrets(&HashMap::new())
    }

    /// Reads the environment, falling back to `secrets` (name → value, as
    /// loaded by [`crate::secrets::load`]) for variables it does not set.
    pub fn from_env_and_secrets(secrets: &HashMap<String, String>) -> Result<Self, ConfigError> {
        let src = Source { secrets };
        let var = |name: &str| src.var(name);
        let provider = var("BATON_LLM_PROVIDER").unwrap_or_else(|| "scripted".to_owned());
        let model_var = var("BATON_LLM_MODEL");
        let fallback_models: Vec<String> = var("BATON_LLM_FALLBACK_MODELS")
            .map(|v| {
                v.split(',')
                    .map(|m| m.trim().to_owned())
                    .filter(|m| !m.is_empty())
                    .collect()
            })
            .unwrap_or_default();
        let (llm, model) = match provider.as_str() {
            "scripted" => (LlmConfig::Scripted, model_var.unwrap_or_else(|| "scripted".to_owned())),
            "openai" => {
                let model = model_var.unwrap_or_else(|| "gpt-4o-mini".to_owned());
                let llm = LlmConfig::OpenAi {
                    base_url: var("OPENAI_BASE_URL"),
                    api_key: var("OPENAI_API_KEY").map(Secret::new),
                    model: model.clone(),
                    fallback_models: fallback_models.clone(),
                };
                (llm, model)
            }
            "anthropic" => {
                let model = model_var.unwrap_or_else(|| "claude-sonnet-4-5".to_owned());
                let api_key = var("ANTHROPIC_API_KEY").map(Secret::new);
                let base_url = var("ANTHROPIC_BASE_URL");
                let llm = LlmConfig::Anthropic { base_url, api_key, model: model.clone(), fallback_models: fallback_models.clone() };
                (llm, model)
            }
            "bedrock" => {
                return Err(invalid(
                    "BATON_LLM_PROVIDER",
                    "`bedrock` is not available in this release; use `anthropic`, `openai` or `scripted`",
                ))
            }
            other => {
                return Err(invalid(
                    "BATON_LLM_PROVIDER",
                    format!("unknown provider `{other}`; expected anthropic, openai or scripted"),
                ))
            }
        };
        let api_token = var("BATON_API_TOKEN")
            .map(|t| ApiToken::parse(&t).map_err(|m| invalid("BATON_API_TOKEN", m)))
            .transpose()?;
        let slack = var("SLACK_SIGNING_SECRET").map(|secret| SlackConfig {
            signing_secret: SigningSecret::new(secret),
            bot_token: var("SLACK_BOT_TOKEN").map(BotToken::new),
            api_url: var("SLACK_API_URL").unwrap_or_else(|| "https://slack.com/api".to_owned()),
            bot_user_id: var("SLACK_BOT_USER_ID"),
        });
        let http_allow = match var("BATON_HTTP_ALLOW") {
            None => AllowList::default(),
            Some(v) => {
                AllowList::parse(&v).map_err(|e| invalid("BATON_HTTP_ALLOW", e.to_string()))?
            }
        };
        let segment_budget = src
            .num::<u64>("BATON_SEGMENT_BUDGET_MS")?
            .map(Duration::from_millis);
        let max_steps = src.num("BATON_MAX_STEPS")?.unwrap_or(50);
        let max_segments = src.num("BATON_MAX_SEGMENTS")?.unwrap_or(200);
        if max_steps == 0 {
            return Err(invalid("BATON_MAX_STEPS", "must be at least 1"));
        }
        let system_prompt = var("BATON_SYSTEM_PROMPT");
        let mut base = AgentConfig::new("default", &model);
        base.limits.max_steps = max_steps;
        base.limits.max_segments = max_segments;
        base.fallback_models = fallback_models;
        if let Some(p) = &system_prompt {
            base.system_prompt = p.clone();
        }
        let cwd = std::env::current_dir().unwrap_or_default();
        let loaded = match AgentsSource::locate(|n| src.var(n), &cwd)? {
            Some(source) => source.load(&base, KNOWN_TOOLS)?,
            None => AgentsConfig::from_base(base),
        };
        Ok(Config {
            agents: loaded.agents,
            settings: loaded.settings,
            llm,
            model,
            api_token,
            slack,
            segment_budget,
            http_allow,
            max_steps,
            max_segments,
            system_prompt,
        })
    }

    /// The agents this configuration defines.
    pub fn agents(&self) -> Agents {
        self.agents.clone()
    }
}
