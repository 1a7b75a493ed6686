//! [`AppBuilder`]: the tools of your own a binary adds, the settings loaded
//! knowing them, and the ingest handler, which every build of this crate
//! has (the ingest Lambda is this and no more). The worker side
//! ([`App`](crate::App), `AppBuilder::build`) is the `worker` feature
//! (app.rs).

use crate::backend::Backend;
use crate::metrics::MetricsMode;
use crate::settings::Settings;
use crate::source::SettingsError;
use crate::BoxError;
use baton_core::tool_names::BUILT_IN;
use baton_core::Tool;
use baton_ingest::{Ingest, SlackIngest};
use baton_slack::SlackNotices;
use std::collections::HashMap;
use std::sync::Arc;

/// Builds an [`App`](crate::App) (the `worker` feature), or the ingest
/// handler alone, with tools of your own besides the built-in ones; from
/// [`AppBuilder::new`] (or `App::builder`).
///
/// A tool added here is one more tool the agents file may name in an
/// agent's `tools` (an agent without a `tools` list has it, like the
/// built-in tools), so the settings must be loaded through the builder
/// ([`AppBuilder::settings_from_env`], [`AppBuilder::lambda_settings`]) for
/// an agents file naming it to be accepted. Its name must be letters,
/// digits, `_` and `-` (1 to 64 characters), without `__` (the MCP
/// servers' tools are `SERVER__TOOL`), and not the name of a built-in tool,
/// of a declared HTTP tool or of another added tool: a tool never silently
/// replaces another; the build (and the settings load) is refused instead,
/// naming the tool.
///
/// The ingest and the worker of a deployment must be built with the same
/// tools: the ingest checks the agents file too.
#[derive(Clone, Default)]
pub struct AppBuilder {
    pub(crate) tools: Vec<Arc<dyn Tool>>,
}

impl std::fmt::Debug for AppBuilder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AppBuilder")
            .field("tools", &self.tool_names())
            .finish()
    }
}

impl AppBuilder {
    /// A builder with the built-in tools only; add yours with
    /// [`AppBuilder::tool`].
    pub fn new() -> Self {
        AppBuilder::default()
    }

    /// Adds a tool.
    pub fn tool(mut self, tool: impl Tool + 'static) -> Self {
        self.tools.push(Arc::new(tool));
        self
    }

    /// Adds tools.
    pub fn tools(mut self, tools: impl IntoIterator<Item = Arc<dyn Tool>>) -> Self {
        self.tools.extend(tools);
        self
    }

    /// The names of the added tools, in the order they were added.
    pub fn tool_names(&self) -> Vec<String> {
        self.tools.iter().map(|t| t.spec().name).collect()
    }

    /// [`Settings::from_env`], with the added tools known to the agents
    /// file.
    pub fn settings_from_env(&self) -> Result<Settings, SettingsError> {
        self.load_settings(&HashMap::new())
    }

    /// [`Settings::load`] (the environment over `secrets`), with the added
    /// tools known to the agents file.
    pub fn load_settings(
        &self,
        secrets: &HashMap<String, String>,
    ) -> Result<Settings, SettingsError> {
        let names = self.checked_names(&[])?;
        Settings::load_knowing(secrets, &names)
    }

    /// [`Settings::load_for_lambda`] (over the `BATON_SECRETS_PATH`
    /// secrets), with the added tools known to the agents file.
    pub async fn lambda_settings(&self) -> Result<Settings, BoxError> {
        self.lambda_settings_with(&baton_aws::load_sdk_config().await)
            .await
    }

    /// [`AppBuilder::lambda_settings`], reading the secrets with `cfg`.
    pub(crate) async fn lambda_settings_with(
        &self,
        cfg: &aws_config::SdkConfig,
    ) -> Result<Settings, BoxError> {
        let names = self.checked_names(&[])?;
        Settings::load_for_lambda_knowing(&names, cfg).await
    }

