//! The one typed load of Baton's settings: every environment variable the
//! runtime reads (docs/configuration.md), with the secrets stored in SSM
//! Parameter Store layered under the process environment, read and checked
//! once at start-up. Nothing else in the runtime reads the environment:
//! the backends, the scheduler, the Lambda entry points and `baton dev`
//! take their values from [`Settings`]. (The AWS SDK reads its own standard
//! variables — `AWS_REGION`, credentials, `AWS_ENDPOINT_URL*` — when its
//! configuration is loaded; `baton dev`'s command-line flags may come from
//! the environment too, as clap reads them.)

use crate::aws_resources::AwsResources;
use crate::backend::Backend;
use crate::llm_settings::LlmSettings;
#[cfg(feature = "worker")]
use crate::loop_settings::LoopSettings;
use crate::source::{invalid, SettingsError, Source};
use baton_connect::{ConnectionVault, Connector};
use baton_core::tool_names::BUILT_IN;
use baton_ingest::ApiToken;
#[cfg(feature = "worker")]
use baton_settings::Problem;
use baton_settings::{AgentConfig, Agents};
use baton_settings::{AgentsConfig, AgentsSource, ConfigFileError, GlobalSettings};
use baton_slack::signature::SigningSecret;
use baton_slack::web::BotToken;
#[cfg(feature = "worker")]
use baton_tools::{DeclaredHttpTool, McpServers};
use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;
use url::Url;

/// Slack app credentials.
#[derive(Clone, Debug)]
pub struct SlackConfig {
    pub signing_secret: SigningSecret,
    pub bot_token: Option<BotToken>,
    pub api_url: String,
    pub bot_user_id: Option<String>,
    /// `SLACK_AGENT_SESSIONS`: the app is declared as an agent (its
    /// manifest has `agent_view`), so a task's phase is its thread's agent
    /// session status and Slack's Stop button stops it. Default false.
    pub agent_sessions: bool,
    /// `SLACK_FEEDBACK_BUTTONS`: answers carry 👍 / 👎 buttons. Default true.
    pub feedback_buttons: bool,
}

/// The worker Lambda's own settings.
#[derive(Clone, Debug)]
pub struct LambdaSettings {
    /// `BATON_SEGMENT_MARGIN_MS`: time kept back from the invocation's
    /// deadline to checkpoint and hand over.
    pub segment_margin: Duration,
    /// `BATON_DLQ_ARN`: records from this queue are dead letters.
    pub dlq_arn: Option<String>,
}

/// The default of `BATON_SEGMENT_MARGIN_MS`.
pub const DEFAULT_SEGMENT_MARGIN: Duration = Duration::from_secs(30);

