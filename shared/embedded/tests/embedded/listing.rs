//! The sorted listing index on SQLite, the task listing over it, and a
//! database of an earlier release gaining the listing columns.

use std::sync::Arc;

use baton_core::table::{ListingEntry, ListingKey};
use baton_core::{Condition, Item, Key, Table, TaskStore, Write};
use baton_embedded::{EmbeddedBackend, EmbeddedTable, QueueConfig, DB_FILE};

fn listed(pk: &str, partition: &str, sort: &str) -> Item {
    Item {
        key: Key::new(pk, "TASK"),
        version: 1,
        data: "{}".into(),
        index: None,
        expires_at: None,
        listing: Some(ListingKey {
            partition: partition.into(),
            sort: sort.into(),
        }),
    }
}

fn sorts(entries: &[ListingEntry]) -> Vec<&str> {
    entries.iter().map(|e| e.sort.as_str()).collect()
}

#[tokio::test]
async fn a_partition_is_read_newest_first_below_a_position() {
    let dir = tempfile::tempdir().unwrap();
    let t = EmbeddedTable::open(dir.path()).unwrap();
    let mut writes: Vec<Write> = ["3", "1", "5", "2", "4"]
        .iter()
        .map(|s| Write::Put {
            item: listed(&format!("TASK#{s}"), "tasks#00", s),
            condition: Condition::None,
        })
        .collect();
    writes.push(Write::Put {
        item: listed("TASK#9", "tasks#01", "9"),
        condition: Condition::None,
    });
    t.transact(writes).await.unwrap();
    let all = t.query_listing("tasks#00", None, 10).await.unwrap();
    assert_eq!(sorts(&all), ["5", "4", "3", "2", "1"]);
    assert_eq!(all[0].key, Key::new("TASK#5", "TASK"));
    let below = t.query_listing("tasks#00", Some("4"), 2).await.unwrap();
    assert_eq!(sorts(&below), ["3", "2"]);
    assert_eq!(
        sorts(&t.query_listing("tasks#01", None, 10).await.unwrap()),
        ["9"]
    );
    // The key round-trips, and an overwrite without it leaves the index.
    let got = t.get(&Key::new("TASK#3", "TASK")).await.unwrap().unwrap();
    assert_eq!(got, listed("TASK#3", "tasks#00", "3"));
    let mut plain = got.clone();
    plain.listing = None;
    t.transact(vec![Write::Put {
        item: plain,
        condition: Condition::None,
    }])
    .await
    .unwrap();
    assert_eq!(
        sorts(&t.query_listing("tasks#00", None, 10).await.unwrap()),
        ["5", "4", "2", "1"]
    );
}

#[tokio::test]
async fn the_task_listing_contract_holds_on_sqlite() {
    let dir = tempfile::tempdir().unwrap();
    let b = EmbeddedBackend::open(dir.path(), QueueConfig::default()).unwrap();
    let store = TaskStore::new(b.table.clone(), b.blobs.clone());
    baton_core::testing::check_task_listing(&store).await;
}

#[tokio::test]
async fn a_database_of_an_earlier_release_gains_the_listing() {
    let dir = tempfile::tempdir().unwrap();
    {
        let conn = rusqlite::Connection::open(dir.path().join(DB_FILE)).unwrap();
        conn.execute_batch(
            "CREATE TABLE items (pk TEXT NOT NULL, sk TEXT NOT NULL, version INTEGER NOT NULL, \
             data TEXT NOT NULL, idx TEXT, expires_at INTEGER, PRIMARY KEY (pk, sk)) WITHOUT ROWID;
             INSERT INTO items VALUES ('TASK#old', 'TASK', 3, '{}', 'active', NULL);",
        )
        .unwrap();
    }
    let t = Arc::new(EmbeddedTable::open(dir.path()).unwrap());
    let old = t.get(&Key::new("TASK#old", "TASK")).await.unwrap().unwrap();
    assert_eq!(old.listing, None);
    assert_eq!(old.index.as_deref(), Some("active"));
    t.transact(vec![Write::Put {
        item: listed("TASK#new", "tasks#00", "1"),
        condition: Condition::NotExists,
    }])
    .await
    .unwrap();
    assert_eq!(
        sorts(&t.query_listing("tasks#00", None, 10).await.unwrap()),
        ["1"]
    );
    drop(t);
    // Opening again finds the columns there.
    let t = EmbeddedTable::open(dir.path()).unwrap();
    assert_eq!(t.count().await.unwrap(), 2);
}
