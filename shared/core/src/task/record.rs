//! The task: one run of an agent on one input, and the record the store
//! keeps of it. Everything the loop must remember across segments — counts,
//! budgets, the lease, pending signals — lives here, never in memory only.

use crate::clock::Instant;
use crate::ids::TaskId;
use crate::lease::LeaseSlot;
use crate::llm::Usage;
use crate::task::wait::WaitingFor;
use serde::{Deserialize, Serialize};

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum TaskStatus {
    Queued,
    Running,
    Waiting,
    Succeeded,
    Failed,
    Cancelled,
}

impl TaskStatus {
    pub fn is_terminal(self) -> bool {
        matches!(
            self,
            TaskStatus::Succeeded | TaskStatus::Failed | TaskStatus::Cancelled
        )
    }

    pub fn as_str(self) -> &'static str {
        match self {
            TaskStatus::Queued => "queued",
            TaskStatus::Running => "running",
            TaskStatus::Waiting => "waiting",
            TaskStatus::Succeeded => "succeeded",
            TaskStatus::Failed => "failed",
            TaskStatus::Cancelled => "cancelled",
        }
    }
}

/// Where a task came from, and so where its answer goes.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Origin {
    /// `POST /tasks`: the client polls or tails for the result.
    Http,
    /// A Slack mention or direct message: the answer is posted in the thread.
    Slack {
        team_id: String,
        channel: String,
        /// The thread to answer in (the mention's own `ts` when it was not
        /// in a thread).
        thread_ts: String,
        user: String,
        /// What kind of conversation it is, as Slack says (`channel_type`
        /// of message events); absent on tasks of earlier releases and on
        /// mentions, whose events do not say ([`Origin::is_direct_message`]
        /// then reads the channel id).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        channel_type: Option<ChannelType>,
    },
}

/// The kinds of Slack conversation.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ChannelType {
    /// A direct message between the bot and one person.
    Im,
    /// A group direct message.
    Mpim,
    /// A public channel.
    Channel,
    /// A private channel.
    Group,
}

impl ChannelType {
    /// Slack's name (`im`, `mpim`, `channel`, `group`); `None` for others
    /// (`app_home`).
    pub fn parse(name: &str) -> Option<ChannelType> {
        match name {
            "im" => Some(ChannelType::Im),
            "mpim" => Some(ChannelType::Mpim),
            "channel" => Some(ChannelType::Channel),
            "group" => Some(ChannelType::Group),
            _ => None,
        }
    }
}

impl Origin {
    /// Whether the task runs in one person's direct messages with the bot,
    /// the only place where what is personal to that person may be shown.
    /// When Slack did not say, a direct-message channel id starts with `D`.
    pub fn is_direct_message(&self) -> bool {
        match self {
            Origin::Http => false,
            Origin::Slack {
                channel_type: Some(kind),
                ..
            } => *kind == ChannelType::Im,
            Origin::Slack { channel, .. } => channel.starts_with('D'),
        }
    }
}

/// Per-task budgets. They are state: a loop cannot outlive them across any
/// number of segments.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Limits {
    /// Completed LLM turns.
    pub max_steps: u32,
    /// Segments (hops through the queue). Replaces Lambda's own
    /// recursive-loop detection, which the template turns off.
    pub max_segments: u32,
    /// Input + output tokens over the whole task; 0 means no limit.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub max_tokens: u64,
    /// Wall-clock deadline; `None` means none. Stored as milliseconds.
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        with = "crate::clock::as_millis_opt"
    )]
    pub deadline_at: Option<Instant>,
}

fn is_zero(n: &u64) -> bool {
    *n == 0
}

fn is_zero_f64(n: &f64) -> bool {
    *n == 0.0
}

/// How a human decision on a tool call came out.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Verdict {
    Approved,
    Denied,
    /// Nobody decided in time: counts as a denial.
    Expired,
}

/// The task's approvals as its status shows them: what was asked and how
/// it was decided, by whom, and by which rule when no one was asked.
fn approvals_json(approvals: &[Approval]) -> serde_json::Value {
    approvals
        .iter()
        .map(|a| {
            let mut v = serde_json::json!({
                "approval_id": a.approval_id,
                "tool": a.tool,
                "summary": a.summary,
            });
            if let Some(d) = &a.decision {
                v["decision"] = serde_json::json!(d.verdict);
                v["by"] = serde_json::json!(d.by);
                if let Some(rule) = &d.rule {
                    v["rule"] = serde_json::json!(rule);
                }
            }
            v
        })
        .collect()
}

/// [`Decision::by`] for a decision made through the HTTP API.
pub const API_DECIDER: &str = "api";

/// A decision on an approval: who made it and when.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Decision {
    pub verdict: Verdict,
    /// Slack user id, [`API_DECIDER`] for the HTTP route, `None` for expiry.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub by: Option<String>,
    #[serde(with = "crate::clock::as_millis")]
    pub at: Instant,
    /// The conversation's rule that decided it, when no one was asked
    /// ([`crate::task::always::AlwaysRule::describe`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rule: Option<String>,
}

/// A posted chat message (to update once the approval is decided).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct PostedMessage {
    pub channel: String,
    pub ts: String,
}

