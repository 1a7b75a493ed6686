//! The handlers, built once per process over a backend.

use crate::backend::Backend;
use crate::settings::Settings;
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
    pub settings: Settings,
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
    /// rest of [`Settings`] but not checked further here: the worker checks
    /// them at its own start-up.
    pub fn ingest_only(settings: &Settings, backend: &Backend) -> Ingest {
        let schedules = schedule_service(backend);
        ingest_handler(settings, backend, settings.agents(), schedules.as_ref())
    }

    pub fn new(
        settings: Settings,
        backend: Backend,
        timing: WorkerSettings,
    ) -> Result<Self, crate::SettingsError> {
        let agents = settings.agents();
        let llm = build_provider(&settings.llm, RetryPolicy::default()).map_err(|e| {
            crate::SettingsError::Invalid {
                name: "BATON_LLM_PROVIDER",
                message: e.to_string(),
            }
        })?;
        let tools = Toolset::builtins(settings.http_allow.clone());
        let mut tools: Vec<Arc<dyn baton_core::Tool>> =
            tools.names().iter().filter_map(|n| tools.get(n)).collect();
        let schedules = schedule_service(&backend);
        if let Some(service) = &schedules {
            let admins = settings.schedule_admins.clone();
            tools.extend(
                baton_tools::ScheduleTools::new(service.clone(), backend.store.clone(), admins)
                    .tools(),
            );
        }
        // The agents file's declared HTTP tools; an agent has one only when
        // its `tools` list names it.
        tools.extend(
            settings
                .http_tools()?
                .into_iter()
                .map(|t| t as Arc<dyn baton_core::Tool>),
        );
        // Memory needs only the task table, so every backend has it.
        tools.extend(baton_tools::MemoryTools::new(backend.store.clone()).tools());
        let mut approval_prompts: Option<Arc<dyn baton_core::approval::ApprovalPrompts>> = None;
        let replies: Arc<dyn ReplySink> = match &settings.slack {
            Some(s) if s.bot_token.is_some() => {
                let token = s
                    .bot_token
                    .clone()
                    .ok_or(crate::SettingsError::Missing("SLACK_BOT_TOKEN"))?;
                let client =
                    baton_slack::web::SlackClient::new(&s.api_url, token).map_err(|e| {
                        crate::SettingsError::Invalid {
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
            timing,
        );
        worker = worker
            .with_budgets(settings.deployment.budgets.clone())
            .with_input_guard(settings.deployment.guard.input_guard);
        if let Some(prompts) = approval_prompts {
            worker = worker.with_approval_prompts(prompts);
        }
        if let Some(service) = &schedules {
            worker = worker.with_schedules(service.clone(), settings.heartbeat_repeat_window);
        }
        let worker = Arc::new(worker);
        let ingest = ingest_handler(&settings, &backend, agents, schedules.as_ref());
        Ok(App {
            ingest,
            worker,
            backend,
            settings,
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
    settings: &Settings,
    backend: &Backend,
    agents: baton_settings::Agents,
    schedules: Option<&baton_schedule::ScheduleService>,
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
    .with_input_guard(settings.deployment.guard.input_guard);
    match schedules {
        Some(service) => ingest.with_scheduler(service.clone()),
        None => ingest,
    }
}
