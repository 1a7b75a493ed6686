//! Answers, endings and progress of a task posted to its Slack thread.
//!
//! Answers carry feedback buttons ([`crate::feedback`]) unless turned off.
//! The task's phase ([`TaskPhase`]) goes to its agent session
//! (`agents.sessions.setStatus`) when the app has agent sessions
//! (`SLACK_AGENT_SESSIONS`); otherwise the progress texts go to the
//! assistant thread's status as before, and the first message titles a
//! direct-message thread (`assistant.threads.setTitle`). A task's plan
//! shows in its streamed message, else in its status ([`crate::plan`]).

use crate::assistant::{thread_title, SessionStatus, SessionTarget};
use crate::plan::{PlanBoard, PlanView, Shown};
use crate::progress_message::ProgressMessages;
use crate::reactions::{WorkShown, WorkShownFor};
use crate::status::{clamp, StatusLimiter};
use crate::streamed::PlanSent;
use crate::web::{ApiErrorKind, SlackClient, SlackError};
use async_trait::async_trait;
use baton_core::judgment::PlanStep;
use baton_core::{
    Appended, Origin, PostKey, ReplyError, ReplySink, StreamedMessage, Task, TaskPhase,
    ToolCallShown,
};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// The longest a status update may hold up the task.
pub const STATUS_TIMEOUT: Duration = Duration::from_secs(3);

/// Where time comes from for the status limiter (injectable for tests).
pub type Clock = Arc<dyn Fn() -> Instant + Send + Sync>;

/// Posts answers of Slack-born tasks in their thread, as mrkdwn, and shows
/// their progress with `assistant.threads.setStatus`.
pub struct SlackReplies {
    client: SlackClient,
    /// The same client without retries: a rate-limited status is dropped,
    /// not waited for.
    status_client: SlackClient,
    limiter: Arc<StatusLimiter>,
    clock: Clock,
    progress_enabled: bool,
    /// Feedback buttons under answers.
    feedback: bool,
    /// The app is an agent: phases go to its sessions.
    agent_sessions: bool,
    /// Slack refused sessions or titles for the whole app (a scope
    /// missing, the app not an agent): not tried again until restart.
    sessions_off: Arc<AtomicBool>,
    titles_off: Arc<AtomicBool>,
    /// This app's bot id, asked of Slack once (to find a stream a crashed
    /// attempt opened).
    bot_id: Arc<std::sync::Mutex<Option<String>>>,
    /// Each task's plan, and where it shows.
    plans: Arc<PlanBoard>,
    /// Slack refused plan or task chunks in streams: plans and tool calls
    /// go to the status until restart.
    chunks_off: Arc<AtomicBool>,
    /// Each agent's reactions and progress-message delay.
    work_shown: WorkShownFor,
    /// Progress messages where the thread has no status.
    progress_messages: Arc<ProgressMessages>,
}

impl SlackReplies {
    pub fn new(client: SlackClient) -> Self {
        SlackReplies {
            status_client: client.clone().with_retry_policy(0, Duration::ZERO),
            client,
            limiter: Arc::new(StatusLimiter::default()),
            clock: Arc::new(Instant::now),
            progress_enabled: true,
            feedback: true,
            agent_sessions: false,
            sessions_off: Arc::new(AtomicBool::new(false)),
            titles_off: Arc::new(AtomicBool::new(false)),
            bot_id: Arc::default(),
            plans: Arc::default(),
            chunks_off: Arc::new(AtomicBool::new(false)),
            work_shown: Arc::new(|_| WorkShown::default()),
            progress_messages: Arc::default(),
        }
    }

    /// How each agent's work shows (its `[agents.NAME.slack]` reaction and
    /// progress-message delay); default: `eyes`, after 10 s.
    pub fn with_work_shown(mut self, work_shown: WorkShownFor) -> Self {
        self.work_shown = work_shown;
        self
    }

