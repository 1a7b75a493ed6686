use super::*;
use crate::testing::MotoServer;
use baton_core::{BlobStore, EntryKind, Limits, Origin, StoreError, Task, TaskId, TaskStore};
use std::sync::Arc;

const TABLE: &str = "baton-test";

/// A fresh moto with the table created by bootstrap's table step.
async fn setup() -> (MotoServer, DynamoTable, aws_config::SdkConfig) {
    let moto = MotoServer::start().expect("moto must be installed");
    let cfg = moto.sdk_config().await;
    let client = crate::dynamodb_client(&cfg);
    crate::bootstrap::ensure_table(&client, TABLE)
        .await
        .expect("create table");
    (moto, DynamoTable::new(client, TABLE), cfg)
}

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

fn sks(items: &[Item]) -> Vec<&str> {
    items.iter().map(|i| i.key.sk.as_str()).collect()
}

#[test]
fn successor_bounds_exactly_the_prefixed_strings() {
    assert_eq!(prefix_successor(""), None);
    assert_eq!(prefix_successor("E#").as_deref(), Some("E$"));
    assert_eq!(prefix_successor("a\u{D7FF}").as_deref(), Some("a\u{E000}"));
    assert_eq!(prefix_successor("a\u{10FFFF}").as_deref(), Some("b"));
    assert_eq!(prefix_successor("\u{10FFFF}\u{10FFFF}"), None);
}

#[test]
fn cancellation_reasons_map_to_port_errors() {
    let none = Some("None");
    assert_eq!(
        cancellation_to_error(&[none, Some("ConditionalCheckFailed"), none]),
        TableError::ConditionFailed { index: 1 }
    );
    assert_eq!(
        cancellation_to_error(&[Some("TransactionConflict"), none]),
        TableError::Contention
    );
    // A real condition failure wins over a conflict: retrying cannot help.
    assert_eq!(
        cancellation_to_error(&[Some("TransactionConflict"), Some("ConditionalCheckFailed")]),
        TableError::ConditionFailed { index: 1 }
    );
    assert!(matches!(
        cancellation_to_error(&[Some("ThrottlingError"), none]),
        TableError::Unavailable(m) if m.contains("ThrottlingError")
    ));
}

#[tokio::test]
async fn put_get_roundtrip_with_index_and_ttl() {
    let (_moto, table, _) = setup().await;
    let key = Key::new("P", "S");
    assert_eq!(table.get(&key).await.unwrap(), None);
    let full = Item {
        key: key.clone(),
        version: 7,
        data: r#"{"a":"é \" \n"}"#.into(),
        index: Some("active".into()),
        expires_at: Some(1_900_000_000),
        listing: Some(ListingKey {
            partition: "tasks#03".into(),
            sort: "0000000000001#a".into(),
        }),
    };
    table
        .transact(vec![put(full.clone(), Condition::None)])
        .await
        .unwrap();
    assert_eq!(table.get(&key).await.unwrap(), Some(full));
    // Overwrite without index/listing/ttl: the attributes go away.
    let plain = item("P", "S", 8, "");
    table
        .transact(vec![put(plain.clone(), Condition::VersionIs(7))])
        .await
        .unwrap();
    assert_eq!(table.get(&key).await.unwrap(), Some(plain));
}