/// A tool call that needs a human decision. It is recorded before anyone
/// can see it, so a decision that arrives before the task starts waiting is
/// kept here and found by the worker.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Approval {
    pub approval_id: String,
    pub step: u32,
    pub call_id: String,
    pub tool: String,
    /// What the call does, for the human ("POST https://...").
    pub summary: String,
    #[serde(with = "crate::clock::as_millis")]
    pub requested_at: Instant,
    /// Undecided by then: denied.
    #[serde(with = "crate::clock::as_millis")]
    pub expires_at: Instant,
    /// The message with the buttons, once posted.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<PostedMessage>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub decision: Option<Decision>,
    /// What "Always in this thread" on this request would allow for the
    /// rest of the conversation; `None`: not offered (a task without a
    /// conversation, or a call with nothing to match later calls by).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub always: Option<crate::task::always::Allowed>,
}

/// A task started by a parent's `delegate` call.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Child {
    pub task_id: TaskId,
    pub agent: String,
    /// The parent's tool call this child answers.
    pub call_id: String,
    /// How it ended, once it has.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub outcome: Option<ChildOutcome>,
}

/// What a child task reports to its parent when it ends.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ChildOutcome {
    pub status: TaskStatus,
    /// The answer, or the reason it failed.
    pub text: String,
    #[serde(default)]
    pub usage: Usage,
}

/// The parent of a child task, and the call the child answers.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ParentLink {
    pub task_id: TaskId,
    pub call_id: String,
    /// The root of the delegation tree (the parent's own root, or the
    /// parent): the task whose trace this one joins. `None` on links
    /// written before it was recorded: the parent is taken as the root.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub root_task_id: Option<TaskId>,
    /// Whom the parent acted for when it delegated: the child acts for
    /// exactly them ([`Task::actor`]). `None` on links of earlier
    /// releases.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub actor: Option<crate::task::author::Actor>,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            max_steps: 50,
            max_segments: 200,
            max_tokens: 0,
            deadline_at: None,
        }
    }
}

/// A rule of the task record that a write broke: such a task is never
/// stored ([`crate::store::TaskStore`] refuses it).
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub enum Invariant {
    /// A waiting task must say what it waits for, or nothing would ever
    /// wake it.
    #[error("a waiting task must say what it waits for")]
    WaitingForNothing,
    /// No worker runs a waiting task, so none may hold its lease.
    #[error("a waiting task holds no lease")]
    WaitingWithLease,
    /// Only a waiting task waits for something: a queued, running or
    /// ended one that kept its `waiting_for` would be shown as waiting.
    #[error("a {0} task waits for nothing")]
    NotWaitingButWaitingFor(&'static str),
    /// A running task is one a worker holds (or held, if it crashed):
    /// between segments a task is queued.
    #[error("a running task holds a lease")]
    RunningWithoutLease,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Task {
    pub id: TaskId,
    /// Bumped by every write; every write is conditional on it. Kept by
    /// the table beside the body, not in it.
    #[serde(default, skip_serializing)]
    pub version: u64,
    pub(crate) status: TaskStatus,
    /// The agent configuration to run (`default` unless asked otherwise).
    pub agent: String,
    pub origin: Origin,
    /// The conversation this task belongs to, if any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub thread: Option<String>,
    #[serde(with = "crate::clock::as_millis")]
    pub created_at: Instant,
    #[serde(with = "crate::clock::as_millis")]
    pub updated_at: Instant,
    #[serde(default, skip_serializing_if = "LeaseSlot::is_free")]
    pub(crate) lease: LeaseSlot,
    /// Completed LLM turns.
    #[serde(default)]
    pub steps: u32,
    /// Segments started.
    #[serde(default)]
    pub segments: u32,
    /// Sequence number the next transcript entry gets.
    #[serde(default)]
    pub next_seq: u64,
    #[serde(default)]
    pub usage: Usage,
    pub limits: Limits,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub result: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) waiting_for: Option<WaitingFor>,
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub cancel_requested: bool,
    /// Set with `cancel_requested` when a new message on the conversation
    /// interrupted the task (`on_new_message = "interrupt"`): the task
    /// that message started, which takes the conversation over.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub interrupted_by: Option<crate::TaskId>,
    /// Messages that arrived for the task while it ran; the loop moves them
    /// into the transcript at the next step boundary.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub inbox: Vec<crate::task::author::InboxMessage>,
    /// The key of a message to the user whose post has started and is not
    /// known to have finished ([`crate::PostKey`]): a retry looks for it
    /// before posting again.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub posting: Option<String>,
    /// Id of the commit that wrote this version. A writer whose commit
    /// failed ambiguously (a timeout, or an SDK retry of a write that had in
    /// fact succeeded) reads it back to learn whether its commit applied.
    #[serde(default)]
    pub last_commit: Option<String>,
    /// Money spent on model calls so far, in US dollars (0 when no prices
    /// are configured).
    #[serde(default, skip_serializing_if = "is_zero_f64")]
    pub cost_usd: f64,
    /// Tool calls that asked for a human decision, decided or not.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub approvals: Vec<Approval>,
    /// Tasks started by `delegate` calls.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub children: Vec<Child>,
    /// How many entries at the start of the transcript are the
    /// conversation's earlier turns ([`crate::recap`]), not this task's.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub carried: u64,
    /// Questions of `ask_user` calls, answered or not.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub questions: Vec<Question>,
    /// Callbacks of `wait_for_callback` calls, called or not.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub callbacks: Vec<Callback>,
    /// The person an HTTP client named (`user` of `POST /tasks`), or, on
    /// a child task, its parent's person, copied at delegation
    /// ([`Task::actor`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub user: Option<crate::connection::PersonKey>,
    /// Tool calls that waited (or wait) for a person to connect.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub connections: Vec<crate::connection::ConnectionWait>,
    /// Set on a child task: whom to report to.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub parent: Option<ParentLink>,
    /// The task holds its slots under `[limits.concurrency]` (taken when
    /// it first started, given back when it ends).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub holds_capacity: bool,
    /// Files the input carried that are still to be downloaded (Slack's):
    /// the first segment fetches them into the transcript and clears this
    /// in the same commit.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub pending_files: Vec<PendingFile>,
    /// Votes on the answer (Slack's feedback buttons), one per person
    /// ([`crate::feedback`]).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub feedback: Vec<Feedback>,
    /// The message the answer streams into, once one was opened: later
    /// steps, segments and retries write into it instead of posting anew.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub answer_stream: Option<AnswerStream>,
    /// What the task was asked, in short: the first line of its input, at
    /// most [`SUMMARY_CHARS`] characters, set when it is created
    /// ([`crate::TaskStore::create`]). The console lists and searches it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub summary: Option<String>,
    /// The schedule that started it, if one did.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub schedule_id: Option<String>,
    /// That schedule's owner (`slack:TEAM:USER`, or `api`), kept at the
    /// firing: a firing that posts nowhere is an HTTP task, yet counts
    /// against its creator's concurrency caps and monthly budgets
    /// ([`Task::schedule_person`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub schedule_owner: Option<String>,
    /// The Slack message (`ts`) that started the task: the reaction saying
    /// it was taken, then how it ended, goes on it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message_ts: Option<String>,
    /// Mentioned in a thread whose earlier messages the conversation has
    /// not read: the first segment reads them into the transcript and
    /// clears this in the same commit.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub unread_thread: Option<UnreadThread>,
    /// The model every step asks instead of the agent's (no tier,
    /// escalation or fallback stands in for it): set by the client that
    /// created the task, to evaluate or compare models.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model: Option<String>,
    /// Set on a fork (`POST /tasks/{id}/fork`): the task and step it was
    /// forked from ([`crate::fork`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub forked_from: Option<ForkedFrom>,
    /// The forks made of this task, oldest first, at most [`MAX_FORKS`]
    /// (the newest are kept), so the record cannot grow without limit.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub forks: Vec<TaskId>,
    /// How the task's tool calls are answered: run (`live`, the default)
    /// or from the recorded results of the task it was forked from.
    #[serde(default, skip_serializing_if = "ToolMode::is_live")]
    pub tools: ToolMode,
}

/// Most forks a task's record names ([`Task::forks`]): older ones are
/// dropped from the list (the forks themselves still name their source).
pub const MAX_FORKS: usize = 100;

/// Where a fork came from: its source task and the last step it copied.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ForkedFrom {
    pub task_id: TaskId,
    pub step: u32,
}