    /// The ingest handler alone, after checking the added tools' names
    /// against `settings`: it never runs the agent loop, so it builds no
    /// LLM provider, tools, worker or reaper, and its Slack client (for
    /// the note to someone whose `stop` is refused) only when it first
    /// needs it. Without the `worker` feature none of that code is even
    /// linked, which is most of the ingest binary's size and memory
    /// (docs/performance-lambda.md). The LLM settings are parsed with the
    /// rest of [`Settings`] but not checked further here: the worker checks
    /// them at its own start-up.
    ///
    /// With `OTEL_EXPORTER_OTLP_ENDPOINT` set it builds the span exporter
    /// too (the ingest exports a span for each task it creates), which is
    /// why it can fail.
    pub fn ingest_only(
        &self,
        settings: &Settings,
        backend: &Backend,
    ) -> Result<Ingest, SettingsError> {
        self.checked_names(&declared_names(settings))?;
        // Before the span exporter and the Slack clients are built.
        crate::install_crypto_provider();
        let schedules = schedule_service(backend);
        let export = crate::telemetry::span_export(settings)?;
        let ingest = ingest_handler(
            settings,
            backend,
            settings.agents(),
            schedules.as_ref(),
            export,
        );
        // The own origin is only ever configured: never a request's host.
        let public_url = settings.public_url.as_deref();
        let ingest = ingest.with_mcp_origins(settings.mcp_origins(public_url)?);
        settings.with_connect_routes(ingest, backend, public_url)
    }

    /// The ingest handler of the ingest Lambda: the same settings and AWS
    /// backend as [`AppBuilder::lambda_app`], without the worker side
    /// ([`AppBuilder::ingest_only`]). Called once per process, at start-up.
    pub async fn lambda_ingest(self) -> Result<Ingest, BoxError> {
        // One SDK configuration for the secrets and the backend.
        let cfg = baton_aws::load_sdk_config().await;
        let settings = self.lambda_settings_with(&cfg).await?;
        let backend = Backend::aws_with_config(&settings.aws, &cfg)?
            .with_active_shards(settings.active_index_shards)
            .with_retention(settings.retention);
        Ok(self.ingest_only(&settings, &backend)?)
    }

    /// The names of the added tools, each checked: a valid tool name, not
    /// reserved, not a built-in tool's nor one of `taken`, and not added
    /// twice.
    pub(crate) fn checked_names(&self, taken: &[&str]) -> Result<Vec<String>, SettingsError> {
        let mut names: Vec<String> = Vec::with_capacity(self.tools.len());
        for name in self.tool_names() {
            let refuse = |message: &str| SettingsError::CustomTool {
                name: name.clone(),
                message: message.to_owned(),
            };
            if !valid_tool_name(&name) {
                return Err(refuse(
                    "tool names are letters, digits, `_` and `-` (1 to 64 characters)",
                ));
            }
            if name.contains("__") {
                return Err(refuse(
                    "`__` is reserved for the tools of MCP servers (`SERVER__TOOL`)",
                ));
            }
            if BUILT_IN.contains(&name.as_str()) {
                return Err(refuse(
                    "is the name of a built-in tool, which a tool of your own cannot replace",
                ));
            }
            if taken.contains(&name.as_str()) {
                return Err(refuse(
                    "the agents file declares a tool of that name; rename one of them",
                ));
            }
            if names.contains(&name) {
                return Err(refuse("added twice"));
            }
            names.push(name);
        }
        Ok(names)
    }
}

/// Schedule records and plans, when the backend has a scheduler.
pub(crate) fn schedule_service(backend: &Backend) -> Option<baton_schedule::ScheduleService> {
    backend.scheduler.clone().map(|s| {
        baton_schedule::ScheduleService::new(
            baton_schedule::ScheduleStore::new(backend.store.table().clone()),
            s,
        )
    })
}

/// The names of the agents file's declared HTTP tools.
fn declared_names(settings: &Settings) -> Vec<&str> {
    settings.declared_tools.iter().map(String::as_str).collect()
}

