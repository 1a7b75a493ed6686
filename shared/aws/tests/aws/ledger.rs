//! The monthly usage ledger (`baton_core::ledger`) over DynamoDB (moto):
//! counters per scope and month, idempotent increments, and concurrent
//! increments that conflict and retry without losing any; cost counted
//! beside tokens.

use baton_aws::testing::MotoServer;
use baton_aws::{DynamoTable, ResourceNames};
use baton_core::{Instant, Key, Month, Spend, Table, Usage, UsageLedger, UsageScope};
use std::sync::Arc;

/// 2026-11-18T11:06:40Z.
const NOV: Instant = Instant(1_795_000_000_000);

async fn setup(stack: &str) -> (MotoServer, Arc<DynamoTable>) {
    let moto = MotoServer::start().expect("moto must be installed");
    let cfg = moto.sdk_config().await;
    let env = baton_aws::bootstrap(&cfg, &ResourceNames::for_stack(stack), 3, 30)
        .await
        .expect("bootstrap");
    let table = DynamoTable::new(baton_aws::dynamodb_client(&cfg), env.table);
    (moto, Arc::new(table))
}

fn usage(i: u64, o: u64) -> Usage {
    Usage {
        input_tokens: i,
        output_tokens: o,
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn counters_per_scope_and_month_over_dynamodb() {
    let (_moto, table) = setup("ledger1").await;
    let ledger = UsageLedger::new(table.clone());
    let ws = UsageScope::Workspace {
        team_id: "T1".into(),
    };
    let user = UsageScope::User {
        team_id: "T1".into(),
        user: "U1".into(),
    };
    let nov = Month::of(NOV);

    ledger
        .add(&[ws.clone(), user.clone()], nov, usage(100, 20), "call-1")
        .await
        .unwrap();
    // Retried with the same id: counted once.
    ledger
        .add(&[ws.clone(), user.clone()], nov, usage(100, 20), "call-1")
        .await
        .unwrap();
    ledger
        .add(std::slice::from_ref(&ws), nov.next(), usage(5, 5), "call-2")
        .await
        .unwrap();

    assert_eq!(ledger.usage(&ws, nov).await.unwrap(), usage(100, 20));
    assert_eq!(ledger.usage(&user, nov).await.unwrap(), usage(100, 20));
    assert_eq!(ledger.usage(&ws, nov.next()).await.unwrap(), usage(5, 5));
    assert_eq!(
        ledger.usage(&UsageScope::Api, nov).await.unwrap(),
        Usage::default()
    );

    // The item as stored: its key (the shard of the increment's id),
    // version and TTL.
    let shard = baton_core::table::shard_of("call-1", baton_core::ledger::USAGE_SHARDS);
    let item = table
        .get(&Key::new(format!("USAGE#team:T1#{shard}"), "M#2026-11"))
        .await
        .unwrap()
        .expect("workspace counter stored");
    assert_eq!(item.version, 1);
    // 2026-11-01T00:00:00Z plus 400 days.
    assert_eq!(item.expires_at, Some(1_793_491_200 + 400 * 24 * 3600));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn concurrent_increments_conflict_retry_and_all_count() {
    let (_moto, table) = setup("ledger2").await;
    let ledger = UsageLedger::new(table);
    let ws = UsageScope::Workspace {
        team_id: "T9".into(),
    };
    let user = UsageScope::User {
        team_id: "T9".into(),
        user: "U9".into(),
    };
    let nov = Month::of(NOV);
    let runs: Vec<_> = (0..12)
        .map(|i| {
            let ledger = ledger.clone();
            let scopes = vec![ws.clone(), user.clone()];
            tokio::spawn(async move {
                ledger
                    .add(&scopes, nov, usage(10, 1), &format!("call-{i}"))
                    .await
            })
        })
        .collect();
    for r in runs {
        r.await.unwrap().unwrap();
    }
    assert_eq!(ledger.usage(&ws, nov).await.unwrap(), usage(120, 12));
    assert_eq!(ledger.usage(&user, nov).await.unwrap(), usage(120, 12));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn cost_counts_beside_tokens_over_dynamodb() {
    let (_moto, table) = setup("ledger3").await;
    let ledger = UsageLedger::new(table);
    let user = UsageScope::User {
        team_id: "T1".into(),
        user: "U1".into(),
    };
    let nov = Month::of(NOV);
    // Concurrent calls of one person spread over the shards; one of them
    // is retried under its id and counted once.
    let runs: Vec<_> = (0..8)
        .map(|i| {
            let ledger = ledger.clone();
            let user = user.clone();
            tokio::spawn(async move {
                let call = Spend::new(usage(10, 1), 0.125);
                ledger
                    .add(std::slice::from_ref(&user), nov, call, &format!("call-{i}"))
                    .await
            })
        })
        .collect();
    for r in runs {
        r.await.unwrap().unwrap();
    }
    ledger
        .add(
            std::slice::from_ref(&user),
            nov,
            Spend::new(usage(10, 1), 0.125),
            "call-0",
        )
        .await
        .unwrap();
    assert_eq!(
        ledger.spend(&user, nov).await.unwrap(),
        Spend {
            usage: usage(80, 8),
            cost_micros: 1_000_000
        }
    );
}