/// How a task's tool calls are answered.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ToolMode {
    /// Tools run.
    #[default]
    Live,
    /// No tool runs: a call identical to the source task's call at the
    /// same position gets the source's recorded result, any other an
    /// error (a fork's side-effect-free replay).
    Recorded,
}

impl ToolMode {
    pub fn is_live(&self) -> bool {
        *self == ToolMode::Live
    }

    pub fn as_str(self) -> &'static str {
        match self {
            ToolMode::Live => "live",
            ToolMode::Recorded => "recorded",
        }
    }
}

/// The longest [`Task::summary`], in characters.
pub const SUMMARY_CHARS: usize = 120;

/// The summary of an input: its first line that is not blank, trimmed, at
/// most [`SUMMARY_CHARS`] characters (`…` marks a cut).
pub fn summary_of(input: &str) -> String {
    let line = input
        .lines()
        .map(str::trim)
        .find(|l| !l.is_empty())
        .unwrap_or_default();
    let mut out: String = line.chars().take(SUMMARY_CHARS).collect();
    if out.len() < line.len() {
        out.push('…');
    }
    out
}

/// What of a Slack thread a task is still to read: the messages before
/// the one that started it ([`Task::message_ts`]) and after `after`, the
/// newest message the conversation took in earlier (none: from the
/// thread's start).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct UnreadThread {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub after: Option<String>,
}

/// One `ask_user` call's question.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Question {
    pub step: u32,
    pub call_id: String,
    pub question: String,
    #[serde(with = "crate::clock::as_millis")]
    pub asked_at: Instant,
    /// Unanswered by then: the call's result says nobody replied.
    #[serde(with = "crate::clock::as_millis")]
    pub expires_at: Instant,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reply: Option<Reply>,
}

/// One `wait_for_callback` call's callback.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Callback {
    pub step: u32,
    pub call_id: String,
    /// What the model said the callback is for.
    pub description: String,
    /// SHA-256 of the token, hex ([`crate::callback::hash_token`]): what the lookup item is
    /// keyed by.
    pub token_hash: String,
    /// The URL while it may be called (`waiting_for.url` shows it);
    /// dropped once it was, so the token is kept nowhere after.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub url: Option<String>,
    #[serde(with = "crate::clock::as_millis")]
    pub created_at: Instant,
    /// Uncalled by then: the call's result says nobody called.
    #[serde(with = "crate::clock::as_millis")]
    pub expires_at: Instant,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub delivered: Option<Delivered>,
}

