//! The reaper: a task whose wake was lost is re-driven; a task that a live
//! segment holds, or that just made progress, is left alone.

use baton_agent::Reaper;
use baton_core::wait;
use baton_core::{
    EntryKind, Instant, Lease, Limits, Origin, Task, TaskId, TaskStatus, TaskStore, Wake,
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
        Instant::now(),
    );
    if let Some(l) = lease {
        // Planted as a segment would have taken it: held until `expires_at`.
        let ms = Duration::from_millis(1);
        assert!(t.start(&l.owner, l.expires_at - ms, ms));
    }
    baton_core::testing::set_status(&mut t, status);
    store
        .create(
            &t,
            vec![EntryKind::UserMessage {
                text: "hi".into(),
                from: None,
            }],
            None,
        )
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
            expires_at: Instant::now() - Duration::from_millis(1),
        }),
    )
    .await;
    // Held by a live segment.
    let live = task(
        &store,
        TaskStatus::Running,
        Some(Lease {
            owner: "alive".into(),
            expires_at: Instant::now() + Duration::from_secs(60),
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

#[tokio::test]
async fn a_parent_whose_child_report_was_lost_is_settled_and_woken() {
    let dir = tempfile::tempdir().unwrap();
    let b = EmbeddedBackend::open(dir.path(), QueueConfig::default()).unwrap();
    let store = TaskStore::new(b.table.clone(), b.blobs.clone());
    // A child that ended (say, dead-lettered while the store was down) ...
    let mut child = Task::new(
        TaskId::generate(),
        "default",
        Origin::Http,
        None,
        Limits::default(),
        Instant::now(),
    );
    let parent_id = TaskId::generate();
    child.finish(TaskStatus::Failed);
    child.answer.error = Some("gave up".into());
    child.source.parent = Some(baton_core::ParentLink {
        task_id: parent_id.clone(),
        call_id: "call_1".into(),
        root_task_id: None,
        actor: None,
    });
    store.create(&child, Vec::new(), None).await.unwrap();
    // ... and its parent, still waiting for its report.
    let mut parent = Task::new(
        parent_id.clone(),
        "default",
        Origin::Http,
        None,
        Limits::default(),
        Instant::now(),
    );
    parent.wait(baton_core::WaitingFor::Children(wait::Children {
        pending: 1,
    }));
    parent.waits.children.push(baton_core::Child {
        task_id: child.id.clone(),
        agent: "default".into(),
        call_id: "call_1".into(),
        outcome: None,
    });
    store.create(&parent, Vec::new(), None).await.unwrap();

    let reaper = Reaper::new(store.clone(), b.queue.clone(), Duration::from_millis(100));
    tokio::time::sleep(Duration::from_millis(200)).await;
    reaper.sweep().await.unwrap();

    let parent = store.get(&parent_id).await.unwrap().unwrap();
    assert_eq!(parent.status(), TaskStatus::Queued, "runnable again");
    let outcome = parent.waits.children[0].outcome.clone().unwrap();
    assert_eq!(outcome.status, TaskStatus::Failed);
    assert_eq!(outcome.text, "gave up");
    let woken: Vec<_> = b
        .queue
        .receive(10, Duration::from_millis(100))
        .await
        .unwrap()
        .into_iter()
        .filter_map(|d| match WorkMessage::parse(&d.body).unwrap() {
            WorkMessage::Wake(w) => Some(w.task_id),
            _ => None,
        })
        .collect();
    assert!(woken.contains(&parent_id), "{woken:?}");
}

/// The wakes the queue holds, by task.
async fn woken(queue: &dyn WorkQueue) -> Vec<TaskId> {
    let mut ids = Vec::new();
    loop {
        let got = queue.receive(10, Duration::from_millis(50)).await.unwrap();
        if got.is_empty() {
            return ids;
        }
        for d in got {
            if let WorkMessage::Wake(w) = WorkMessage::parse(&d.body).unwrap() {
                ids.push(w.task_id);
            }
        }
    }
}

/// Every kind of wait: a task whose wake was lost (its expiry passed long
/// ago, or what it waited for is on its record) is woken, and the worker
/// then takes it; one still rightly waiting is left alone.
#[tokio::test]
async fn every_kind_of_wait_whose_wake_was_lost_is_woken_and_no_other() {
    use baton_core::wait::testing::{cases, KINDS};
    let dir = tempfile::tempdir().unwrap();
    let b = EmbeddedBackend::open(dir.path(), QueueConfig::default()).unwrap();
    let store = TaskStore::new(b.table.clone(), b.blobs.clone());
    let now = Instant::now();
    let cases = cases(now);
    assert_eq!(cases.len(), KINDS, "a case of every kind");
    let (mut lost, mut waiting) = (Vec::new(), Vec::new());
    for c in &cases {
        store.create(&c.lost, Vec::new(), None).await.unwrap();
        lost.push((c.lost.id.clone(), c.kind));
        if let Some(t) = &c.waiting {
            store.create(t, Vec::new(), None).await.unwrap();
            waiting.push((t.id.clone(), c.kind));
        }
    }
    let reaper = Reaper::new(store.clone(), b.queue.clone(), Duration::from_secs(60));
    assert_eq!(reaper.sweep().await.unwrap(), KINDS);
    let woken = woken(b.queue.as_ref()).await;
    for (id, kind) in &lost {
        assert!(woken.contains(id), "the lost {kind} wait was not woken");
        let t = store.get(id).await.unwrap().unwrap();
        if t.status() == TaskStatus::Waiting {
            // What the wake does: the wait is over for the worker too.
            assert!(baton_core::wait::is_over(&t, Instant::now()), "{kind}");
        }
    }
    for (id, kind) in &waiting {
        assert!(!woken.contains(id), "the {kind} wait was woken early");
    }
}

/// A person connected (their tokens stored) but the task's wait was never
/// lifted: the reaper lifts it and wakes the task, before the link expires.
/// A connection made before the task asked does not count.
#[tokio::test]
async fn a_task_whose_person_connected_but_whose_wake_was_lost_is_lifted_and_woken() {
    use baton_core::connection::Tokens;
    use baton_core::store::connections::{ConnectionStore, PutCondition};
    use baton_core::wait::testing::{cases, person, PROVIDER};
    let dir = tempfile::tempdir().unwrap();
    let b = EmbeddedBackend::open(dir.path(), QueueConfig::default()).unwrap();
    let store = TaskStore::new(b.table.clone(), b.blobs.clone());
    let connections = ConnectionStore::new(
        b.table.clone(),
        std::sync::Arc::new(baton_core::testing::TestSealer),
    );
    let now = Instant::now();
    let case = |i: usize| cases(now).swap_remove(i);
    let connection = 6;
    assert_eq!(case(connection).kind, "connection");
    let tokens = Tokens {
        access_token: "at".to_owned().into(),
        refresh_token: None,
        expires_at: None,
        scopes: Vec::new(),
    };
    // Connected an hour and a half ago: before the task asked.
    connections
        .put(
            &person(),
            PROVIDER,
            &tokens,
            PutCondition::Replace,
            now - Duration::from_secs(5400),
        )
        .await
        .unwrap();
    let task = case(connection).waiting.unwrap();
    store.create(&task, Vec::new(), None).await.unwrap();
    let reaper = Reaper::new(store.clone(), b.queue.clone(), Duration::from_secs(60))
        .with_connections(Some(connections.clone()));
    assert_eq!(reaper.sweep().await.unwrap(), 0, "an old connection");

    // Connected since it asked.
    connections
        .put(&person(), PROVIDER, &tokens, PutCondition::Replace, now)
        .await
        .unwrap();
    assert_eq!(reaper.sweep().await.unwrap(), 1);
    let t = store.get(&task.id).await.unwrap().unwrap();
    assert_eq!(t.status(), TaskStatus::Queued, "runnable again");
    assert_eq!(t.waiting_for(), None);
    assert_eq!(woken(b.queue.as_ref()).await, vec![task.id.clone()]);
}
