//! How a segment ends when it does not wait: the answer delivered and the
//! task finished, the task ended otherwise (failed, cancelled), or the
//! segment handing over to the next.

use super::events::Event;
use super::{Segment, SegmentEnd, Step};
use crate::delegation;
use crate::error::WorkerError;
use crate::sanitize::{is_no_reply, sanitize};
use baton_core::{EntryKind, PostKey, TaskStatus, Wake};
use std::time::Duration;

impl Segment<'_> {
    /// Delivers the final answer, then finishes. `None` means a message
    /// arrived meanwhile and the loop goes on.
    ///
    /// On a retry of the post the sink first looks for the message; one it
    /// finds counts as delivered exactly like one it posts now: either way
    /// the task is then recorded as succeeded, `posting` cleared in the same
    /// commit (or, when a message arrived meanwhile, goes on with it).
    /// Unlike an approval request an answer is never edited later, so no
    /// `ts` is kept for it.
    pub(super) async fn deliver(&mut self, answer: String) -> Step {
        let clean = sanitize(&answer);
        // A child's answer goes to its parent, not to the user.
        if !is_no_reply(&clean) && self.task.source.parent.is_none() {
            let post = self
                .begin_post(format!(
                    "{}:answer:{}",
                    self.task.id, self.task.budget.steps
                ))
                .await?;
            self.deps.replies.answer(&self.task, &clean, &post).await?;
        }
        let end = self.end(TaskStatus::Succeeded, Some(clean), None).await?;
        Ok((self.task.status() == TaskStatus::Succeeded).then_some(end))
    }

    /// Ends the task. Failures and cancellations are told to the user first
    /// (at least once), then recorded. A success is not recorded while the
    /// inbox holds unread messages: the loop answers those first.
    pub(super) async fn end(
        &mut self,
        status: TaskStatus,
        result: Option<String>,
        error: Option<String>,
    ) -> Result<SegmentEnd, WorkerError> {
        let reason = error.clone().unwrap_or_default();
        let told = match status {
            TaskStatus::Cancelled => Some(format!("This task was cancelled: {reason}")),
            TaskStatus::Succeeded => None,
            _ => Some(format!("Sorry, this task failed: {reason}")),
        };
        self.finish(status, result, error, told).await
    }

    /// [`end`](Self::end), telling the user `told` (when the task has no
    /// parent to report to instead).
    pub(super) async fn finish(
        &mut self,
        status: TaskStatus,
        result: Option<String>,
        error: Option<String>,
        told: Option<String>,
    ) -> Result<SegmentEnd, WorkerError> {
        if self.task.source.parent.is_some() {
            // Report first: a crash after it only repeats the (idempotent)
            // report, a crash before the task's own end re-runs this.
            let text = error.clone().or_else(|| result.clone()).unwrap_or_default();
            let outcome = delegation::outcome_of(&self.task, status, &text);
            delegation::report_to_parent(
                &self.deps.store,
                self.deps.queue.as_ref(),
                &self.task,
                outcome,
            )
            .await?;
        } else if let Some(message) = told {
            let post = self.begin_post(format!("{}:ended", self.task.id)).await?;
            if let Err(e) = self.deps.replies.ended(&self.task, &message, &post).await {
                tracing::warn!(task_id = %self.task.id, error = %e, "could not tell the user how the task ended");
            }
        }
        let detail = error.clone().or_else(|| result.clone()).unwrap_or_default();
        let detail: String = detail.chars().take(500).collect();
        self.commit(|t| {
            if status == TaskStatus::Succeeded && !t.conversation.inbox.is_empty() {
                // The answer was delivered into its message, which it
                // keeps: the next answer opens a message of its own.
                if t.answer.answer_stream.is_some() || t.answer.posting.is_some() {
                    t.answer.answer_stream = None;
                    t.answer.posting = None;
                    return Some(Vec::new());
                }
                return None;
            }
            t.finish(status);
            t.answer.result = result.clone();
            t.answer.error = error.clone();
            t.answer.posting = None;
            Some(vec![EntryKind::Status {
                status,
                detail: detail.clone(),
            }])
        })
        .await?;
        if !self.task.status().is_terminal() {
            // Going on with a message that arrived: this segment's view of
            // the delivered answer's message is of no further use.
            self.stream = Default::default();
        }
        self.events.emit(&self.task, Event::Ended(status));
        if self.task.status().is_terminal() && self.task.source.parent.is_none() {
            super::admit::release(self.deps, &self.task).await;
        }
        if self.task.status().is_terminal() {
            // After the answer was delivered and the end committed: a
            // summary call here delays nobody.
            self.remember_conversation().await;
        }
        if self.task.status().is_terminal() && self.task.waits.pending_children() > 0 {
            let (store, queue) = (&self.deps.store, self.deps.queue.as_ref());
            delegation::cancel_children(store, queue, &self.task).await;
        }
        Ok(SegmentEnd::Finished(status))
    }

    /// Records that the post `key` starts (unless this is a retry of it),
    /// so that a retry after a crash looks for the message before posting
    /// it again. Nothing is written for a task nobody is told about.
    pub(super) async fn begin_post(&mut self, key: String) -> Result<PostKey, WorkerError> {
        let maybe_posted = self.task.answer.posting.as_deref() == Some(key.as_str());
        if !maybe_posted && self.deps.replies.posts_for(&self.task) {
            self.commit(|t| {
                t.answer.posting = Some(key.clone());
                Some(Vec::new())
            })
            .await?;
        }
        Ok(PostKey { key, maybe_posted })
    }

    /// Tells the task's person `text` (a question, a callback URL) once:
    /// post `key` as [`Segment::begin_post`] keeps it, so a retry after a
    /// crash does not post it twice. A failed post is logged, not fatal:
    /// the task waits all the same, and its status says for what.
    pub(super) async fn post_once(
        &mut self,
        key: String,
        text: &str,
        what: &'static str,
    ) -> Result<(), WorkerError> {
        let post = self.begin_post(key).await?;
        if let Err(e) = self.deps.replies.answer(&self.task, text, &post).await {
            tracing::warn!(task_id = %self.task.id, error = %e, "could not post {what}");
        }
        self.commit(|t| {
            t.answer.posting = None;
            Some(Vec::new())
        })
        .await
    }

    /// Checkpoint and release the lease, send the next wake, and only then
    /// (by returning) acknowledge the current one: a crash in between can
    /// duplicate a wake but never lose one.
    pub(super) async fn hand_over(&mut self) -> Result<SegmentEnd, WorkerError> {
        let segments = self.task.budget.segments;
        self.commit(|t| {
            t.requeue();
            Some(vec![EntryKind::Status {
                status: TaskStatus::Queued,
                detail: format!("segment {segments} handed over"),
            }])
        })
        .await?;
        let wake = Wake::new(self.task.id.clone(), "handover");
        self.deps
            .queue
            .send(&wake.to_body(), Duration::ZERO)
            .await?;
        Ok(SegmentEnd::HandedOver)
    }
}

