//! A segment over in-memory ports, for the interpreter's tests: the table
//! (`baton_core::testing::MemoryTable`), a queue that records what it is
//! sent, a model that answers from a script, replies recorded, and a tool
//! that counts its calls and can meddle with the task while it runs (a
//! cancel, a stolen lease, a message arriving).

use super::{Segment, SegmentBudget, SegmentEnd};
use crate::Worker;
use async_trait::async_trait;
use baton_core::testing::{MemoryTable, NoBlobs, SentQueue};
use baton_core::{
    now_ms, Completion, CompletionRequest, Entry, EntryKind, LlmError, LlmProvider, Origin,
    PostKey, ReplyError, ReplySink, Task, TaskId, TaskStore, Tool, ToolCall, ToolCallShown,
    ToolCallState, ToolContext, ToolOutput, ToolSpec,
};
use baton_settings::{AgentConfig, Agents};
use serde_json::{json, Value};
use std::collections::VecDeque;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// What the counting tool does to the task while it runs.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(super) enum Meddle {
    Nothing,
    /// Someone asks for the task to be cancelled.
    Cancel,
    /// Another segment takes the lease (this one's expired meanwhile).
    StealLease,
    /// The system the call's `url` argument names calls it back at once,
    /// before the task waits (a `wait_for_callback` URL).
    CallBack,
}

pub(super) struct Harness {
    pub(super) worker: Worker,
    pub(super) store: TaskStore,
    pub(super) queue: Arc<SentQueue>,
    pub(super) llm: Arc<ScriptedModel>,
    pub(super) replies: Arc<Replies>,
    pub(super) tool: Arc<Counter>,
}

impl Harness {
    /// An agent `default` with the `count` tool, shaped by `configure`.
    pub(super) fn new(configure: impl FnOnce(&mut AgentConfig)) -> Self {
        Self::build(
            configure,
            Vec::new(),
            crate::WorkerSettings::default(),
            |w| w,
        )
    }

    /// [`Harness::new`] with `extra` tools too, `settings`, and the
    /// worker wired further by `wire`.
    pub(super) fn build(
        configure: impl FnOnce(&mut AgentConfig),
        extra: Vec<Arc<dyn Tool>>,
        settings: crate::WorkerSettings,
        wire: impl FnOnce(Worker) -> Worker,
    ) -> Self {
        let store = TaskStore::new(Arc::new(MemoryTable::default()), Arc::new(NoBlobs));
        let queue = Arc::new(SentQueue::default());
        let llm = Arc::new(ScriptedModel::default());
        let replies = Arc::new(Replies::default());
        let tool = Arc::new(Counter {
            store: store.clone(),
            calls: AtomicUsize::new(0),
            meddle: Mutex::new(Meddle::Nothing),
            safe: true.into(),
            arguments: Mutex::new(Vec::new()),
        });
        let mut agent = AgentConfig::new("default", "m");
        agent.tools = Some(vec!["count".into(), "sleep".into()]);
        agent.approval.require = Some(Vec::new());
        configure(&mut agent);
        let mut tools = vec![tool.clone() as Arc<dyn Tool>];
        tools.extend(extra);
        let worker = wire(Worker::new(
            store.clone(),
            queue.clone(),
            llm.clone(),
            tools,
            Agents::new(agent, Vec::new()),
            replies.clone(),
            settings,
        ));
        Harness {
            worker,
            store,
            queue,
            llm,
            replies,
            tool,
        }
    }

    /// A new HTTP task asking `input`.
    pub(super) async fn task(&self, input: &str) -> TaskId {
        self.task_from(Origin::Http, input).await
    }

    /// A new task from `origin` asking `input`.
    pub(super) async fn task_from(&self, origin: Origin, input: &str) -> TaskId {
        let task = Task::new(
            TaskId::generate(),
            "default",
            origin,
            None,
            baton_core::Limits::default(),
            now_ms(),
        );
        let first = vec![EntryKind::UserMessage {
            text: input.to_owned(),
            from: None,
        }];
        let created = self.store.create(&task, first, None).await;
        assert!(created.is_ok(), "{created:?}");
        task.id
    }

