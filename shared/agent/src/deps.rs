//! What the message handlers and the segment work with, passed to each
//! explicitly. Its own module so the worker (which builds it) and the
//! segment (which uses it) depend on it, not on each other.

use crate::spend::MonthlyBudgets;
use baton_core::approval::ApprovalPrompts;
use baton_core::input_guard::InputGuardMode;
use baton_core::metric::Measurement;
use baton_core::{LlmProvider, Metrics, RemoteTools, ReplySink, TaskStore, Tool, WorkQueue};
use baton_schedule::{ScheduleService, Scheduler};
use baton_settings::Agents;
use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

/// The tools the worker offers, by name.
pub(crate) type Tools = BTreeMap<String, Arc<dyn Tool>>;

/// Everything a handler may use. Built once per process by
/// [`Worker`](crate::Worker); handlers borrow it.
pub(crate) struct Deps {
    pub(crate) store: TaskStore,
    pub(crate) queue: Arc<dyn WorkQueue>,
    pub(crate) llm: Arc<dyn LlmProvider>,
    pub(crate) tools: Tools,
    /// The MCP servers' tools, when the agents file declares servers.
    pub(crate) remote: Option<Arc<dyn RemoteTools>>,
    pub(crate) agents: Agents,
    /// Where answers, endings and progress go (for heartbeat schedules,
    /// through the repeat filter).
    pub(crate) replies: Arc<dyn ReplySink>,
    /// Schedule records and plans, when schedules are enabled.
    pub(crate) schedules: Option<ScheduleService>,
    /// Display names of the people in a conversation (Slack `users.info`).
    pub(crate) people: Option<Arc<dyn baton_core::People>>,
    /// Which roles a person has (`[roles.NAME]`, Slack user groups).
    pub(crate) roles: Arc<dyn baton_core::Roles>,
    /// A chat thread's earlier messages (Slack `conversations.replies`),
    /// for a task that joins a thread.
    pub(crate) threads: Option<Arc<dyn baton_core::ThreadHistory>>,
    /// Where approval requests are shown; without it HTTP clients decide
    /// through the approvals route.
    pub(crate) approvals: Option<Arc<dyn ApprovalPrompts>>,
    /// Monthly token and cost budgets per workspace and user, when set.
    pub(crate) budgets: Option<MonthlyBudgets>,
    /// The concurrency caps (`[limits.concurrency]`), when set.
    pub(crate) capacity: Option<crate::capacity::Capacity>,
    /// Where the files a Slack message carried are downloaded from.
    pub(crate) files: Option<Arc<dyn baton_core::attachment::FileSource>>,
    /// The largest file given to the model (`BATON_MAX_FILE_BYTES`).
    pub(crate) max_file_bytes: u64,
    /// How tool output that looks like instructions reaches the model.
    pub(crate) input_guard: InputGuardMode,
    /// Where each segment's spans go besides the blob store (OTLP).
    pub(crate) span_export: Option<Arc<dyn baton_core::SpanExport>>,
    /// Where task counts, model calls and tool errors are measured.
    pub(crate) metrics: Arc<dyn Metrics>,
    /// The agents file's Cedar policies (`[policy]`), asked before every
    /// tool call and task start; without them today's rules alone apply.
    pub(crate) policies: Option<Arc<baton_policy::Policies>>,
    /// Notes to one person (Slack ephemerals): the Connect prompts.
    pub(crate) notices: Option<Arc<dyn baton_core::Notices>>,
    /// Per-person OAuth connections (sealed tokens, Connect links);
    /// `None` where the deployment has no key to seal them
    /// ([`baton_core::store::connections::NOT_CONFIGURED`]).
    pub(crate) connections: Option<baton_core::store::connections::ConnectionStore>,
    /// Where per-person tools get a person's bearer token (#24); without
    /// it (or without `connections`) no call can wait for a connection.
    pub(crate) credentials: Option<Arc<dyn baton_core::connection::Credentials>>,
    pub(crate) settings: WorkerSettings,
}

impl Deps {
    /// Emits `m`; never fails.
    pub(crate) fn measure(&self, m: Measurement) {
        self.metrics.emit(&m);
    }

    /// A task this worker created (a schedule firing, a child task).
    pub(crate) fn measure_created(&self, agent: &str, id: &baton_core::TaskId) {
        self.measure(
            Measurement::for_agent(agent)
                .count(baton_core::metric::TASKS_CREATED)
                .property("task_id", id.to_string()),
        );
    }

    /// The scheduler for wakes beyond the queue's 15-minute delay.
    pub(crate) fn scheduler(&self) -> Option<&dyn Scheduler> {
        self.schedules.as_ref().map(|s| s.scheduler().as_ref())
    }
}

/// Timing of leases and queue visibility. The lease must expire before the
/// message it was taken for becomes visible again (see [`Lease`](baton_core::Lease)).
#[derive(Clone, Debug)]
pub struct WorkerSettings {
    /// Unique per process, part of every lease owner id (for logs).
    pub instance_id: String,
    /// How long a lease lasts unless renewed.
    pub lease_ttl: Duration,
    /// How often a running segment renews its lease and message visibility.
    pub heartbeat_every: Duration,
    /// The visibility a heartbeat extends the message to (longer than the
    /// lease, so a crashed holder's lease is expired when its message
    /// reappears).
    pub visibility: Duration,
    /// Delay before a message that failed transiently is retried.
    pub retry_delay: Duration,
    /// Longest a single tool call may run.
    pub tool_timeout: Duration,
    /// Where the deployment's ingest is reached from outside
    /// (`BATON_PUBLIC_URL`): `wait_for_callback` URLs start with it.
    pub public_url: String,
    /// How long a call waits for its person to connect
    /// (`[connection] expires_after`).
    pub connection_expires_after: Duration,
}

/// The public URL when none is set: `baton dev`'s default address.
pub const DEFAULT_PUBLIC_URL: &str = "http://127.0.0.1:3000";

impl Default for WorkerSettings {
    fn default() -> Self {
        WorkerSettings {
            instance_id: uuid::Uuid::new_v4().simple().to_string()[..8].to_owned(),
            lease_ttl: Duration::from_secs(30),
            heartbeat_every: Duration::from_secs(10),
            visibility: Duration::from_secs(45),
            retry_delay: Duration::from_secs(5),
            tool_timeout: Duration::from_secs(120),
            public_url: DEFAULT_PUBLIC_URL.to_owned(),
            connection_expires_after: baton_settings::DEFAULT_CONNECTION_EXPIRES_AFTER,
        }
    }
}