    fn shown(&self, task: &Task) -> WorkShown {
        (self.work_shown)(&task.agent)
    }

    /// The thread ends with the answer, not the progress message.
    async fn remove_progress(&self, task: &Task) {
        let shown = self.shown(task);
        let removed = self.progress_messages.remove(&self.client, task, &shown);
        if tokio::time::timeout(STATUS_TIMEOUT, removed).await.is_err() {
            tracing::debug!(task_id = %task.id, "deleting the progress message timed out");
        }
    }

    /// Answers without feedback buttons (`SLACK_FEEDBACK_BUTTONS=false`).
    pub fn without_feedback(mut self) -> Self {
        self.feedback = false;
        self
    }

    /// The app is declared as an agent (`SLACK_AGENT_SESSIONS=true`): the
    /// task's phase is its thread's agent session status.
    pub fn with_agent_sessions(mut self, on: bool) -> Self {
        self.agent_sessions = on;
        self
    }

    /// One status update per thread at most every `interval` (default
    /// [`crate::status::MIN_STATUS_INTERVAL`]).
    pub fn with_progress_interval(mut self, interval: Duration) -> Self {
        self.limiter = Arc::new(StatusLimiter::new(interval));
        self
    }

    /// Reads time from `clock` for rate limiting (tests drive it by hand).
    pub fn with_clock(mut self, clock: Clock) -> Self {
        self.clock = clock;
        self
    }

    /// Shows no progress at all.
    pub fn without_progress(mut self) -> Self {
        self.progress_enabled = false;
        self
    }

    async fn post(
        &self,
        task: &Task,
        text: &str,
        post: &PostKey,
        buttons: bool,
    ) -> Result<(), ReplyError> {
        let Origin::Slack {
            channel, thread_ts, ..
        } = &task.source.origin
        else {
            return Ok(());
        };
        let mrkdwn = crate::mrkdwn::from_markdown(text);
        let blocks = buttons
            .then(|| crate::feedback::answer_blocks(&mrkdwn, task.id.as_str()))
            .flatten();
        if let Some(message) = task
            .answer
            .answer_stream
            .as_ref()
            .and_then(|s| s.message.as_ref())
        {
            // The answer streamed into a message: it ends showing exactly
            // this text (an update, safe to repeat after a crash).
            let shown =
                crate::streamed::replace(&self.client, message, text, blocks, Some(&post.key))
                    .await;
            if shown.is_ok() {
                self.remove_progress(task).await;
            }
            return shown;
        }
        let posted = self
            .client
            // An empty thread_ts (a scheduled post to a channel) starts a new message.
            .post_once(
                channel,
                Some(thread_ts.as_str()).filter(|t| !t.is_empty()),
                &mrkdwn,
                blocks,
                &post.key,
                post.maybe_posted,
            )
            .await
            .map(|_| ())
            .map_err(|e| ReplyError(e.to_string()));
        if posted.is_ok() && !thread_ts.is_empty() {
            // Slack clears the status when the bot replies.
            self.limiter.cleared(&thread_key(channel, thread_ts));
            self.remove_progress(task).await;
        }
        posted
    }
}

impl SlackReplies {
    /// Makes a best-effort call (within [`STATUS_TIMEOUT`]) unless `off`;
    /// a refusal for the whole app turns it off.
    async fn best_effort(
        &self,
        task: &Task,
        method: &str,
        off: &AtomicBool,
        call: impl std::future::Future<Output = Result<(), SlackError>>,
    ) {
        if off.load(Ordering::Relaxed) {
            return;
        }
        match tokio::time::timeout(STATUS_TIMEOUT, call).await {
            Ok(Ok(())) => {}
            Ok(Err(e)) if classify(&e) == StatusFailure::App => {
                tracing::warn!(error = %e, method,
                    "Slack refuses this call for the app (agent sessions need the app declared as an agent; titles the assistant:write scope); not trying it again until restart");
                off.store(true, Ordering::Relaxed);
            }
            Ok(Err(e)) => {
                tracing::debug!(task_id = %task.id, error = %e, method, "Slack call failed")
            }
            Err(_) => tracing::debug!(task_id = %task.id, method, "Slack call timed out"),
        }
    }
}

