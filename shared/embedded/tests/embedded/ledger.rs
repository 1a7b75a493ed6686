//! The monthly usage ledger (`baton_core::ledger`) over SQLite: tokens
//! and cost per scope and month, once per increment id, kept across a
//! reopen of the database.

use baton_core::{Instant, Month, Spend, Usage, UsageLedger, UsageScope};
use baton_embedded::EmbeddedTable;
use std::sync::Arc;

/// 2026-11-18T11:06:40Z.
const NOV: Instant = Instant(1_795_000_000_000);

fn usage(i: u64, o: u64) -> Usage {
    Usage {
        input_tokens: i,
        output_tokens: o,
    }
}

#[tokio::test]
async fn tokens_and_cost_per_scope_and_month_over_sqlite() {
    let dir = tempfile::tempdir().unwrap();
    let ws = UsageScope::Workspace {
        team_id: "T1".into(),
    };
    let user = UsageScope::User {
        team_id: "T1".into(),
        user: "U1".into(),
    };
    let nov = Month::of(NOV);
    {
        let ledger = UsageLedger::new(Arc::new(EmbeddedTable::open(dir.path()).unwrap()));
        for i in 0..20 {
            let call = Spend::new(usage(100, 10), 0.0105);
            ledger
                .add(&[ws.clone(), user.clone()], nov, call, &format!("call-{i}"))
                .await
                .unwrap();
        }
        // A retried increment: counted once.
        ledger
            .add(
                &[ws.clone(), user.clone()],
                nov,
                Spend::new(usage(100, 10), 0.0105),
                "call-3",
            )
            .await
            .unwrap();
        ledger
            .add(
                std::slice::from_ref(&ws),
                nov.next(),
                Spend::new(usage(1, 1), 2.0),
                "call-dec",
            )
            .await
            .unwrap();
    }
    let ledger = UsageLedger::new(Arc::new(EmbeddedTable::open(dir.path()).unwrap()));
    let want = Spend {
        usage: usage(2_000, 200),
        cost_micros: 210_000,
    };
    assert_eq!(
        ledger
            .spend_of(&[ws.clone(), user.clone()], nov)
            .await
            .unwrap(),
        vec![want, want]
    );
    assert_eq!(
        ledger.spend(&ws, nov.next()).await.unwrap(),
        Spend {
            usage: usage(1, 1),
            cost_micros: 2_000_000
        }
    );
    assert_eq!(ledger.usage(&user, nov).await.unwrap(), usage(2_000, 200));
}
