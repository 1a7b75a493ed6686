//! The worker handler: one wake message in, one segment run, a disposition
//! out. The `worker` Lambda and `baton dev` both call [`Worker::handle`].

use crate::agent::Agents;
use crate::budget::SegmentBudget;
use crate::reply::ReplySink;
use crate::segment::{Leg, LegError};
use baton_core::{
    now_ms, Delivery, LlmProvider, ScheduleFire, StoreError, Task, TaskId, TaskStatus, TaskStore,
    Tool, Wake, WorkMessage, WorkQueue,
};
use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

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
}

impl Default for WorkerSettings {
    fn default() -> Self {
        WorkerSettings {
            instance_id: uuid::Uuid::new_v4().simple().to_string()[..8].to_owned(),
            lease_ttl: Duration::from_secs(30),
            heartbeat_every: Duration::from_secs(10),
            visibility: Duration::from_secs(45),
            retry_delay: Duration::from_secs(5),
            tool_timeout: Duration::from_secs(120),
        }
    }
}

/// What to do with the message that woke the worker.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Disposition {
    /// Done with it (handed over, finished, or a duplicate): delete it.
    Ack,
    /// A transient failure: leave it to be delivered again after `after`.
    /// After the queue's max receive count it goes to the dead-letter queue.
    Retry { reason: String, after: Duration },
    /// It can never be processed (not a wake message): dead-letter it.
    Poison { reason: String },
}

