use std::sync::Arc;
use std::time::{Duration, Instant};

use baton_core::queue::MAX_DELAY;
use baton_core::{QueueError, WorkQueue};
use baton_embedded::{DeadLetter, EmbeddedQueue, QueueConfig, MAX_BODY_BYTES};

const NOW: Duration = Duration::ZERO;

fn config(visibility_ms: u64, max_receive_count: u32) -> QueueConfig {
    QueueConfig {
        visibility_timeout: Duration::from_millis(visibility_ms),
        max_receive_count,
    }
}

fn open(cfg: QueueConfig) -> (tempfile::TempDir, EmbeddedQueue) {
    let dir = tempfile::tempdir().unwrap();
    let q = EmbeddedQueue::open(dir.path(), cfg).unwrap();
    (dir, q)
}

#[tokio::test]
async fn send_receive_delete() {
    let (_dir, q) = open(QueueConfig::default());
    assert!(q.is_empty().await.unwrap());
    q.send("one", NOW).await.unwrap();
    q.send("two", NOW).await.unwrap();
    assert_eq!(q.len().await.unwrap(), 2);
    let got = q.receive(10, NOW).await.unwrap();
    let bodies: Vec<&str> = got.iter().map(|d| d.body.as_str()).collect();
    assert_eq!(bodies, ["one", "two"]);
    assert!(got.iter().all(|d| d.receive_count == 1));
    assert_ne!(got[0].message_id, got[1].message_id);
    assert_eq!(q.in_flight().await.unwrap(), 2);
    // In flight: nothing more to receive.
    assert!(q.receive(10, NOW).await.unwrap().is_empty());
    for d in &got {
        q.delete(&d.receipt).await.unwrap();
    }
    assert_eq!(q.len().await.unwrap(), 0);
    assert_eq!(q.in_flight().await.unwrap(), 0);
    assert!(q.receive(10, NOW).await.unwrap().is_empty());
}

#[tokio::test]
async fn receive_respects_max() {
    let (_dir, q) = open(QueueConfig::default());
    for i in 0..5 {
        q.send(&i.to_string(), NOW).await.unwrap();
    }
    assert_eq!(q.receive(2, NOW).await.unwrap().len(), 2);
    assert_eq!(q.receive(0, NOW).await.unwrap().len(), 0);
    assert_eq!(q.receive(10, NOW).await.unwrap().len(), 3);
}

#[tokio::test]
async fn limits_on_body_and_delay() {
    let (_dir, q) = open(QueueConfig::default());
    let big = "x".repeat(MAX_BODY_BYTES + 1);
    assert_eq!(
        q.send(&big, NOW).await,
        Err(QueueError::TooLarge(MAX_BODY_BYTES + 1))
    );
    q.send(&big[1..], NOW).await.unwrap();
    let long = MAX_DELAY + Duration::from_millis(1);
    assert_eq!(q.send("x", long).await, Err(QueueError::InvalidDelay(long)));
    q.send("x", MAX_DELAY).await.unwrap();
    assert_eq!(q.len().await.unwrap(), 2);
}

#[tokio::test]
async fn delayed_messages_wait_their_turn() {
    let (_dir, q) = open(QueueConfig::default());
    q.send("later", Duration::from_millis(400)).await.unwrap();
    q.send("now", NOW).await.unwrap();
    let first = q.receive(10, NOW).await.unwrap();
    assert_eq!(first.len(), 1);
    assert_eq!(first[0].body, "now");
    assert!(q.receive(10, NOW).await.unwrap().is_empty());
    // A long poll sleeps until the delayed message becomes visible.
    let start = Instant::now();
    let got = q.receive(10, Duration::from_secs(10)).await.unwrap();
    let waited = start.elapsed();
    assert_eq!(got.len(), 1);
    assert_eq!(got[0].body, "later");
    assert!(waited < Duration::from_secs(2), "waited {waited:?}");
}

#[tokio::test]
async fn unacknowledged_messages_come_back_with_a_higher_count() {
    let (_dir, q) = open(config(200, 0));
    q.send("m", NOW).await.unwrap();
    let first = q.receive(1, NOW).await.unwrap().remove(0);
    assert_eq!(first.receive_count, 1);
    assert!(q
        .receive(1, Duration::from_millis(50))
        .await
        .unwrap()
        .is_empty());
    let second = q
        .receive(1, Duration::from_secs(5))
        .await
        .unwrap()
        .remove(0);
    assert_eq!(second.message_id, first.message_id);
    assert_eq!(second.receive_count, 2);
    assert_ne!(second.receipt, first.receipt);
}

