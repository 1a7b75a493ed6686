//! Where answers go: the reply port, implemented per front end (Slack in
//! `baton_slack::replies`; nothing for HTTP clients, who poll).
//!
//! Messages are posted **exactly once**: each carries a [`PostKey`]. The
//! worker records on the task that a post has started before it posts, so
//! a retry after a crash knows the post may have happened
//! ([`PostKey::maybe_posted`]); the sink then looks for the key in what it
//! posted (Slack: the message metadata in the thread) before posting again.

use crate::clock::Instant;
use crate::judgment::PlanStep;
pub use crate::task::parts::{AnswerStream, StreamedMessage};
use crate::task::Task;
use async_trait::async_trait;

#[derive(Debug, thiserror::Error)]
#[error("could not deliver the reply: {0}")]
pub struct ReplyError(pub String);

/// The identity of one message to a user.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PostKey {
    /// Unique among the messages of all tasks, e.g. `TASK:answer:7`.
    pub key: String,
    /// An earlier attempt started this post and was not seen to finish:
    /// look for the message before posting it.
    pub maybe_posted: bool,
}

/// Where a task is in its life, as a chat front end shows it (Slack's
/// agent sessions: `processing`, `suspended`, `closed`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TaskPhase<'a> {
    /// A segment runs. `title` is the task's first message on its first
    /// segment (once per task), for front ends that title conversations.
    Processing { title: Option<&'a str> },
    /// The task waits (an approval, a reply, its children, a timer) with no
    /// worker running.
    Suspended,
    /// The task ended, whatever the outcome.
    Closed,
}

/// A plan on one line, for a status: `Plan: ☑ look ☐ compare ☐ answer`.
pub fn compact_checklist(steps: &[PlanStep], done: &[bool]) -> String {
    let items: Vec<String> = steps
        .iter()
        .enumerate()
        .map(|(i, s)| {
            let mark = if done.get(i).copied().unwrap_or(false) {
                "☑"
            } else {
                "☐"
            };
            format!("{mark} {}", s.title)
        })
        .collect();
    format!("Plan: {}", items.join(" "))
}

/// Tells users about their task.
#[async_trait]
pub trait ReplySink: Send + Sync {
    /// Whether this sink posts anything for `task` (so the worker records
    /// posts it starts only when there are any).
    fn posts_for(&self, _task: &Task) -> bool {
        true
    }
    /// The final answer (already sanitised; never `NO_REPLY`).
    async fn answer(&self, task: &Task, text: &str, post: &PostKey) -> Result<(), ReplyError>;
    /// The task ended without an answer: failed or cancelled, and why.
    async fn ended(&self, task: &Task, message: &str, post: &PostKey) -> Result<(), ReplyError>;
    /// What the task is doing now, e.g. "is thinking…". Best effort and
    /// ephemeral: it never fails the task, and a sink may drop updates
    /// (rate limits). Default: nothing.
    async fn progress(&self, _task: &Task, _status: &str) {}
    /// The task entered `phase`. Best effort like
    /// [`progress`](Self::progress). Default: nothing.
    async fn phase(&self, _task: &Task, _phase: TaskPhase<'_>) {}
    /// The task's plan (issue #22), written or updated: its steps, and
    /// which are done. Best effort like [`progress`](Self::progress).
    /// Default: a compact checklist as the progress text.
    async fn plan(&self, task: &Task, steps: &[PlanStep], done: &[bool]) {
        self.progress(task, &compact_checklist(steps, done)).await;
    }

    /// A tool call started or ended (issue #23): a front end that can shows
    /// it as an item of the streamed answer, keyed by the call's id so a
    /// retried segment updates the same item. Only the tool's name is
    /// given: arguments and results may hold secrets or personal data.
    /// Best effort; `false` when not shown, so the worker says it in text
    /// (the progress status) instead. Default: not shown.
    async fn tool_call(&self, _task: &Task, _call: ToolCallShown<'_>) -> bool {
        false
    }

    /// Whether answers for `task` are streamed as the model writes them.
    /// Default: no (the `stream_*` methods are then never called).
    fn streams_for(&self, _task: &Task) -> bool {
        false
    }
    /// Opens the message an answer streams into, showing `text`.
    async fn stream_open(&self, _task: &Task, _text: &str) -> Result<StreamedMessage, ReplyError> {
        Err(ReplyError("this front end does not stream".to_owned()))
    }
    /// Appends `shown[from..]` to the streaming message, which shows
    /// `shown[..from]` so far (`from` is a character boundary). The sink
    /// gets the text before too: a chunk may continue something the one
    /// before began (a `\`, a link), and escaping must see it whole.
    async fn stream_append(
        &self,
        _task: &Task,
        _message: &StreamedMessage,
        _shown: &str,
        _from: usize,
    ) -> Result<Appended, ReplyError> {
        Ok(Appended::Closed)
    }
    /// Shows exactly `text` in the message, streaming or not (after the
    /// stream closed, or in a later segment that does not know what the
    /// message shows). Safe to repeat.
    async fn stream_replace(
        &self,
        _task: &Task,
        _message: &StreamedMessage,
        _text: &str,
    ) -> Result<(), ReplyError> {
        Ok(())
    }
    /// The message a crashed attempt opened after `since` but did not
    /// record, if the front end can find it. Default: none.
    async fn stream_find(&self, _task: &Task, _since: Instant) -> Option<StreamedMessage> {
        None
    }
}

/// A tool call as a front end may show it ([`ReplySink::tool_call`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ToolCallShown<'a> {
    /// The model's id of the call (stable across a segment's retries).
    pub id: &'a str,
    /// The tool's name, as the model called it.
    pub name: &'a str,
    pub state: ToolCallState,
}

/// Where a shown tool call is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ToolCallState {
    Running,
    Done,
    Failed,
}

/// What became of an append to a streaming message.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Appended {
    /// The text was added.
    Added,
    /// The stream had closed (Slack ends streams after a few minutes): the
    /// message keeps what it shows; [`ReplySink::stream_replace`] updates it.
    Closed,
}

/// For deployments with no chat front end: HTTP clients poll.
pub struct NoReplies;

#[async_trait]
impl ReplySink for NoReplies {
    fn posts_for(&self, _: &Task) -> bool {
        false
    }
    async fn answer(&self, _: &Task, _: &str, _: &PostKey) -> Result<(), ReplyError> {
        Ok(())
    }
    async fn ended(&self, _: &Task, _: &str, _: &PostKey) -> Result<(), ReplyError> {
        Ok(())
    }
}
