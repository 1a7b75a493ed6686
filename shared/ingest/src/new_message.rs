//! `on_new_message`: what a message does to its conversation's running
//! task (docs/conversations.md#a-new-message-while-a-task-runs).
//!
//! `steer` (the default) gives it to the running task ([`Ingest::steer`])
//! when it is the message of the person that task acts for, and queues
//! anyone else's as their own turn (a task acting for them);
//! `queue` makes it a task that waits its turn ([`baton_core::turn`]);
//! `interrupt` does the same and asks the running task to cancel;
//! `reject` refuses it and changes nothing. A stop word, and the
//! requester's answer to the running task's open `ask_user` question, are
//! not new messages: they go to the running task in every mode.

use crate::response::ApiError;
use crate::submission::{is_stop_word, slack_user, Submission};
use crate::Ingest;
use baton_core::store::Thread;
use baton_core::wait;
use baton_core::{turn, EntryKind, StoreError, Task, TaskId, Wake};
use baton_settings::OnNewMessage;
use std::time::Duration;

/// What becomes of a message on a conversation.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Decision {
    /// Today's path: to the running task, or a new task when none runs.
    Steer,
    /// Refused: `running` is the conversation's task.
    Reject { running: TaskId },
    /// A new task that waits for its turn behind `behind` (the last live
    /// task on the conversation); with `interrupt`, the running task is
    /// asked to cancel.
    Queue {
        behind: TaskId,
        interrupt: Option<TaskId>,
    },
}

impl Ingest {
    /// What the conversation's agent makes of `s`, a message on `thread`.
    ///
    /// A message from someone the running task does not act for
    /// ([`Submission::is_for`]) never steers it: it is its author's own
    /// turn, queued behind the running one under `steer` and `queue`, as
    /// `interrupt` and `reject` say otherwise.
    pub(crate) async fn on_new_message(
        &self,
        thread: &Thread,
        s: &Submission,
    ) -> Result<Decision, ApiError> {
        if is_stop_word(&s.text) {
            return Ok(Decision::Steer);
        }
        let failed = |e: StoreError| ApiError::unavailable_on(Some(&thread.key), e);
        let running = match &thread.active_task {
            Some(id) => self
                .store
                .get(id)
                .await
                .map_err(failed)?
                .filter(|t| !t.status().is_terminal()),
            None => None,
        };
        let foreign = running.as_ref().is_some_and(|t| !s.is_for(t));
        let diverts = self
            .agents
            .names()
            .filter_map(|n| self.agents.get(n))
            .any(|a| a.on_new_message != OnNewMessage::Steer);
        if !diverts && !foreign {
            return Ok(Decision::Steer);
        }
        let Some(behind) = turn::last_live(&self.store, thread).await.map_err(failed)? else {
            // Nothing runs or waits on it: a new task, as ever.
            return Ok(Decision::Steer);
        };
        if let Some(t) = &running {
            // As `question::reply` finds it: asked, unanswered, not expired
            // (the worker may not be waiting for it yet).
            let now = baton_core::Instant::now();
            let asked = t
                .waits
                .questions
                .iter()
                .any(|q| q.reply.is_none() && q.expires_at > now);
            if asked && !foreign {
                // The answer to its question, not a new message.
                return Ok(Decision::Steer);
            }
        }
        let agent = running
            .as_ref()
            .map_or(s.agent.as_str(), |t| t.agent.as_str());
        let mode = self
            .agents
            .get(agent)
            .map(|a| a.on_new_message)
            .unwrap_or_default();
        Ok(match mode {
            OnNewMessage::Steer if foreign => Decision::Queue {
                behind,
                interrupt: None,
            },
            OnNewMessage::Steer => Decision::Steer,
            OnNewMessage::Reject => Decision::Reject {
                running: running.map_or(behind, |t| t.id),
            },
            OnNewMessage::Queue => Decision::Queue {
                behind,
                interrupt: None,
            },
            OnNewMessage::Interrupt => {
                // Only who may stop the task may interrupt it; anyone
                // else's message waits its turn instead.
                let interrupt = match running {
                    Some(t) => {
                        let roles = self.roles_of_origin(&s.origin).await;
                        self.may_stop(slack_user(&s.origin), &roles, &t)
                            .then_some(t.id)
                    }
                    None => None,
                };
                Decision::Queue { behind, interrupt }
            }
        })
    }