/// Everything Baton reads from its environment.
#[derive(Clone, Debug)]
pub struct Settings {
    /// `BATON_LLM_PROVIDER` and the provider's variables.
    pub llm: LlmSettings,
    /// `BATON_LLM_MODEL`, or the provider's default model.
    pub model: String,
    pub api_token: Option<ApiToken>,
    pub slack: Option<SlackConfig>,
    /// `BATON_SEGMENT_BUDGET_MS`: overrides the time a segment may use.
    pub segment_budget: Option<Duration>,
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
    pub deployment: GlobalSettings,
    /// `BATON_SCHEDULE_ADMINS`: schedule owners who may delete any schedule.
    pub schedule_admins: Vec<String>,
    /// `BATON_ADMINS`: Slack user ids, and role names (`[roles.NAME]`), of
    /// the people who may stop any task from Slack
    /// (besides its requester and its agent's approvers). Not schedule
    /// admins: those are owners with their workspace (`slack:TEAM:USER`).
    pub admins: Vec<String>,
    pub aws: AwsResources,
    pub lambda: LambdaSettings,
    /// `BATON_ACTIVE_INDEX_SHARDS`: the shards of the index of running
    /// tasks (docs/scale.md). Every function of a deployment must agree.
    pub active_index_shards: u32,
    /// `BATON_MAX_FILE_BYTES`: the largest file given with a task that is
    /// kept for the model (default 10 MB).
    pub max_file_bytes: u64,
    /// `BATON_PUBLIC_URL`: where the ingest is reached from outside
    /// (`wait_for_callback` URLs start with it). `baton dev` defaults to
    /// the address it listens on; elsewhere the default is
    /// `http://127.0.0.1:3000`.
    pub public_url: Option<String>,
    /// `BATON_MCP_ALLOWED_ORIGINS`: browser origins `/mcp` answers besides
    /// the deployment's own (its public URL's), comma-separated, each
    /// `scheme://host[:port]`; none by default.
    pub mcp_allowed_origins: Vec<String>,
    /// The per-person OAuth providers (`[mcp.NAME] auth = "oauth"`,
    /// `[oauth.NAME]`), their references resolved.
    pub(crate) oauth_providers: Vec<baton_connect::Provider>,
    /// `SLACK_CLIENT_ID`, `SLACK_CLIENT_SECRET`: Sign in with Slack proves
    /// who opened a Slack person's Connect link; without them a page asks
    /// the browser to confirm whose connection it makes.
    pub sign_in_with_slack: Option<crate::connect::SignInSettings>,
    /// `BATON_TASK_RETENTION_DAYS`: how long finished tasks, their
    /// transcripts and payloads are kept (default 90; 0 keeps them
    /// forever).
    pub retention: baton_core::retention::Retention,
    /// `OTEL_EXPORTER_OTLP_ENDPOINT` and the other OpenTelemetry settings
    /// (`baton_otel::OtlpSettings`): where the worker exports each task's
    /// trace; `None` exports nothing.
    pub otlp: Option<baton_otel::OtlpSettings>,
    /// `BATON_METRICS`, `BATON_METRICS_NAMESPACE`: where operational
    /// metrics go.
    pub metrics: crate::metrics::MetricsSettings,
    /// The names of the agents file's `[http_tools]` (which a tool of
    /// your own may not take).
    pub declared_tools: Vec<String>,
    /// What only the agent loop reads (the tools' settings, resolved, and
    /// the heartbeats'): the `worker` feature, so the ingest Lambda links
    /// none of their types.
    #[cfg(feature = "worker")]
    pub agent_loop: LoopSettings,
    /// Where the agents file came from, for errors found when its tools
    /// are built.
    pub agents_origin: String,
}

/// The non-empty items of a comma-separated list, trimmed.
fn comma_list(value: &str) -> Vec<String> {
    value
        .split(',')
        .map(|a| a.trim().to_owned())
        .filter(|a| !a.is_empty())
        .collect()
}

/// Whether `id` looks like a Slack user id (`U…`, `W…`: capitals and
/// digits), so a `slack:TEAM:USER` owner or a name given by mistake is
/// refused at start rather than matching nobody.
fn is_slack_user_id(id: &str) -> bool {
    id.len() >= 2
        && id.starts_with(['U', 'W'])
        && id
            .chars()
            .all(|c| c.is_ascii_uppercase() || c.is_ascii_digit())
}

impl Settings {
    /// The browser origins `/mcp` answers: that of `public_url` (the
    /// deployment's own, where it is known) and `BATON_MCP_ALLOWED_ORIGINS`.
    pub(crate) fn mcp_origins(
        &self,
        public_url: Option<&str>,
    ) -> Result<baton_ingest::McpOrigins, SettingsError> {
        baton_ingest::McpOrigins::new(public_url, &self.mcp_allowed_origins)
            .map_err(|e| invalid("BATON_PUBLIC_URL", e.to_string()))
    }
}

/// `BATON_PUBLIC_URL`: an `http(s)://` URL with a host, kept without a
/// trailing `/`.
fn public_url(value: Option<String>) -> Result<Option<String>, SettingsError> {
    const NAME: &str = "BATON_PUBLIC_URL";
    let Some(value) = value else {
        return Ok(None);
    };
    let refuse = || {
        invalid(
            NAME,
            "must be the deployment's public base URL, e.g. https://baton.example.com",
        )
    };
    let url = value.trim().trim_end_matches('/');
    let rest = url
        .strip_prefix("https://")
        .or_else(|| url.strip_prefix("http://"))
        .ok_or_else(refuse)?;
    let host = rest.split('/').next().unwrap_or_default();
    if host.is_empty() || rest.contains(['?', '#', ' ']) {
        return Err(refuse());
    }
    Ok(Some(url.to_owned()))
}