#[tokio::test]
async fn single_write_conditions() {
    let (_moto, table, _) = setup().await;
    let a = item("P", "A", 1, "one");
    let cf0 = Err(TableError::ConditionFailed { index: 0 });

    // NotExists: applies once, then fails.
    table
        .transact(vec![put(a.clone(), Condition::NotExists)])
        .await
        .unwrap();
    let again = item("P", "A", 1, "again");
    assert_eq!(
        table.transact(vec![put(again, Condition::NotExists)]).await,
        cf0
    );
    assert_eq!(table.get(&a.key).await.unwrap().unwrap().data, "one");

    // VersionIs: wrong version fails, right version applies.
    let two = item("P", "A", 2, "two");
    assert_eq!(
        table
            .transact(vec![put(two.clone(), Condition::VersionIs(5))])
            .await,
        cf0
    );
    table
        .transact(vec![put(two.clone(), Condition::VersionIs(1))])
        .await
        .unwrap();
    assert_eq!(table.get(&a.key).await.unwrap(), Some(two));

    // VersionIs on a missing item fails.
    assert_eq!(
        table
            .transact(vec![put(
                item("P", "missing", 2, "x"),
                Condition::VersionIs(1)
            )])
            .await,
        cf0
    );
    assert_eq!(table.get(&Key::new("P", "missing")).await.unwrap(), None);

    // Deletes: stale version fails, right version deletes, NotExists on a
    // missing item is a no-op.
    let del = |condition| Write::Delete {
        key: a.key.clone(),
        condition,
    };
    assert_eq!(
        table.transact(vec![del(Condition::VersionIs(1))]).await,
        cf0
    );
    assert_eq!(table.transact(vec![del(Condition::NotExists)]).await, cf0);
    table
        .transact(vec![del(Condition::VersionIs(2))])
        .await
        .unwrap();
    assert_eq!(table.get(&a.key).await.unwrap(), None);
    table
        .transact(vec![del(Condition::NotExists)])
        .await
        .unwrap();
    table.transact(vec![del(Condition::None)]).await.unwrap();

    // Condition::None overwrites whatever is there.
    table
        .transact(vec![put(item("P", "A", 9, "x"), Condition::None)])
        .await
        .unwrap();
    table
        .transact(vec![put(item("P", "A", 3, "y"), Condition::None)])
        .await
        .unwrap();
    assert_eq!(table.get(&a.key).await.unwrap().unwrap().version, 3);
    assert_eq!(table.transact(Vec::new()).await, Ok(()));
}

#[tokio::test]
async fn transactions_apply_all_or_nothing_and_report_the_failed_write() {
    let (_moto, table, _) = setup().await;
    table
        .transact(vec![
            put(item("T", "x", 1, "x1"), Condition::NotExists),
            put(item("T", "y", 1, "y1"), Condition::NotExists),
        ])
        .await
        .unwrap();

    // Write 2 fails (stale version): writes 0 and 1 must not land.
    let result = table
        .transact(vec![
            put(item("T", "new", 1, "n"), Condition::NotExists),
            Write::Delete {
                key: Key::new("T", "x"),
                condition: Condition::VersionIs(1),
            },
            put(item("T", "y", 3, "y3"), Condition::VersionIs(2)),
        ])
        .await;
    assert_eq!(result, Err(TableError::ConditionFailed { index: 2 }));
    assert_eq!(table.get(&Key::new("T", "new")).await.unwrap(), None);
    assert!(table.get(&Key::new("T", "x")).await.unwrap().is_some());
    assert_eq!(
        table.get(&Key::new("T", "y")).await.unwrap().unwrap().data,
        "y1"
    );

    // Failure at position 0 (NotExists on an existing item).
    let result = table
        .transact(vec![
            put(item("T", "x", 1, "dup"), Condition::NotExists),
            put(item("T", "other", 1, "o"), Condition::None),
        ])
        .await;
    assert_eq!(result, Err(TableError::ConditionFailed { index: 0 }));
    assert_eq!(table.get(&Key::new("T", "other")).await.unwrap(), None);

    // All conditions hold: everything applies, the delete included.
    table
        .transact(vec![
            put(item("T", "new", 1, "n"), Condition::NotExists),
            Write::Delete {
                key: Key::new("T", "x"),
                condition: Condition::VersionIs(1),
            },
            put(item("T", "y", 2, "y2"), Condition::VersionIs(1)),
        ])
        .await
        .unwrap();
    assert!(table.get(&Key::new("T", "new")).await.unwrap().is_some());
    assert_eq!(table.get(&Key::new("T", "x")).await.unwrap(), None);
    assert_eq!(
        table
            .get(&Key::new("T", "y"))
            .await
            .unwrap()
            .unwrap()
            .version,
        2
    );
}

#[tokio::test]
async fn invalid_transactions_are_refused_before_sending() {
    // No server needed: validation happens first.
    let cfg = aws_config::SdkConfig::builder()
        .behavior_version(aws_config::BehaviorVersion::latest())
        .build();
    let table = DynamoTable::new(crate::dynamodb_client(&cfg), TABLE);
    let many: Vec<Write> = (0..26)
        .map(|i| put(item("P", &format!("{i}"), 1, ""), Condition::None))
        .collect();
    assert!(
        matches!(table.transact(many).await, Err(TableError::Unavailable(m)) if m.contains("26 writes"))
    );
    let dup = vec![
        put(item("P", "a", 1, ""), Condition::None),
        Write::Delete {
            key: Key::new("P", "a"),
            condition: Condition::None,
        },
    ];
    assert!(
        matches!(table.transact(dup).await, Err(TableError::Unavailable(m)) if m.contains("two writes"))
    );
}

