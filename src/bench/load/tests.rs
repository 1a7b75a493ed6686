//! The hot-key test: many tasks at once must spread their writes, so no
//! partition key (of the table or of its index) takes more than a few
//! percent of them, and the hottest share does not grow with the load.

use super::*;

/// The most of all writes one partition key may take.
const HOT_SHARE: f64 = 0.05;

fn embedded() -> Stack {
    let dir = tempfile::tempdir().expect("temp dir");
    let backend =
        // Nothing drains dead letters here: a message must not be lost to
        // them, so a redelivery loop shows up as a stall instead.
        baton_embedded::EmbeddedBackend::open(
            dir.path(),
            baton_embedded::QueueConfig {
                max_receive_count: 1000,
                ..baton_embedded::QueueConfig::default()
            },
        )
            .expect("embedded backend");
    Stack {
        table: backend.table.clone(),
        blobs: backend.blobs.clone(),
        queue: backend.queue.clone(),
        _keep: Box::new((dir, backend)),
    }
}

async fn dynamodb(moto: &baton_aws::testing::MotoServer, stack: &str) -> Stack {
    let cfg = moto.sdk_config().await;
    let env = baton_aws::bootstrap(&cfg, &baton_aws::ResourceNames::for_stack(stack), 3, 30)
        .await
        .expect("bootstrap");
    Stack {
        table: Arc::new(baton_aws::DynamoTable::new(
            baton_aws::dynamodb_client(&cfg),
            env.table,
        )),
        blobs: Arc::new(baton_aws::S3Blobs::new(
            baton_aws::s3_client(&cfg),
            env.trace_bucket,
            None,
        )),
        queue: Arc::new(baton_aws::SqsQueue::new(
            baton_aws::sqs_client(&cfg),
            env.queue_url,
        )),
        _keep: Box::new(()),
    }
}

fn load(tasks: usize, steps: u32) -> Load {
    Load {
        tasks,
        steps,
        consumers: 4,
        batch: 10,
        active_shards: baton_core::store::DEFAULT_ACTIVE_SHARDS,
    }
}

/// Both runs end without errors, and their hottest keys stay under
/// [`HOT_SHARE`], not growing from the small run to the large one.
fn check(small: &Report, large: &Report) {
    for r in [small, large] {
        assert_eq!(r.errors, 0, "tasks failed under load");
        assert_eq!(r.latencies.len(), r.load.tasks, "every task answered");
        let (key, share) = r.writes.hottest();
        assert!(
            share < HOT_SHARE,
            "{} tasks: `{key}` takes {:.1}% of {} writes",
            r.load.tasks,
            share * 100.0,
            r.writes.total()
        );
    }
    let (_, a) = small.writes.hottest();
    let (key, b) = large.writes.hottest();
    // Some slack for how a hash happens to fall on few items.
    assert!(
        b <= a * 1.25,
        "the hottest share grew with the load: {:.2}% -> {:.2}% (`{key}`)",
        a * 100.0,
        b * 100.0
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_hot_partition_key_on_the_embedded_backend() {
    let small = run(embedded(), load(40, 3)).await.unwrap();
    let large = run(embedded(), load(200, 3)).await.unwrap();
    check(&small, &large);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_hot_partition_key_on_dynamodb() {
    // Two steps a task, and a fresh server per run: moto copies every
    // table on each transaction, so it slows as its tables grow.
    let moto = baton_aws::testing::MotoServer::start().expect("moto must be installed");
    let small = run(dynamodb(&moto, "load40").await, load(40, 2))
        .await
        .unwrap();
    drop(moto);
    let moto = baton_aws::testing::MotoServer::start().expect("moto must be installed");
    let large = run(dynamodb(&moto, "load200").await, load(200, 2))
        .await
        .unwrap();
    check(&small, &large);
}

/// The test catches a hot key: the same load over an unsharded index.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unsharded_index_is_caught() {
    let one_shard = Load {
        active_shards: 1,
        ..load(40, 3)
    };
    let r = run(embedded(), one_shard).await.unwrap();
    let (key, share) = r.writes.hottest();
    assert_eq!(key, "index active#00");
    assert!(share > HOT_SHARE, "{:.1}%", share * 100.0);
}

/// The recorder itself: what a hot key looks like to it.
#[tokio::test]
async fn the_recorder_sees_a_single_index_key_as_hot() {
    let recorder = KeyRecorder::new(Arc::new(baton_core::testing::MemoryTable::default()));
    // 50 items all indexed under one key, each written 3 times with the
    // same index value (keys-only: only the first write touches the index),
    // then leaving the index.
    for i in 0..50 {
        let key = Key::new(format!("TASK#{i}"), "TASK");
        for v in 1..=3u64 {
            recorder
                .transact(vec![Write::Put {
                    item: Item {
                        key: key.clone(),
                        version: v,
                        data: "{}".into(),
                        index: Some("active".into()),
                        expires_at: None,
                        listing: None,
                    },
                    condition: baton_core::Condition::None,
                }])
                .await
                .unwrap();
        }
        recorder
            .transact(vec![Write::Put {
                item: Item {
                    key,
                    version: 4,
                    data: "{}".into(),
                    index: None,
                    expires_at: None,
                    listing: None,
                },
                condition: baton_core::Condition::None,
            }])
            .await
            .unwrap();
    }
    let spread = recorder.spread();
    assert_eq!(spread.per_key["index active"], 100, "enter and leave each");
    assert_eq!(spread.per_key["table TASK#7"], 4);
    assert_eq!(spread.total(), 300);
    let (key, share) = spread.hottest();
    assert_eq!(key, "index active");
    assert!((share - 1.0 / 3.0).abs() < 1e-9);
}

#[tokio::test]
async fn the_recorder_counts_a_listing_key_once_per_item() {
    let recorder = KeyRecorder::new(Arc::new(baton_core::testing::MemoryTable::default()));
    // A task record written 3 times with its fixed listing key (as every
    // task write carries it): the keys-only listing index is written once.
    let listing = baton_core::listing::listing_key(
        &baton_core::TaskId::generate(),
        baton_core::Instant(1_000),
    );
    for v in 1..=3u64 {
        recorder
            .transact(vec![Write::Put {
                item: Item {
                    key: Key::new("TASK#1", "TASK"),
                    version: v,
                    data: "{}".into(),
                    index: None,
                    expires_at: None,
                    listing: Some(listing.clone()),
                },
                condition: baton_core::Condition::None,
            }])
            .await
            .unwrap();
    }
    let spread = recorder.spread();
    assert_eq!(spread.per_key[&format!("listing {}", listing.partition)], 1);
    assert_eq!(spread.total(), 4);
}
