//! The reaper: a task whose wake was lost is re-driven; a task that a live
//! segment holds, or that just made progress, is left alone.

use baton_agent::Reaper;
use baton_core::{
    now_ms, EntryKind, Lease, Limits, Origin, Task, TaskId, TaskStatus, TaskStore, Wake,
    WorkMessage, WorkQueue,
};
use baton_embedded::{EmbeddedBackend, QueueConfig};
use std::time::Duration;

async fn task(store: &TaskStore, status: TaskStatus, lease: Option<Lease>) -> TaskId {
    let mut t = Task::new(
        TaskId::generate(),
        "default",
        Origin::Http,
        None,
        Limits::default(),
        now_ms(),
    );
    t.status = status;
    t.lease = lease;
    store
        .create(&t, vec![EntryKind::UserMessage { text: "hi".into() }], None)
        .await
        .unwrap();
    t.id
}

#[tokio::test]
async fn lost_wakes_are_resent_and_nothing_else() {
    let dir = tempfile::tempdir().unwrap();
    let b = EmbeddedBackend::open(dir.path(), QueueConfig::default()).unwrap();
    let store = TaskStore::new(b.table.clone(), b.blobs.clone());
    // Created, but its wake never reached the queue (the ingest died).
    let lost = task(&store, TaskStatus::Queued, None).await;
    // Running, but its segment crashed: the lease expired.
    let crashed = task(
        &store,
        TaskStatus::Running,
        Some(Lease {
            owner: "gone".into(),
            expires_at: now_ms() - 1,
        }),
    )
    .await;
    // Held by a live segment.
    let live = task(
        &store,
        TaskStatus::Running,
        Some(Lease {
            owner: "alive".into(),
            expires_at: now_ms() + 60_000,
        }),
    )
    .await;
    let reaper = Reaper::new(store.clone(), b.queue.clone(), Duration::from_millis(200));

    // Nothing is stale yet: progress was just made.
    assert_eq!(reaper.sweep().await.unwrap(), 0);
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(reaper.sweep().await.unwrap(), 2);

    let mut woken = Vec::new();
    for d in b
        .queue
        .receive(10, Duration::from_millis(100))
        .await
        .unwrap()
    {
        match WorkMessage::parse(&d.body).unwrap() {
            WorkMessage::Wake(Wake { task_id, .. }) => woken.push(task_id),
            other => panic!("unexpected message {other:?}"),
        }
    }
    woken.sort();
    let mut expected = vec![lost, crashed];
    expected.sort();
    assert_eq!(
        woken, expected,
        "the live task ({live}) is left to its segment"
    );
}
