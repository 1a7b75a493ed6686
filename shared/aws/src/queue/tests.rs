use super::*;
use crate::testing::MotoServer;
use crate::ResourceNames;
use std::collections::HashSet;

/// A fresh moto with a bootstrapped stack; returns the work and dead-letter
/// queues.
async fn setup(max_receive: u32, visibility_secs: u32) -> (MotoServer, SqsQueue, SqsQueue) {
    let moto = MotoServer::start().expect("moto must be installed");
    let cfg = moto.sdk_config().await;
    let env = crate::bootstrap(
        &cfg,
        &ResourceNames::for_stack("qtest"),
        max_receive,
        visibility_secs,
    )
    .await
    .expect("bootstrap");
    let client = crate::sqs_client(&cfg);
    let work = SqsQueue::new(client.clone(), env.queue_url);
    let dlq = SqsQueue::new(client, env.dlq_url);
    (moto, work, dlq)
}

const NOW: Duration = Duration::ZERO;

#[tokio::test]
async fn send_receive_delete() {
    let (_moto, q, _) = setup(5, 30).await;
    assert!(q.queue_url().ends_with("/qtest-work"), "{}", q.queue_url());
    q.send("hello", NOW).await.unwrap();
    let got = q.receive(10, Duration::from_secs(1)).await.unwrap();
    assert_eq!(got.len(), 1);
    assert_eq!(got[0].body, "hello");
    assert_eq!(got[0].receive_count, 1);
    assert!(!got[0].message_id.is_empty());
    // Invisible while received, gone once deleted.
    assert!(q.receive(10, NOW).await.unwrap().is_empty());
    q.delete(&got[0].receipt).await.unwrap();
    q.extend(&got[0].receipt, NOW).await.ok();
    assert!(q.receive(10, NOW).await.unwrap().is_empty());
    assert!(q.receive(0, NOW).await.unwrap().is_empty());
}

#[tokio::test]
async fn receive_is_capped_at_ten_per_call() {
    let (_moto, q, _) = setup(5, 30).await;
    for i in 0..12 {
        q.send(&format!("m{i}"), NOW).await.unwrap();
    }
    let first = q.receive(50, NOW).await.unwrap();
    assert!(
        !first.is_empty() && first.len() <= MAX_RECEIVE_BATCH,
        "{}",
        first.len()
    );
    let mut bodies: HashSet<String> = first.into_iter().map(|d| d.body).collect();
    while bodies.len() < 12 {
        let more = q.receive(10, NOW).await.unwrap();
        assert!(!more.is_empty(), "lost messages: have {}", bodies.len());
        bodies.extend(more.into_iter().map(|d| d.body));
    }
    assert_eq!(bodies.len(), 12);
}

#[tokio::test]
async fn delayed_messages_arrive_after_the_delay() {
    let (_moto, q, _) = setup(5, 30).await;
    q.send("later", Duration::from_millis(1500)).await.unwrap();
    assert!(q.receive(1, NOW).await.unwrap().is_empty());
    tokio::time::sleep(Duration::from_secs(2)).await;
    let got = q.receive(1, Duration::from_secs(2)).await.unwrap();
    assert_eq!(got.len(), 1);
    assert_eq!(got[0].body, "later");
}

#[tokio::test]
async fn limits_are_checked_before_sending() {
    let (_moto, q, _) = setup(5, 30).await;
    let too_long = MAX_DELAY + Duration::from_secs(1);
    assert_eq!(
        q.send("x", too_long).await,
        Err(QueueError::InvalidDelay(too_long))
    );
    let big = "x".repeat(MAX_MESSAGE_BYTES + 1);
    assert_eq!(
        q.send(&big, NOW).await,
        Err(QueueError::TooLarge(big.len()))
    );
    // The largest allowed delay is accepted.
    q.send("max", MAX_DELAY).await.unwrap();
}

#[tokio::test]
async fn extend_hides_and_zero_releases() {
    let (_moto, q, _) = setup(5, 1).await;
    q.send("work", NOW).await.unwrap();
    let got = q.receive(1, NOW).await.unwrap();
    assert_eq!(got.len(), 1);
    q.extend(&got[0].receipt, Duration::from_secs(30))
        .await
        .unwrap();
    // Past the queue's 1 s visibility timeout, but extended: still hidden.
    tokio::time::sleep(Duration::from_millis(1500)).await;
    assert!(q.receive(1, NOW).await.unwrap().is_empty());
    // Visibility 0 makes it visible again at once: a second delivery.
    q.extend(&got[0].receipt, NOW).await.unwrap();
    let again = q.receive(1, Duration::from_secs(1)).await.unwrap();
    assert_eq!(again.len(), 1);
    assert_eq!(again[0].message_id, got[0].message_id);
    assert_eq!(again[0].receive_count, 2);
}

#[tokio::test]
async fn poison_message_moves_to_the_dlq_after_max_receives() {
    let (_moto, q, dlq) = setup(2, 30).await;
    q.send("poison", NOW).await.unwrap();
    for n in 1..=2 {
        let got = q.receive(1, Duration::from_secs(1)).await.unwrap();
        assert_eq!(got.len(), 1, "delivery {n}");
        assert_eq!(got[0].receive_count, n);
        // Fail without deleting: release it at once.
        q.extend(&got[0].receipt, NOW).await.unwrap();
    }
    // The third receive finds it over maxReceiveCount and redrives it.
    assert!(q
        .receive(1, Duration::from_secs(1))
        .await
        .unwrap()
        .is_empty());
    let dead = dlq.receive(1, Duration::from_secs(1)).await.unwrap();
    assert_eq!(dead.len(), 1);
    assert_eq!(dead[0].body, "poison");
}

#[tokio::test]
async fn missing_queue_is_unavailable() {
    let (moto, q, _) = setup(5, 30).await;
    let bad = SqsQueue::new(
        q.client.clone(),
        format!("{}/000000000000/nope", moto.endpoint()),
    );
    assert!(matches!(
        bad.send("x", NOW).await,
        Err(QueueError::Unavailable(_))
    ));
}
