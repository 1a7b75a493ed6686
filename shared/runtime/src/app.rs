//! The handlers, built once per process over a backend.

use crate::backend::Backend;
use crate::config::Config;
use baton_agent::{Worker, WorkerSettings};
use baton_core::{NoReplies, ReplySink};
use baton_ingest::{Ingest, SlackIngest};
use baton_llm::{build_provider, RetryPolicy};
use baton_slack::SlackReplies;
use baton_tools::Toolset;
use std::sync::Arc;

/// Ingest and worker over one backend.
#[derive(Clone)]
pub struct App {
    pub ingest: Ingest,
    pub worker: Arc<Worker>,
    pub backend: Backend,
    pub config: Config,
    /// Schedule records and plans, when the backend has a scheduler.
    pub schedules: Option<baton_schedule::ScheduleService>,
}

impl App {
    /// The ingest handler alone, built exactly as [`App::new`] builds it,
    /// for the ingest Lambda: it never runs the agent loop, so it builds
    /// no LLM provider, tools, Slack client, worker or reaper. Besides
    /// the work saved at start-up, none of that code is linked into (or
    /// paged in by) the ingest binary, which is most of its memory
    /// (docs/performance-lambda.md). The LLM settings are parsed with the
    /// rest of [`Config`] but not checked further here: the worker checks
    /// them at its own start-up.
    pub fn ingest_only(config: &Config, backend: &Backend) -> Ingest {
        let schedules = schedule_service(backend);
        ingest_handler(config, backend, config.agents(), schedules.as_ref())
    }

    pub fn new(
        config: Config,
        backend: Backend,
        settings: WorkerSettings,
    ) -> Result<Self, crate::ConfigError> {
        let agents = config.agents();
        let llm = build_provider(&config.llm, RetryPolicy::default()).map_err(|e| {
            crate::ConfigError::Invalid {
                name: "BATON_LLM_PROVIDER",
                message: e.to_string(),
            }
        })?;
        let tools = Toolset::builtins(config.http_allow.clone());
        let mut tools: Vec<Arc<dyn baton_core::Tool>> =
            tools.names().iter().filter_map(|n| tools.get(n)).collect();
        let schedules = schedule_service(&backend);
        if let Some(service) = &schedules {
            let admins = crate::scheduling::admins_from_env();
            tools.extend(
                baton_tools::ScheduleTools::new(service.clone(), backend.store.clone(), admins)
                    .tools(),
            );
        }
        // Memory needs only the task table, so every backend has it.
        tools.extend(baton_tools::MemoryTools::new(backend.store.clone()).tools());
        let mut approval_prompts: Option<Arc<dyn baton_core::approval::ApprovalPrompts>> = None;
        let replies: Arc<dyn ReplySink> = match &config.slack {
            Some(s) if s.bot_token.is_some() => {
                let token = s
                    .bot_token
                    .clone()
                    .ok_or(crate::ConfigError::Missing("SLACK_BOT_TOKEN"))?;
                let client =
                    baton_slack::web::SlackClient::new(&s.api_url, token).map_err(|e| {
                        crate::ConfigError::Invalid {
                            name: "SLACK_API_URL",
                            message: e.to_string(),
                        }
                    })?;
                approval_prompts = Some(Arc::new(baton_slack::SlackApprovals::new(client.clone())));
                Arc::new(SlackReplies::new(client))
            }
            Some(_) => {
                tracing::warn!("SLACK_SIGNING_SECRET is set but SLACK_BOT_TOKEN is not: answers cannot be posted");
                Arc::new(NoReplies)
            }
            None => Arc::new(NoReplies),
        };
        let mut worker = Worker::new(
            backend.store.clone(),
            backend.queue.clone(),
            llm,
            tools,
            agents.clone(),
            replies,
            settings,
        );
        worker = worker
            .with_budgets(config.settings.budgets.clone())
            .with_input_guard(config.settings.guard.input_guard);
        if let Some(prompts) = approval_prompts {
            worker = worker.with_approval_prompts(prompts);
        }
        if let Some(service) = &schedules {
            worker = worker.with_schedules(
                service.clone(),
                crate::scheduling::repeat_window_from_env()?,
            );
        }
        let worker = Arc::new(worker);
        let ingest = ingest_handler(&config, &backend, agents, schedules.as_ref());
        Ok(App {
            ingest,
            worker,
            backend,
            config,
            schedules,
        })
    }
}

/// Schedule records and plans, when the backend has a scheduler.
fn schedule_service(backend: &Backend) -> Option<baton_schedule::ScheduleService> {
    backend.scheduler.clone().map(|s| {
        baton_schedule::ScheduleService::new(
            baton_schedule::ScheduleStore::new(backend.store.table().clone()),
            s,
        )
    })
}

/// The one place the ingest handler is built, for [`App::new`] and
/// [`App::ingest_only`].
fn ingest_handler(
    config: &Config,
    backend: &Backend,
    agents: baton_settings::Agents,
    schedules: Option<&baton_schedule::ScheduleService>,
) -> Ingest {
    let slack = config.slack.as_ref().map(|s| SlackIngest {
        signing_secret: s.signing_secret.clone(),
        bot_user_id: s.bot_user_id.clone(),
    });
    let ingest = Ingest::new(
        backend.store.clone(),
        backend.queue.clone(),
        agents,
        config.api_token.clone(),
        slack,
    )
    .with_input_guard(config.settings.guard.input_guard);
    match schedules {
        Some(service) => ingest.with_scheduler(service.clone()),
        None => ingest,
    }
}
