//! A wake message that landed in the dead-letter queue: its task can no
//! longer make progress. The task is marked failed with the reason and the
//! user (or the parent task) is told.

use super::Deps;
use crate::delegation;
use baton_core::metric::{self, Measurement};
use baton_core::{EntryKind, PostKey, StoreError, Task, TaskStatus, Wake};

#[tracing::instrument(skip_all)]
pub(super) async fn handle(
    deps: &Deps,
    body: &str,
    receive_count: u32,
) -> Result<Option<Task>, StoreError> {
    let Ok(wake) = Wake::parse(body) else {
        tracing::error!(
            body_len = body.len(),
            "dead letter that is not a wake message; dropped after logging"
        );
        // Counted (overall: it names no agent) so the alarm on dead letters
        // sees it; once per delivery of the letter.
        deps.measure(Measurement::overall().count(metric::DEAD_LETTERS));
        return Ok(None);
    };
    let (task, written) = deps
        .store
        .update(&wake.task_id, None, |t| {
            if t.status().is_terminal() {
                return Ok(None);
            }
            let last = t
                .answer
                .error
                .clone()
                .unwrap_or_else(|| "no error was recorded".to_owned());
            let msg = format!("gave up after {receive_count} delivery attempts: {last}");
            t.finish(TaskStatus::Failed);
            t.answer.error = Some(msg.clone());
            // Whatever post was under way, the failure notice below looks
            // for its own message first.
            t.answer.posting = None;
            Ok(Some(vec![EntryKind::Status {
                status: TaskStatus::Failed,
                detail: msg,
            }]))
        })
        .await?;
    if !written.is_empty() {
        // Marked failed now, not by an earlier delivery of this letter.
        deps.measure(
            Measurement::for_agent(&task.agent)
                .count(metric::DEAD_LETTERS)
                .count(metric::TASKS_FAILED)
                .property("task_id", task.id.to_string()),
        );
    }
    if task.status() == TaskStatus::Failed {
        crate::segment::release_capacity(deps, &task).await;
        crate::segment::pass_turn(deps, &task).await;
        let reason = task.answer.error.clone().unwrap_or_default();
        if task.source.parent.is_some() {
            // The parent waits for this child: it hears of the failure.
            delegation::report_ended(&deps.store, deps.queue.as_ref(), &task).await;
        } else {
            let message = format!("Sorry, this task failed: {reason}");
            // No record says whether an earlier delivery of this message
            // posted it: look first.
            let post = PostKey {
                key: format!("{}:ended", task.id),
                maybe_posted: true,
            };
            if let Err(e) = deps.replies.ended(&task, &message, &post).await {
                tracing::warn!(task_id = %task.id, error = %e, "could not tell the user about the failed task");
            }
            deps.replies
                .phase(&task, baton_core::TaskPhase::Closed)
                .await;
        }
        delegation::cancel_children(&deps.store, deps.queue.as_ref(), &task).await;
    }
    Ok(Some(task))
}