    /// Makes `task` (new, not yet stored) wait its turn behind `behind`:
    /// no first entries — the conversation as it is when its turn comes
    /// is written then — and its message in its inbox, its files stashed
    /// for its first segment.
    pub(crate) async fn wait_turn(
        &self,
        task: &mut Task,
        s: &Submission,
        behind: &TaskId,
    ) -> Result<(), ApiError> {
        task.wait(baton_core::WaitingFor::Turn(wait::Turn {
            behind: behind.clone(),
        }));
        task.conversation.summary = Some(baton_core::task::parts::summary_of(&s.text));
        task.conversation.inbox.push(s.inbox_message());
        for entry in &s.attachments {
            let pending =
                baton_core::attachment::stash(self.store.blobs().as_ref(), &task.id, entry)
                    .await
                    .map_err(|e| ApiError::unavailable_on(s.thread.as_deref(), e))?;
            task.conversation.pending_files.push(pending);
        }
        Ok(())
    }

    /// Puts the new task `id` in its conversation's line, asks the task it
    /// interrupts (if any) to cancel, and wakes whoever's turn it is now
    /// (the task ahead may have ended meanwhile, before it could see this
    /// one in line).
    pub(crate) async fn join_turns(
        &self,
        key: &str,
        id: &TaskId,
        interrupt: Option<&TaskId>,
    ) -> Result<(), ApiError> {
        let failed = |e: turn::TurnError| ApiError::unavailable_on(Some(key), e);
        turn::join_line(&self.store, key, id)
            .await
            .map_err(failed)?;
        if let Some(running) = interrupt {
            self.interrupt(running, id).await?;
        }
        turn::wake_next(&self.store, self.queue.as_ref(), key)
            .await
            .map_err(failed)?;
        Ok(())
    }

    /// A request that queued `id` before, sent again: the first may have
    /// died before it joined the line or interrupted, so both are done
    /// again (each happens once) — but not once `id` started: the task
    /// running then is not the one it was queued behind. Its status.
    pub(crate) async fn queued_again(
        &self,
        key: &str,
        id: &TaskId,
        interrupt: Option<&TaskId>,
    ) -> Result<baton_core::TaskStatus, ApiError> {
        let first = self
            .store
            .get(id)
            .await
            .map_err(|e| ApiError::unavailable_on(Some(key), e))?
            .ok_or_else(|| ApiError::unavailable(format!("task {id} vanished")))?;
        if matches!(first.waiting_for(), Some(baton_core::WaitingFor::Turn(_))) {
            self.join_turns(key, id, interrupt).await?;
        }
        Ok(first.status())
    }

    /// Asks `running` to cancel at its next safe point because `by` takes
    /// the conversation over; recorded on it. Idempotent.
    async fn interrupt(&self, running: &TaskId, by: &TaskId) -> Result<(), ApiError> {
        let result = self
            .store
            .update(running, None, |t| {
                if t.status().is_terminal() || t.conversation.interrupted_by.is_some() {
                    return Ok(None);
                }
                t.cancel_requested = true;
                t.conversation.interrupted_by = Some(by.clone());
                Ok(Some(vec![EntryKind::Status {
                    status: t.status(),
                    detail: format!(
                        "interrupted by a new message in the conversation: task {by} takes over"
                    ),
                }]))
            })
            .await;
        match result {
            Ok((task, written)) if !written.is_empty() => {
                tracing::info!(task_id = %task.id, by = %by, "interrupted by a new message");
                // Wake it so a waiting or handed-over task ends promptly.
                let _ = self
                    .queue
                    .send(&Wake::new(task.id, "cancel").to_body(), Duration::ZERO)
                    .await;
                Ok(())
            }
            Ok(_) | Err(StoreError::NotFound(_)) => Ok(()),
            Err(e) => Err(ApiError::unavailable(e)),
        }
    }
}

#[cfg(test)]
mod tests;