impl SlackReplies {
    /// Appends `view` to the streaming `message` as chunks (within
    /// [`STATUS_TIMEOUT`]); `false` when it did not go (the stream closed,
    /// Slack refused, too slow).
    async fn append_plan(
        &self,
        task: &Task,
        message: &StreamedMessage,
        view: &PlanView,
        shown_before: usize,
    ) -> bool {
        if self.chunks_off.load(Ordering::Relaxed) {
            return false;
        }
        let chunks = view.chunks(shown_before);
        let sent = tokio::time::timeout(
            STATUS_TIMEOUT,
            self.client
                .append_stream_chunks(&message.channel, &message.ts, &chunks),
        )
        .await;
        match sent {
            Ok(Ok(())) => {
                let shown = Shown {
                    message: message.clone(),
                    tasks: view.len().max(shown_before),
                };
                self.plans.set_shown(task.id.as_str(), Some(shown));
                true
            }
            Ok(Err(e)) => {
                self.chunks_refused(task, &e);
                false
            }
            Err(_) => {
                tracing::debug!(task_id = %task.id, "showing the plan in the stream timed out");
                false
            }
        }
    }

    /// Slack did not take plan chunks: a closed stream is the stream's
    /// business; a refusal of what was sent (or of the method, for the
    /// app) turns chunks off, with one warning.
    fn chunks_refused(&self, task: &Task, e: &SlackError) {
        let for_good = matches!(
            e,
            SlackError::Api {
                kind: ApiErrorKind::Other | ApiErrorKind::App,
                ..
            } | SlackError::Status { status: 404, .. }
        );
        if for_good && !self.chunks_off.swap(true, Ordering::Relaxed) {
            tracing::warn!(error = %e,
                "Slack refuses plan and task chunks in streamed messages; plans and tool calls show in the thread status until restart");
        } else {
            tracing::debug!(task_id = %task.id, error = %e, "the plan did not go into the stream");
        }
    }

    /// Shows `status` as the thread's status, within the limiter.
    async fn set_status(&self, task: &Task, status: &str) {
        let Origin::Slack {
            channel, thread_ts, ..
        } = &task.source.origin
        else {
            return;
        };
        if !self.progress_enabled || thread_ts.is_empty() {
            return;
        }
        if crate::progress_message::shows_message(task).is_some() {
            // No assistant status outside assistant threads (Slack refuses
            // `assistant.threads.setStatus` there): a message instead, and
            // no status call.
            self.progress_messages
                .show(
                    &self.client,
                    task,
                    &self.shown(task),
                    status,
                    (self.clock)(),
                )
                .await;
            return;
        }
        let status = clamp(status);
        let key = thread_key(channel, thread_ts);
        if !self.limiter.admit(&key, &status, (self.clock)()) {
            return;
        }
        let sent = tokio::time::timeout(
            STATUS_TIMEOUT,
            self.status_client
                .set_thread_status(channel, thread_ts, &status),
        )
        .await;
        let error = match sent {
            Ok(Ok(())) => return,
            Ok(Err(e)) => e,
            Err(_) => {
                tracing::debug!(task_id = %task.id, "status update timed out");
                self.limiter.failed(&key, (self.clock)(), None);
                return;
            }
        };
        match classify(&error) {
            StatusFailure::Transient { retry_after } => {
                tracing::debug!(task_id = %task.id, error = %error, "status update failed");
                self.limiter.failed(&key, (self.clock)(), retry_after);
            }
            StatusFailure::Thread => {
                tracing::debug!(task_id = %task.id, error = %error,
                    "this thread takes no status; not trying it again");
                self.limiter.disable_thread(&key, (self.clock)());
            }
            StatusFailure::App => {
                tracing::warn!(error = %error,
                    "Slack refuses thread status updates (assistant.threads.setStatus needs the chat:write scope); progress is off until restart");
                self.limiter.disable_all();
            }
        }
    }
}