#[tokio::test]
async fn query_by_prefix_after_and_limit() {
    let (_moto, table, _) = setup().await;
    let mut writes: Vec<Write> = [
        "A#1", "E", "E#03", "E#01", "E#02", "E#04", "E#05", "E$", "F#1",
    ]
    .iter()
    .map(|sk| put(item("Q", sk, 1, sk), Condition::None))
    .collect();
    writes.push(put(item("Q2", "E#00", 1, ""), Condition::None));
    table.transact(writes).await.unwrap();

    let all_e = ["E#01", "E#02", "E#03", "E#04", "E#05"];
    assert_eq!(
        sks(&table.query("Q", "E#", None, 100).await.unwrap()),
        all_e
    );
    assert_eq!(
        sks(&table.query("Q", "E#", None, 2).await.unwrap()),
        ["E#01", "E#02"]
    );
    assert_eq!(
        sks(&table.query("Q", "E#", Some("E#02"), 100).await.unwrap()),
        ["E#03", "E#04", "E#05"]
    );
    // `after` need not be a stored key.
    assert_eq!(
        sks(&table.query("Q", "E#", Some("E#025"), 2).await.unwrap()),
        ["E#03", "E#04"]
    );
    assert!(table
        .query("Q", "E#", Some("E#05"), 100)
        .await
        .unwrap()
        .is_empty());
    // `after` before the prefix range: the whole range.
    assert_eq!(
        sks(&table.query("Q", "E#", Some("D"), 100).await.unwrap()),
        all_e
    );
    // `after` beyond the prefix range: nothing.
    assert!(table
        .query("Q", "E#", Some("E$"), 100)
        .await
        .unwrap()
        .is_empty());
    // Empty prefix: the whole partition, in order.
    assert_eq!(
        sks(&table.query("Q", "", Some("E#04"), 100).await.unwrap()),
        ["E#05", "E$", "F#1"]
    );
    assert_eq!(table.query("Q", "", None, 100).await.unwrap().len(), 9);
    assert!(table.query("Q", "E#", None, 0).await.unwrap().is_empty());
    assert!(table
        .query("nobody", "E#", None, 10)
        .await
        .unwrap()
        .is_empty());

    // Same answers when every page holds one item.
    let paged = table.clone().with_page_size(1);
    assert_eq!(
        sks(&paged.query("Q", "E#", None, 100).await.unwrap()),
        all_e
    );
    assert_eq!(
        sks(&paged.query("Q", "E#", Some("E#01"), 3).await.unwrap()),
        ["E#02", "E#03", "E#04"]
    );
}

#[tokio::test]
async fn query_follows_pages_past_one_megabyte() {
    let (_moto, table, _) = setup().await;
    let body = "x".repeat(100 * 1024);
    for chunk in (0..15u32).collect::<Vec<_>>().chunks(5) {
        let writes = chunk
            .iter()
            .map(|i| put(item("BIG", &format!("E#{i:03}"), 1, &body), Condition::None))
            .collect();
        table.transact(writes).await.unwrap();
    }
    // One raw Query stops at 1 MB, so the adapter must have followed pages.
    let raw = table
        .client
        .query()
        .table_name(TABLE)
        .key_condition_expression("pk = :pk")
        .expression_attribute_values(":pk", s("BIG"))
        .send()
        .await
        .unwrap();
    assert!(raw.items().len() < 15 && raw.last_evaluated_key().is_some());

    let items = table.query("BIG", "E#", None, usize::MAX).await.unwrap();
    let want: Vec<String> = (0..15).map(|i| format!("E#{i:03}")).collect();
    assert_eq!(sks(&items), want);
    assert!(items.iter().all(|i| i.data.len() == body.len()));
    let tail = table.query("BIG", "E#", Some("E#003"), 12).await.unwrap();
    assert_eq!(sks(&tail), want[4..].to_vec());
}