    /// One segment of task `id` with `budget`, as a wake would run it.
    pub(super) async fn run(&self, id: &TaskId, budget: SegmentBudget) -> SegmentEnd {
        let owner = format!("test:{}", id);
        match Segment::run(self.worker.deps(), id, owner, budget).await {
            Ok(end) => end,
            Err(e) => panic!("segment failed: {e}"),
        }
    }

    pub(super) async fn get(&self, id: &TaskId) -> Task {
        match self.store.get(id).await {
            Ok(Some(t)) => t,
            other => panic!("no task {id}: {other:?}"),
        }
    }

    pub(super) async fn transcript(&self, id: &TaskId) -> Vec<Entry> {
        self.store.transcript(id).await.unwrap_or_default()
    }
}

/// A budget with room for everything.
pub(super) fn roomy() -> SegmentBudget {
    SegmentBudget::new(Duration::from_secs(600))
}

/// A model turn asking for the `count` tool, once per id (each with its
/// own arguments: the same call thrice is a loop, refused).
pub(super) fn calls(ids: &[&str]) -> Completion {
    Completion {
        tool_calls: ids
            .iter()
            .map(|id| ToolCall {
                id: (*id).into(),
                name: "count".into(),
                arguments: json!({ "label": id }),
            })
            .collect(),
        ..Completion::default()
    }
}

/// A final answer.
pub(super) fn says(text: &str) -> Completion {
    Completion {
        content: text.into(),
        ..Completion::default()
    }
}

/// A model that gives the scripted completions in order, then "done".
#[derive(Default)]
pub(super) struct ScriptedModel {
    script: Mutex<VecDeque<Completion>>,
    pub(super) requests: Mutex<Vec<CompletionRequest>>,
}

impl ScriptedModel {
    pub(super) fn then(&self, c: Completion) -> &Self {
        if let Ok(mut s) = self.script.lock() {
            s.push_back(c);
        }
        self
    }

    pub(super) fn calls(&self) -> usize {
        self.requests.lock().map(|r| r.len()).unwrap_or(0)
    }
}

#[async_trait]
impl LlmProvider for ScriptedModel {
    fn name(&self) -> &str {
        "scripted"
    }

    async fn complete(&self, request: &CompletionRequest) -> Result<Completion, LlmError> {
        if let Ok(mut r) = self.requests.lock() {
            r.push(request.clone());
        }
        let next = self.script.lock().ok().and_then(|mut s| s.pop_front());
        Ok(next.unwrap_or_else(|| says("done")))
    }
}

/// The `count` tool: counts its calls; safe to repeat unless told not to.
pub(super) struct Counter {
    store: TaskStore,
    pub(super) calls: AtomicUsize,
    pub(super) meddle: Mutex<Meddle>,
    pub(super) safe: std::sync::atomic::AtomicBool,
    /// The arguments of each call, in order.
    pub(super) arguments: Mutex<Vec<Value>>,
}

impl Counter {
    pub(super) fn meddle(&self, m: Meddle) {
        if let Ok(mut slot) = self.meddle.lock() {
            *slot = m;
        }
    }

    pub(super) fn calls(&self) -> usize {
        self.calls.load(Ordering::SeqCst)
    }
}

#[async_trait]
impl Tool for Counter {
    fn spec(&self) -> ToolSpec {
        ToolSpec {
            name: "count".into(),
            description: "counts".into(),
            input_schema: json!({"type": "object"}),
        }
    }

    fn idempotent(&self, _: &Value) -> bool {
        self.safe.load(Ordering::SeqCst)
    }