/// The limiter's key of a Slack thread.
fn thread_key(channel: &str, thread_ts: &str) -> String {
    format!("{channel}/{thread_ts}")
}

/// What a failed status update means for the next ones.
#[derive(Debug, PartialEq, Eq)]
enum StatusFailure {
    /// Worth trying again later (network, 5xx, rate limit).
    Transient { retry_after: Option<Duration> },
    /// This thread takes no status (not an assistant thread, no access).
    Thread,
    /// No thread will: the app lacks the scope or its token is bad.
    App,
}

fn classify(e: &SlackError) -> StatusFailure {
    match e {
        SlackError::Api {
            kind: ApiErrorKind::App,
            ..
        } => StatusFailure::App,
        SlackError::Api {
            kind: ApiErrorKind::Transient,
            ..
        } => StatusFailure::Transient { retry_after: None },
        // Any other definite refusal (`not_allowed`, `channel_not_found`,
        // `invalid_thread_ts`, `not_in_channel`, ...) is about the thread.
        SlackError::Api {
            kind: ApiErrorKind::Conversation | ApiErrorKind::Other | ApiErrorKind::NotStreaming,
            ..
        } => StatusFailure::Thread,
        SlackError::RateLimited { retry_after } => StatusFailure::Transient {
            retry_after: retry_after.or(Some(Duration::from_secs(1))),
        },
        // A 404 is an API without the method (an old or partial fake).
        SlackError::Status { status: 404, .. } => StatusFailure::App,
        SlackError::Config(_) => StatusFailure::App,
        SlackError::Transport { .. } | SlackError::Status { .. } | SlackError::Decode { .. } => {
            StatusFailure::Transient { retry_after: None }
        }
    }
}

#[async_trait]
impl ReplySink for SlackReplies {
    fn posts_for(&self, task: &Task) -> bool {
        matches!(task.source.origin, Origin::Slack { .. })
    }

    async fn answer(&self, task: &Task, text: &str, post: &PostKey) -> Result<(), ReplyError> {
        self.post(task, text, post, self.feedback).await
    }

    async fn ended(&self, task: &Task, message: &str, post: &PostKey) -> Result<(), ReplyError> {
        self.post(task, &format!(":warning: {message}"), post, false)
            .await
    }

    fn streams_for(&self, task: &Task) -> bool {
        crate::streamed::streams(task)
    }

    async fn stream_open(&self, task: &Task, text: &str) -> Result<StreamedMessage, ReplyError> {
        // The plan, when known, opens the message, above the answer.
        let plan = if self.chunks_off.load(Ordering::Relaxed) {
            None
        } else {
            self.plans.view(task.id.as_str())
        };
        let chunks = plan.as_ref().map(|p| p.chunks(0));
        let opened = crate::streamed::open(&self.client, task, text, chunks).await?;
        match (opened.plan, plan) {
            (PlanSent::Shown, Some(plan)) => {
                let shown = Shown {
                    message: opened.message.clone(),
                    tasks: plan.len(),
                };
                self.plans.set_shown(task.id.as_str(), Some(shown));
            }
            (PlanSent::Refused(e), _) => self.chunks_refused(task, &e),
            _ => {}
        }
        Ok(opened.message)
    }

    async fn stream_append(
        &self,
        _task: &Task,
        message: &StreamedMessage,
        shown: &str,
        from: usize,
    ) -> Result<Appended, ReplyError> {
        crate::streamed::append(&self.client, message, shown, from).await
    }

