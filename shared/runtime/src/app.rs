//! The whole app (the `worker` feature): the ingest handler, the worker
//! and the reaper, built once per process over a backend, with the
//! binary's own tools ([`AppBuilder`]) besides the built-in ones.

use crate::backend::Backend;
use crate::builder::{ingest_handler, schedule_service, AppBuilder};
use crate::metrics::MetricsMode;
use crate::settings::Settings;
use crate::source::SettingsError;
use crate::BoxError;
use baton_agent::{Worker, WorkerSettings};
use baton_core::{NoReplies, ReplySink, Tool};
use baton_ingest::Ingest;
use baton_llm::{build_provider, RetryPolicy};
use baton_slack::SlackReplies;
use baton_tools::Toolset;
use std::sync::Arc;
use std::time::Duration;

/// Ingest and worker over one backend.
#[derive(Clone)]
pub struct App {
    pub ingest: Ingest,
    pub worker: Arc<Worker>,
    pub backend: Backend,
    pub settings: Settings,
    /// Schedule records and plans, when the backend has a scheduler.
    pub schedules: Option<baton_schedule::ScheduleService>,
}

impl App {
    /// A builder of the app with tools of your own besides the built-in
    /// ones (docs/tools.md, *Your own Rust tools*):
    ///
    /// ```no_run
    /// # async fn run(my_tool: impl baton_runtime::tool::Tool + 'static) -> Result<(), baton_runtime::BoxError> {
    /// let app = baton_runtime::App::builder().tool(my_tool).lambda_app().await?;
    /// # Ok(()) }
    /// ```
    ///
    /// (`run_worker_lambda` and `run_ingest_lambda` with the `lambda`
    /// feature, `run_dev` with the `dev` feature.)
    pub fn builder() -> AppBuilder {
        AppBuilder::default()
    }

    /// The ingest handler alone, built exactly as [`App::new`] builds it:
    /// [`AppBuilder::ingest_only`] with the built-in tools only.
    pub fn ingest_only(settings: &Settings, backend: &Backend) -> Result<Ingest, SettingsError> {
        AppBuilder::new().ingest_only(settings, backend)
    }

    /// The app with the built-in tools only: `App::builder().build(..)`.
    pub fn new(
        settings: Settings,
        backend: Backend,
        timing: WorkerSettings,
    ) -> Result<Self, SettingsError> {
        AppBuilder::default().build(settings, backend, timing)
    }
}

impl AppBuilder {
    /// The app of a Lambda function: settings from the environment (over
    /// the `BATON_SECRETS_PATH` secrets), the AWS backend, and worker
    /// timings fit for SQS with a visibility timeout longer than the
    /// function's. Called once per process, at start-up.
    pub async fn lambda_app(self) -> Result<App, BoxError> {
        // One SDK configuration for the secrets and the backend.
        let cfg = baton_aws::load_sdk_config().await;
        let settings = self.lambda_settings_with(&cfg).await?;
        let backend = Backend::aws_with_config(&settings.aws, &cfg)?
            .with_active_shards(settings.active_index_shards)
            .with_retention(settings.retention);
        Ok(self.build(settings, backend, lambda_timing())?)
    }

