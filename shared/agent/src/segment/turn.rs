//! A task waiting its turn on its conversation (`on_new_message = "queue"`
//! or `"interrupt"`, [`baton_core::turn`]): checked before its first
//! segment takes the lease, so it never runs before the task ahead ended.
//! When its turn comes it starts with the conversation as it is then —
//! the turns of the task ahead included — and its own message, which
//! waited in its inbox.

use crate::deps::Deps;
use crate::error::WorkerError;
use baton_core::store::Thread;
use baton_core::{turn, EntryKind, Instant, Task, TaskId, TaskStatus, WaitingFor};
use std::time::Duration;

/// How long a task whose turn came waits for the task ahead to record its
/// turns on the conversation (it records them just before it wakes this
/// one; the recording is best effort).
const RECORDED_WAIT: Duration = Duration::from_millis(1000);

/// What the turn check decided.
pub(super) enum TurnGate {
    /// Not waiting for a turn (or ending anyway): go on with this task.
    Open,
    /// Its turn came: go on with the task as it is now.
    Taken(Box<Task>),
    /// A task ahead of it runs: it stays queued and this segment ends.
    Held,
}

/// Whether `task` may start now, and if it may, its first entries: the
/// conversation's turns so far.
pub(super) async fn gate(deps: &Deps, task: &Task) -> Result<TurnGate, WorkerError> {
    let Some(WaitingFor::Turn(baton_core::wait::Turn { behind })) = &task.waiting_for() else {
        return Ok(TurnGate::Open);
    };
    let now = Instant::now();
    // A cancelled or out-of-time task runs only to end, at once.
    let ending = task.cancel_requested || task.budget.limits.deadline_at.is_some_and(|d| d <= now);
    let Some(key) = task.conversation.thread.as_deref().filter(|_| !ending) else {
        return Ok(TurnGate::Open);
    };
    if task.status() != TaskStatus::Queued {
        return Ok(TurnGate::Open);
    }
    if !turn::take_turn(&deps.store, key, &task.id).await? {
        tracing::debug!(task_id = %task.id, behind = %behind, "a task ahead runs on the conversation: waiting for its turn");
        return Ok(TurnGate::Held);
    }
    let thread = recorded(deps, key, behind).await;
    let recap = thread.and_then(|t| t.recap.entry());
    let behind = behind.clone();
    let (task, _) = deps
        .store
        .update(&task.id, None, |t| {
            if !matches!(t.waiting_for(), Some(WaitingFor::Turn(_))) {
                // Another wake took the turn first.
                return Ok(None);
            }
            t.admit();
            let mut entries: Vec<EntryKind> = recap.iter().cloned().collect();
            t.conversation.carried = entries.len() as u64;
            entries.push(EntryKind::Status {
                status: TaskStatus::Queued,
                detail: format!("its turn on the conversation came (after task {behind})"),
            });
            Ok(Some(entries))
        })
        .await?;
    tracing::info!(task_id = %task.id, "its turn on the conversation came");
    Ok(TurnGate::Taken(Box::new(task)))
}