#[tokio::test]
async fn a_stale_receipt_neither_deletes_nor_extends() {
    let (_dir, q) = open(config(100, 0));
    q.send("m", NOW).await.unwrap();
    let first = q.receive(1, NOW).await.unwrap().remove(0);
    let second = q
        .receive(1, Duration::from_secs(5))
        .await
        .unwrap()
        .remove(0);
    assert_eq!(second.receive_count, 2);

    assert!(!q.extend_checked(&first.receipt, NOW).await.unwrap());
    // Through the port, the stale calls succeed but change nothing.
    q.extend(&first.receipt, NOW).await.unwrap();
    assert_eq!(q.in_flight().await.unwrap(), 1);
    assert!(!q.delete_checked(&first.receipt).await.unwrap());
    q.delete(&first.receipt).await.unwrap();
    assert_eq!(q.len().await.unwrap(), 1);

    assert!(q.delete_checked(&second.receipt).await.unwrap());
    assert_eq!(q.len().await.unwrap(), 0);
    assert!(!q.delete_checked(&second.receipt).await.unwrap());
    assert!(!q.delete_checked("garbage").await.unwrap());
}

#[tokio::test]
async fn extend_keeps_a_message_invisible_and_zero_releases_it() {
    let (_dir, q) = open(config(150, 0));
    q.send("m", NOW).await.unwrap();
    let d = q.receive(1, NOW).await.unwrap().remove(0);
    q.extend(&d.receipt, Duration::from_secs(60)).await.unwrap();
    // Well past the original 150 ms, still invisible.
    assert!(q
        .receive(1, Duration::from_millis(500))
        .await
        .unwrap()
        .is_empty());
    assert_eq!(q.in_flight().await.unwrap(), 1);
    // Visibility 0 hands it back at once, waking a waiting receiver.
    let q = Arc::new(q);
    let waiter = {
        let q = Arc::clone(&q);
        tokio::spawn(async move { q.receive(1, Duration::from_secs(10)).await })
    };
    tokio::time::sleep(Duration::from_millis(100)).await;
    let start = Instant::now();
    assert!(q.extend_checked(&d.receipt, NOW).await.unwrap());
    let again = waiter.await.unwrap().unwrap().remove(0);
    assert!(start.elapsed() < Duration::from_secs(1));
    assert_eq!(again.message_id, d.message_id);
    assert_eq!(again.receive_count, 2);
}