    async fn stream_replace(
        &self,
        _task: &Task,
        message: &StreamedMessage,
        text: &str,
    ) -> Result<(), ReplyError> {
        crate::streamed::replace(&self.client, message, text, None, None).await
    }

    async fn stream_find(
        &self,
        task: &Task,
        since: baton_core::Instant,
    ) -> Option<StreamedMessage> {
        let bot = crate::streamed::bot_id(&self.client, &self.bot_id).await?;
        crate::streamed::find(&self.client, &bot, task, since).await
    }

    async fn phase(&self, task: &Task, phase: TaskPhase<'_>) {
        let Origin::Slack {
            channel,
            thread_ts,
            user,
            ..
        } = &task.source.origin
        else {
            return;
        };
        // Children post nothing of their own; a scheduled post has no
        // thread to hold a session.
        if task.source.parent.is_some() || thread_ts.is_empty() {
            return;
        }
        match phase {
            TaskPhase::Processing { .. } => {
                let shown = self.shown(task);
                let ack = crate::reactions::acknowledge(&self.status_client, task, &shown);
                if tokio::time::timeout(STATUS_TIMEOUT, ack).await.is_err() {
                    tracing::debug!(task_id = %task.id, "the acknowledgement timed out");
                }
            }
            TaskPhase::Closed => {
                self.plans.forget(task.id.as_str());
                let shown = self.shown(task);
                let concluded = crate::reactions::conclude(&self.client, task, &shown);
                if tokio::time::timeout(STATUS_TIMEOUT, concluded)
                    .await
                    .is_err()
                {
                    tracing::debug!(task_id = %task.id, "the outcome's reaction timed out");
                }
                self.remove_progress(task).await;
            }
            TaskPhase::Suspended => {}
        }
        let title = match phase {
            TaskPhase::Processing { title } => title.and_then(thread_title),
            _ => None,
        };
        if self.agent_sessions {
            let status = match phase {
                TaskPhase::Processing { .. } => SessionStatus::Processing,
                TaskPhase::Suspended => SessionStatus::Suspended,
                TaskPhase::Closed => SessionStatus::Closed,
            };
            let target = SessionTarget {
                channel,
                thread_ts,
                title: title.as_deref(),
                initiator: Some(user.as_str()),
            };
            let sent = self.status_client.set_session_status(target, status);
            self.best_effort(task, "agents.sessions.setStatus", &self.sessions_off, sent)
                .await;
        } else if let Some(title) = title.filter(|_| task.source.origin.is_direct_message()) {
            // Assistant threads live in the app's direct messages; a DM
            // thread that is not one refuses the title, which is harmless.
            let sent = self
                .status_client
                .set_thread_title(channel, thread_ts, &title);
            self.best_effort(task, "assistant.threads.setTitle", &self.titles_off, sent)
                .await;
        }
    }

    /// A call shows in the task's streamed message while one is open (not
    /// for sub-agents: their parent's stream is the thread's). Anything
    /// else — no stream, chunks refused, Slack slow — is `false`, and the
    /// worker says it in the status text.
    async fn tool_call(&self, task: &Task, call: ToolCallShown<'_>) -> bool {
        let streaming = task
            .answer
            .answer_stream
            .as_ref()
            .and_then(|s| s.message.as_ref());
        let Some(message) = streaming.filter(|_| task.source.parent.is_none()) else {
            return false;
        };
        if self.chunks_off.load(Ordering::Relaxed) {
            return false;
        }
        let chunks = [crate::tool_calls::chunk(&call)];
        let sent = tokio::time::timeout(
            STATUS_TIMEOUT,
            self.client
                .append_stream_chunks(&message.channel, &message.ts, &chunks),
        )
        .await;
        match sent {
            Ok(Ok(())) => true,
            // A closed stream takes nothing more: the status says it.
            Ok(Err(e)) if e.is_not_streaming() => false,
            Ok(Err(e)) => {
                self.chunks_refused(task, &e);
                false
            }
            Err(_) => {
                tracing::debug!(task_id = %task.id, "showing a tool call in the stream timed out");
                false
            }
        }
    }