/// The POST that called a [`Callback`].
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Delivered {
    #[serde(with = "crate::clock::as_millis")]
    pub at: Instant,
    /// The JSON body, until the call's result holds it (then dropped, so
    /// the task record stays small).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub body: Option<serde_json::Value>,
}

/// What the requester answered (to a [`Question`]).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Reply {
    pub text: String,
    /// The Slack user who replied, when it came from Slack.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub by: Option<String>,
    #[serde(with = "crate::clock::as_millis")]
    pub at: Instant,
}

/// Thumbs up or down.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Rating {
    Positive,
    Negative,
}

impl Rating {
    pub fn as_str(self) -> &'static str {
        match self {
            Rating::Positive => "positive",
            Rating::Negative => "negative",
        }
    }

    /// `positive` or `negative`.
    pub fn parse(s: &str) -> Option<Rating> {
        match s {
            "positive" => Some(Rating::Positive),
            "negative" => Some(Rating::Negative),
            _ => None,
        }
    }
}

/// One person's vote on a task's answer.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Feedback {
    /// Who voted (a Slack user id).
    pub user: String,
    pub rating: Rating,
    /// When it was recorded.
    #[serde(with = "crate::clock::as_millis")]
    pub at: Instant,
    /// Slack's `action_ts` of the click, to order clicks that arrive out
    /// of order.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub action_ts: Option<String>,
}

/// A file a Slack message carried, not yet downloaded: the ingest answers
/// Slack within its 3 seconds and leaves the download to the task's first
/// segment ([`crate::attachment::FileSource`]).
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct PendingFile {
    /// Slack's file id.
    pub id: String,
    /// The file's name.
    pub name: String,
    /// The media type Slack gave, if any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub media_type: Option<String>,
    /// The size Slack gave, in bytes.
    #[serde(default)]
    pub size: u64,
    /// Where to download it (`url_private_download`), with the bot token.
    #[serde(default)]
    pub url: String,
    /// A file sent over HTTP to a task already running: its entry waits
    /// in the blob store under this key ([`crate::attachment::stash`]), too large for the
    /// task record.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stashed: Option<String>,
}

/// A task's streamed answer message ([`Task::answer_stream`]).
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct AnswerStream {
    /// When opening it began: an attempt that crashed before recording
    /// `message` may have opened one after this.
    #[serde(with = "crate::clock::as_millis")]
    pub opened_at: Instant,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<StreamedMessage>,
}

/// The message an answer is streamed into (Slack: the channel and `ts`
/// of a `chat.startStream` message). Recorded on the task, so every later
/// step, segment and retry writes into the same message.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct StreamedMessage {
    pub channel: String,
    pub ts: String,
}

/// A message as the model reads it when someone other than the task's
/// requester wrote it. Only for the model's eyes: nothing reads an author
/// back out of text ([`crate::task::author`]).
pub fn attributed(author: &str, text: &str) -> String {
    format!("[from <@{author}>] {text}")
}

/// How every Slack conversation's key begins (`slack:TEAM:CHANNEL[:TS]`);
/// HTTP `thread` ids may not, so the two are never confused.
pub const SLACK_THREAD_PREFIX: &str = "slack:";

impl Task {
    /// Whether the task keeps the record's rules ([`Invariant`]): checked
    /// by the store on every write, so a change that breaks one is refused
    /// rather than stored.
    ///
    /// A running task with no lease is allowed: it is one between two
    /// segments (handed over, or released after a failure) whose next
    /// wake is on its way.
    pub fn check(&self) -> Result<(), Invariant> {
        match (self.status, &self.waiting_for) {
            (TaskStatus::Waiting, None) => Err(Invariant::WaitingForNothing),
            (TaskStatus::Waiting, Some(_)) if !self.lease.is_free() => {
                Err(Invariant::WaitingWithLease)
            }
            (TaskStatus::Waiting, Some(w)) if w.is_admission() => {
                Err(Invariant::NotWaitingButWaitingFor("waiting"))
            }
            (TaskStatus::Waiting, Some(_)) => Ok(()),
            // Waiting for a slot is being queued: no worker holds it.
            (TaskStatus::Queued, Some(w)) if w.is_admission() && self.lease.is_free() => Ok(()),
            (status, Some(_)) => Err(Invariant::NotWaitingButWaitingFor(status.as_str())),
            (TaskStatus::Running, None) if self.lease.is_free() => {
                Err(Invariant::RunningWithoutLease)
            }
            (_, None) => Ok(()),
        }
    }

    /// A task record as stored, at `version`. Records of earlier releases
    /// kept a handed-over task `running` with no lease; they read as
    /// `queued`, which they were, so [`Task::check`] holds for them too.
    pub fn from_record(data: &str, version: u64) -> Result<Task, serde_json::Error> {
        let mut task: Task = serde_json::from_str(data)?;
        task.version = version;
        if task.status == TaskStatus::Running && task.lease.is_free() {
            task.status = TaskStatus::Queued;
        }
        Ok(task)
    }