#[tokio::test]
async fn poison_messages_go_to_dead_letters() {
    let (_dir, q) = open(config(1, 3));
    q.send("poison", NOW).await.unwrap();
    q.send("fine", Duration::from_millis(1000)).await.unwrap();
    let mut counts = Vec::new();
    for _ in 0..3 {
        let d = q
            .receive(1, Duration::from_secs(1))
            .await
            .unwrap()
            .remove(0);
        assert_eq!(d.body, "poison");
        counts.push(d.receive_count);
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    assert_eq!(counts, [1, 2, 3]);
    // The fourth receive buries it and delivers the next message instead.
    let next = q.receive(1, Duration::from_secs(5)).await.unwrap();
    assert_eq!(next.len(), 1);
    assert_eq!(next[0].body, "fine");
    let dead = q.dead_letters().await.unwrap();
    assert_eq!(dead.len(), 1);
    assert_eq!(
        dead[0],
        DeadLetter {
            message_id: dead[0].message_id.clone(),
            body: "poison".into(),
            receive_count: 3,
        }
    );
    // A handled letter is deleted once; the others stay.
    assert!(!q.delete_dead_letter("not-a-letter").await.unwrap());
    assert_eq!(q.dead_letters().await.unwrap(), dead);
    assert!(q.delete_dead_letter(&dead[0].message_id).await.unwrap());
    assert!(q.dead_letters().await.unwrap().is_empty());
    assert!(!q.delete_dead_letter(&dead[0].message_id).await.unwrap());
}

#[tokio::test]
async fn a_long_poll_is_woken_by_send() {
    let (_dir, q) = open(QueueConfig::default());
    let q = Arc::new(q);
    let receiver = {
        let q = Arc::clone(&q);
        tokio::spawn(async move {
            let got = q.receive(1, Duration::from_secs(30)).await;
            (got, Instant::now())
        })
    };
    tokio::time::sleep(Duration::from_millis(200)).await;
    let sent = Instant::now();
    q.send("wake", NOW).await.unwrap();
    let (got, at) = receiver.await.unwrap();
    assert_eq!(got.unwrap()[0].body, "wake");
    // Well under the 2 s fallback poll: the send woke it.
    let lag = at.duration_since(sent);
    assert!(lag < Duration::from_millis(500), "woken after {lag:?}");
}

#[tokio::test]
async fn a_long_poll_gives_up_after_wait() {
    let (_dir, q) = open(QueueConfig::default());
    let start = Instant::now();
    assert!(q
        .receive(1, Duration::from_millis(300))
        .await
        .unwrap()
        .is_empty());
    let waited = start.elapsed();
    assert!(waited >= Duration::from_millis(300), "{waited:?}");
    assert!(waited < Duration::from_secs(2), "{waited:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn concurrent_receivers_never_share_a_message() {
    let (_dir, q) = open(QueueConfig::default());
    let q = Arc::new(q);
    for i in 0..100 {
        q.send(&i.to_string(), NOW).await.unwrap();
    }
    let mut handles = Vec::new();
    for _ in 0..4 {
        let q = Arc::clone(&q);
        handles.push(tokio::spawn(async move {
            let mut got = Vec::new();
            loop {
                let batch = q.receive(3, Duration::from_millis(50)).await.unwrap();
                if batch.is_empty() {
                    return got;
                }
                for d in batch {
                    q.delete(&d.receipt).await.unwrap();
                    got.push(d.body);
                }
            }
        }));
    }
    let mut all = Vec::new();
    for h in handles {
        all.extend(h.await.unwrap());
    }
    all.sort_by_key(|b| b.parse::<u32>().unwrap());
    assert_eq!(all, (0..100).map(|i| i.to_string()).collect::<Vec<_>>());
}

#[tokio::test]
async fn messages_and_deadlines_survive_reopen() {
    let dir = tempfile::tempdir().unwrap();
    let cfg = config(800, 5);
    let (in_flight, dead_id) = {
        let q = EmbeddedQueue::open(dir.path(), config(1, 1)).unwrap();
        q.send("dead", NOW).await.unwrap();
        let d = q.receive(1, NOW).await.unwrap().remove(0);
        tokio::time::sleep(Duration::from_millis(5)).await;
        assert!(q.receive(1, NOW).await.unwrap().is_empty());
        let dead_id = d.message_id;
        drop(q);

        let q = EmbeddedQueue::open(dir.path(), cfg.clone()).unwrap();
        q.send("waiting", NOW).await.unwrap();
        q.send("flying", NOW).await.unwrap();
        q.send("delayed", Duration::from_secs(600)).await.unwrap();
        let d = q.receive(1, NOW).await.unwrap().remove(0);
        assert_eq!(d.body, "waiting");
        (d, dead_id)
    };
    let q = EmbeddedQueue::open(dir.path(), cfg).unwrap();
    assert_eq!(q.len().await.unwrap(), 3);
    assert_eq!(q.in_flight().await.unwrap(), 1);
    assert_eq!(q.dead_letters().await.unwrap()[0].message_id, dead_id);
    let got = q.receive(10, NOW).await.unwrap();
    assert_eq!(got.len(), 1);
    assert_eq!(got[0].body, "flying");
    q.delete(&got[0].receipt).await.unwrap();
    // The in-flight message reappears when its persisted deadline passes,
    // not at restart.
    let again = q
        .receive(10, Duration::from_secs(5))
        .await
        .unwrap()
        .remove(0);
    assert_eq!(again.message_id, in_flight.message_id);
    assert_eq!(again.receive_count, 2);
    // The delayed one is still delayed.
    assert_eq!(q.len().await.unwrap(), 2);
    assert!(q.receive(10, NOW).await.unwrap().is_empty());
}