    async fn progress(&self, task: &Task, status: &str) {
        // While the plan is in no message, the status says how far it is.
        match self.plans.note(task.id.as_str()) {
            Some(note) => self.set_status(task, &format!("{status} · {note}")).await,
            None => self.set_status(task, status).await,
        }
    }

    /// The plan goes into the task's streamed message when one is open
    /// (its start carries the plan when it opens later, [`stream_open`]);
    /// otherwise, or when that fails, it is the thread's status. A
    /// sub-agent's plan is not shown: its parent's is the thread's.
    ///
    /// [`stream_open`]: ReplySink::stream_open
    async fn plan(&self, task: &Task, steps: &[PlanStep], done: &[bool]) {
        let shows =
            matches!(&task.source.origin, Origin::Slack { thread_ts, .. } if !thread_ts.is_empty());
        if !shows || task.source.parent.is_some() {
            return;
        }
        let view = PlanView::new(steps, done);
        if view.is_empty() {
            return;
        }
        let before = self.plans.remember(task.id.as_str(), view.clone());
        let streaming = task
            .answer
            .answer_stream
            .as_ref()
            .and_then(|s| s.message.as_ref());
        if let Some(message) = streaming {
            let shown_before = before
                .filter(|s| &s.message == message)
                .map_or(0, |s| s.tasks);
            if self.append_plan(task, message, &view, shown_before).await {
                return;
            }
        }
        self.plans.set_shown(task.id.as_str(), None);
        self.set_status(task, &view.status()).await;
    }
}