#[tokio::test]
async fn sparse_index_lists_only_indexed_items() {
    let (_moto, table, _) = setup().await;
    let mut writes = Vec::new();
    for i in 0..6 {
        let mut it = item(&format!("TASK#{i}"), "TASK", 1, "{}");
        it.index = match i % 3 {
            0 => None,
            1 => Some("active".into()),
            _ => Some("other".into()),
        };
        writes.push(put(it, Condition::None));
    }
    table.transact(writes).await.unwrap();
    let mut active: Vec<String> = table
        .query_index("active", 100)
        .await
        .unwrap()
        .into_iter()
        .map(|i| i.key.pk)
        .collect();
    active.sort();
    assert_eq!(active, ["TASK#1", "TASK#4"]);
    assert_eq!(table.query_index("active", 1).await.unwrap().len(), 1);
    assert_eq!(
        table
            .clone()
            .with_page_size(1)
            .query_index("other", 100)
            .await
            .unwrap()
            .len(),
        2
    );
    assert!(table.query_index("none", 100).await.unwrap().is_empty());

    // Dropping the index value takes the item out of the index.
    table
        .transact(vec![put(
            item("TASK#1", "TASK", 2, "{}"),
            Condition::VersionIs(1),
        )])
        .await
        .unwrap();
    let active = table.query_index("active", 100).await.unwrap();
    assert_eq!(active.len(), 1);
    assert_eq!(active[0].key.pk, "TASK#4");
    assert_eq!(active[0].index.as_deref(), Some("active"));
}

#[tokio::test]
async fn corrupt_items_are_reported() {
    let (_moto, table, _) = setup().await;
    table
        .client
        .put_item()
        .table_name(TABLE)
        .item("pk", s("C"))
        .item("sk", s("1"))
        .item("v", s("not a number"))
        .send()
        .await
        .unwrap();
    assert!(matches!(
        table.get(&Key::new("C", "1")).await,
        Err(TableError::Corrupt(_))
    ));
}

#[tokio::test]
async fn missing_table_is_unavailable() {
    let moto = MotoServer::start().expect("moto must be installed");
    let cfg = moto.sdk_config().await;
    let table = DynamoTable::new(crate::dynamodb_client(&cfg), "nope");
    assert!(matches!(
        table.get(&Key::new("a", "b")).await,
        Err(TableError::Unavailable(_))
    ));
}

#[tokio::test]
async fn task_store_on_dynamodb_and_s3() {
    let (_moto, table, cfg) = setup().await;
    let s3 = crate::s3_client(&cfg);
    s3.create_bucket().bucket("traces").send().await.unwrap();
    let blobs = crate::S3Blobs::new(s3, "traces", Some("store"));
    let store = TaskStore::new(Arc::new(table), Arc::new(blobs.clone()));

    let task = Task::new(
        TaskId::generate(),
        "default",
        Origin::Http,
        None,
        Limits::default(),
        1_700_000_000_000,
    );
    let first = vec![EntryKind::UserMessage {
        text: "hello".into(),
        from: None,
    }];
    let created = store
        .create(&task, first.clone(), Some("key-1".into()))
        .await
        .unwrap();
    assert_eq!(created, baton_core::Created::New(task.id.clone()));
    // Same dedupe key, different task: nothing written, the first id back.
    let other = Task::new(
        TaskId::generate(),
        "default",
        Origin::Http,
        None,
        Limits::default(),
        1_700_000_000_000,
    );
    assert_eq!(
        store
            .create(&other, first, Some("key-1".into()))
            .await
            .unwrap(),
        baton_core::Created::Duplicate(task.id.clone())
    );
    assert_eq!(store.get(&other.id).await.unwrap(), None);

    let mut fresh = store.get(&task.id).await.unwrap().unwrap();
    assert_eq!(fresh.version, 1);
    let mut stale = fresh.clone();

    // An entry well over DynamoDB's 400 KB item limit goes to S3.
    let big = "b".repeat(500 * 1024);
    store
        .commit(
            &mut fresh,
            vec![EntryKind::UserMessage {
                text: big.clone(),
                from: None,
            }],
        )
        .await
        .unwrap();
    assert_eq!(fresh.version, 2);
    let blob_keys = blobs.list("tasks/").await.unwrap();
    assert_eq!(blob_keys.len(), 1, "{blob_keys:?}");

    // Committing from the old version conflicts.
    assert!(matches!(
        store.commit(&mut stale, vec![]).await,
        Err(StoreError::Conflict(id)) if id == task.id
    ));

    let transcript = store.transcript(&task.id).await.unwrap();
    assert_eq!(transcript.len(), 2);
    assert_eq!(
        transcript[1].kind,
        EntryKind::UserMessage {
            text: big,
            from: None
        }
    );
    assert_eq!(store.entries(&task.id, Some(0), 10).await.unwrap().len(), 1);

    let active = store.active_tasks(10).await.unwrap();
    assert_eq!(active.len(), 1);
    assert_eq!(active[0].id, task.id);
}

