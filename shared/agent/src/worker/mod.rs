//! The worker: one work-queue message in, one disposition out. The
//! `worker` Lambda and `baton dev` both call [`Worker::handle`].
//!
//! [`Worker::handle`] only parses the message and dispatches it, one
//! module per kind, each given the [`Deps`] explicitly:
//!
//! | message | module |
//! | --- | --- |
//! | `wake` (run a task's next segment) | [`wake`] |
//! | `reap` (the reaper's sweep) | [`reap`] |
//! | `schedule` (a schedule fired) | [`schedule`] |
//! | a dead-lettered wake ([`Worker::dead_letter`]) | [`dead_letter`] |

mod dead_letter;
mod reap;
mod schedule;
mod wake;

pub(crate) use crate::deps::Deps;
pub use crate::deps::{WorkerSettings, DEFAULT_PUBLIC_URL};

use crate::segment::SegmentBudget;
use crate::spend::MonthlyBudgets;
use baton_core::approval::ApprovalPrompts;
use baton_core::input_guard::InputGuardMode;
use baton_core::{
    Delivery, LlmProvider, RemoteTools, ReplySink, StoreError, Task, TaskStore, Tool,
};
use baton_core::{WorkMessage, WorkQueue};
use baton_schedule::ScheduleService;
use baton_settings::{Agents, BudgetSettings};
use std::sync::Arc;
use std::time::Duration;

pub use schedule::{HeartbeatReplies, DEFAULT_REPEAT_WINDOW};

/// What to do with the message that woke the worker.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Disposition {
    /// Done with it (handed over, finished, or a duplicate): delete it.
    Ack,
    /// A transient failure: leave it to be delivered again after `after`.
    /// After the queue's max receive count it goes to the dead-letter queue.
    Retry { reason: String, after: Duration },
    /// It can never be processed (not a work message, or a failure that
    /// retrying cannot heal): leave it for the dead-letter queue.
    Poison { reason: String },
}

/// The handlers over their dependencies. Cheap to share behind an `Arc`.
pub struct Worker {
    deps: Deps,
}

impl Worker {
    pub fn new(
        store: TaskStore,
        queue: Arc<dyn WorkQueue>,
        llm: Arc<dyn LlmProvider>,
        tools: Vec<Arc<dyn Tool>>,
        agents: Agents,
        replies: Arc<dyn ReplySink>,
        settings: WorkerSettings,
    ) -> Self {
        let tools = tools.into_iter().map(|t| (t.spec().name, t)).collect();
        Worker {
            deps: Deps {
                store,
                queue,
                llm,
                tools,
                remote: None,
                agents,
                replies,
                schedules: None,
                approvals: None,
                people: None,
                roles: Arc::new(baton_core::NoRoles),
                threads: None,
                budgets: None,
                capacity: None,
                files: None,
                max_file_bytes: baton_core::attachment::DEFAULT_MAX_FILE_BYTES,
                input_guard: InputGuardMode::default(),
                span_export: None,
                metrics: Arc::new(baton_core::NoMetrics),
                policies: None,
                notices: None,
                connections: None,
                credentials: None,
                settings,
            },
        }
    }

    /// Downloads the files Slack messages carry from `source`, each up to
    /// `max_bytes` (`BATON_MAX_FILE_BYTES`); a larger one is named to the
    /// model with why.
    pub fn with_files(
        mut self,
        source: Arc<dyn baton_core::attachment::FileSource>,
        max_bytes: u64,
    ) -> Self {
        self.deps.files = Some(source);
        self.deps.max_file_bytes = max_bytes;
        self
    }

    /// Enforces the monthly token and cost budgets (`[budgets]` of the agents file)
    /// over the task table.
    pub fn with_budgets(mut self, settings: BudgetSettings) -> Self {
        self.deps.budgets = MonthlyBudgets::new(self.deps.store.table().clone(), settings);
        self
    }

    /// Holds tasks over the concurrency caps (`[limits.concurrency]` of the
    /// agents file) in the queue until a slot frees.
    pub fn with_concurrency(mut self, caps: baton_settings::ConcurrencySettings) -> Self {
        self.deps.capacity = crate::capacity::Capacity::new(self.deps.store.table().clone(), caps);
        self
    }

    /// How tool output that looks like instructions reaches the model (the
    /// deployment's `[guard] input_guard`; default `warn`).
    pub fn with_input_guard(mut self, mode: InputGuardMode) -> Self {
        self.deps.input_guard = mode;
        self
    }

    /// Tells people things meant for them alone (the Connect prompts of
    /// per-person tools) through `notices`.
    pub fn with_notices(mut self, notices: Arc<dyn baton_core::Notices>) -> Self {
        self.deps.notices = Some(notices);
        self
    }

