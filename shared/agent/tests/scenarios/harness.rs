//! The one worker harness of the scenario tests: a worker driven over the
//! embedded queue the way the Lambda's event source mapping drives it, and
//! tasks submitted the way ingest submits them.

use baton_agent::{Disposition, SegmentBudget, Worker};
use baton_core::{now_ms, EntryKind, Limits, Origin, Task, TaskId, TaskStore, Wake, WorkQueue};
use std::time::Duration;

/// Runs the worker over the queue until it has been empty for a while. The
/// messages of a batch are handled concurrently, as the worker Lambda does.
/// Any disposition but `Ack` fails the test.
pub(crate) async fn drain(worker: &Worker, queue: &dyn WorkQueue) {
    let mut idle = 0;
    while idle < 3 {
        let got = queue.receive(10, Duration::from_millis(100)).await.unwrap();
        if got.is_empty() {
            idle += 1;
            continue;
        }
        idle = 0;
        let handled = futures::future::join_all(
            got.iter()
                .map(|d| worker.handle(d, SegmentBudget::new(Duration::from_secs(60)))),
        )
        .await;
        for (d, disposition) in got.iter().zip(handled) {
            match disposition {
                Disposition::Ack => queue.delete(&d.receipt).await.unwrap(),
                other => panic!("unexpected disposition {other:?} for {}", d.body),
            }
        }
    }
}

/// A Slack-born task's origin: a thread in channel C1 of workspace T1.
pub(crate) fn slack_origin(user: &str) -> Origin {
    Origin::Slack {
        team_id: "T1".into(),
        channel: "C1".into(),
        thread_ts: "100.1".into(),
        user: user.into(),
        channel_type: None,
    }
}

/// Creates a task of the default agent with `text` as its input and wakes it.
pub(crate) async fn submit(
    store: &TaskStore,
    queue: &dyn WorkQueue,
    origin: Origin,
    text: &str,
) -> TaskId {
    let task = Task::new(
        TaskId::generate(),
        "default",
        origin,
        None,
        Limits::default(),
        now_ms(),
    );
    store
        .create(
            &task,
            vec![EntryKind::UserMessage {
                text: text.into(),
                from: None,
            }],
            None,
        )
        .await
        .unwrap();
    wake(queue, &task.id).await;
    task.id
}

/// Sends a wake for `id`, as ingest does after a decision or a cancel.
pub(crate) async fn wake(queue: &dyn WorkQueue, id: &TaskId) {
    queue
        .send(&Wake::new(id.clone(), "test").to_body(), Duration::ZERO)
        .await
        .unwrap();
}

/// A worker over a fresh embedded backend, with a fake Slack and an
/// embedded scheduler beside it.
pub(crate) struct Harness {
    _dir: tempfile::TempDir,
    pub(crate) backend: baton_embedded::EmbeddedBackend,
    pub(crate) store: TaskStore,
    pub(crate) worker: Worker,
    pub(crate) slack: baton_slack::testing::FakeSlack,
    pub(crate) scheduler: std::sync::Arc<baton_embedded::EmbeddedScheduler>,
    pub(crate) service: baton_schedule::ScheduleService,
}

/// Shows approval requests, given the store and the fake Slack.
pub(crate) type Prompts = Box<
    dyn FnOnce(
        &TaskStore,
        &baton_slack::testing::FakeSlack,
    ) -> std::sync::Arc<dyn baton_core::approval::ApprovalPrompts>,
>;

/// What a scenario's worker is built with; `Default` is the scripted model,
/// no tools, the `default` agent and no replies.
pub(crate) struct Options {
    pub(crate) llm: std::sync::Arc<dyn baton_core::LlmProvider>,
    pub(crate) tools: Vec<std::sync::Arc<dyn baton_core::Tool>>,
    pub(crate) agents: baton_settings::Agents,
    /// Answers go to the fake Slack (else nowhere).
    pub(crate) slack_replies: bool,
    pub(crate) prompts: Option<Prompts>,
    pub(crate) budgets: Option<baton_settings::BudgetSettings>,
    /// Schedule firings, with this heartbeat repeat window.
    pub(crate) schedules: Option<Duration>,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            llm: std::sync::Arc::new(baton_llm::ScriptedProvider::new()),
            tools: Vec::new(),
            agents: baton_settings::Agents::new(
                baton_settings::AgentConfig::new("default", "scripted"),
                Vec::new(),
            ),
            slack_replies: false,
            prompts: None,
            budgets: None,
            schedules: None,
        }
    }
}

impl Harness {
    pub(crate) async fn start(o: Options) -> Harness {
        use std::sync::Arc;
        let dir = tempfile::tempdir().unwrap();
        let backend = baton_embedded::EmbeddedBackend::open(
            dir.path(),
            baton_embedded::QueueConfig::default(),
        )
        .unwrap();
        let store = TaskStore::new(backend.table.clone(), backend.blobs.clone());
        let slack = baton_slack::testing::FakeSlack::start().await;
        let scheduler = Arc::new(baton_embedded::EmbeddedScheduler::new(
            backend.table.clone(),
            backend.queue.clone(),
        ));
        let service = baton_schedule::ScheduleService::new(
            baton_schedule::ScheduleStore::new(backend.table.clone()),
            scheduler.clone(),
        );
        let replies: Arc<dyn baton_core::ReplySink> = if o.slack_replies {
            Arc::new(baton_slack::SlackReplies::new(slack.client()))
        } else {
            Arc::new(baton_core::NoReplies)
        };
        let mut worker = Worker::new(
            store.clone(),
            backend.queue.clone(),
            o.llm,
            o.tools,
            o.agents,
            replies,
            baton_agent::WorkerSettings::default(),
        );
        if let Some(prompts) = o.prompts {
            worker = worker.with_approval_prompts(prompts(&store, &slack));
        }
        if let Some(budgets) = o.budgets {
            worker = worker.with_budgets(budgets);
        }
        if let Some(window) = o.schedules {
            worker = worker.with_schedules(service.clone(), window);
        }
        Harness {
            _dir: dir,
            backend,
            store,
            worker,
            slack,
            scheduler,
            service,
        }
    }

    /// Runs the worker until the queue stays empty ([`drain`]).
    pub(crate) async fn drain(&self) {
        drain(&self.worker, self.backend.queue.as_ref()).await;
    }

    /// A task of the default agent from `origin` with `text`, woken.
    pub(crate) async fn submit(&self, origin: Origin, text: &str) -> TaskId {
        submit(&self.store, self.backend.queue.as_ref(), origin, text).await
    }

    /// Sends a wake for `id`.
    pub(crate) async fn wake(&self, id: &TaskId) {
        wake(self.backend.queue.as_ref(), id).await;
    }
}