    /// The Slack workspace and user of the schedule that started the
    /// task, when a person made it (`schedule_owner` `slack:TEAM:USER`).
    pub fn schedule_person(&self) -> Option<(&str, &str)> {
        let owner = self.schedule_owner.as_deref()?;
        let mut parts = owner.splitn(3, ':');
        match (parts.next(), parts.next(), parts.next()) {
            (Some("slack"), Some(team), Some(user)) if !team.is_empty() && !user.is_empty() => {
                Some((team, user))
            }
            _ => None,
        }
    }

    /// Whom the task acts for, decided here and nowhere else, from the
    /// author of the message that started its turn (it never changes
    /// while the task lives): a child acts for its parent's actor (copied
    /// into its [`ParentLink`] at delegation); a Slack task for the author of
    /// its message; a schedule's task for the schedule's creator; an HTTP
    /// task for the API's client and the person it named, if any. Whose
    /// connections, memory, budgets, roles and Cedar principal apply.
    pub fn actor(&self) -> crate::task::author::Actor {
        use crate::task::author::Actor;
        if let Some(parent) = &self.parent {
            return match &parent.actor {
                Some(a) => a.clone(),
                // Links of earlier releases kept the parent's person only.
                None => Actor::of_person(self.user.as_ref()),
            };
        }
        if let Origin::Slack { team_id, user, .. } = &self.origin {
            if let Some(a) = Actor::slack(team_id, user) {
                return a;
            }
        }
        if let Some((team, user)) = self.schedule_person() {
            if let Some(a) = Actor::slack(team, user) {
                return a;
            }
        }
        Actor::Api {
            person: self.user.clone(),
        }
    }

    /// Whose connections the task's per-person tools use: its
    /// [`Task::actor`]'s person; `None` for an API client that named
    /// nobody.
    pub fn acting_for(&self) -> Option<crate::connection::PersonKey> {
        self.actor().person()
    }

    pub fn new(
        id: TaskId,
        agent: &str,
        origin: Origin,
        thread: Option<String>,
        limits: Limits,
        now: impl Into<Instant>,
    ) -> Self {
        let now = now.into();
        Task {
            id,
            version: 0,
            status: TaskStatus::Queued,
            agent: agent.to_owned(),
            origin,
            thread,
            created_at: now,
            updated_at: now,
            lease: LeaseSlot::default(),
            steps: 0,
            segments: 0,
            next_seq: 0,
            usage: Usage::default(),
            limits,
            result: None,
            error: None,
            waiting_for: None,
            cancel_requested: false,
            interrupted_by: None,
            inbox: Vec::new(),
            posting: None,
            last_commit: None,
            cost_usd: 0.0,
            approvals: Vec::new(),
            children: Vec::new(),
            carried: 0,
            questions: Vec::new(),
            callbacks: Vec::new(),
            user: None,
            connections: Vec::new(),
            parent: None,
            holds_capacity: false,
            pending_files: Vec::new(),
            feedback: Vec::new(),
            answer_stream: None,
            summary: None,
            schedule_id: None,
            schedule_owner: None,
            message_ts: None,
            unread_thread: None,
            model: None,
            forked_from: None,
            forks: Vec::new(),
            tools: ToolMode::Live,
        }
    }

    /// Names `fork` among the task's forks, keeping the newest
    /// [`MAX_FORKS`]; `false` when it was named already (nothing to write).
    pub fn add_fork(&mut self, fork: &TaskId) -> bool {
        if self.forks.contains(fork) {
            return false;
        }
        self.forks.push(fork.clone());
        if self.forks.len() > MAX_FORKS {
            let extra = self.forks.len() - MAX_FORKS;
            self.forks.drain(..extra);
        }
        true
    }

    /// The task whose trace this one belongs to: the root of its
    /// delegation tree (itself, unless it is a child task).
    pub fn trace_root(&self) -> &TaskId {
        match &self.parent {
            Some(p) => p.root_task_id.as_ref().unwrap_or(&p.task_id),
            None => &self.id,
        }
    }

    /// The approval with this id, if the task asked for it.
    pub fn approval(&self, approval_id: &str) -> Option<&Approval> {
        self.approvals.iter().find(|a| a.approval_id == approval_id)
    }

    /// The child answering the parent's call `call_id`.
    pub fn child_for_call(&self, call_id: &str) -> Option<&Child> {
        self.children.iter().find(|c| c.call_id == call_id)
    }

    /// Children that have not ended yet.
    pub fn pending_children(&self) -> u32 {
        self.children.iter().filter(|c| c.outcome.is_none()).count() as u32
    }

    /// The conversation as clients name it: an HTTP `thread` as it was
    /// given (stored as `http:{thread}`), a Slack one by its stored key.
    pub fn shown_thread(&self) -> Option<&str> {
        self.thread
            .as_deref()
            .map(|t| t.strip_prefix("http:").unwrap_or(t))
    }

    /// Who asked for the task and where: `{"kind": "slack", "user",
    /// "channel", "direct_message"}`, `{"kind": "schedule",
    /// "schedule_id"}`, `{"kind": "delegate", "parent_task_id"}` or
    /// `{"kind": "http"}`. The Slack user is their id: the routes that show
    /// tasks add their display name when shown, not kept on the task.
    pub fn requester_json(&self) -> serde_json::Value {
        if let Some(p) = &self.parent {
            return serde_json::json!({"kind": "delegate", "parent_task_id": p.task_id});
        }
        if let Some(s) = &self.schedule_id {
            return serde_json::json!({"kind": "schedule", "schedule_id": s});
        }
        match &self.origin {
            Origin::Slack { user, channel, .. } => serde_json::json!({
                "kind": "slack", "user": user, "channel": channel,
                "direct_message": self.origin.is_direct_message(),
            }),
            Origin::Http => serde_json::json!({"kind": "http"}),
        }
    }