    async fn call(&self, arguments: Value, ctx: &ToolContext) -> ToolOutput {
        let n = self.calls.fetch_add(1, Ordering::SeqCst) + 1;
        let token = arguments["url"]
            .as_str()
            .and_then(|u| u.rsplit('/').next())
            .map(baton_core::callback::hash_token);
        if let Ok(mut seen) = self.arguments.lock() {
            seen.push(arguments);
        }
        let meddle = self.meddle.lock().map(|m| *m).unwrap_or(Meddle::Nothing);
        let id = ctx.task_id.clone();
        let changed = self
            .store
            .update(&id, None, |t| {
                match meddle {
                    Meddle::Nothing => return Ok(None),
                    Meddle::Cancel => t.cancel_requested = true,
                    Meddle::CallBack => {
                        let body = json!({"called": "early"});
                        let now = baton_core::Instant::now();
                        let hash = token.clone().unwrap_or_default();
                        return Ok(baton_core::callback::deliver(t, &hash, body, now).ok());
                    }
                    Meddle::StealLease => {
                        // This one's lease expired; another wake took it.
                        t.start(
                            "another-segment",
                            baton_core::Instant::now() + Duration::from_secs(3600),
                            Duration::from_secs(600),
                        );
                    }
                }
                Ok(Some(Vec::new()))
            })
            .await;
        assert!(changed.is_ok(), "{changed:?}");
        ToolOutput::ok(format!("count {n}"))
    }
}

/// Answers and endings told to the user; a message can be made to arrive
/// while an answer is posted.
#[derive(Default)]
pub(super) struct Replies {
    pub(super) answers: Mutex<Vec<String>>,
    pub(super) endings: Mutex<Vec<String>>,
    /// Put in the task's inbox while the next answer is posted.
    pub(super) arrives_while_answering: Mutex<Option<(TaskStore, String)>>,
    /// Tool calls are shown (as a streamed answer's items would be).
    pub(super) shows_calls: std::sync::atomic::AtomicBool,
    /// The calls shown: (id, name, state).
    pub(super) shown_calls: Mutex<Vec<(String, String, ToolCallState)>>,
    /// The progress texts, in order.
    pub(super) statuses: Mutex<Vec<String>>,
}

impl Replies {
    pub(super) fn answers(&self) -> Vec<String> {
        self.answers.lock().map(|a| a.clone()).unwrap_or_default()
    }
    pub(super) fn endings(&self) -> Vec<String> {
        self.endings.lock().map(|a| a.clone()).unwrap_or_default()
    }
}

#[async_trait]
impl ReplySink for Replies {
    async fn answer(&self, task: &Task, text: &str, _: &PostKey) -> Result<(), ReplyError> {
        if let Ok(mut a) = self.answers.lock() {
            a.push(text.to_owned());
        }
        let arriving = self
            .arrives_while_answering
            .lock()
            .ok()
            .and_then(|mut m| m.take());
        if let Some((store, message)) = arriving {
            let r = store
                .update(&task.id, None, |t| {
                    t.conversation.inbox.push(baton_core::InboxMessage {
                        text: message.clone(),
                        from: None,
                    });
                    Ok(Some(Vec::new()))
                })
                .await;
            assert!(r.is_ok(), "{r:?}");
        }
        Ok(())
    }

    async fn ended(&self, _: &Task, message: &str, _: &PostKey) -> Result<(), ReplyError> {
        if let Ok(mut e) = self.endings.lock() {
            e.push(message.to_owned());
        }
        Ok(())
    }

    async fn progress(&self, _: &Task, status: &str) {
        if let Ok(mut s) = self.statuses.lock() {
            s.push(status.to_owned());
        }
    }

    async fn tool_call(&self, _: &Task, call: ToolCallShown<'_>) -> bool {
        if !self.shows_calls.load(Ordering::SeqCst) {
            return false;
        }
        if let Ok(mut c) = self.shown_calls.lock() {
            c.push((call.id.to_owned(), call.name.to_owned(), call.state));
        }
        true
    }
}
