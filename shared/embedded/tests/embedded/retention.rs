//! Retention on the embedded backend: expired items and old task blobs
//! are pruned; everything else stays.

use std::time::{Duration, SystemTime};

use baton_core::retention::Retention;
use baton_core::{BlobStore, Condition, Item, Key, Table, Write};
use baton_embedded::{EmbeddedBackend, Pruned, QueueConfig, BLOB_DIR};

fn item(pk: &str, expires_at: Option<i64>) -> Item {
    Item {
        key: Key::new(pk, "X"),
        version: 1,
        data: "{}".into(),
        index: None,
        expires_at,
        listing: None,
    }
}

fn age(dir: &std::path::Path, key: &str, days: u64) {
    let file = std::fs::File::options()
        .write(true)
        .open(dir.join(BLOB_DIR).join(key))
        .unwrap();
    file.set_modified(SystemTime::now() - Duration::from_secs(days * 24 * 3600))
        .unwrap();
}

#[tokio::test]
async fn prune_deletes_expired_items_and_old_task_blobs_and_keeps_the_rest() {
    let dir = tempfile::tempdir().unwrap();
    let b = EmbeddedBackend::open(dir.path(), QueueConfig::default()).unwrap();
    let now = baton_core::now_ms() / 1000;
    b.table
        .transact(vec![
            Write::Put {
                item: item("TASK#gone", Some(now - 10)),
                condition: Condition::None,
            },
            Write::Put {
                item: item("TASK#later", Some(now + 3600)),
                condition: Condition::None,
            },
            Write::Put {
                item: item("THREAD#kept", None),
                condition: Condition::None,
            },
        ])
        .await
        .unwrap();
    for key in [
        "tasks/a/entries/0000000001.json",
        "tasks/b/entries/0000000001.json",
        "traces/a/task.json",
        "traces/b/task.json",
        "other/keep.json",
    ] {
        b.blobs.put(key, b"x".to_vec()).await.unwrap();
    }
    // 7 days' retention: blobs go after 7 + 30 days.
    age(dir.path(), "tasks/a/entries/0000000001.json", 40);
    age(dir.path(), "traces/a/task.json", 40);
    age(dir.path(), "traces/b/task.json", 30);
    age(dir.path(), "other/keep.json", 400);

    let pruned = b.prune(Retention::days(7)).await.unwrap();
    assert_eq!(pruned, Pruned { items: 1, blobs: 2 });
    assert!(b
        .table
        .get(&Key::new("TASK#gone", "X"))
        .await
        .unwrap()
        .is_none());
    assert!(b
        .table
        .get(&Key::new("TASK#later", "X"))
        .await
        .unwrap()
        .is_some());
    assert!(b
        .table
        .get(&Key::new("THREAD#kept", "X"))
        .await
        .unwrap()
        .is_some());
    let mut left = b.blobs.list("").await.unwrap();
    left.sort();
    assert_eq!(
        left,
        [
            "other/keep.json",
            "tasks/b/entries/0000000001.json",
            "traces/b/task.json"
        ]
    );
    assert!(
        !dir.path().join(BLOB_DIR).join("tasks/a").exists(),
        "emptied directories go too"
    );

    // Forever: old blobs stay.
    age(dir.path(), "tasks/b/entries/0000000001.json", 4000);
    assert_eq!(
        b.prune(Retention::forever()).await.unwrap(),
        Pruned::default()
    );
    assert_eq!(b.blobs.list("tasks/").await.unwrap().len(), 1);
}