    /// The ingest handler, the worker and the reaper over `backend`, with
    /// the built-in tools and the added ones.
    pub fn build(
        self,
        settings: Settings,
        backend: Backend,
        mut timing: WorkerSettings,
    ) -> Result<App, SettingsError> {
        if let Some(url) = &settings.public_url {
            timing.public_url = url.clone();
        }
        timing.connection_expires_after = settings.deployment.connection.expires_after;
        let public_url = timing.public_url.clone();
        let agents = settings.agents();
        settings.require_llm_key()?;
        let llm = build_provider(&settings.llm.config(), RetryPolicy::default()).map_err(|e| {
            SettingsError::Invalid {
                name: "BATON_LLM_PROVIDER",
                message: e.to_string(),
            }
        })?;
        let tools = Toolset::builtins(settings.agent_loop.http_allow.clone());
        let mut tools: Vec<Arc<dyn Tool>> =
            tools.names().iter().filter_map(|n| tools.get(n)).collect();
        let schedules = schedule_service(&backend);
        if let Some(service) = &schedules {
            let admins = settings.schedule_admins.clone();
            tools.extend(
                baton_tools::ScheduleTools::new(service.clone(), backend.store.clone(), admins)
                    .with_quota(schedule_quota(&settings.deployment.schedules))
                    .tools(),
            );
        }
        // The agents file's declared HTTP tools; an agent has one only when
        // its `tools` list names it.
        tools.extend(
            settings
                .http_tools()?
                .into_iter()
                .map(|t| t as Arc<dyn Tool>),
        );
        // Memory needs only the task table, so every backend has it.
        tools.extend(baton_tools::MemoryTools::new(backend.store.clone()).tools());
        // The binary's own tools, last, and never in place of another: the
        // worker keeps one tool per name.
        let mut taken: Vec<String> = tools.iter().map(|t| t.spec().name).collect();
        // `send_file` joins below, once Slack's client is known.
        taken.push(baton_tools::SEND_FILE.to_owned());
        let taken: Vec<&str> = taken.iter().map(String::as_str).collect();
        self.checked_names(&taken)?;
        tools.extend(self.tools);
        let mut approval_prompts: Option<Arc<dyn baton_core::approval::ApprovalPrompts>> = None;
        let mut people: Option<Arc<dyn baton_core::People>> = None;
        let mut roles: Option<Arc<dyn baton_core::Roles>> = None;
        let mut threads: Option<Arc<dyn baton_core::ThreadHistory>> = None;
        let mut files: Option<Arc<dyn baton_core::attachment::FileSource>> = None;
        // The Connect prompts of per-person tools (#24), shown to one person.
        let mut notices: Option<Arc<dyn baton_core::Notices>> = None;
        let mut send_file =
            baton_tools::SendFileTool::new(backend.store.clone(), settings.max_file_bytes);
        let replies: Arc<dyn ReplySink> = match &settings.slack {
            Some(s) if s.bot_token.is_some() => {
                let token = s
                    .bot_token
                    .clone()
                    .ok_or(SettingsError::Missing("SLACK_BOT_TOKEN"))?;
                let client = baton_slack::web::SlackClient::new(&s.api_url, token.clone())
                    .map_err(|e| SettingsError::Invalid {
                        name: "SLACK_API_URL",
                        message: e.to_string(),
                    })?;
                let source =
                    baton_slack::SlackFiles::new(&s.api_url, token.clone()).map_err(|e| {
                        SettingsError::Invalid {
                            name: "SLACK_API_URL",
                            message: e.to_string(),
                        }
                    })?;
                files = Some(Arc::new(source));
                notices = Some(Arc::new(baton_slack::SlackNotices::new(
                    &s.api_url,
                    token.clone(),
                )));
                let uploads = baton_slack::SlackUploads::new(client.clone()).map_err(|e| {
                    SettingsError::Invalid {
                        name: "SLACK_API_URL",
                        message: e.to_string(),
                    }
                })?;
                send_file = send_file.with_uploads(Arc::new(uploads));
                approval_prompts = Some(Arc::new(baton_slack::SlackApprovals::new(client.clone())));
                people = Some(Arc::new(baton_slack::people::SlackPeople::new(
                    client.clone(),
                )));
                roles = Some(crate::builder::roles_lookup(&settings, Some(&client)));
                threads = Some(Arc::new(baton_slack::thread::SlackThreads::new(
                    client.clone(),
                )));
                let shown_agents = agents.clone();
                let replies = SlackReplies::new(client)
                    .with_agent_sessions(s.agent_sessions)
                    .with_work_shown(Arc::new(move |name| {
                        let slack = &shown_agents.resolve(name).slack;
                        baton_slack::reactions::WorkShown {
                            ack_reaction: slack.ack_reaction.clone(),
                            progress_after: slack.progress_after,
                        }
                    }));
                Arc::new(if s.feedback_buttons {
                    replies
                } else {
                    replies.without_feedback()
                })
            }
            Some(_) => {
                tracing::warn!("SLACK_SIGNING_SECRET is set but SLACK_BOT_TOKEN is not: answers cannot be posted");
                Arc::new(NoReplies)
            }
            None => Arc::new(NoReplies),
        };
        tools.push(Arc::new(send_file));
        let mut worker = Worker::new(
            backend.store.clone(),
            backend.queue.clone(),
            llm,
            tools,
            agents.clone(),
            replies,
            timing,
        );
        worker = worker
            .with_budgets(settings.deployment.budgets.clone())
            .with_concurrency(settings.deployment.limits.concurrency)
            .with_input_guard(settings.deployment.guard.input_guard)
            .with_metrics(settings.metrics.sink("worker", MetricsMode::Off));
        if let Some(prompts) = approval_prompts {
            worker = worker.with_approval_prompts(prompts);
        }
        if let Some(people) = people {
            worker = worker.with_people(people);
        }
        worker = worker
            .with_roles(roles.unwrap_or_else(|| crate::builder::roles_lookup(&settings, None)));
        if let Some(threads) = threads {
            worker = worker.with_thread_history(threads);
        }
        if let Some(files) = files {
            worker = worker.with_files(files, settings.max_file_bytes);
        }
        if let Some(notices) = notices {
            worker = worker.with_notices(notices);
        }
        if let Some(service) = &schedules {
            worker =
                worker.with_schedules(service.clone(), settings.agent_loop.heartbeat_repeat_window);
        }
        if let Some(servers) = settings.mcp_servers()? {
            worker = worker.with_remote_tools(Arc::new(servers));
        }
        if let Some(policies) = &settings.agent_loop.policies {
            worker = worker.with_policies(policies.clone());
        }
        if let Some(connections) = &backend.connections {
            worker = worker.with_connections(connections.clone());
        }
        // Per-person tools call with each person's token (#24).
        if let Some(credentials) = settings.credentials(&backend, &public_url)? {
            worker = worker.with_credentials(credentials);
        }
        // One exporter for both handlers (`baton dev` runs them together).
        let export = crate::telemetry::span_export(&settings)?;
        if let Some(export) = &export {
            worker = worker.with_span_export(export.clone());
        }
        let worker = Arc::new(worker);
        let ingest = ingest_handler(&settings, &backend, agents, schedules.as_ref(), export)
            .with_mcp_origins(settings.mcp_origins(Some(&public_url))?);
        let ingest = settings.with_connect_routes(ingest, &backend, Some(&public_url))?;
        Ok(App {
            ingest,
            worker,
            backend,
            settings,
            schedules,
        })
    }
}