/// Everything a segment needs. Cheap to share behind an `Arc`.
pub struct Worker {
    pub(crate) store: TaskStore,
    pub(crate) queue: Arc<dyn WorkQueue>,
    pub(crate) llm: Arc<dyn LlmProvider>,
    pub(crate) tools: Arc<BTreeMap<String, Arc<dyn Tool>>>,
    pub(crate) agents: Agents,
    pub(crate) replies: Arc<dyn ReplySink>,
    pub(crate) settings: WorkerSettings,
    /// Schedule firings, when enabled ([`Worker::with_schedules`]).
    pub(crate) schedules: Option<crate::schedules::WorkerSchedules>,
    /// Where approval requests are shown ([`Worker::with_approval_prompts`]);
    /// without it HTTP clients decide through the approvals route.
    pub(crate) approvals: Option<Arc<dyn crate::approval::ApprovalPrompts>>,
    /// Monthly token budgets per workspace and user
    /// ([`Worker::with_budgets`]).
    pub(crate) budgets: Option<crate::spend::MonthlyBudgets>,
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
            store,
            queue,
            llm,
            tools: Arc::new(tools),
            agents,
            replies,
            settings,
            schedules: None,
            approvals: None,
            budgets: None,
        }
    }

    /// Enforces the monthly token budgets (`[budgets]` of the agents file)
    /// over the task table.
    pub fn with_budgets(mut self, settings: crate::config_file::BudgetSettings) -> Self {
        self.budgets = crate::spend::MonthlyBudgets::new(self.store.table().clone(), settings);
        self
    }

    /// Shows approval requests (e.g. Slack buttons) and their decisions.
    pub fn with_approval_prompts(
        mut self,
        prompts: Arc<dyn crate::approval::ApprovalPrompts>,
    ) -> Self {
        self.approvals = Some(prompts);
        self
    }

    pub fn store(&self) -> &TaskStore {
        &self.store
    }

    pub fn settings(&self) -> &WorkerSettings {
        &self.settings
    }

    /// Runs one segment for the task named by `delivery`.
    #[tracing::instrument(skip_all, fields(message_id = %delivery.message_id, receive_count = delivery.receive_count))]
    pub async fn handle(&self, delivery: &Delivery, budget: SegmentBudget) -> Disposition {
        let wake = match WorkMessage::parse(&delivery.body) {
            Ok(WorkMessage::Wake(w)) => w,
            Ok(WorkMessage::Reap) => return self.reap().await,
            Ok(WorkMessage::Schedule(fire)) => return self.fire_schedule(&fire).await,
            Err(e) => {
                tracing::error!(error = %e, "not a work message");
                return Disposition::Poison {
                    reason: format!("not a work message: {e}"),
                };
            }
        };
        let owner = format!(
            "{}-{}",
            self.settings.instance_id,
            &uuid::Uuid::new_v4().simple().to_string()[..8]
        );
        let heartbeat = self.spawn_heartbeat(
            wake.task_id.clone(),
            owner.clone(),
            delivery.receipt.clone(),
        );
        let result = Leg::run(self, &wake.task_id, owner.clone(), budget).await;
        heartbeat.abort();
        match result {
            Ok(end) => {
                tracing::info!(task_id = %wake.task_id, outcome = ?end, "segment ended");
                Disposition::Ack
            }
            Err(LegError::Transient(reason)) => {
                tracing::warn!(task_id = %wake.task_id, %reason, "segment failed; the message will be retried");
                self.release_after_failure(&wake.task_id, &owner, &reason)
                    .await;
                Disposition::Retry {
                    reason,
                    after: self.settings.retry_delay,
                }
            }
        }
    }

    /// One reaper sweep (the reaper schedule's message).
    async fn reap(&self) -> Disposition {
        let reaper = crate::Reaper::new(
            self.store.clone(),
            self.queue.clone(),
            self.settings.visibility * 2,
        );
        self.repair_schedules().await;
        match reaper.sweep().await {
            Ok(n) => {
                tracing::info!(resent = n, "reaper sweep done");
                Disposition::Ack
            }
            // The next sweep will try again; no need to retry this one.
            Err(e) => {
                tracing::warn!(error = %e, "reaper sweep failed");
                Disposition::Ack
            }
        }
    }

    /// A schedule fired. Schedules are handled by `crate::schedules` when
    /// configured; without them the firing cannot be processed.
    async fn fire_schedule(&self, fire: &ScheduleFire) -> Disposition {
        self.fire(fire).await
    }

    /// Renews the lease and the message's visibility while a segment runs.
    fn spawn_heartbeat(
        &self,
        id: TaskId,
        owner: String,
        receipt: String,
    ) -> tokio::task::JoinHandle<()> {
        let store = self.store.clone();
        let queue = self.queue.clone();
        let s = self.settings.clone();
        tokio::spawn(async move {
            loop {
                tokio::time::sleep(s.heartbeat_every).await;
                let renewed = store
                    .update(&id, None, |t| match &mut t.lease {
                        Some(l) if l.owner == owner => {
                            l.expires_at = now_ms() + s.lease_ttl.as_millis() as i64;
                            Ok(Some(Vec::new()))
                        }
                        _ => Ok(None),
                    })
                    .await;
                if let Err(e) = renewed {
                    tracing::warn!(error = %e, "lease renewal failed");
                }
                if let Err(e) = queue.extend(&receipt, s.visibility).await {
                    tracing::warn!(error = %e, "visibility extension failed");
                }
            }
        })
    }

    /// After a transient failure: record why and free the lease, so the
    /// retried message does not have to wait for it to expire. Best effort:
    /// the store itself may be what failed.
    async fn release_after_failure(&self, id: &TaskId, owner: &str, reason: &str) {
        let _ = self
            .store
            .update(id, None, |t| match &t.lease {
                Some(l) if l.owner == owner => {
                    t.lease = None;
                    t.error = Some(reason.to_owned());
                    Ok(Some(Vec::new()))
                }
                _ => Ok(None),
            })
            .await;
    }

    /// A wake message that landed in the dead-letter queue: its task can no
    /// longer make progress. Marks it failed with the reason and tells the
    /// user. Returns the task, if the message named one.
    #[tracing::instrument(skip_all)]
    pub async fn dead_letter(
        &self,
        body: &str,
        receive_count: u32,
    ) -> Result<Option<Task>, StoreError> {
        let Ok(wake) = Wake::parse(body) else {
            tracing::error!(
                body_len = body.len(),
                "dead letter that is not a wake message; dropped after logging"
            );
            return Ok(None);
        };
        let (task, _) = self
            .store
            .update(&wake.task_id, None, |t| {
                if t.status.is_terminal() {
                    return Ok(None);
                }
                let last = t
                    .error
                    .clone()
                    .unwrap_or_else(|| "no error was recorded".to_owned());
                let msg =
                    format!("gave up after {receive_count} delivery attempts; last error: {last}");
                t.status = TaskStatus::Failed;
                t.error = Some(msg.clone());
                t.lease = None;
                t.waiting_for = None;
                Ok(Some(vec![baton_core::EntryKind::Status {
                    status: TaskStatus::Failed,
                    detail: msg,
                }]))
            })
            .await?;
        if task.status == TaskStatus::Failed {
            let reason = task.error.clone().unwrap_or_default();
            if task.parent.is_some() {
                // The parent waits for this child: it hears of the failure.
                crate::delegation::report_ended(&self.store, self.queue.as_ref(), &task).await;
            } else {
                let message = format!("Sorry, this task failed: {reason}");
                if let Err(e) = self.replies.ended(&task, &message).await {
                    tracing::warn!(error = %e, "could not tell the user about the failed task");
                }
            }
            crate::delegation::cancel_children(&self.store, self.queue.as_ref(), &task).await;
        }
        Ok(Some(task))
    }
}
