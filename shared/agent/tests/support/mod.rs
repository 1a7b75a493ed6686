//! What the agent crate's scenario tests share: a worker driven over the
//! embedded queue the way the Lambda's event source mapping drives it, and
//! tasks submitted the way ingest submits them.
#![allow(dead_code)]

use baton_agent::{Disposition, SegmentBudget, Worker};
use baton_core::{now_ms, EntryKind, Limits, Origin, Task, TaskId, TaskStore, Wake, WorkQueue};
use std::time::Duration;

/// Runs the worker over the queue until it has been empty for a while. The
/// messages of a batch are handled concurrently, as the worker Lambda does.
/// Any disposition but `Ack` fails the test.
pub(crate) async fn drain(worker: &Worker, queue: &dyn WorkQueue) {
    let mut idle = 0;
    while idle < 3 {
        let got = queue.receive(10, Duration::from_millis(100)).await.unwrap();
        if got.is_empty() {
            idle += 1;
            continue;
        }
        idle = 0;
        let handled = futures::future::join_all(
            got.iter()
                .map(|d| worker.handle(d, SegmentBudget::new(Duration::from_secs(60)))),
        )
        .await;
        for (d, disposition) in got.iter().zip(handled) {
            match disposition {
                Disposition::Ack => queue.delete(&d.receipt).await.unwrap(),
                other => panic!("unexpected disposition {other:?} for {}", d.body),
            }
        }
    }
}

/// A Slack-born task's origin: a thread in channel C1 of workspace T1.
pub(crate) fn slack_origin(user: &str) -> Origin {
    Origin::Slack {
        team_id: "T1".into(),
        channel: "C1".into(),
        thread_ts: "100.1".into(),
        user: user.into(),
    }
}

/// Creates a task of the default agent with `text` as its input and wakes it.
pub(crate) async fn submit(
    store: &TaskStore,
    queue: &dyn WorkQueue,
    origin: Origin,
    text: &str,
) -> TaskId {
    let task = Task::new(
        TaskId::generate(),
        "default",
        origin,
        None,
        Limits::default(),
        now_ms(),
    );
    store
        .create(
            &task,
            vec![EntryKind::UserMessage { text: text.into() }],
            None,
        )
        .await
        .unwrap();
    wake(queue, &task.id).await;
    task.id
}

/// Sends a wake for `id`, as ingest does after a decision or a cancel.
pub(crate) async fn wake(queue: &dyn WorkQueue, id: &TaskId) {
    queue
        .send(&Wake::new(id.clone(), "test").to_body(), Duration::ZERO)
        .await
        .unwrap();
}