/// The conversation once `behind`'s turns are recorded on it, waiting
/// briefly ([`RECORDED_WAIT`]); as it is, after that.
async fn recorded(deps: &Deps, key: &str, behind: &TaskId) -> Option<Thread> {
    let started = std::time::Instant::now();
    loop {
        let thread = match deps.store.thread(key).await {
            Ok(t) => t?,
            Err(e) => {
                tracing::warn!(conversation = key, error = %e, "could not read the conversation: the task starts without its earlier turns");
                return None;
            }
        };
        if thread.recap.recorded.contains(behind) || started.elapsed() >= RECORDED_WAIT {
            return Some(thread);
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// Wakes the task whose turn it is now that `task` ended, if one waits on
/// its conversation. Logged, never failing the end: the reaper re-sends
/// the wake of a task left queued.
pub(crate) async fn pass_on(deps: &Deps, task: &Task) {
    let Some(key) = task.conversation.thread.as_deref() else {
        return;
    };
    if task.source.parent.is_some() || !task.status().is_terminal() {
        return;
    }
    match turn::wake_next(&deps.store, deps.queue.as_ref(), key).await {
        Ok(Some(next)) => {
            tracing::info!(task_id = %task.id, next = %next, "the task ended: the next on its conversation is woken");
        }
        Ok(None) => {}
        Err(e) => {
            tracing::warn!(task_id = %task.id, error = %e, "could not wake the next task on the conversation; the reaper will");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::harness::{calls, roomy, says, Harness};
    use super::super::SegmentEnd;
    use baton_core::store::Thread;
    use baton_core::{turn, EntryKind, Origin, Task, TaskId, TaskStatus, WaitingFor};

    const KEY: &str = "http:chat";

    /// A task on the conversation, with `input` as its first entry.
    async fn running(h: &Harness, input: &str) -> TaskId {
        let task = Task::new(
            TaskId::generate(),
            "default",
            Origin::Http,
            Some(KEY.into()),
            baton_core::Limits::default(),
            baton_core::now_ms(),
        );
        let first = vec![EntryKind::UserMessage {
            text: input.into(),
            from: None,
        }];
        h.store.create(&task, first, None).await.unwrap();
        let thread = Thread {
            key: KEY.into(),
            active_task: Some(task.id.clone()),
            recap: Default::default(),
            seen_ts: None,
            always: Vec::new(),
            waiting: Vec::new(),
            version: 0,
        };
        assert!(h.store.put_thread(&thread).await.unwrap());
        task.id
    }

    /// A message queued behind `behind`, as the ingest writes it.
    async fn queued(h: &Harness, behind: &TaskId, text: &str) -> TaskId {
        let mut task = Task::new(
            TaskId::generate(),
            "default",
            Origin::Http,
            Some(KEY.into()),
            baton_core::Limits::default(),
            baton_core::now_ms(),
        );
        task.wait(WaitingFor::Turn(baton_core::wait::Turn {
            behind: behind.clone(),
        }));
        task.conversation.inbox.push(baton_core::InboxMessage {
            text: text.into(),
            from: None,
        });
        h.store.create(&task, Vec::new(), None).await.unwrap();
        turn::join_line(&h.store, KEY, &task.id).await.unwrap();
        task.id
    }

    #[tokio::test]
    async fn a_queued_message_waits_then_starts_with_the_ended_tasks_exchange() {
        let h = Harness::new(|_| {});
        h.llm
            .then(calls(&["a"]))
            .then(says("first answer"))
            .then(says("second answer"));
        let a = running(&h, "first question").await;
        let b = queued(&h, &a, "second question").await;
        // The first runs: the second is held, without a lease or a call.
        assert_eq!(h.run(&b, roomy()).await, SegmentEnd::Waiting);
        let held = h.get(&b).await;
        assert_eq!(held.status(), TaskStatus::Queued);
        assert!(held.lease().is_free());
        assert_eq!(h.llm.calls(), 0);

        let sent_before = h.queue.sent().len();
        assert_eq!(
            h.run(&a, roomy()).await,
            SegmentEnd::Finished(TaskStatus::Succeeded)
        );
        assert!(
            h.queue.sent()[sent_before..]
                .iter()
                .any(|(body, _)| body.contains(b.as_str())),
            "the ended task wakes the next: {:?}",
            h.queue.sent()
        );
        assert_eq!(
            h.run(&b, roomy()).await,
            SegmentEnd::Finished(TaskStatus::Succeeded)
        );
        let done = h.get(&b).await;
        assert!(done.waiting_for().is_none());
        assert_eq!(done.conversation.carried, 1);
        let entries = h.transcript(&b).await;
        let EntryKind::Recap { turns, .. } = &entries[0].kind else {
            panic!("{entries:?}");
        };
        let said: Vec<&str> = turns.iter().map(|t| t.text.as_str()).collect();
        assert_eq!(said.len(), 2, "{said:?}");
        assert_eq!(said[0], "first question");
        assert!(said[1].ends_with("first answer"), "{said:?}");
        assert!(entries.iter().any(|e| e.kind
            == EntryKind::UserMessage {
                text: "second question".into(),
                from: None,
            }));
        let thread = h.store.thread(KEY).await.unwrap().unwrap();
        assert_eq!(thread.active_task.as_ref(), Some(&b));
        assert!(thread.waiting.is_empty());
        assert_eq!(h.replies.answers(), ["first answer", "second answer"]);
    }

    #[tokio::test]
    async fn an_interrupted_task_leaves_how_far_it_got_to_the_next() {
        let h = Harness::new(|_| {});
        h.llm
            .then(baton_core::Completion {
                content: "Looking into it".into(),
                ..calls(&["a"])
            })
            .then(says("second answer"));
        let a = running(&h, "a long job").await;
        let b = queued(&h, &a, "do this instead").await;
        // One step (a tool call), then the interruption.
        assert_eq!(
            h.run(
                &a,
                super::super::SegmentBudget::new(std::time::Duration::ZERO)
            )
            .await,
            SegmentEnd::HandedOver
        );
        h.store
            .update(&a, None, |t| {
                t.cancel_requested = true;
                t.conversation.interrupted_by = Some(b.clone());
                Ok(Some(Vec::new()))
            })
            .await
            .unwrap();
        assert_eq!(
            h.run(&a, roomy()).await,
            SegmentEnd::Finished(TaskStatus::Cancelled)
        );
        let ended = h.get(&a).await;
        assert!(
            ended
                .answer
                .error
                .as_deref()
                .unwrap_or_default()
                .contains("interrupted by a new message"),
            "{ended:?}"
        );
        assert_eq!(
            h.run(&b, roomy()).await,
            SegmentEnd::Finished(TaskStatus::Succeeded)
        );
        let entries = h.transcript(&b).await;
        let EntryKind::Recap { turns, .. } = &entries[0].kind else {
            panic!("{entries:?}");
        };
        assert_eq!(turns[0].text, "a long job");
        assert!(
            turns[1].text.starts_with(crate::recap::INTERRUPTED)
                && turns[1].text.ends_with("So far: Looking into it"),
            "{turns:?}"
        );
        assert_eq!(h.replies.answers(), ["second answer"]);
    }
}
