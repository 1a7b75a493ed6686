//! What a task is doing, where the thread shows no status: Slack's
//! assistant status (`assistant.threads.setStatus`) only shows in assistant
//! threads (the app's direct messages), so in channels and group DMs a task
//! still working after its agent's `slack.progress_after` posts one
//! progress message in the thread, keeps it up to date (`chat.update`, at
//! most every [`UPDATE_INTERVAL`]) and deletes it once the answer (or the
//! ending) is posted, so the thread ends with the answer, not a trail.
//!
//! One message per task across segments, retries and crashes: it carries
//! the key `TASK:progress` in its metadata like every post of Baton
//! (`SlackClient::post_once`), and a process that does not know it yet
//! looks for it in the thread before posting one, or before deleting it.
//! Best effort throughout: a refusal is logged and the task goes on.

use crate::reactions::WorkShown;
use crate::status::{clamp, StatusLimiter};
use crate::web::{ApiErrorKind, SlackClient, SlackError};
use baton_core::{Origin, Task};
use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// The shortest time between two updates of one progress message (Slack
/// allows `chat.update` about once a second per message; the thread's
/// readers need far less).
pub(crate) const UPDATE_INTERVAL: Duration = Duration::from_secs(5);
/// Tasks remembered before the map is emptied (a cache: a task forgotten
/// only costs a lookup).
const MAX_TRACKED: usize = 4_096;

/// The progress messages this process knows, by task id.
pub(crate) struct ProgressMessages {
    limiter: StatusLimiter,
    /// `Some(ts)`: the task's message; `None`: looked for, there is none.
    known: Mutex<HashMap<String, Option<String>>>,
}

impl Default for ProgressMessages {
    fn default() -> Self {
        ProgressMessages::new(UPDATE_INTERVAL)
    }
}

/// The metadata key of `task`'s progress message.
fn key(task: &Task) -> String {
    format!("{}:progress", task.id)
}

/// `(channel, thread_ts)` when `task` shows its progress as a message: a
/// task of its own (not a child) in a thread with no assistant status.
pub(crate) fn shows_message(task: &Task) -> Option<(&str, &str)> {
    let Origin::Slack {
        channel, thread_ts, ..
    } = &task.source.origin
    else {
        return None;
    };
    if task.source.parent.is_some()
        || thread_ts.is_empty()
        || task.source.origin.is_direct_message()
    {
        return None;
    }
    Some((channel.as_str(), thread_ts.as_str()))
}

/// Whether `task` has worked long enough to show its progress (and so may
/// have a progress message to delete).
fn due(task: &Task, shown: &WorkShown) -> bool {
    baton_core::Instant::now().since(task.created_at) >= shown.progress_after
}

impl ProgressMessages {
    pub(crate) fn new(interval: Duration) -> Self {
        ProgressMessages {
            limiter: StatusLimiter::new(interval),
            known: Mutex::new(HashMap::new()),
        }
    }

    fn get(&self, task: &Task) -> Option<Option<String>> {
        self.known.lock().ok()?.get(task.id.as_str()).cloned()
    }

    fn set(&self, task: &Task, ts: Option<String>) {
        if let Ok(mut known) = self.known.lock() {
            if known.len() >= MAX_TRACKED {
                known.clear();
            }
            known.insert(task.id.to_string(), ts);
        }
    }

    /// Shows `text` in `task`'s progress message, posting it the first
    /// time (when due), updating it after (within the limiter).
    pub(crate) async fn show(
        &self,
        client: &SlackClient,
        task: &Task,
        shown: &WorkShown,
        text: &str,
        now: Instant,
    ) {
        let Some((channel, thread_ts)) = shows_message(task) else {
            return;
        };
        if !due(task, shown) {
            return;
        }
        let text = format!("_Working on it: {}_", clamp(text));
        if !self.limiter.admit(task.id.as_str(), &text, now) {
            return;
        }
        let result = match self.get(task).flatten() {
            Some(ts) => client
                .update_message(channel, &ts, &text, None)
                .await
                .map(|()| ts),
            // Unknown to this process: a crashed one may have posted it.
            None => {
                client
                    .post_once(channel, Some(thread_ts), &text, None, &key(task), true)
                    .await
            }
        };
        match result {
            Ok(ts) => self.set(task, Some(ts)),
            Err(e) => {
                tracing::debug!(task_id = %task.id, error = %e, "progress message not shown");
                if gone(&e) {
                    // Deleted by someone: not posted again for this task.
                    self.limiter.disable_thread(task.id.as_str(), now);
                } else {
                    self.limiter.failed(task.id.as_str(), now, None);
                }
            }
        }
    }

