//! `cancel`: stops this thread's task, with the stop permissions in force
//! ([`Ingest::may_stop`]): its requester, an approver of its agent, or an
//! admin. Anyone else is told so and nothing changes.

use super::{Context, NOTHING_RUNS, NO_THREAD};
use crate::response::ApiError;
use crate::submission::Submission;
use crate::threads::Submitted;
use crate::Ingest;

pub(super) async fn answer(ingest: &Ingest, ctx: &Context) -> Result<String, ApiError> {
    if ctx.conversation.is_none() {
        return Ok(NO_THREAD.to_owned());
    }
    let Some((thread, task)) = ingest.thread_task(ctx).await? else {
        return Ok(NOTHING_RUNS.to_owned());
    };
    // Refused here, before anything is written, so the answer is the one
    // note the sender gets (`steer` checks again inside the update).
    let roles = ingest.roles_of(&ctx.team_id, &ctx.user).await;
    if !ingest.may_stop(Some(&ctx.user), &roles, &task) {
        tracing::info!(task_id = %task.id, user = %ctx.user, "cancel by someone who may not stop the task; refused");
        return Ok(crate::stopping::refusal(&task));
    }
    let stop = Submission {
        text: "cancel".to_owned(),
        agent: task.agent.clone(),
        origin: ctx.origin(),
        thread: ctx.conversation.clone(),
        dedupe_key: Some(ctx.dedupe_key.clone()),
        fingerprint: None,
        attachments: Vec::new(),
        files: Vec::new(),
        message_ts: None,
        model: None,
        user: None,
    };
    Ok(
        match ingest.steer(&thread, &stop).await?.map(|a| a.outcome) {
            None => NOTHING_RUNS.to_owned(),
            Some(Submitted::StopRefused(_)) => crate::stopping::refusal(&task),
            Some(Submitted::Duplicate(id)) => format!("Task `{id}` was already asked to stop."),
            Some(done) => {
                tracing::info!(task_id = %done.task_id(), user = %ctx.user, "cancelled by command");
                format!("Stopping task `{}`.", done.task_id())
            }
        },
    )
}
