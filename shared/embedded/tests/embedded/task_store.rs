//! `baton_core::TaskStore` on the embedded table and blob store.

use std::time::Duration;

use baton_core::store::DEFAULT_OFFLOAD_THRESHOLD;
use baton_core::{
    BlobStore, Created, EntryKind, Limits, Origin, StoreError, Table, Task, TaskId, TaskStatus,
    TaskStore,
};
use baton_embedded::{EmbeddedBackend, QueueConfig};

fn open(dir: &std::path::Path) -> (EmbeddedBackend, TaskStore) {
    let backend = EmbeddedBackend::open(dir, QueueConfig::default()).unwrap();
    let store = TaskStore::new(backend.table.clone(), backend.blobs.clone());
    (backend, store)
}

fn new_task() -> Task {
    Task::new(
        TaskId::generate(),
        "default",
        Origin::Http,
        None,
        Limits::default(),
        baton_core::now_ms(),
    )
}

fn user(text: &str) -> EntryKind {
    EntryKind::UserMessage {
        text: text.to_owned(),
        from: None,
    }
}

#[tokio::test]
async fn create_with_a_dedupe_key_twice_is_a_duplicate() {
    let dir = tempfile::tempdir().unwrap();
    let (_b, store) = open(dir.path());
    let first = new_task();
    let created = store
        .create(&first, vec![user("hi")], Some("slack:Ev1".into()))
        .await
        .unwrap();
    assert_eq!(created, Created::New(first.id.clone()));
    let second = new_task();
    let again = store
        .create(&second, vec![user("hi")], Some("slack:Ev1".into()))
        .await
        .unwrap();
    assert_eq!(again, Created::Duplicate(first.id.clone()));
    assert!(store.get(&second.id).await.unwrap().is_none());
    assert!(store.transcript(&second.id).await.unwrap().is_empty());
    let stored = store.get(&first.id).await.unwrap().unwrap();
    assert_eq!(stored.version, 1);
    assert_eq!(store.transcript(&first.id).await.unwrap().len(), 1);
    assert_eq!(store.active_tasks(10).await.unwrap().len(), 1);
}

#[tokio::test]
async fn commit_with_a_stale_version_conflicts() {
    let dir = tempfile::tempdir().unwrap();
    let (_b, store) = open(dir.path());
    let task = new_task();
    store.create(&task, vec![user("go")], None).await.unwrap();
    let mut a = store.get(&task.id).await.unwrap().unwrap();
    let mut stale = a.clone();
    assert!(a.start(
        "worker-a",
        baton_core::Instant::now(),
        std::time::Duration::from_secs(30)
    ));
    store.commit(&mut a, vec![user("a")]).await.unwrap();
    assert_eq!(a.version, 2);
    stale.finish(TaskStatus::Cancelled);
    let err = store.commit(&mut stale, vec![user("b")]).await.unwrap_err();
    assert_eq!(err, StoreError::Conflict(task.id.clone()));
    // Neither the task nor the transcript took the stale write.
    let now = store.get(&task.id).await.unwrap().unwrap();
    assert_eq!((now.version, now.status()), (2, TaskStatus::Running));
    let texts: Vec<_> = store
        .transcript(&task.id)
        .await
        .unwrap()
        .into_iter()
        .map(|e| e.kind)
        .collect();
    assert_eq!(texts, [user("go"), user("a")]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn concurrent_updates_lose_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let (_b, store) = open(dir.path());
    let task = new_task();
    store.create(&task, Vec::new(), None).await.unwrap();
    const WRITERS: u32 = 8;
    const EACH: u32 = 5;
    let mut handles = Vec::new();
    for w in 0..WRITERS {
        let store = store.clone();
        let id = task.id.clone();
        handles.push(tokio::spawn(async move {
            let mut gave_up = 0;
            for i in 0..EACH {
                // `update` retries conflicts itself; under heavy contention
                // it may still give up, and then the caller tries again.
                loop {
                    match store
                        .update(&id, None, |t| {
                            t.budget.steps += 1;
                            Ok(Some(vec![EntryKind::Status {
                                status: TaskStatus::Running,
                                detail: format!("{w}:{i}"),
                            }]))
                        })
                        .await
                    {
                        Ok(_) => break,
                        Err(StoreError::Conflict(_)) => gave_up += 1,
                        Err(e) => panic!("{e}"),
                    }
                }
            }
            gave_up
        }));
    }
    for h in handles {
        h.await.unwrap();
    }
    let t = store.get(&task.id).await.unwrap().unwrap();
    assert_eq!(t.budget.steps, WRITERS * EACH);
    assert_eq!(t.version, 1 + u64::from(WRITERS * EACH));
    let entries = store.transcript(&task.id).await.unwrap();
    assert_eq!(entries.len() as u32, WRITERS * EACH);
    // Sequence numbers are dense: no entry was overwritten or skipped.
    for (i, e) in entries.iter().enumerate() {
        assert_eq!(e.seq, i as u64);
    }
}

#[tokio::test]
async fn large_entries_round_trip_through_the_blob_store() {
    let dir = tempfile::tempdir().unwrap();
    let big = "x".repeat(DEFAULT_OFFLOAD_THRESHOLD + 10);
    let id;
    {
        let (backend, store) = open(dir.path());
        let task = new_task();
        id = task.id.clone();
        store
            .create(&task, vec![user("small"), user(&big)], None)
            .await
            .unwrap();
        let keys = backend.blobs.list(&format!("tasks/{id}/")).await.unwrap();
        assert_eq!(keys, [format!("tasks/{id}/entries/0000000001.json")]);
        // The table holds only a pointer.
        let row = backend
            .table
            .query(&format!("TASK#{id}"), "E#0000000001", None, 1)
            .await
            .unwrap();
        assert!(row[0].data.len() < 1024, "{} bytes", row[0].data.len());
    }
    // And it all comes back after a restart.
    let (_b, store) = open(dir.path());
    let entries = store.transcript(&id).await.unwrap();
    assert_eq!(entries.len(), 2);
    assert_eq!(entries[0].kind, user("small"));
    assert_eq!(entries[1].kind, user(&big));
    assert_eq!(entries[1].seq, 1);
}

#[tokio::test]
async fn queue_and_table_share_the_database() {
    let dir = tempfile::tempdir().unwrap();
    let (backend, store) = open(dir.path());
    let task = new_task();
    store.create(&task, Vec::new(), None).await.unwrap();
    use baton_core::WorkQueue;
    backend
        .queue
        .send(&format!("{{\"task_id\":\"{}\"}}", task.id), Duration::ZERO)
        .await
        .unwrap();
    drop((backend, store));
    let files: Vec<_> = std::fs::read_dir(dir.path())
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .filter(|n| n.ends_with(".sqlite3"))
        .collect();
    assert_eq!(files, [baton_embedded::DB_FILE]);
    let (backend, store) = open(dir.path());
    let d = backend.queue.receive(1, Duration::ZERO).await.unwrap();
    assert!(d[0].body.contains(task.id.as_str()));
    assert!(store.get(&task.id).await.unwrap().is_some());
}