/// The worker timings of the Lambda functions: SQS with a visibility
/// timeout longer than the function's.
fn lambda_timing() -> WorkerSettings {
    WorkerSettings {
        lease_ttl: Duration::from_secs(60),
        heartbeat_every: Duration::from_secs(20),
        visibility: Duration::from_secs(90),
        retry_delay: Duration::from_secs(10),
        ..WorkerSettings::default()
    }
}

/// The agents file's `[schedules]` as the schedule tools hold people to it.
fn schedule_quota(s: &baton_settings::ScheduleSettings) -> baton_schedule::Quota {
    baton_schedule::Quota {
        max_per_user: s.max_per_user,
        max_per_team: s.max_per_team,
        min_interval: s.min_interval,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use baton_core::tool_names::BUILT_IN;
    use baton_core::{ToolContext, ToolOutput, ToolSpec};
    use std::collections::HashMap;

    /// A tool that is only a name.
    struct Named(&'static str);

    #[async_trait::async_trait]
    impl Tool for Named {
        fn spec(&self) -> ToolSpec {
            ToolSpec {
                name: self.0.to_owned(),
                description: "test".to_owned(),
                input_schema: serde_json::json!({"type": "object"}),
            }
        }

        async fn call(&self, _: serde_json::Value, _: &ToolContext) -> ToolOutput {
            ToolOutput::ok(self.0)
        }
    }

    /// Values go in as stored secrets, which the process environment
    /// would override: these tests assume it sets none of them.
    fn values(agents: &str) -> HashMap<String, String> {
        HashMap::from([("BATON_AGENTS_TOML".to_owned(), agents.to_owned())])
    }

    fn env_has(names: &[&str]) -> bool {
        names.iter().any(|n| std::env::var_os(n).is_some())
    }

    fn refusal(builder: AppBuilder) -> String {
        match builder.load_settings(&HashMap::new()) {
            Ok(_) => panic!("accepted"),
            Err(e) => {
                assert!(matches!(e, SettingsError::CustomTool { .. }), "{e}");
                e.to_string()
            }
        }
    }

    #[test]
    fn a_tool_of_your_own_never_replaces_a_built_in_one() {
        for name in BUILT_IN {
            let err = refusal(App::builder().tool(Named(name)));
            assert_eq!(
                err,
                format!(
                    "custom tool `{name}`: is the name of a built-in tool, \
                     which a tool of your own cannot replace"
                )
            );
        }
    }

    #[test]
    fn a_tool_of_your_own_needs_a_valid_unique_name() {
        let long: &'static str = "x".repeat(65).leak();
        for name in ["", "has space", "dotted.name", long] {
            let err = refusal(App::builder().tool(Named(name)));
            assert!(err.contains("letters, digits"), "{err}");
        }
        let err = refusal(App::builder().tool(Named("github__issues")));
        assert!(
            err.contains("reserved for the tools of MCP servers"),
            "{err}"
        );
        let err = refusal(
            App::builder()
                .tool(Named("word_count"))
                .tool(Named("word_count")),
        );
        assert_eq!(err, "custom tool `word_count`: added twice");
        let ok = App::builder()
            .tool(Named("word_count"))
            .tools([Arc::new(Named("Dice-Roll_2")) as Arc<dyn Tool>]);
        assert_eq!(ok.tool_names(), ["word_count", "Dice-Roll_2"]);
        assert_eq!(ok.checked_names(&[]).unwrap(), ok.tool_names());
    }

    #[test]
    fn the_agents_file_may_name_the_tools_of_your_own() {
        if env_has(&["BATON_AGENTS_TOML", "BATON_AGENTS_FILE"]) {
            eprintln!("skipped: the environment sets an agents file");
            return;
        }
        let file = values("[agents.default]\ntools = [\"word_count\", \"current_time\"]\n");
        let err = Settings::load(&file).unwrap_err().to_string();
        assert!(err.contains("unknown tool `word_count`"), "{err}");
        let settings = App::builder()
            .tool(Named("word_count"))
            .load_settings(&file)
            .unwrap();
        assert!(settings
            .agents
            .get("default")
            .unwrap()
            .allows_tool("word_count"));
    }

    #[test]
    fn a_tool_of_your_own_cannot_take_a_declared_tools_name() {
        if env_has(&[
            "BATON_AGENTS_TOML",
            "BATON_AGENTS_FILE",
            "BATON_LLM_PROVIDER",
        ]) {
            eprintln!("skipped: the environment sets an agents file or a provider");
            return;
        }
        let file = values(
            "[http_tools.lookup]\ndescription = \"Look up\"\nmethod = \"GET\"\n\
             url = \"https://example.com/lookup\"\n",
        );
        let builder = App::builder().tool(Named("lookup"));
        // Loaded through the builder, the file is refused...
        let err = builder.load_settings(&file).unwrap_err().to_string();
        assert!(err.contains("http_tools.lookup"), "{err}");
        // ...and settings loaded without it are refused at build.
        let settings = Settings::load(&file).unwrap();
        let dir = tempfile::tempdir().unwrap();
        let backend = Backend::embedded(dir.path(), Default::default()).unwrap();
        let expected = "custom tool `lookup`: the agents file declares a tool of that name; \
                        rename one of them";
        let err = builder
            .ingest_only(&settings, &backend)
            .err()
            .expect("refused");
        assert_eq!(err.to_string(), expected);
        let err = builder
            .build(settings, backend, WorkerSettings::default())
            .err()
            .expect("refused");
        assert_eq!(err.to_string(), expected);
    }
}