/// `BATON_TASK_RETENTION_DAYS`: whole days from 0 (forever) to ten years.
fn task_retention(src: &Source<'_>) -> Result<baton_core::retention::Retention, SettingsError> {
    use baton_core::retention::{Retention, DEFAULT_RETENTION_DAYS, MAX_RETENTION_DAYS};
    const NAME: &str = "BATON_TASK_RETENTION_DAYS";
    let refuse = || {
        invalid(
            NAME,
            format!("must be a whole number of days from 1 to {MAX_RETENTION_DAYS}, or 0 to keep tasks forever"),
        )
    };
    match src.var(NAME) {
        None => Ok(Retention::days(DEFAULT_RETENTION_DAYS)),
        Some(v) => match v.parse::<u32>() {
            Ok(0) => Ok(Retention::forever()),
            Ok(days) if days <= MAX_RETENTION_DAYS => Ok(Retention::days(days)),
            _ => Err(refuse()),
        },
    }
}

impl Settings {
    /// Reads the environment. Errors name the variable at fault. The
    /// agents file may name the built-in tools; a binary with its own
    /// tools loads its settings through [`crate::AppBuilder::settings_from_env`]
    /// instead, so that it may name those too.
    pub fn from_env() -> Result<Self, SettingsError> {
        Self::load(&HashMap::new())
    }

    /// For the Lambda functions: the secrets under `BATON_SECRETS_PATH` (if
    /// set) from SSM Parameter Store, then [`Settings::load`] over them.
    pub async fn load_for_lambda() -> Result<Self, Box<dyn std::error::Error + Send + Sync>> {
        Self::load_for_lambda_knowing(&[], &baton_aws::load_sdk_config().await).await
    }

    /// Reads the environment, falling back to `secrets` (name → value, as
    /// loaded by [`crate::secrets::load`]) for variables it does not set.
    pub fn load(secrets: &HashMap<String, String>) -> Result<Self, SettingsError> {
        Self::load_knowing(secrets, &[])
    }

    /// [`Settings::load_for_lambda`], with `custom_tools` (the names of the
    /// tools an [`crate::AppBuilder`] adds) known to the agents file besides
    /// the built-in tools, and the secrets read with `cfg`.
    pub(crate) async fn load_for_lambda_knowing(
        custom_tools: &[String],
        cfg: &aws_config::SdkConfig,
    ) -> Result<Self, Box<dyn std::error::Error + Send + Sync>> {
        let env = HashMap::new();
        let src = Source { secrets: &env };
        let mut secrets = match src.var("BATON_SECRETS_PATH") {
            Some(path) => crate::secrets::load(cfg, &path).await?,
            None => HashMap::new(),
        };
        // The stack's URL (the ingest's: its API cannot name itself to the
        // function it routes to), unless BATON_PUBLIC_URL says otherwise.
        if src.var("BATON_PUBLIC_URL").is_none() {
            if let Some(name) = src.var("BATON_PUBLIC_URL_PARAMETER") {
                let url = crate::secrets::parameter(cfg, &name).await?;
                secrets.insert("BATON_PUBLIC_URL".to_owned(), url);
            }
        }
        let mut settings = Self::load_knowing(&secrets, custom_tools)?;
        // A function's stdout is CloudWatch Logs, which extracts the
        // metrics: on unless BATON_METRICS says otherwise.
        settings
            .metrics
            .mode
            .get_or_insert(crate::metrics::MetricsMode::Emf);
        Ok(settings)
    }