    /// Makes per-person tool calls (`auth = "oauth"`) with each person's
    /// own token from `credentials` (#24); the Connect links of those who
    /// must connect first go to the store of
    /// [`Worker::with_connections`].
    pub fn with_credentials(
        mut self,
        credentials: Arc<dyn baton_core::connection::Credentials>,
    ) -> Self {
        self.deps.credentials = Some(credentials);
        self
    }

    /// Asks `policies` (the agents file's `[policy]`, checked at start-up)
    /// before every tool call and task start.
    pub fn with_policies(mut self, policies: Arc<baton_policy::Policies>) -> Self {
        self.deps.policies = Some(policies);
        self
    }

    /// Offers agents the tools of their MCP servers (`mcp:NAME` in an
    /// agent's `tools`), listed once when each task starts.
    pub fn with_remote_tools(mut self, remote: Arc<dyn RemoteTools>) -> Self {
        self.deps.remote = Some(remote);
        self
    }

    /// Sends each segment's spans to `export` too (OpenTelemetry), before
    /// the segment returns: nothing is left to flush when a Lambda
    /// invocation ends.
    pub fn with_span_export(mut self, export: Arc<dyn baton_core::SpanExport>) -> Self {
        self.deps.span_export = Some(export);
        self
    }

    /// Emits task counts, model calls, tool errors, segments and dead
    /// letters to `metrics` (none without it).
    pub fn with_metrics(mut self, metrics: Arc<dyn baton_core::Metrics>) -> Self {
        self.deps.metrics = metrics;
        self
    }

    /// Tells the model the names of the people in a Slack conversation.
    pub fn with_people(mut self, people: Arc<dyn baton_core::People>) -> Self {
        self.deps.people = Some(people);
        self
    }

    /// Looks up people's roles (`[roles.NAME]` of the agents file) with
    /// `roles`; without it nobody has a role.
    pub fn with_roles(mut self, roles: Arc<dyn baton_core::Roles>) -> Self {
        self.deps.roles = roles;
        self
    }

    /// The roles lookup decisions about people use.
    pub fn roles(&self) -> &Arc<dyn baton_core::Roles> {
        &self.deps.roles
    }

    /// Reads the earlier messages of a thread a task joins.
    pub fn with_thread_history(mut self, threads: Arc<dyn baton_core::ThreadHistory>) -> Self {
        self.deps.threads = Some(threads);
        self
    }

    /// Keeps per-person OAuth connections in `store` (built once per
    /// process by the runtime).
    pub fn with_connections(
        mut self,
        store: baton_core::store::connections::ConnectionStore,
    ) -> Self {
        self.deps.connections = Some(store);
        self
    }

    /// Shows approval requests (e.g. Slack buttons) and their decisions.
    pub fn with_approval_prompts(mut self, prompts: Arc<dyn ApprovalPrompts>) -> Self {
        self.deps.approvals = Some(prompts);
        self
    }

    /// Enables schedule firings and heartbeat repeat suppression: answers of
    /// heartbeat tasks go through [`HeartbeatReplies`] with `repeat_window`.
    pub fn with_schedules(mut self, service: ScheduleService, repeat_window: Duration) -> Self {
        self.deps.replies = Arc::new(HeartbeatReplies::new(
            service.store().clone(),
            self.deps.replies.clone(),
            repeat_window,
        ));
        self.deps.schedules = Some(service);
        self
    }

    /// The handlers' dependencies, for the segment's tests.
    #[cfg(test)]
    pub(crate) fn deps(&self) -> &Deps {
        &self.deps
    }

    pub fn store(&self) -> &TaskStore {
        &self.deps.store
    }

    pub fn settings(&self) -> &WorkerSettings {
        &self.deps.settings
    }

    /// Handles one work-queue message.
    #[tracing::instrument(skip_all, fields(message_id = %delivery.message_id, receive_count = delivery.receive_count))]
    pub async fn handle(&self, delivery: &Delivery, budget: SegmentBudget) -> Disposition {
        match WorkMessage::parse(&delivery.body) {
            Ok(WorkMessage::Wake(w)) => wake::handle(&self.deps, delivery, &w, budget).await,
            Ok(WorkMessage::Reap) => reap::handle(&self.deps).await,
            Ok(WorkMessage::Schedule(fire)) => schedule::handle(&self.deps, &fire).await,
            Err(e) => {
                tracing::error!(error = %e, "not a work message");
                Disposition::Poison {
                    reason: format!("not a work message: {e}"),
                }
            }
        }
    }

    /// A wake message that landed in the dead-letter queue: its task can no
    /// longer make progress. Marks it failed with the reason and tells the
    /// user. Returns the task, if the message named one.
    pub async fn dead_letter(
        &self,
        body: &str,
        receive_count: u32,
    ) -> Result<Option<Task>, StoreError> {
        dead_letter::handle(&self.deps, body, receive_count).await
    }
}
