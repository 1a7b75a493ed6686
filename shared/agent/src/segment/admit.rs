//! Whether a task may start under `[limits.concurrency]`: checked before
//! its first segment takes the lease, so a task over a cap is never run,
//! only left `queued` (waiting for `capacity`) until a slot frees.

use crate::capacity::Admission;
use crate::deps::Deps;
use crate::error::WorkerError;
use baton_core::{EntryKind, Instant, Task, TaskStatus, WaitingFor};

/// What the gate decided.
pub(super) enum Gate {
    /// No cap applies (none set, a child task, already holding its slots,
    /// or ending anyway): go on.
    Open,
    /// The task took its slots: the lease-taking commit records it.
    Admitted,
    /// Over a cap: the task stays queued and this segment ends.
    Held,
}

/// Takes the task's slots, or leaves it queued waiting for capacity.
pub(super) async fn gate(deps: &Deps, task: &Task) -> Result<Gate, WorkerError> {
    let Some(capacity) = &deps.capacity else {
        return Ok(Gate::Open);
    };
    let now = Instant::now();
    // A cancelled or out-of-time task runs only to end, at once.
    let ending = task.cancel_requested || task.budget.limits.deadline_at.is_some_and(|d| d <= now);
    if task.budget.holds_capacity || task.status() != TaskStatus::Queued || ending {
        return Ok(Gate::Open);
    }
    match capacity
        .admit(&deps.store, deps.queue.as_ref(), task)
        .await?
    {
        Admission::Start => Ok(Gate::Admitted),
        Admission::Wait { scope, limit } => {
            let waiting_for = WaitingFor::Capacity(baton_core::wait::Capacity { scope, limit });
            deps.store
                .update(&task.id, None, |t| {
                    // Only a task nobody runs is held back (a duplicate
                    // wake may race a segment that holds the lease).
                    if t.status() != TaskStatus::Queued || t.lease().is_live(Instant::now()) {
                        return Ok(None);
                    }
                    let first = t.waiting_for() != Some(&waiting_for);
                    t.wait(waiting_for.clone());
                    // The status entry once; later checks only touch the
                    // record (the reaper's sweep sees it is still looked at).
                    Ok(Some(if first {
                        vec![EntryKind::Status {
                            status: TaskStatus::Queued,
                            detail: format!(
                                "waiting for capacity: {} tasks running for this {}",
                                limit,
                                scope.as_str()
                            ),
                        }]
                    } else {
                        Vec::new()
                    }))
                })
                .await?;
            tracing::info!(task_id = %task.id, scope = scope.as_str(), limit, "over a concurrency cap: the task waits for a slot");
            Ok(Gate::Held)
        }
    }
}

/// Gives back the slots of a task that ended, and its places in line,
/// waking the next waiter; logged, never failing the end (a slot of an
/// ended task is free to the next task that looks).
pub(crate) async fn release(deps: &Deps, task: &Task) {
    let Some(capacity) = &deps.capacity else {
        return;
    };
    if !task.status().is_terminal() {
        return;
    }
    if let Err(e) = capacity
        .release(&deps.store, deps.queue.as_ref(), task)
        .await
    {
        tracing::warn!(task_id = %task.id, error = %e, "could not give back the task's concurrency slots; the next task to look takes them over");
    }
}

#[cfg(test)]
mod tests {
    use super::super::harness::{calls, roomy, says, Harness};
    use super::super::{SegmentBudget, SegmentEnd};
    use baton_core::{CapacityScope, TaskStatus, WaitingFor};
    use baton_settings::ConcurrencySettings;
    use std::time::Duration;

    #[tokio::test]
    async fn a_task_over_the_cap_stays_queued_until_the_holder_ends() {
        let mut h = Harness::new(|_| {});
        // HTTP tasks share the `api` scope, capped by `per_team`.
        h.worker = h.worker.with_concurrency(ConcurrencySettings {
            per_team: Some(1),
            ..Default::default()
        });
        h.llm
            .then(calls(&["a"]))
            .then(says("first"))
            .then(says("second"));
        let first = h.task("one").await;
        let second = h.task("two").await;
        // The first hands over between segments, still holding its slot.
        assert_eq!(
            h.run(&first, SegmentBudget::new(Duration::ZERO)).await,
            SegmentEnd::HandedOver
        );
        assert!(h.get(&first).await.budget.holds_capacity);
        assert_eq!(h.run(&second, roomy()).await, SegmentEnd::Waiting);
        let held = h.get(&second).await;
        assert_eq!(held.status(), TaskStatus::Queued);
        assert!(held.lease().is_free());
        assert_eq!(
            held.waiting_for(),
            Some(&WaitingFor::Capacity(baton_core::wait::Capacity {
                scope: CapacityScope::Api,
                limit: 1
            }))
        );
        assert_eq!(h.llm.calls(), 1, "the held task made no call");
        let woken_before = h.queue.sent().len();
        assert_eq!(
            h.run(&first, roomy()).await,
            SegmentEnd::Finished(TaskStatus::Succeeded)
        );
        let sent = h.queue.sent();
        assert!(
            sent[woken_before..]
                .iter()
                .any(|(body, _)| body.contains(second.as_str())),
            "the held task is woken: {sent:?}"
        );
        assert_eq!(
            h.run(&second, roomy()).await,
            SegmentEnd::Finished(TaskStatus::Succeeded)
        );
        let done = h.get(&second).await;
        assert!(done.waiting_for().is_none());
        assert_eq!(h.replies.answers(), ["first", "second"]);
    }
}