    /// [`Settings::load`], with `custom_tools` known to the agents file
    /// besides the built-in tools: an agent's `tools` may name them.
    pub(crate) fn load_knowing(
        secrets: &HashMap<String, String>,
        custom_tools: &[String],
    ) -> Result<Self, SettingsError> {
        let known_tools: Vec<&str> = BUILT_IN
            .iter()
            .copied()
            .chain(custom_tools.iter().map(String::as_str))
            .collect();
        let src = Source { secrets };
        let var = |name: &str| src.var(name);
        let (llm, model) = LlmSettings::load(&src)?;
        // Fallback models are not the provider's business: they go to the
        // agents (below), whose loop asks the one provider for each in turn.
        let fallback_models: Vec<String> = var("BATON_LLM_FALLBACK_MODELS")
            .map(|v| {
                v.split(',')
                    .map(|m| m.trim().to_owned())
                    .filter(|m| !m.is_empty())
                    .collect()
            })
            .unwrap_or_default();
        let api_token = var("BATON_API_TOKEN")
            .map(|t| ApiToken::parse(&t).map_err(|m| invalid("BATON_API_TOKEN", m)))
            .transpose()?;
        let agent_sessions = src.flag("SLACK_AGENT_SESSIONS")?.unwrap_or(false);
        let feedback_buttons = src.flag("SLACK_FEEDBACK_BUTTONS")?.unwrap_or(true);
        let slack = var("SLACK_SIGNING_SECRET").map(|secret| SlackConfig {
            agent_sessions,
            feedback_buttons,
            signing_secret: SigningSecret::new(secret),
            bot_token: var("SLACK_BOT_TOKEN").map(BotToken::new),
            api_url: var("SLACK_API_URL").unwrap_or_else(|| "https://slack.com/api".to_owned()),
            bot_user_id: var("SLACK_BOT_USER_ID"),
        });
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
        let (loaded, origin) = match AgentsSource::locate(|n| src.var(n), &cwd)? {
            Some(source) => (
                source.load(&base, &known_tools)?,
                source.origin().to_owned(),
            ),
            None => (AgentsConfig::from_base(base), String::new()),
        };
        #[cfg(feature = "worker")]
        let agent_loop = LoopSettings::load(&src, &loaded, &origin, &known_tools)?;
        let declared_tools = loaded.http_tools.iter().map(|d| d.name.clone()).collect();
        let schedule_admins = var("BATON_SCHEDULE_ADMINS")
            .map(|v| comma_list(&v))
            .unwrap_or_default();
        let admins = var("BATON_ADMINS")
            .map(|v| comma_list(&v))
            .unwrap_or_default();
        // A role name stands for its people, once declared (`[roles.NAME]`).
        if let Some(bad) = admins
            .iter()
            .find(|a| !is_slack_user_id(a) && !loaded.settings.roles.contains(a))
        {
            return Err(invalid(
                "BATON_ADMINS",
                format!(
                    "`{bad}` is neither a Slack user id (like U0123ABCD) nor a role of the \
                     agents file (declare it with `[roles.{bad}]`)"
                ),
            ));
        }
        let aws = AwsResources {
            table: var("BATON_TABLE"),
            queue_url: var("BATON_QUEUE_URL"),
            trace_bucket: var("BATON_TRACE_BUCKET"),
            dlq_url: var("BATON_DLQ_URL"),
            schedule_group: var("BATON_SCHEDULE_GROUP"),
            scheduler_role_arn: var("BATON_SCHEDULER_ROLE_ARN"),
            queue_arn: var("BATON_QUEUE_ARN"),
            connections_key: var("BATON_CONNECTIONS_KEY"),
        };
        let lambda = LambdaSettings {
            segment_margin: src
                .num::<u64>("BATON_SEGMENT_MARGIN_MS")?
                .map_or(DEFAULT_SEGMENT_MARGIN, Duration::from_millis),
            dlq_arn: var("BATON_DLQ_ARN"),
        };
        let active_index_shards = src
            .num::<u32>("BATON_ACTIVE_INDEX_SHARDS")?
            .unwrap_or(baton_core::store::DEFAULT_ACTIVE_SHARDS);
        if !(1..=baton_core::store::MAX_ACTIVE_SHARDS).contains(&active_index_shards) {
            return Err(invalid(
                "BATON_ACTIVE_INDEX_SHARDS",
                format!("must be from 1 to {}", baton_core::store::MAX_ACTIVE_SHARDS),
            ));
        }
        let max_file_bytes = src
            .num::<u64>("BATON_MAX_FILE_BYTES")?
            .unwrap_or(baton_core::attachment::DEFAULT_MAX_FILE_BYTES);
        let retention = task_retention(&src)?;
        let public_url = public_url(var("BATON_PUBLIC_URL"))?;
        let mcp_allowed_origins = var("BATON_MCP_ALLOWED_ORIGINS")
            .map(|v| comma_list(&v))
            .unwrap_or_default();
        baton_ingest::McpOrigins::new(None, &mcp_allowed_origins)
            .map_err(|e| invalid("BATON_MCP_ALLOWED_ORIGINS", e.to_string()))?;
        let oauth_providers =
            crate::connect::resolve_providers(&src, &loaded).map_err(|problems| {
                ConfigFileError::Invalid {
                    origin: origin.clone(),
                    problems,
                }
            })?;
        let sign_in_with_slack = crate::connect::sign_in_settings(&src)?;
        let metrics = crate::metrics::MetricsSettings::load(var)?;
        let otlp = baton_otel::OtlpSettings::from_vars(|n| src.var(n))
            .map_err(|e| invalid(e.name, e.message))?;
        Ok(Settings {
            max_file_bytes,
            public_url,
            mcp_allowed_origins,
            oauth_providers,
            sign_in_with_slack,
            retention,
            otlp,
            metrics,
            declared_tools,
            #[cfg(feature = "worker")]
            agent_loop,
            agents_origin: origin,
            active_index_shards,
            agents: loaded.agents,
            deployment: loaded.settings,
            schedule_admins,
            admins,
            aws,
            lambda,
            llm,
            model,
            api_token,
            slack,
            segment_budget,
            max_steps,
            max_segments,
            system_prompt,
        })
    }