#[cfg(test)]
mod plan_tests;
#[cfg(test)]
mod tool_call_tests;

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::FakeSlack;
    use baton_core::{Limits, TaskId};

    fn slack_task() -> Task {
        Task::new(
            TaskId::generate(),
            "default",
            Origin::Slack {
                team_id: "T1".into(),
                channel: "C1".into(),
                thread_ts: "1.0".into(),
                user: "U1".into(),
                channel_type: None,
            },
            None,
            Limits::default(),
            0,
        )
    }

    /// Slack refuses `assistant.threads.setStatus` outside assistant
    /// threads: a channel's thread is not asked (its progress is a
    /// message), a DM's is.
    #[tokio::test]
    async fn only_assistant_threads_are_sent_a_status() {
        let fake = FakeSlack::start().await;
        let replies = SlackReplies::new(fake.client()).with_progress_interval(Duration::ZERO);
        replies.progress(&slack_task(), "is thinking…").await;
        assert!(fake.calls("assistant.threads.setStatus").is_empty());
        let mut dm = slack_task();
        if let Origin::Slack { channel, .. } = &mut dm.source.origin {
            *channel = "D1".into();
        }
        replies.progress(&dm, "is thinking…").await;
        assert_eq!(fake.calls("assistant.threads.setStatus").len(), 1);
    }

    #[tokio::test]
    async fn an_answer_is_posted_when_the_thread_cannot_be_read() {
        let fake = FakeSlack::start().await;
        fake.fail_always("conversations.replies", "missing_scope");
        let replies = SlackReplies::new(fake.client()).without_progress();
        let task = slack_task();
        let retry = PostKey {
            key: format!("{}:answer:1", task.id),
            maybe_posted: true,
        };
        replies
            .answer(&task, "the answer", &retry)
            .await
            .expect("told, without the duplicate check");
        let posted = fake.posted();
        assert_eq!(posted.len(), 1);
        assert_eq!(posted[0].text, "the answer");
        assert_eq!(posted[0].thread_ts.as_deref(), Some("1.0"));
    }

    #[tokio::test]
    async fn an_answer_waits_while_slack_cannot_answer_the_lookup() {
        let fake = FakeSlack::start().await;
        let client = fake
            .client()
            .with_retry_policy(0, Duration::from_millis(10));
        let replies = SlackReplies::new(client).without_progress();
        let task = slack_task();
        let retry = PostKey {
            key: format!("{}:ended", task.id),
            maybe_posted: true,
        };
        fake.rate_limit_next("conversations.replies", 0);
        replies
            .ended(&task, "failed", &retry)
            .await
            .expect_err("the post is retried later");
        assert!(fake.posted().is_empty());
        replies.ended(&task, "failed", &retry).await.expect("told");
        assert_eq!(fake.posted().len(), 1);
    }

    #[tokio::test]
    async fn phases_go_to_the_agent_session_or_title_a_dm_thread() {
        let fake = FakeSlack::start().await;
        let sessions = SlackReplies::new(fake.client()).with_agent_sessions(true);
        let task = slack_task();
        let title = Some("Check the <https://x.test|deploy>");
        sessions.phase(&task, TaskPhase::Processing { title }).await;
        let call = &fake.calls("agents.sessions.setStatus")[0];
        assert_eq!(call["title"], "Check the deploy");
        assert_eq!(call["initiator_user_id"], "U1");
        sessions.phase(&task, TaskPhase::Suspended).await;
        assert_eq!(fake.session("C1", "1.0").as_deref(), Some("suspended"));
        sessions.phase(&task, TaskPhase::Closed).await;
        assert_eq!(fake.session("C1", "1.0").as_deref(), Some("closed"));
        // A child shows nothing of its own.
        let mut child = slack_task();
        child.source.parent = Some(baton_core::task::ParentLink {
            task_id: task.id.clone(),
            call_id: "c".into(),
            root_task_id: None,
            actor: None,
        });
        sessions.phase(&child, TaskPhase::Suspended).await;
        assert_eq!(fake.calls("agents.sessions.setStatus").len(), 3);

        // Without sessions: a title for a DM thread only, never a status.
        let plain = SlackReplies::new(fake.client());
        plain.phase(&task, TaskPhase::Processing { title }).await;
        assert!(fake.calls("assistant.threads.setTitle").is_empty());
        let mut dm = slack_task();
        if let Origin::Slack { channel, .. } = &mut dm.source.origin {
            *channel = "D1".into();
        }
        plain.phase(&dm, TaskPhase::Processing { title }).await;
        plain.phase(&dm, TaskPhase::Closed).await;
        let titles = fake.calls("assistant.threads.setTitle");
        assert_eq!(titles.len(), 1);
        assert_eq!(titles[0]["title"], "Check the deploy");
        assert_eq!(fake.calls("agents.sessions.setStatus").len(), 3);

        // An app that is not an agent: one refusal turns sessions off.
        fake.fail_always("agents.sessions.setStatus", "not_allowed_token_type");
        sessions.phase(&task, TaskPhase::Closed).await;
        fake.stop_failing("agents.sessions.setStatus");
        sessions.phase(&task, TaskPhase::Closed).await;
        assert_eq!(fake.calls("agents.sessions.setStatus").len(), 3);
    }

    #[test]
    fn failures_are_classified() {
        let api = SlackError::api;
        assert_eq!(classify(&api("missing_scope")), StatusFailure::App);
        assert_eq!(classify(&api("invalid_auth")), StatusFailure::App);
        assert_eq!(classify(&api("not_allowed")), StatusFailure::Thread);
        assert_eq!(classify(&api("channel_not_found")), StatusFailure::Thread);
        assert_eq!(
            classify(&SlackError::RateLimited {
                retry_after: Some(Duration::from_secs(7))
            }),
            StatusFailure::Transient {
                retry_after: Some(Duration::from_secs(7))
            }
        );
        assert_eq!(
            classify(&SlackError::Status {
                method: "m".into(),
                status: 503
            }),
            StatusFailure::Transient { retry_after: None }
        );
    }
}
