//! Rough numbers behind the "one connection behind a mutex" choice. Not a
//! benchmark suite; run with
//! `cargo test -p baton-embedded --release --test embedded throughput -- --ignored --nocapture`.

use std::sync::Arc;
use std::time::Instant;

use baton_core::{Condition, Item, Key, Table, Write};
use baton_embedded::{Durability, EmbeddedBackend, QueueConfig};

fn put(i: usize) -> Write {
    Write::Put {
        item: Item {
            key: Key::new(format!("TASK#{}", i % 64), format!("E#{i:010}")),
            version: 1,
            data: "x".repeat(512),
            index: None,
            expires_at: None,
            listing: None,
        },
        condition: Condition::NotExists,
    }
}

async fn run(durability: Durability) {
    let dir = tempfile::tempdir().unwrap();
    let b = EmbeddedBackend::open_with(dir.path(), QueueConfig::default(), durability).unwrap();
    let n = 2000;
    let start = Instant::now();
    for i in 0..n {
        b.table.transact(vec![put(i)]).await.unwrap();
    }
    let seq = start.elapsed();
    let table = Arc::clone(&b.table);
    let start = Instant::now();
    let tasks: Vec<_> = (0..8)
        .map(|t| {
            let table = Arc::clone(&table);
            tokio::spawn(async move {
                for i in 0..n / 8 {
                    table.transact(vec![put(n + t * n + i)]).await.unwrap();
                }
            })
        })
        .collect();
    for t in tasks {
        t.await.unwrap();
    }
    let conc = start.elapsed();
    let start = Instant::now();
    for i in 0..n {
        b.table
            .get(&Key::new(format!("TASK#{}", i % 64), format!("E#{i:010}")))
            .await
            .unwrap();
    }
    let reads = start.elapsed();
    let per = |d: std::time::Duration| d.as_micros() as f64 / n as f64;
    eprintln!(
        "{durability:?}: sequential put {:.0} µs, 8 concurrent writers {:.0} µs/put, get {:.0} µs",
        per(seq),
        per(conc),
        per(reads)
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "prints timings; run by hand"]
async fn throughput() {
    run(Durability::Process).await;
    run(Durability::Full).await;
}