    /// The provider's API key, where the provider needs one: checked where
    /// the model is called (the worker, `baton dev`), so a missing key stops
    /// the start rather than failing the first task. A server of your own
    /// (`ANTHROPIC_BASE_URL`, `OPENAI_BASE_URL`) may need none.
    pub fn require_llm_key(&self) -> Result<(), SettingsError> {
        self.llm.require_key()
    }

    /// Which model answers, as a person reads it: `anthropic
    /// claude-sonnet-4-5`, or the scripted model and what it is.
    pub fn model_summary(&self) -> String {
        let Some(provider) = self.llm.provider() else {
            return "the scripted model (an offline stand-in; set BATON_LLM_PROVIDER for a real one)"
                .to_owned();
        };
        format!("{provider} {}", self.model)
    }

    /// The agents this configuration defines.
    pub fn agents(&self) -> Agents {
        self.agents.clone()
    }
}

#[cfg(feature = "worker")]
impl Settings {
    /// The declared HTTP tools, checked (URL, header values) and their
    /// schemas compiled; every problem at once, named by its key. Called
    /// where tools are built (the worker and `baton dev`), not by ingest.
    pub fn http_tools(&self) -> Result<Vec<Arc<DeclaredHttpTool>>, SettingsError> {
        let mut problems = Vec::new();
        let mut tools = Vec::with_capacity(self.agent_loop.http_tool_defs.len());
        for def in &self.agent_loop.http_tool_defs {
            let at = format!("http_tools.{}", def.name);
            match DeclaredHttpTool::new(def.clone()) {
                Ok(tool) => tools.push(Arc::new(tool)),
                Err(e) => problems.push(Problem {
                    path: format!("{at}.{}", e.field),
                    message: e.message,
                }),
            }
        }
        if problems.is_empty() {
            Ok(tools)
        } else {
            Err(ConfigFileError::Invalid {
                origin: self.agents_origin.clone(),
                problems,
            }
            .into())
        }
    }
}

#[cfg(feature = "worker")]
impl Settings {
    /// The declared MCP servers, checked once resolved (URL, header
    /// values); `None` when there are none. Connects to nothing: the
    /// worker lists a server's tools when a task that uses it starts.
    pub fn mcp_servers(&self) -> Result<Option<McpServers>, SettingsError> {
        if self.agent_loop.mcp_server_defs.is_empty() {
            return Ok(None);
        }
        McpServers::new(self.agent_loop.mcp_server_defs.clone())
            .map(Some)
            .map_err(|(server, e)| {
                ConfigFileError::Invalid {
                    origin: self.agents_origin.clone(),
                    problems: vec![Problem {
                        path: format!("mcp.{server}.{}", e.field),
                        message: e.message,
                    }],
                }
                .into()
            })
    }
}

impl Settings {
    /// The flows of the deployment's per-person providers under
    /// `public_url`; `None` when none is declared or the backend keeps no
    /// connections (no key to seal them with).
    pub fn connector(
        &self,
        backend: &Backend,
        public_url: &str,
    ) -> Result<Option<Arc<Connector>>, SettingsError> {
        let Some(store) = &backend.connections else {
            if !self.oauth_providers.is_empty() {
                tracing::warn!("{}", baton_core::store::connections::NOT_CONFIGURED);
            }
            return Ok(None);
        };
        if self.oauth_providers.is_empty() {
            return Ok(None);
        }
        let invalid = |message: String| SettingsError::Invalid {
            name: "BATON_PUBLIC_URL",
            message,
        };
        let url = Url::parse(public_url).map_err(|e| invalid(e.to_string()))?;
        let connector = Connector::new(
            self.oauth_providers.clone(),
            &url,
            Arc::new(baton_connect::StoredClients(store.clone())),
        )
        .map_err(invalid)?;
        Ok(Some(Arc::new(connector)))
    }

