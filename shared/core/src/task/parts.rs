//! The parts of a task's record, each a concept of its own: where it came
//! from and for whom ([`Source`]), its budgets and what it spent
//! ([`Budget`]), its place in a conversation ([`Conversation`]), the
//! events its waits record ([`Waits`]), its answer and how it was
//! delivered ([`Answer`]), and its line of forks ([`Fork`]). Each is
//! stored flat in the task's JSON, as the fields always were; and the
//! records they are made of (an approval, a child, a question, a vote…).

use crate::clock::Instant;
use crate::connection::{ConnectionWait, PersonKey};
use crate::ids::TaskId;
use crate::llm::Usage;
use crate::task::author::InboxMessage;

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

/// How a human decision on a tool call came out.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Verdict {
    Approved,
    Denied,
    /// Nobody decided in time: counts as a denial.
    Expired,
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
    /// exactly them ([`crate::Task::actor`]). `None` on links of earlier
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

/// Most forks a task's record names ([`Fork::forks`]): older ones are
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

/// The longest [`Conversation::summary`], in characters.
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
/// the one that started it ([`Conversation::message_ts`]) and after `after`, the
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

/// A task's streamed answer message ([`Answer::answer_stream`]).
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

fn is_zero_f64(n: &f64) -> bool {
    *n == 0.0
}

/// Where the task came from and for whom: whom it acts for is decided
/// from these ([`crate::Task::actor`]).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Source {
    pub origin: Origin,
    /// The person an HTTP client named (`user` of `POST /tasks`), or, on
    /// a child task, its parent's person, copied at delegation
    /// ([`crate::Task::actor`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub user: Option<PersonKey>,
    /// Set on a child task: whom to report to.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub parent: Option<ParentLink>,
    /// The schedule that started it, if one did.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub schedule_id: Option<String>,
    /// That schedule's owner (`slack:TEAM:USER`, or `api`), kept at the
    /// firing: a firing that posts nowhere is an HTTP task, yet counts
    /// against its creator's concurrency caps and monthly budgets
    /// ([`Source::schedule_person`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub schedule_owner: Option<String>,
}

impl Source {
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
}

/// The task's budgets and what it spent against them: they are state, so
/// a loop cannot outlive them across any number of segments.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Budget {
    pub limits: Limits,
    #[serde(default)]
    pub usage: Usage,
    /// Completed LLM turns.
    #[serde(default)]
    pub steps: u32,
    /// Segments started.
    #[serde(default)]
    pub segments: u32,
    /// Money spent on model calls so far, in US dollars (0 when no prices
    /// are configured).
    #[serde(default, skip_serializing_if = "is_zero_f64")]
    pub cost_usd: f64,
    /// The task holds its slots under `[limits.concurrency]` (taken when
    /// it first started, given back when it ends).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub holds_capacity: bool,
}

/// The task's place in its conversation: the thread, what it carried in
/// from earlier turns and what came in while it ran.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Conversation {
    /// The conversation this task belongs to, if any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub thread: Option<String>,
    /// What the task was asked, in short: the first line of its input, at
    /// most [`crate::task::parts::SUMMARY_CHARS`] characters, set when it
    /// is created ([`crate::TaskStore::create`]). The console lists and
    /// searches it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub summary: Option<String>,
    /// Messages that arrived for the task while it ran; the loop moves them
    /// into the transcript at the next step boundary.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub inbox: Vec<InboxMessage>,
    /// How many entries at the start of the transcript are the
    /// conversation's earlier turns ([`crate::recap`]), not this task's.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub carried: u64,
    /// Set with `cancel_requested` when a new message on the conversation
    /// interrupted the task (`on_new_message = "interrupt"`): the task
    /// that message started, which takes the conversation over.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub interrupted_by: Option<TaskId>,
    /// The Slack message (`ts`) that started the task: the reaction saying
    /// it was taken, then how it ended, goes on it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message_ts: Option<String>,
    /// Mentioned in a thread whose earlier messages the conversation has
    /// not read: the first segment reads them into the transcript and
    /// clears this in the same commit.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub unread_thread: Option<UnreadThread>,
    /// Files the input carried that are still to be downloaded (Slack's):
    /// the first segment fetches them into the transcript and clears this
    /// in the same commit.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub pending_files: Vec<PendingFile>,
}

impl Conversation {
    /// The conversation as clients name it: an HTTP `thread` as it was
    /// given (stored as `http:{thread}`), a Slack one by its stored key.
    pub fn shown_thread(&self) -> Option<&str> {
        self.thread
            .as_deref()
            .map(|t| t.strip_prefix("http:").unwrap_or(t))
    }
}

/// What the task's waits recorded, answered or not: the approvals it
/// asked for, the tasks it delegated to, its questions, its callbacks and
/// the connections it needed ([`crate::wait`] reads them).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Waits {
    /// Tool calls that asked for a human decision, decided or not.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub approvals: Vec<Approval>,
    /// Tasks started by `delegate` calls.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub children: Vec<Child>,
    /// Questions of `ask_user` calls, answered or not.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub questions: Vec<Question>,
    /// Callbacks of `wait_for_callback` calls, called or not.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub callbacks: Vec<Callback>,
    /// Tool calls that waited (or wait) for a person to connect.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub connections: Vec<ConnectionWait>,
}

impl Waits {
    /// The approval with this id, if the task asked for it.
    pub fn approval(&self, approval_id: &str) -> Option<&Approval> {
        self.approvals.iter().find(|a| a.approval_id == approval_id)
    }

    /// The child answering the parent's call `call_id`.
    pub fn child_for_call(&self, call_id: &str) -> Option<&Child> {
        self.children.iter().find(|c| c.call_id == call_id)
    }

    /// The first expiry among the approvals not decided yet.
    pub fn next_approval_expiry(&self) -> Option<Instant> {
        self.approvals
            .iter()
            .filter(|a| a.decision.is_none())
            .map(|a| a.expires_at)
            .min()
    }

    /// Children that have not ended yet.
    pub fn pending_children(&self) -> u32 {
        self.children.iter().filter(|c| c.outcome.is_none()).count() as u32
    }
}

/// The task's answer, and how it went out: its posts, its streamed
/// message, the votes on it.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Answer {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub result: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
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
    /// The message the answer streams into, once one was opened: later
    /// steps, segments and retries write into it instead of posting anew.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub answer_stream: Option<AnswerStream>,
    /// Votes on the answer (Slack's feedback buttons), one per person
    /// ([`crate::feedback`]).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub feedback: Vec<Feedback>,
}

/// The task's line of forks: what it was forked from, the forks made of
/// it, and how its tool calls are answered.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Fork {
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

impl Fork {
    /// Names `fork` among the task's forks, keeping the newest
    /// [`MAX_FORKS`]; `false` when it was named already (nothing to write).
    pub fn add(&mut self, fork: &TaskId) -> bool {
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
}
