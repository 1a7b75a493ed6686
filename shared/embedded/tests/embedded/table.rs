use std::sync::Arc;

use baton_core::{Condition, Item, Key, Table, TableError, Write};
use baton_embedded::{EmbeddedTable, MAX_TRANSACTION_WRITES};

fn item(pk: &str, sk: &str, version: u64, data: &str) -> Item {
    Item {
        key: Key::new(pk, sk),
        version,
        data: data.to_owned(),
        index: None,
        expires_at: None,
        listing: None,
    }
}

fn put(item: Item, condition: Condition) -> Write {
    Write::Put { item, condition }
}

fn open() -> (tempfile::TempDir, EmbeddedTable) {
    let dir = tempfile::tempdir().unwrap();
    let table = EmbeddedTable::open(dir.path()).unwrap();
    (dir, table)
}

#[tokio::test]
async fn get_missing_is_none_and_put_round_trips() {
    let (_dir, t) = open();
    let key = Key::new("p", "s");
    assert_eq!(t.get(&key).await.unwrap(), None);
    let mut it = item("p", "s", 7, r#"{"x":1}"#);
    it.index = Some("active".into());
    it.expires_at = Some(i64::MAX);
    t.transact(vec![put(it.clone(), Condition::None)])
        .await
        .unwrap();
    assert_eq!(t.get(&key).await.unwrap(), Some(it));
}

#[tokio::test]
async fn not_exists_condition() {
    let (_dir, t) = open();
    t.transact(vec![put(item("p", "s", 1, "a"), Condition::NotExists)])
        .await
        .unwrap();
    let err = t
        .transact(vec![put(item("p", "s", 1, "b"), Condition::NotExists)])
        .await
        .unwrap_err();
    assert_eq!(err, TableError::ConditionFailed { index: 0 });
    assert_eq!(t.get(&Key::new("p", "s")).await.unwrap().unwrap().data, "a");
}

#[tokio::test]
async fn version_is_condition() {
    let (_dir, t) = open();
    // VersionIs on a missing item fails.
    let err = t
        .transact(vec![put(item("p", "s", 2, "x"), Condition::VersionIs(1))])
        .await
        .unwrap_err();
    assert_eq!(err, TableError::ConditionFailed { index: 0 });
    t.transact(vec![put(item("p", "s", 1, "a"), Condition::NotExists)])
        .await
        .unwrap();
    // Wrong version fails, right version applies, and the stored version is
    // the one the caller set.
    let err = t
        .transact(vec![put(item("p", "s", 3, "b"), Condition::VersionIs(2))])
        .await
        .unwrap_err();
    assert_eq!(err, TableError::ConditionFailed { index: 0 });
    t.transact(vec![put(item("p", "s", 2, "b"), Condition::VersionIs(1))])
        .await
        .unwrap();
    let got = t.get(&Key::new("p", "s")).await.unwrap().unwrap();
    assert_eq!((got.version, got.data.as_str()), (2, "b"));
    // Versions beyond i64::MAX round-trip too.
    t.transact(vec![put(
        item("p", "s", u64::MAX, "c"),
        Condition::VersionIs(2),
    )])
    .await
    .unwrap();
    t.transact(vec![put(
        item("p", "s", 5, "d"),
        Condition::VersionIs(u64::MAX),
    )])
    .await
    .unwrap();
}

#[tokio::test]
async fn none_condition_overwrites() {
    let (_dir, t) = open();
    t.transact(vec![put(item("p", "s", 9, "a"), Condition::None)])
        .await
        .unwrap();
    t.transact(vec![put(item("p", "s", 1, "b"), Condition::None)])
        .await
        .unwrap();
    let got = t.get(&Key::new("p", "s")).await.unwrap().unwrap();
    assert_eq!((got.version, got.data.as_str()), (1, "b"));
}

#[tokio::test]
async fn deletes_with_conditions() {
    let (_dir, t) = open();
    t.transact(vec![put(item("p", "s", 4, "a"), Condition::None)])
        .await
        .unwrap();
    let key = Key::new("p", "s");
    let err = t
        .transact(vec![Write::Delete {
            key: key.clone(),
            condition: Condition::VersionIs(3),
        }])
        .await
        .unwrap_err();
    assert_eq!(err, TableError::ConditionFailed { index: 0 });
    let err = t
        .transact(vec![Write::Delete {
            key: key.clone(),
            condition: Condition::NotExists,
        }])
        .await
        .unwrap_err();
    assert_eq!(err, TableError::ConditionFailed { index: 0 });
    assert!(t.get(&key).await.unwrap().is_some());
    t.transact(vec![Write::Delete {
        key: key.clone(),
        condition: Condition::VersionIs(4),
    }])
    .await
    .unwrap();
    assert_eq!(t.get(&key).await.unwrap(), None);
    // Unconditional delete of a missing item is fine.
    t.transact(vec![Write::Delete {
        key: key.clone(),
        condition: Condition::None,
    }])
    .await
    .unwrap();
}

#[tokio::test]
async fn a_failing_third_write_leaves_nothing_written() {
    let (_dir, t) = open();
    t.transact(vec![
        put(item("p", "existing", 1, "old"), Condition::None),
        put(item("p", "gone", 1, "x"), Condition::None),
    ])
    .await
    .unwrap();
    let err = t
        .transact(vec![
            put(item("p", "a", 1, "new"), Condition::NotExists),
            Write::Delete {
                key: Key::new("p", "gone"),
                condition: Condition::None,
            },
            put(item("p", "existing", 2, "new"), Condition::VersionIs(5)),
            put(item("p", "b", 1, "new"), Condition::None),
        ])
        .await
        .unwrap_err();
    assert_eq!(err, TableError::ConditionFailed { index: 2 });
    assert_eq!(t.get(&Key::new("p", "a")).await.unwrap(), None);
    assert!(t.get(&Key::new("p", "gone")).await.unwrap().is_some());
    assert_eq!(
        t.get(&Key::new("p", "existing"))
            .await
            .unwrap()
            .unwrap()
            .data,
        "old"
    );
    assert_eq!(t.get(&Key::new("p", "b")).await.unwrap(), None);
    assert_eq!(t.count().await.unwrap(), 2);
}

#[tokio::test]
async fn the_first_failing_write_is_reported() {
    let (_dir, t) = open();
    t.transact(vec![put(item("p", "x", 1, ""), Condition::None)])
        .await
        .unwrap();
    let err = t
        .transact(vec![
            put(item("p", "a", 1, ""), Condition::None),
            put(item("p", "x", 1, ""), Condition::NotExists),
            put(item("p", "y", 1, ""), Condition::VersionIs(1)),
        ])
        .await
        .unwrap_err();
    assert_eq!(err, TableError::ConditionFailed { index: 1 });
}

#[tokio::test]
async fn invalid_transactions_are_refused() {
    let (_dir, t) = open();
    let dup = t
        .transact(vec![
            put(item("p", "a", 1, ""), Condition::None),
            put(item("p", "a", 2, ""), Condition::None),
        ])
        .await;
    assert!(matches!(dup, Err(TableError::Unavailable(_))), "{dup:?}");
    let many = (0..=MAX_TRANSACTION_WRITES)
        .map(|i| put(item("p", &i.to_string(), 1, ""), Condition::None))
        .collect();
    assert!(matches!(
        t.transact(many).await,
        Err(TableError::Unavailable(_))
    ));
    assert_eq!(t.count().await.unwrap(), 0);
    t.transact(Vec::new()).await.unwrap();
}

async fn seed(t: &EmbeddedTable, pk: &str, sks: &[&str]) {
    let writes = sks
        .iter()
        .map(|sk| put(item(pk, sk, 1, sk), Condition::None))
        .collect();
    t.transact(writes).await.unwrap();
}

fn sks(items: &[Item]) -> Vec<&str> {
    items.iter().map(|i| i.key.sk.as_str()).collect()
}

#[tokio::test]
async fn query_prefix_after_limit_and_order() {
    let (_dir, t) = open();
    seed(
        &t,
        "TASK#1",
        &[
            "E#0000000002",
            "E#0000000000",
            "E#0000000001",
            "TASK",
            "E$",
            "E",
            "F#0",
        ],
    )
    .await;
    seed(&t, "TASK#2", &["E#0000000000"]).await;

    let all = t.query("TASK#1", "E#", None, usize::MAX).await.unwrap();
    assert_eq!(sks(&all), ["E#0000000000", "E#0000000001", "E#0000000002"]);
    let after = t
        .query("TASK#1", "E#", Some("E#0000000000"), 10)
        .await
        .unwrap();
    assert_eq!(sks(&after), ["E#0000000001", "E#0000000002"]);
    let limited = t.query("TASK#1", "E#", None, 2).await.unwrap();
    assert_eq!(sks(&limited), ["E#0000000000", "E#0000000001"]);
    assert!(t.query("TASK#1", "E#", None, 0).await.unwrap().is_empty());
    // `after` before the prefix range does not widen it.
    let after_low = t.query("TASK#1", "E#", Some("A"), 10).await.unwrap();
    assert_eq!(sks(&after_low).len(), 3);
    // An empty prefix is the whole partition, in byte order.
    let whole = t.query("TASK#1", "", None, 100).await.unwrap();
    assert_eq!(
        sks(&whole),
        [
            "E",
            "E#0000000000",
            "E#0000000001",
            "E#0000000002",
            "E$",
            "F#0",
            "TASK"
        ]
    );
    assert!(t.query("TASK#3", "", None, 100).await.unwrap().is_empty());
}

#[tokio::test]
async fn query_prefix_has_no_wildcards() {
    let (_dir, t) = open();
    seed(
        &t,
        "p",
        &["a%b", "axb", "a_c", "abc", "A_C", "a_", "a\u{10FFFF}z"],
    )
    .await;
    assert_eq!(sks(&t.query("p", "a%", None, 10).await.unwrap()), ["a%b"]);
    assert_eq!(
        sks(&t.query("p", "a_", None, 10).await.unwrap()),
        ["a_", "a_c"]
    );
    assert_eq!(
        sks(&t.query("p", "a\u{10FFFF}", None, 10).await.unwrap()),
        ["a\u{10FFFF}z"]
    );
}

#[tokio::test]
async fn index_lists_only_indexed_items() {
    let (_dir, t) = open();
    let mut a = item("TASK#1", "TASK", 1, "a");
    a.index = Some("active".into());
    let mut b = item("TASK#2", "TASK", 1, "b");
    b.index = Some("active".into());
    let mut c = item("TASK#3", "TASK", 1, "c");
    c.index = Some("other".into());
    let d = item("TASK#4", "TASK", 1, "d");
    t.transact(vec![
        put(a.clone(), Condition::None),
        put(b, Condition::None),
        put(c, Condition::None),
        put(d, Condition::None),
    ])
    .await
    .unwrap();
    let mut active: Vec<String> = t
        .query_index("active", 10)
        .await
        .unwrap()
        .into_iter()
        .map(|i| i.key.pk)
        .collect();
    active.sort();
    assert_eq!(active, ["TASK#1", "TASK#2"]);
    assert_eq!(t.query_index("active", 1).await.unwrap().len(), 1);
    // Dropping the index (a task turning terminal) removes it from the list.
    a.index = None;
    a.version = 2;
    t.transact(vec![put(a, Condition::VersionIs(1))])
        .await
        .unwrap();
    let active = t.query_index("active", 10).await.unwrap();
    assert_eq!(sks(&active).len(), 1);
    assert_eq!(active[0].key.pk, "TASK#2");
}

#[tokio::test]
async fn expired_items_are_purged_on_open() {
    let dir = tempfile::tempdir().unwrap();
    let now_secs = baton_core::now_ms() / 1000;
    {
        let t = EmbeddedTable::open(dir.path()).unwrap();
        let mut old = item("DEDUPE#a", "DEDUPE", 1, "");
        old.expires_at = Some(now_secs - 10);
        let mut fresh = item("DEDUPE#b", "DEDUPE", 1, "");
        fresh.expires_at = Some(now_secs + 3600);
        t.transact(vec![
            put(old, Condition::None),
            put(fresh, Condition::None),
            put(item("x", "y", 1, ""), Condition::None),
        ])
        .await
        .unwrap();
        // Reads do not filter on expiry.
        assert!(t
            .get(&Key::new("DEDUPE#a", "DEDUPE"))
            .await
            .unwrap()
            .is_some());
    }
    let t = EmbeddedTable::open(dir.path()).unwrap();
    assert_eq!(t.get(&Key::new("DEDUPE#a", "DEDUPE")).await.unwrap(), None);
    assert!(t
        .get(&Key::new("DEDUPE#b", "DEDUPE"))
        .await
        .unwrap()
        .is_some());
    assert_eq!(t.count().await.unwrap(), 2);
    assert_eq!(t.purge_expired().await.unwrap(), 0);
}

#[tokio::test]
async fn writes_survive_reopen() {
    let dir = tempfile::tempdir().unwrap();
    let data_dir = dir.path().join("nested/data");
    {
        let t = EmbeddedTable::open(&data_dir).unwrap();
        for i in 0..50u64 {
            t.transact(vec![put(
                item("p", &format!("{i:04}"), i, &i.to_string()),
                Condition::NotExists,
            )])
            .await
            .unwrap();
        }
    }
    assert!(data_dir.join(baton_embedded::DB_FILE).exists());
    let t = EmbeddedTable::open(&data_dir).unwrap();
    let items = t.query("p", "", None, 1000).await.unwrap();
    assert_eq!(items.len(), 50);
    for (i, it) in items.iter().enumerate() {
        assert_eq!(it.version, i as u64);
        assert_eq!(it.data, i.to_string());
    }
    t.database().integrity_check().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn concurrent_read_modify_write_loses_no_update() {
    let (_dir, t) = open();
    let t = Arc::new(t);
    let key = Key::new("counter", "C");
    t.transact(vec![put(
        item("counter", "C", 0, "0"),
        Condition::NotExists,
    )])
    .await
    .unwrap();
    const TASKS: u64 = 8;
    const EACH: u64 = 25;
    let mut handles = Vec::new();
    for _ in 0..TASKS {
        let t = Arc::clone(&t);
        let key = key.clone();
        handles.push(tokio::spawn(async move {
            let mut conflicts = 0u64;
            for _ in 0..EACH {
                loop {
                    let cur = t.get(&key).await.unwrap().unwrap();
                    let n: u64 = cur.data.parse().unwrap();
                    let mut next = cur.clone();
                    next.version = cur.version + 1;
                    next.data = (n + 1).to_string();
                    match t
                        .transact(vec![put(next, Condition::VersionIs(cur.version))])
                        .await
                    {
                        Ok(()) => break,
                        Err(TableError::ConditionFailed { index: 0 }) => conflicts += 1,
                        Err(e) => panic!("{e}"),
                    }
                    tokio::task::yield_now().await;
                }
            }
            conflicts
        }));
    }
    let mut conflicts = 0;
    for h in handles {
        conflicts += h.await.unwrap();
    }
    let got = t.get(&key).await.unwrap().unwrap();
    assert_eq!(got.data, (TASKS * EACH).to_string());
    assert_eq!(got.version, TASKS * EACH);
    eprintln!("{conflicts} conflicts retried");
}