    /// `ingest` serving the Connect routes under `public_url` (with Sign in
    /// with Slack when set up); unchanged when no per-person provider is
    /// declared, or without a public URL (said at start-up: the flows'
    /// URLs are never taken from a request's `Host`).
    pub(crate) fn with_connect_routes(
        &self,
        ingest: baton_ingest::Ingest,
        backend: &Backend,
        public_url: Option<&str>,
    ) -> Result<baton_ingest::Ingest, SettingsError> {
        let Some(public_url) = public_url else {
            if !self.oauth_providers.is_empty() {
                tracing::error!(
                    "BATON_PUBLIC_URL is not set: Connect links cannot be served (on AWS the \
                     stack gives the ingest its URL through BATON_PUBLIC_URL_PARAMETER)"
                );
            }
            return Ok(ingest);
        };
        let Some(connector) = self.connector(backend, public_url)? else {
            return Ok(ingest);
        };
        let ingest = ingest.with_connector(connector);
        let Some(s) = &self.sign_in_with_slack else {
            return Ok(ingest);
        };
        let sign_in = baton_slack::openid::SignInWithSlack::new(
            s.client_id.clone(),
            s.client_secret.clone(),
            &s.api_url,
            &s.authorize_url,
        )
        .map_err(|e| SettingsError::Invalid {
            name: "SLACK_CLIENT_ID",
            message: e.to_string(),
        })?;
        Ok(ingest.with_sign_in_with_slack(Arc::new(sign_in)))
    }