    /// The task status JSON of the HTTP API (`GET /tasks/{id}`, and each
    /// task of `GET /tasks`).
    pub fn status_json(&self) -> serde_json::Value {
        let mut v = serde_json::json!({
            "task_id": self.id,
            "status": self.status.as_str(),
            "agent": self.agent,
            "thread": self.shown_thread(),
            "waiting_for": self.waiting_for,
            "result": self.result,
            "error": self.error,
            "steps": self.steps,
            "segments": self.segments,
            "usage": self.usage,
            "created_at": self.created_at,
            "updated_at": self.updated_at,
        });
        // Additions to the contract's shape, present only when they say
        // something.
        if self.cost_usd > 0.0 {
            v["cost_usd"] = serde_json::json!(self.cost_usd);
        }
        if let Some(p) = &self.parent {
            v["parent_task_id"] = serde_json::json!(p.task_id);
        }
        if !self.feedback.is_empty() {
            v["feedback"] = feedback_json(&self.feedback);
        }
        if let Some(summary) = &self.summary {
            v["summary"] = serde_json::json!(summary);
        }
        if let Some(model) = &self.model {
            v["model"] = serde_json::json!(model);
        }
        v["requester"] = self.requester_json();
        if let Some(f) = &self.forked_from {
            v["forked_from"] = serde_json::json!({"task_id": f.task_id, "step": f.step});
        }
        if !self.forks.is_empty() {
            v["forks"] = serde_json::json!(self.forks);
        }
        if !self.tools.is_live() {
            v["tools"] = serde_json::json!(self.tools.as_str());
        }
        if !self.approvals.is_empty() {
            v["approvals"] = approvals_json(&self.approvals);
        }
        if !self.children.is_empty() {
            v["children"] = serde_json::json!(self
                .children
                .iter()
                .map(|c| serde_json::json!({
                    "task_id": c.task_id,
                    "agent": c.agent,
                    "status": c.outcome.as_ref().map(|o| o.status.as_str()),
                }))
                .collect::<Vec<_>>());
        }
        v
    }
}

