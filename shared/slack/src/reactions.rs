//! How a message Baton took shows it: a reaction added when the task
//! starts (the agent's `slack.ack_reaction`, `eyes` by default), replaced
//! when it ends (`white_check_mark` on success, `x` on failure or cancel;
//! nothing for an answer of `NO_REPLY`).
//!
//! Both calls are safe to repeat: Slack's `already_reacted` and
//! `no_reaction` count as done, so a re-run segment or a retried end adds
//! no second reaction. The end's reaction is added before the
//! acknowledgement is removed, so a crash between the two leaves both,
//! never neither.

use crate::web::{SlackClient, SlackError};
use baton_core::{Origin, Task, TaskStatus};
use serde_json::json;
use std::sync::Arc;
use std::time::Duration;

/// The reaction of a task that succeeded.
pub const SUCCEEDED: &str = "white_check_mark";
/// The reaction of a task that failed or was cancelled.
pub const FAILED: &str = "x";

/// How an agent's work shows in Slack (`[agents.NAME.slack]`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct WorkShown {
    /// Added to the message a task took; `None`: no reactions at all.
    pub ack_reaction: Option<String>,
    /// A task working this long posts a progress message where the thread
    /// has no status.
    pub progress_after: Duration,
}

impl Default for WorkShown {
    fn default() -> Self {
        WorkShown {
            ack_reaction: Some("eyes".to_owned()),
            progress_after: Duration::from_secs(10),
        }
    }
}

/// Each agent's [`WorkShown`], by agent name.
pub type WorkShownFor = Arc<dyn Fn(&str) -> WorkShown + Send + Sync>;

impl SlackClient {
    /// Adds reaction `name` to message `ts`; already there counts as done.
    pub async fn add_reaction(
        &self,
        channel: &str,
        ts: &str,
        name: &str,
    ) -> Result<(), SlackError> {
        let body = json!({ "channel": channel, "timestamp": ts, "name": name });
        match self.call("reactions.add", &body).await {
            Err(SlackError::Api { code, .. }) if code == "already_reacted" => Ok(()),
            other => other.map(drop),
        }
    }

    /// Removes the app's reaction `name` from message `ts`; already gone
    /// counts as done.
    pub async fn remove_reaction(
        &self,
        channel: &str,
        ts: &str,
        name: &str,
    ) -> Result<(), SlackError> {
        let body = json!({ "channel": channel, "timestamp": ts, "name": name });
        match self.call("reactions.remove", &body).await {
            Err(SlackError::Api { code, .. }) if code == "no_reaction" => Ok(()),
            other => other.map(drop),
        }
    }
}

/// The message a task took, when it has one to react on: `(channel, ts)`.
/// Children and scheduled tasks have none.
pub(crate) fn taken_message(task: &Task) -> Option<(&str, &str)> {
    let Origin::Slack { channel, .. } = &task.source.origin else {
        return None;
    };
    if task.source.parent.is_some() {
        return None;
    }
    task.conversation
        .message_ts
        .as_deref()
        .filter(|ts| !ts.is_empty())
        .map(|ts| (channel.as_str(), ts))
}

/// The reaction that says how `task` ended; `None` for an answer that
/// posts nothing (or a task not ended).
pub(crate) fn outcome(task: &Task) -> Option<&'static str> {
    match task.status() {
        TaskStatus::Succeeded => {
            let result = task.answer.result.as_deref().unwrap_or_default().trim();
            let silent = result.is_empty() || result == "NO_REPLY" || result == "HEARTBEAT_OK";
            (!silent).then_some(SUCCEEDED)
        }
        TaskStatus::Failed | TaskStatus::Cancelled => Some(FAILED),
        _ => None,
    }
}

/// The task was taken: the acknowledgement goes on its message.
pub(crate) async fn acknowledge(client: &SlackClient, task: &Task, shown: &WorkShown) {
    let (Some((channel, ts)), Some(ack)) = (taken_message(task), shown.ack_reaction.as_deref())
    else {
        return;
    };
    if let Err(e) = client.add_reaction(channel, ts, ack).await {
        tracing::debug!(task_id = %task.id, error = %e, "could not add the acknowledgement reaction");
    }
}

/// The task ended: its outcome's reaction in place of the acknowledgement.
pub(crate) async fn conclude(client: &SlackClient, task: &Task, shown: &WorkShown) {
    let (Some((channel, ts)), Some(ack)) = (taken_message(task), shown.ack_reaction.as_deref())
    else {
        return;
    };
    let outcome = outcome(task);
    if let Some(name) = outcome.filter(|n| *n != ack) {
        if let Err(e) = client.add_reaction(channel, ts, name).await {
            tracing::debug!(task_id = %task.id, error = %e, "could not add the outcome reaction");
        }
    }
    if outcome != Some(ack) {
        if let Err(e) = client.remove_reaction(channel, ts, ack).await {
            tracing::debug!(task_id = %task.id, error = %e, "could not remove the acknowledgement reaction");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::FakeSlack;
    use baton_core::{Limits, TaskId};

    fn task() -> Task {
        let mut t = Task::new(
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
            baton_core::Instant::now(),
        );
        t.conversation.message_ts = Some("2.0".into());
        t
    }

    #[tokio::test]
    async fn the_acknowledgement_is_replaced_by_the_outcome_once() {
        let fake = FakeSlack::start().await;
        let client = fake.client();
        let shown = WorkShown::default();
        let mut t = task();
        acknowledge(&client, &t, &shown).await;
        acknowledge(&client, &t, &shown).await;
        assert_eq!(fake.reactions("C1", "2.0"), ["eyes"]);
        t.finish(TaskStatus::Succeeded);
        t.answer.result = Some("done".into());
        conclude(&client, &t, &shown).await;
        conclude(&client, &t, &shown).await;
        assert_eq!(fake.reactions("C1", "2.0"), [SUCCEEDED]);

        let mut failed = task();
        failed.conversation.message_ts = Some("3.0".into());
        acknowledge(&client, &failed, &shown).await;
        failed.finish(TaskStatus::Failed);
        conclude(&client, &failed, &shown).await;
        assert_eq!(fake.reactions("C1", "3.0"), [FAILED]);

        let mut silent = task();
        silent.conversation.message_ts = Some("4.0".into());
        acknowledge(&client, &silent, &shown).await;
        silent.finish(TaskStatus::Succeeded);
        silent.answer.result = Some("NO_REPLY".into());
        conclude(&client, &silent, &shown).await;
        assert!(fake.reactions("C1", "4.0").is_empty());
    }

    #[tokio::test]
    async fn no_reaction_when_turned_off_or_nothing_was_taken() {
        let fake = FakeSlack::start().await;
        let off = WorkShown {
            ack_reaction: None,
            ..WorkShown::default()
        };
        acknowledge(&fake.client(), &task(), &off).await;
        let mut scheduled = task();
        scheduled.conversation.message_ts = None;
        acknowledge(&fake.client(), &scheduled, &WorkShown::default()).await;
        assert!(fake.calls("reactions.add").is_empty());
    }
}