#[cfg(test)]
mod tests {
    use super::super::harness::{roomy, says, Harness};
    use super::super::SegmentEnd;
    use baton_core::{EntryKind, TaskStatus};

    #[tokio::test]
    async fn the_answer_is_delivered_once_and_a_duplicate_wake_does_nothing() {
        let h = Harness::new(|_| {});
        h.llm.then(says("<thinking>easy</thinking>It is 4."));
        let id = h.task("2+2?").await;
        assert_eq!(
            h.run(&id, roomy()).await,
            SegmentEnd::Finished(TaskStatus::Succeeded)
        );
        assert_eq!(
            h.replies.answers(),
            ["It is 4."],
            "cleaned before it is shown"
        );
        let task = h.get(&id).await;
        assert_eq!(task.answer.result.as_deref(), Some("It is 4."));
        assert!(task.lease().is_free() && task.waiting_for().is_none());
        assert_eq!(
            h.run(&id, roomy()).await,
            SegmentEnd::Dropped("task is not runnable")
        );
        assert_eq!(h.replies.answers().len(), 1);
        assert_eq!(h.llm.calls(), 1);
    }

    #[tokio::test]
    async fn a_message_arriving_while_answering_is_answered_next() {
        let h = Harness::new(|_| {});
        h.llm.then(says("first")).then(says("second"));
        let id = h.task("one").await;
        if let Ok(mut slot) = h.replies.arrives_while_answering.lock() {
            *slot = Some((h.store.clone(), "two".to_owned()));
        }
        assert_eq!(
            h.run(&id, roomy()).await,
            SegmentEnd::Finished(TaskStatus::Succeeded)
        );
        assert_eq!(h.replies.answers(), ["first", "second"]);
        let users: Vec<String> = h
            .transcript(&id)
            .await
            .into_iter()
            .filter_map(|e| match e.kind {
                EntryKind::UserMessage { text, .. } => Some(text),
                _ => None,
            })
            .collect();
        assert_eq!(users, ["one", "two"]);
        assert_eq!(h.get(&id).await.answer.result.as_deref(), Some("second"));
    }
}