/// The `feedback` of the task status JSON.
pub(crate) fn feedback_json(votes: &[Feedback]) -> serde_json::Value {
    serde_json::Value::Array(
        votes
            .iter()
            .map(|f| {
                serde_json::json!({
                    "user": f.user,
                    "value": f.rating.as_str(),
                    "at": f.at.to_string(),
                })
            })
            .collect(),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn slack(channel: &str, channel_type: Option<ChannelType>) -> Origin {
        Origin::Slack {
            team_id: "T1".into(),
            channel: channel.into(),
            thread_ts: "1.0".into(),
            user: "U1".into(),
            channel_type,
        }
    }

    #[test]
    fn only_a_direct_message_is_private_to_its_user() {
        assert!(slack("D1", Some(ChannelType::Im)).is_direct_message());
        assert!(!slack("C1", Some(ChannelType::Channel)).is_direct_message());
        assert!(!slack("G1", Some(ChannelType::Group)).is_direct_message());
        assert!(!slack("G2", Some(ChannelType::Mpim)).is_direct_message());
        // Slack did not say (a mention; a task of an earlier release).
        assert!(slack("D1", None).is_direct_message());
        assert!(!slack("C1", None).is_direct_message());
        // What Slack says wins over the id's look.
        assert!(!slack("D1", Some(ChannelType::Mpim)).is_direct_message());
        assert!(!Origin::Http.is_direct_message());
        assert_eq!(ChannelType::parse("im"), Some(ChannelType::Im));
        assert_eq!(ChannelType::parse("app_home"), None);
    }

    #[test]
    fn origins_of_earlier_releases_still_read() {
        let old = r#"{"kind":"slack","team_id":"T1","channel":"C1","thread_ts":"1.0","user":"U1"}"#;
        let o: Origin = serde_json::from_str(old).unwrap();
        assert_eq!(o, slack("C1", None));
        let json = serde_json::to_string(&slack("D1", Some(ChannelType::Im))).unwrap();
        assert!(json.contains(r#""channel_type":"im""#), "{json}");
    }

    #[test]
    fn status_json_has_the_contract_fields() {
        let t = Task::new(
            TaskId::generate(),
            "default",
            Origin::Http,
            None,
            Limits::default(),
            0,
        );
        let v = t.status_json();
        for k in [
            "task_id",
            "status",
            "waiting_for",
            "result",
            "error",
            "steps",
            "segments",
            "usage",
            "created_at",
            "updated_at",
            "agent",
            "thread",
        ] {
            assert!(v.get(k).is_some(), "missing {k}");
        }
        assert_eq!(v["status"], "queued");
        assert_eq!(v["agent"], "default");
        assert_eq!(v["thread"], serde_json::Value::Null);
        let mut t = t;
        t.thread = Some("http:chat-1".into());
        assert_eq!(t.status_json()["thread"], "chat-1");
        t.thread = Some("slack:T1:C1:1.0".into());
        assert_eq!(t.status_json()["thread"], "slack:T1:C1:1.0");
        assert_eq!(v["usage"]["input_tokens"], 0);
    }

    /// A task row as stored by releases whose instants were bare
    /// milliseconds: it reads, and is written back byte for byte.
    const OLD_ROW: &str = concat!(
        r#"{"id":"0190a5e4-7f3b-7cc0-8a1e-2b3c4d5e6f70","status":"waiting","agent":"default","#,
        r#""origin":{"kind":"http"},"created_at":1767225600000,"updated_at":1767225601000,"#,
        r#""steps":2,"segments":1,"next_seq":5,"usage":{"input_tokens":10,"output_tokens":3},"#,
        r#""limits":{"max_steps":50,"max_segments":200,"deadline_at":1767229200000},"#,
        r#""waiting_for":{"kind":"timer","until":"2026-01-01T00:10:00.000Z"},"#,
        r#""last_commit":null,"#,
        r#""approvals":[{"approval_id":"ap-1-c1","step":1,"call_id":"c1","tool":"http_request","#,
        r#""summary":"POST https://x.test","requested_at":1767225600500,"expires_at":1767229200000,"#,
        r#""decision":{"verdict":"approved","by":"U1","at":1767225600900}}],"#,
        r#""questions":[{"step":2,"call_id":"c2","question":"Which env?","#,
        r#""asked_at":1767225601000,"expires_at":1767229200000,"#,
        r#""reply":{"text":"staging","by":"U1","at":1767225602000}}],"#,
        r#""feedback":[{"user":"U2","rating":"positive","at":1767225603000,"#,
        r#""action_ts":"1767225603.000100"}],"#,
        r#""answer_stream":{"opened_at":1767225602500,"message":{"channel":"C1","ts":"1.0"}}}"#,
    );

    #[test]
    fn rows_of_earlier_releases_read_and_write_back_the_same() {
        let t: Task = serde_json::from_str(OLD_ROW).unwrap();
        assert_eq!(t.limits.deadline_at, Some(Instant(1_767_229_200_000)));
        assert_eq!(t.created_at, Instant(1_767_225_600_000));
        assert_eq!(t.updated_at, Instant(1_767_225_601_000));
        // The API shows them as text, as it always did.
        assert_eq!(t.status_json()["created_at"], "2026-01-01T00:00:00.000Z");
        let a = &t.approvals[0];
        assert_eq!(a.requested_at, Instant(1_767_225_600_500));
        assert_eq!(a.expires_at, Instant(1_767_229_200_000));
        assert_eq!(
            a.decision.as_ref().map(|d| d.at),
            Some(Instant(1_767_225_600_900))
        );
        let q = &t.questions[0];
        assert_eq!(q.asked_at, Instant(1_767_225_601_000));
        assert_eq!(q.expires_at, Instant(1_767_229_200_000));
        assert_eq!(
            q.reply.as_ref().map(|r| r.at),
            Some(Instant(1_767_225_602_000))
        );
        assert_eq!(t.feedback[0].at, Instant(1_767_225_603_000));
        assert_eq!(
            t.status_json()["feedback"][0]["at"],
            "2026-01-01T00:00:03.000Z"
        );
        assert_eq!(
            t.answer_stream.as_ref().map(|s| s.opened_at),
            Some(Instant(1_767_225_602_500))
        );
        assert_eq!(serde_json::to_string(&t).unwrap(), OLD_ROW);
    }

    #[test]
    fn waiting_for_serialises_with_kind() {
        let w = WaitingFor::Children(crate::task::wait::Children { pending: 2 });
        assert_eq!(
            serde_json::to_value(&w).unwrap(),
            serde_json::json!({"kind": "children", "pending": 2})
        );
    }
}

#[cfg(test)]
mod invariant_tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn a_handed_over_task_of_an_earlier_release_reads_as_queued() {
        let mut t = Task::new(
            TaskId::generate(),
            "default",
            Origin::Http,
            None,
            Limits::default(),
            0,
        );
        t.status = TaskStatus::Running;
        let old = serde_json::to_string(&t).unwrap_or_default();
        let read = Task::from_record(&old, 7).ok();
        assert_eq!(read.as_ref().map(|t| t.status), Some(TaskStatus::Queued));
        assert_eq!(read.as_ref().map(|t| t.version), Some(7));
        assert_eq!(read.map(|t| t.check()), Some(Ok(())));
        // One a worker holds stays running.
        assert!(t.lease.take("w", Instant(0), Duration::from_secs(1)));
        let held = serde_json::to_string(&t).unwrap_or_default();
        let read = Task::from_record(&held, 1).ok();
        assert_eq!(read.map(|t| t.status), Some(TaskStatus::Running));
    }

    #[test]
    fn the_record_rules_hold_or_name_what_broke() {
        let timer = || {
            WaitingFor::Timer(crate::task::wait::Timer {
                until: crate::clock::Instant(1),
            })
        };
        // (status, waits for something, holds a lease) -> the rule broken.
        let cases = [
            (TaskStatus::Queued, false, false, Ok(())),
            (
                TaskStatus::Queued,
                true,
                false,
                Err(Invariant::NotWaitingButWaitingFor("queued")),
            ),
            (TaskStatus::Running, false, true, Ok(())),
            // Between two segments a task is queued, not running.
            (
                TaskStatus::Running,
                false,
                false,
                Err(Invariant::RunningWithoutLease),
            ),
            (
                TaskStatus::Running,
                true,
                true,
                Err(Invariant::NotWaitingButWaitingFor("running")),
            ),
            (TaskStatus::Waiting, true, false, Ok(())),
            (
                TaskStatus::Waiting,
                false,
                false,
                Err(Invariant::WaitingForNothing),
            ),
            (
                TaskStatus::Waiting,
                true,
                true,
                Err(Invariant::WaitingWithLease),
            ),
            (TaskStatus::Succeeded, false, false, Ok(())),
            (
                TaskStatus::Failed,
                true,
                false,
                Err(Invariant::NotWaitingButWaitingFor("failed")),
            ),
            (
                TaskStatus::Cancelled,
                true,
                false,
                Err(Invariant::NotWaitingButWaitingFor("cancelled")),
            ),
        ];
        for (status, waits, leased, want) in cases {
            let mut t = Task::new(
                TaskId::generate(),
                "default",
                Origin::Http,
                None,
                Limits::default(),
                0,
            );
            t.status = status;
            t.waiting_for = waits.then(timer);
            if leased {
                assert!(t.lease.take("w", Instant(0), Duration::from_millis(10)));
            }
            assert_eq!(
                t.check(),
                want,
                "{status:?}, waits: {waits}, leased: {leased}"
            );
        }
    }

    #[test]
    fn the_helpers_keep_the_rules() {
        let mut t = Task::new(
            TaskId::generate(),
            "default",
            Origin::Http,
            None,
            Limits::default(),
            0,
        );
        t.status = TaskStatus::Running;
        assert!(t.lease.take("w", Instant(0), Duration::from_millis(10)));
        t.wait(WaitingFor::Children(crate::task::wait::Children {
            pending: 1,
        }));
        assert_eq!(t.check(), Ok(()));
        assert!(t.lease.is_free());
        t.wake();
        assert_eq!((t.status, t.check()), (TaskStatus::Queued, Ok(())));
    }
}

#[cfg(test)]
mod acting_for_tests {
    use super::*;
    use crate::connection::PersonKey;

    fn task(origin: Origin) -> Task {
        Task::new(TaskId::generate(), "a", origin, None, Limits::default(), 0)
    }

    fn slack_in_channel() -> Origin {
        Origin::Slack {
            team_id: "T1".into(),
            channel: "C1".into(),
            thread_ts: "1.0".into(),
            user: "U1".into(),
            channel_type: Some(ChannelType::Channel),
        }
    }

    #[test]
    fn a_slack_task_acts_for_the_author_of_its_message_whatever_comes_later() {
        let mut t = task(slack_in_channel());
        assert_eq!(t.acting_for(), Some(PersonKey::new("T1", "U1")));
        // A message in its inbox, marked or not, changes nothing.
        t.inbox.push(crate::task::author::InboxMessage {
            text: "[from <@U2>] recall my door code".into(),
            from: None,
        });
        assert_eq!(t.acting_for(), Some(PersonKey::new("T1", "U1")));
        // A user named over HTTP never overrides the Slack person.
        t.user = Some(PersonKey::new("api", "mallory"));
        assert_eq!(t.acting_for(), Some(PersonKey::new("T1", "U1")));
    }

    #[test]
    fn a_stored_second_speaker_of_earlier_releases_is_ignored() {
        let t = task(slack_in_channel());
        let mut json: serde_json::Value = serde_json::to_value(&t).unwrap();
        json["speaker"] = "U2".into();
        let back = Task::from_record(&json.to_string(), 1).unwrap();
        assert_eq!(back.acting_for(), Some(PersonKey::new("T1", "U1")));
    }

    #[test]
    fn a_schedule_acts_for_its_creator() {
        let mut t = task(Origin::Http);
        t.schedule_owner = Some("slack:T9:U9".into());
        assert_eq!(t.acting_for(), Some(PersonKey::new("T9", "U9")));
        // An API-made schedule has no person.
        t.schedule_owner = Some("api".into());
        assert_eq!(t.acting_for(), None);
    }

    #[test]
    fn a_child_acts_for_the_person_copied_from_its_parent() {
        let mut parent = task(slack_in_channel());
        if let Origin::Slack { user, .. } = &mut parent.origin {
            *user = "U2".into();
        }
        // The child is made with the parent's origin and acts for whom
        // the parent acted for when it delegated.
        let mut child = task(parent.origin.clone());
        child.parent = Some(ParentLink {
            task_id: parent.id.clone(),
            call_id: "c".into(),
            root_task_id: None,
            actor: None,
        });
        child.user = parent.acting_for();
        assert_eq!(child.acting_for(), Some(PersonKey::new("T1", "U2")));
        // A child of a task acting for nobody acts for nobody.
        child.user = None;
        assert_eq!(child.acting_for(), None);
    }

    #[test]
    fn an_http_task_acts_for_the_named_user_or_nobody() {
        let mut t = task(Origin::Http);
        assert_eq!(t.acting_for(), None);
        t.user = Some(PersonKey::new("api", "alice"));
        assert_eq!(t.acting_for(), Some(PersonKey::new("api", "alice")));
        // Stored and read back.
        let json = serde_json::to_string(&t).unwrap_or_default();
        let back = Task::from_record(&json, 1).map(|b| b.acting_for());
        assert_eq!(back.ok().flatten(), Some(PersonKey::new("api", "alice")));
    }
}