    /// The per-person credentials tools use (the worker), over the
    /// backend's connection store; `None` as for [`Settings::connector`].
    pub fn credentials(
        &self,
        backend: &Backend,
        public_url: &str,
    ) -> Result<Option<Arc<ConnectionVault>>, SettingsError> {
        let (Some(store), Some(connector)) =
            (&backend.connections, self.connector(backend, public_url)?)
        else {
            return Ok(None);
        };
        Ok(Some(Arc::new(ConnectionVault::new(
            store.clone(),
            connector,
        ))))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_public_url_is_an_http_base_url() {
        assert_eq!(super::public_url(None).unwrap(), None);
        assert_eq!(
            super::public_url(Some(" https://baton.example.com/ ".into())).unwrap(),
            Some("https://baton.example.com".into())
        );
        assert_eq!(
            super::public_url(Some("http://127.0.0.1:3000/prod".into())).unwrap(),
            Some("http://127.0.0.1:3000/prod".into())
        );
        for bad in ["baton.example.com", "ftp://x", "https://", "https://x/?a=1"] {
            assert!(super::public_url(Some(bad.into())).is_err(), "{bad}");
        }
    }
    use crate::llm_settings::DEFAULT_BEDROCK_MODEL;

    #[test]
    fn sign_in_with_slack_takes_both_credentials_and_secure_urls_only() {
        let names = [
            "SLACK_CLIENT_ID",
            "SLACK_CLIENT_SECRET",
            "SLACK_API_URL",
            "SLACK_OPENID_AUTHORIZE_URL",
        ];
        if env_has(&names) {
            return;
        }
        let load = |pairs: &[(&str, &str)]| {
            let values: HashMap<String, String> = pairs
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect();
            crate::connect::sign_in_settings(&Source { secrets: &values })
        };
        assert!(load(&[]).unwrap().is_none());
        let s = load(&[("SLACK_CLIENT_ID", "1.2"), ("SLACK_CLIENT_SECRET", "shh")])
            .unwrap()
            .unwrap();
        assert_eq!(s.api_url, "https://slack.com/api");
        assert_eq!(
            s.authorize_url,
            "https://slack.com/openid/connect/authorize"
        );
        assert!(!format!("{s:?}").contains("shh"));
        assert!(matches!(
            load(&[("SLACK_CLIENT_ID", "1.2")]),
            Err(SettingsError::Missing("SLACK_CLIENT_SECRET"))
        ));
        assert!(matches!(
            load(&[("SLACK_CLIENT_SECRET", "shh")]),
            Err(SettingsError::Missing("SLACK_CLIENT_ID"))
        ));
        let insecure = load(&[
            ("SLACK_CLIENT_ID", "1.2"),
            ("SLACK_CLIENT_SECRET", "shh"),
            (
                "SLACK_OPENID_AUTHORIZE_URL",
                "http://evil.example/authorize",
            ),
        ]);
        assert!(matches!(
            insecure,
            Err(SettingsError::Invalid {
                name: "SLACK_OPENID_AUTHORIZE_URL",
                ..
            })
        ));
    }

    /// Values go in as stored secrets, which the process environment
    /// would override: these tests assume it sets none of them.
    fn bedrock(extra: &[(&str, &str)]) -> Result<Settings, SettingsError> {
        let values: HashMap<String, String> = [("BATON_LLM_PROVIDER", "bedrock")]
            .iter()
            .chain(extra)
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        Settings::load(&values)
    }

    fn env_has(names: &[&str]) -> bool {
        names.iter().any(|n| std::env::var_os(n).is_some())
    }

    #[test]
    fn bedrock_reads_region_model_and_endpoint() {
        if env_has(&[
            "BATON_LLM_PROVIDER",
            "BATON_LLM_MODEL",
            "AWS_REGION",
            "AWS_ENDPOINT_URL_BEDROCK_RUNTIME",
            "BEDROCK_ENDPOINT_URL",
        ]) {
            eprintln!("skipped: the environment sets Bedrock variables");
            return;
        }
        let c = bedrock(&[("AWS_REGION", "eu-west-1")]).unwrap();
        match &c.llm {
            LlmSettings::Bedrock {
                region,
                endpoint_url,
                model,
                ..
            } => {
                assert_eq!(region, "eu-west-1");
                assert_eq!(endpoint_url, &None);
                assert_eq!(model, DEFAULT_BEDROCK_MODEL);
            }
            other => panic!("expected bedrock, got {other:?}"),
        }
        assert_eq!(c.model, DEFAULT_BEDROCK_MODEL);
        // Building the provider loads no credentials yet (no network).
        #[cfg(feature = "worker")]
        {
            let config = c.llm.config();
            let p = baton_llm::build_provider(&config, baton_llm::RetryPolicy::default()).unwrap();
            assert_eq!(p.name(), "bedrock");
        }

        let c = bedrock(&[
            ("AWS_REGION", "us-west-2"),
            ("BATON_LLM_MODEL", "us.amazon.nova-lite-v1:0"),
            ("BEDROCK_ENDPOINT_URL", "http://127.0.0.1:9"),
            (
                "AWS_ENDPOINT_URL_BEDROCK_RUNTIME",
                "https://vpce.example.com",
            ),
            // Ignored: it points every AWS client elsewhere (moto).
            ("AWS_ENDPOINT_URL", "http://127.0.0.1:5000"),
        ])
        .unwrap();
        match &c.llm {
            LlmSettings::Bedrock {
                endpoint_url,
                model,
                ..
            } => {
                assert_eq!(endpoint_url.as_deref(), Some("https://vpce.example.com"));
                assert_eq!(model, "us.amazon.nova-lite-v1:0");
            }
            other => panic!("expected bedrock, got {other:?}"),
        }
    }

    #[test]
    fn bedrock_without_a_region_names_the_variable() {
        if env_has(&["BATON_LLM_PROVIDER", "AWS_REGION", "AWS_DEFAULT_REGION"]) {
            eprintln!("skipped: the environment sets a region");
            return;
        }
        let err = bedrock(&[]).unwrap_err();
        assert!(matches!(err, SettingsError::Missing("AWS_REGION")), "{err}");
        assert_eq!(err.to_string(), "AWS_REGION is required");
    }

    #[test]
    fn a_bad_number_names_its_variable() {
        if env_has(&[
            "BATON_SEGMENT_MARGIN_MS",
            "BATON_HEARTBEAT_REPEAT_WINDOW_SECS",
        ]) {
            eprintln!("skipped: the environment sets the variables");
            return;
        }
        let mut names = vec![
            "BATON_SEGMENT_MARGIN_MS",
            "BATON_ACTIVE_INDEX_SHARDS",
            "BATON_MAX_FILE_BYTES",
        ];
        // Read only where the agent loop is built.
        if cfg!(feature = "worker") {
            names.push("BATON_HEARTBEAT_REPEAT_WINDOW_SECS");
        }
        for name in names {
            let values = HashMap::from([(name.to_owned(), "soon".to_owned())]);
            let err = Settings::load(&values).unwrap_err();
            assert!(err.to_string().starts_with(name), "{err}");
        }
    }

    #[test]
    fn admins_are_a_comma_list_of_slack_user_ids() {
        if env_has(&["BATON_ADMINS", "BATON_SCHEDULE_ADMINS"]) {
            eprintln!("skipped: the environment sets the variables");
            return;
        }
        let load =
            |name: &str, v: &str| Settings::load(&HashMap::from([(name.to_owned(), v.to_owned())]));
        assert!(Settings::load(&HashMap::new()).unwrap().admins.is_empty());
        let s = load("BATON_ADMINS", " U0123ABCD, W42 ,,").unwrap();
        assert_eq!(s.admins, ["U0123ABCD", "W42"]);
        // Schedule admins are their own list (owners name the workspace).
        assert!(s.schedule_admins.is_empty());
        let s = load("BATON_SCHEDULE_ADMINS", "slack:T1:U1").unwrap();
        assert_eq!(s.schedule_admins, ["slack:T1:U1"]);
        assert!(s.admins.is_empty());
        for bad in ["slack:T1:U1", "u0123abcd", "alice"] {
            let err = load("BATON_ADMINS", bad).unwrap_err();
            assert!(err.to_string().starts_with("BATON_ADMINS"), "{err}");
            assert!(err.to_string().contains(bad), "{err}");
        }
        // A role name, once the agents file declares it.
        if env_has(&["BATON_AGENTS_FILE", "BATON_AGENTS_TOML"]) {
            return;
        }
        let with_file = |admins: &str| {
            Settings::load(&HashMap::from([
                ("BATON_ADMINS".to_owned(), admins.to_owned()),
                (
                    "BATON_AGENTS_TOML".to_owned(),
                    "[roles.oncall]\nusergroups = [\"S0614TZR7\"]\n".to_owned(),
                ),
            ]))
        };
        let s = with_file("oncall,U0123ABCD").unwrap();
        assert_eq!(s.admins, ["oncall", "U0123ABCD"]);
        let err = with_file("oncall,ops").unwrap_err().to_string();
        assert!(
            err.starts_with("BATON_ADMINS") && err.contains("`ops`"),
            "{err}"
        );
    }

    #[test]
    fn task_retention_default_forever_and_range() {
        if env_has(&["BATON_TASK_RETENTION_DAYS"]) {
            eprintln!("skipped: the environment sets the variable");
            return;
        }
        let days = |v: &str| {
            Settings::load(&HashMap::from([(
                "BATON_TASK_RETENTION_DAYS".to_owned(),
                v.to_owned(),
            )]))
        };
        let default = Settings::load(&HashMap::new()).unwrap().retention;
        assert_eq!(default.in_days(), 90);
        assert_eq!(days("7").unwrap().retention.in_days(), 7);
        assert_eq!(
            days("0").unwrap().retention,
            baton_core::retention::Retention::forever()
        );
        for bad in ["-1", "3651", "90d", "1.5"] {
            let err = days(bad).unwrap_err().to_string();
            assert!(err.starts_with("BATON_TASK_RETENTION_DAYS"), "{err}");
            assert!(err.contains("or 0 to keep tasks forever"), "{err}");
        }
    }

    #[test]
    fn active_index_shards_default_and_range() {
        if env_has(&["BATON_ACTIVE_INDEX_SHARDS"]) {
            eprintln!("skipped: the environment sets the variable");
            return;
        }
        let shards = |v: &str| {
            Settings::load(&HashMap::from([(
                "BATON_ACTIVE_INDEX_SHARDS".to_owned(),
                v.to_owned(),
            )]))
        };
        assert_eq!(
            Settings::load(&HashMap::new()).unwrap().active_index_shards,
            16
        );
        assert_eq!(shards("64").unwrap().active_index_shards, 64);
        for bad in ["0", "257", "many"] {
            let err = shards(bad).unwrap_err();
            assert!(
                err.to_string().starts_with("BATON_ACTIVE_INDEX_SHARDS"),
                "{err}"
            );
        }
    }
}