/// Names the model APIs accept (and the agents file's declared tools use).
fn valid_tool_name(name: &str) -> bool {
    (1..=64).contains(&name.len())
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
}

/// The roles lookup over the agents file's `[roles]`: Slack user groups'
/// members come from `client` (the worker's), else from a client built at
/// the first lookup, when the bot token is known.
pub(crate) fn roles_lookup(
    settings: &Settings,
    client: Option<&baton_slack::web::SlackClient>,
) -> Arc<dyn baton_core::Roles> {
    let table = settings.deployment.roles.clone();
    if table.is_empty() {
        return Arc::new(baton_core::NoRoles);
    }
    let members: Option<Arc<dyn baton_core::UsergroupMembers>> = if !table.has_usergroups() {
        None
    } else if let Some(client) = client {
        Some(Arc::new(baton_slack::usergroups::SlackUsergroups::new(
            client.clone(),
        )))
    } else {
        settings
            .slack
            .as_ref()
            .and_then(|s| Some((s, s.bot_token.clone()?)))
            .map(|(s, token)| -> Arc<dyn baton_core::UsergroupMembers> {
                Arc::new(baton_slack::usergroups::SlackUsergroups::lazy(
                    &s.api_url, token,
                ))
            })
    };
    if members.is_none() && table.has_usergroups() {
        tracing::warn!("roles list Slack user groups but SLACK_BOT_TOKEN is not set: the groups give nobody their role");
    }
    Arc::new(baton_settings::RoleLookup::new(table, members))
}

/// The one place the ingest handler is built, for `AppBuilder::build`
/// and [`AppBuilder::ingest_only`].
pub(crate) fn ingest_handler(
    settings: &Settings,
    backend: &Backend,
    agents: baton_settings::Agents,
    schedules: Option<&baton_schedule::ScheduleService>,
    export: Option<Arc<dyn baton_core::SpanExport>>,
) -> Ingest {
    let slack = settings.slack.as_ref().map(|s| SlackIngest {
        signing_secret: s.signing_secret.clone(),
        bot_user_id: s.bot_user_id.clone(),
    });
    let ingest = Ingest::new(
        backend.store.clone(),
        backend.queue.clone(),
        agents,
        settings.api_token.clone(),
        slack,
    )
    .with_input_guard(settings.deployment.guard.input_guard)
    .with_routes(settings.deployment.routes.clone())
    .with_tasks_per_hour(settings.deployment.limits.tasks_per_hour)
    .with_admins(settings.admins.clone())
    .with_roles(roles_lookup(settings, None))
    .with_max_file_bytes(settings.max_file_bytes)
    .with_api_may_name_user(settings.deployment.connection.api_may_name_user)
    .with_metrics(settings.metrics.sink("ingest", MetricsMode::Off));
    // Tells a Slack user their `stop` was refused; the client is built at
    // the first such note, so the ingest's start-up does not pay for it.
    let ingest = match settings
        .slack
        .as_ref()
        .and_then(|s| Some((s, s.bot_token.clone()?)))
    {
        Some((s, token)) => ingest
            .with_notices(Arc::new(SlackNotices::new(&s.api_url, token.clone())))
            .with_people(Arc::new(baton_slack::people::SlackPeople::lazy(
                &s.api_url,
                token.clone(),
            )))
            .with_thread_setup(Arc::new(baton_slack::assistant::SlackThreadSetup::new(
                &s.api_url,
                token,
                s.agent_sessions,
            ))),
        None => ingest,
    };
    let ingest = match export {
        Some(export) => ingest.with_span_export(export),
        None => ingest,
    };
    let ingest = match &backend.connections {
        Some(connections) => ingest.with_connections(connections.clone()),
        None => ingest,
    };
    match schedules {
        Some(service) => ingest.with_scheduler(service.clone()),
        None => ingest,
    }
}
