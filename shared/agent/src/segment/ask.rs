//! `ask_user`: record the question (once), post it where the requester
//! reads (the Slack thread; HTTP clients see it in `waiting_for` and the
//! events), and wait at zero compute for the reply, which ingest records
//! on the task. The question expires after the agent's
//! `ask_user.expires_after`; a wake then lets the model go on without it.

use super::{start_waiting, Segment, Step};
use crate::progress;
use baton_core::question::{self, Question};
use baton_core::{EntryKind, Instant, TaskStatus, ToolCall, WaitingFor};

impl Segment<'_> {
    pub(super) async fn wait_for_reply(&mut self, step: u32, calls: Vec<ToolCall>) -> Step {
        let now = Instant::now();
        let expires_at =
            (now + self.agent.ask_user_expires_after).capped(self.task.budget.limits.deadline_at);
        let new: Vec<Question> = calls
            .iter()
            .filter(|c| question::question(&self.task, &c.id).is_none())
            .filter_map(|c| {
                let text = crate::question::question_of(&c.arguments).ok()?;
                Some(Question {
                    step,
                    call_id: c.id.clone(),
                    question: text,
                    asked_at: now,
                    expires_at,
                    reply: None,
                })
            })
            .collect();
        for q in &new {
            // Recorded before it is posted: a reply may arrive the moment
            // it is, and ingest finds it here.
            self.commit(|t| {
                if question::question(t, &q.call_id).is_some() {
                    return None;
                }
                t.waits.questions.push(q.clone());
                Some(vec![EntryKind::Status {
                    status: TaskStatus::Running,
                    detail: format!("asked: {}", q.question),
                }])
            })
            .await?;
            let key = format!("{}:ask:{}", self.task.id, q.call_id);
            self.post_once(key, &q.question, "the question").await?;
        }
        // One question waits at a time; another call of the turn is asked
        // once this one is settled.
        self.commit(|t| {
            if t.cancel_requested {
                return None;
            }
            let open = t
                .waits
                .questions
                .iter()
                .find(|q| q.reply.is_none() && q.expires_at > Instant::now())?
                .clone();
            let waiting_for = WaitingFor::Reply(baton_core::wait::Reply {
                question: open.question.clone(),
                expires_at: open.expires_at,
            });
            let detail = format!("waiting for a reply to: {}", open.question);
            Some(vec![start_waiting(t, waiting_for, detail)])
        })
        .await?;
        let expires_at = question::open(&self.task).map(|q| q.expires_at);
        self.parked(expires_at, progress::WAITING_FOR_REPLY).await
    }
}