    /// Deletes `task`'s progress message, if it has one.
    pub(crate) async fn remove(&self, client: &SlackClient, task: &Task, shown: &WorkShown) {
        let Some((channel, thread_ts)) = shows_message(task) else {
            return;
        };
        let ts = match self.get(task) {
            Some(known) => known,
            // Nothing could have been posted before it was due.
            None if !due(task, shown) => None,
            None => match client.find_post(channel, Some(thread_ts), &key(task)).await {
                Ok(found) => found,
                Err(e) => {
                    tracing::debug!(task_id = %task.id, error = %e, "could not look for the progress message");
                    None
                }
            },
        };
        if let Some(ts) = ts {
            match client
                .call(
                    "chat.delete",
                    &serde_json::json!({"channel": channel, "ts": ts}),
                )
                .await
            {
                Ok(_) => {}
                Err(e) if gone(&e) => {}
                Err(e) => {
                    tracing::warn!(task_id = %task.id, error = %e, "could not delete the progress message");
                }
            }
        }
        self.set(task, None);
        self.limiter.cleared(task.id.as_str());
    }
}

/// The message is not there any more.
fn gone(e: &SlackError) -> bool {
    matches!(e, SlackError::Api { code, kind, .. }
        if code == "message_not_found" || *kind == ApiErrorKind::Conversation)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::FakeSlack;
    use baton_core::{Limits, TaskId};

    fn task(channel: &str) -> Task {
        let mut t = Task::new(
            TaskId::generate(),
            "default",
            Origin::Slack {
                team_id: "T1".into(),
                channel: channel.into(),
                thread_ts: "1.0".into(),
                user: "U1".into(),
                channel_type: None,
            },
            None,
            Limits::default(),
            baton_core::Instant::now() - Duration::from_secs(60),
        );
        t.conversation.message_ts = Some("1.0".into());
        t
    }

    #[tokio::test]
    async fn one_message_updated_within_the_limit_then_deleted() {
        let fake = FakeSlack::start().await;
        let client = fake.client();
        let shown = WorkShown::default();
        let progress = ProgressMessages::new(Duration::from_secs(5));
        let t = task("C1");
        let start = Instant::now();
        progress
            .show(&client, &t, &shown, "is running web_search", start)
            .await;
        // Too soon after: dropped; later: the same message, updated.
        progress
            .show(
                &client,
                &t,
                &shown,
                "is running fetch",
                start + Duration::from_secs(1),
            )
            .await;
        progress
            .show(
                &client,
                &t,
                &shown,
                "is running fetch",
                start + Duration::from_secs(6),
            )
            .await;
        let posted = fake.posted();
        assert_eq!(posted.len(), 1);
        assert_eq!(fake.calls("chat.update").len(), 1);
        let ts = posted[0].ts.clone();
        assert_eq!(
            fake.message("C1", &ts).map(|m| m.text).as_deref(),
            Some("_Working on it: is running fetch_")
        );

        // A process that did not post it finds it by its key and deletes it.
        let other = ProgressMessages::new(Duration::from_secs(5));
        other.remove(&client, &t, &shown).await;
        assert_eq!(fake.deleted(), [("C1".to_owned(), ts)]);
        assert!(fake.message("C1", &posted[0].ts).is_none());
    }

    #[tokio::test]
    async fn nothing_before_it_is_due_nor_in_direct_messages() {
        let fake = FakeSlack::start().await;
        let client = fake.client();
        let progress = ProgressMessages::default();
        let mut young = task("C1");
        young.created_at = baton_core::Instant::now();
        progress
            .show(
                &client,
                &young,
                &WorkShown::default(),
                "is thinking",
                Instant::now(),
            )
            .await;
        progress
            .show(
                &client,
                &task("D1"),
                &WorkShown::default(),
                "is thinking",
                Instant::now(),
            )
            .await;
        progress
            .remove(&client, &young, &WorkShown::default())
            .await;
        assert!(fake.posted().is_empty());
        assert!(fake.calls("conversations.replies").is_empty());
    }
}