#[tokio::test]
async fn get_many_reads_in_batches_in_order() {
    let (_moto, table, _) = setup().await;
    // 130 items: more than one BatchGetItem of 100 keys.
    let mut keys = Vec::new();
    for chunk in (0..130).collect::<Vec<_>>().chunks(25) {
        let writes = chunk
            .iter()
            .map(|i| {
                put(
                    item(&format!("B#{i}"), "X", 1, &format!("{i}")),
                    Condition::None,
                )
            })
            .collect();
        table.transact(writes).await.unwrap();
    }
    for i in (0..130).rev() {
        keys.push(Key::new(format!("B#{i}"), "X"));
        if i % 10 == 0 {
            keys.push(Key::new(format!("MISSING#{i}"), "X"));
        }
    }
    keys.push(Key::new("B#7", "X")); // a key twice
    let got = table.get_many(&keys).await.unwrap();
    assert_eq!(got.len(), keys.len());
    for (key, found) in keys.iter().zip(&got) {
        match found {
            Some(i) => {
                assert_eq!(&i.key, key);
                assert_eq!(i.data, key.pk.trim_start_matches("B#"));
            }
            None => assert!(key.pk.starts_with("MISSING#"), "{key:?} not found"),
        }
    }
    assert!(table.get_many(&[]).await.unwrap().is_empty());
}

#[tokio::test]
async fn listing_index_reads_a_partition_newest_first_below_a_position() {
    let (_moto, table, _) = setup().await;
    // Pages of 2 items, so reads follow LastEvaluatedKey.
    let table = table.with_page_size(2);
    let writes = (0..7)
        .map(|i| {
            let mut it = item(&format!("TASK#{i}"), "TASK", 1, "{}");
            it.listing = Some(ListingKey {
                partition: if i == 3 { "tasks#01" } else { "tasks#00" }.into(),
                sort: format!("{i:013}#x"),
            });
            put(it, Condition::None)
        })
        .chain([put(item("TASK#plain", "TASK", 1, "{}"), Condition::None)])
        .collect();
    table.transact(writes).await.unwrap();
    let sorts = |entries: &[ListingEntry]| -> Vec<String> {
        entries.iter().map(|e| e.sort[12..13].to_owned()).collect()
    };
    let all = table.query_listing("tasks#00", None, 100).await.unwrap();
    assert_eq!(sorts(&all), ["6", "5", "4", "2", "1", "0"]);
    assert_eq!(all[0].key, Key::new("TASK#6", "TASK"));
    let below = table
        .query_listing("tasks#00", Some(&format!("{:013}#x", 4)), 3)
        .await
        .unwrap();
    assert_eq!(sorts(&below), ["2", "1", "0"]);
    assert_eq!(
        sorts(&table.query_listing("tasks#00", None, 1).await.unwrap()),
        ["6"]
    );
    assert_eq!(
        sorts(&table.query_listing("tasks#01", None, 10).await.unwrap()),
        ["3"]
    );
    assert!(table
        .query_listing("tasks#09", None, 10)
        .await
        .unwrap()
        .is_empty());
    assert!(table
        .query_listing("tasks#00", Some(""), 10)
        .await
        .unwrap()
        .is_empty());
}

#[tokio::test]
async fn the_task_listing_contract_holds_on_dynamodb() {
    let (_moto, table, _) = setup().await;
    let store = TaskStore::new(Arc::new(table), Arc::new(baton_core::testing::NoBlobs));
    baton_core::testing::check_task_listing(&store).await;
}
