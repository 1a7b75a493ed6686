//! Monthly usage counters: tokens used per Slack workspace and per user in
//! each calendar month (UTC), kept in the task table over the [`Table`]
//! port so both backends share the logic.
//!
//! Item layout:
//!
//! | item | pk | sk | data |
//! | --- | --- | --- | --- |
//! | workspace month | `USAGE#team:{team_id}` | `M#{yyyy-mm}` | `{input_tokens, output_tokens, recent}` |
//! | user month | `USAGE#user:{team_id}:{user}` | `M#{yyyy-mm}` | same |
//! | HTTP API month | `USAGE#api` | `M#{yyyy-mm}` | same |
//!
//! An increment is a read and a write conditional on the version read,
//! retried on conflict; the items of one increment (workspace and user) are
//! written in one transaction. Each increment carries an id (one per LLM
//! call), and an item remembers the last [`RECENT_IDS`] ids it counted, so
//! an increment retried after an ambiguous failure (an SDK retry of a write
//! that had in fact applied) is not counted twice. Items expire a little
//! over a year after their month began.

use crate::clock::Millis;
use crate::conversation::Usage;
use crate::table::{Condition, Item, Key, Table, TableError, Write};
use crate::task::Origin;
use chrono::{Datelike, TimeZone, Utc};
use serde::{Deserialize, Serialize};
use std::fmt;
use std::sync::Arc;

/// Increment ids an item remembers. Only the window between an ambiguous
/// write and its read-back matters, so a few dozen is plenty.
pub const RECENT_IDS: usize = 32;
/// How often a conflicting increment is retried before giving up.
const MAX_CONFLICT_RETRIES: usize = 20;
/// Counters are kept this long after their month began (then TTL removes
/// them): a year of history for reports, plus a margin.
const KEEP_SECS: i64 = 400 * 24 * 3600;

/// Whose usage a counter counts.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum UsageScope {
    /// A Slack workspace (team id).
    Workspace { team_id: String },
    /// A Slack user, within a workspace (ids are per workspace in general).
    User { team_id: String, user: String },
    /// Tasks created through the HTTP API: one shared counter, treated as
    /// one workspace (the bearer token is one client).
    Api,
}

impl UsageScope {
    /// The workspace counter of a task's origin (Slack team, or [`Api`]).
    ///
    /// [`Api`]: UsageScope::Api
    pub fn workspace_of(origin: &Origin) -> UsageScope {
        match origin {
            Origin::Http => UsageScope::Api,
            Origin::Slack { team_id, .. } => UsageScope::Workspace {
                team_id: team_id.clone(),
            },
        }
    }

    /// The user counter of a task's origin; HTTP tasks have no user.
    pub fn user_of(origin: &Origin) -> Option<UsageScope> {
        match origin {
            Origin::Http => None,
            Origin::Slack { team_id, user, .. } => Some(UsageScope::User {
                team_id: team_id.clone(),
                user: user.clone(),
            }),
        }
    }

    fn pk(&self) -> String {
        match self {
            UsageScope::Workspace { team_id } => format!("USAGE#team:{team_id}"),
            UsageScope::User { team_id, user } => format!("USAGE#user:{team_id}:{user}"),
            UsageScope::Api => "USAGE#api".to_owned(),
        }
    }
}

/// A calendar month in UTC.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Month {
    year: i32,
    /// 1 to 12.
    month: u32,
}

impl Month {
    /// The month (UTC) that the instant `at` falls in.
    pub fn of(at: Millis) -> Month {
        let t = Utc
            .timestamp_millis_opt(at)
            .single()
            .unwrap_or(chrono::DateTime::UNIX_EPOCH);
        Month {
            year: t.year(),
            month: t.month(),
        }
    }

    /// The month after this one.
    pub fn next(self) -> Month {
        if self.month == 12 {
            Month {
                year: self.year + 1,
                month: 1,
            }
        } else {
            Month {
                year: self.year,
                month: self.month + 1,
            }
        }
    }

    /// Its first day, `YYYY-MM-01`: when a counter of the previous month
    /// stops mattering ("it resets on ...").
    pub fn first_day(self) -> String {
        format!("{:04}-{:02}-01", self.year, self.month)
    }

    /// Seconds since the epoch at its first instant.
    fn start_secs(self) -> i64 {
        Utc.with_ymd_and_hms(self.year, self.month, 1, 0, 0, 0)
            .single()
            .map(|t| t.timestamp())
            .unwrap_or(0)
    }
}

impl fmt::Display for Month {
    /// `YYYY-MM`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:04}-{:02}", self.year, self.month)
    }
}

/// Why the ledger could not be read or written.
#[derive(Debug, Clone, thiserror::Error, PartialEq, Eq)]
pub enum LedgerError {
    #[error(transparent)]
    Table(#[from] TableError),
    /// The counters kept changing under concurrent writers.
    #[error("usage counters kept changing under concurrent writers")]
    Conflict,
    #[error("usage counter unreadable: {0}")]
    Corrupt(String),
}

#[derive(Default, Serialize, Deserialize)]
struct Counter {
    #[serde(default)]
    input_tokens: u64,
    #[serde(default)]
    output_tokens: u64,
    /// Ids of the latest increments, oldest first.
    #[serde(default)]
    recent: Vec<String>,
}

/// Monthly usage counters over a [`Table`]. Cheap to clone.
#[derive(Clone)]
pub struct UsageLedger {
    table: Arc<dyn Table>,
}

impl UsageLedger {
    pub fn new(table: Arc<dyn Table>) -> Self {
        UsageLedger { table }
    }

    fn key(scope: &UsageScope, month: Month) -> Key {
        Key::new(scope.pk(), format!("M#{month}"))
    }

    async fn read(&self, key: &Key) -> Result<Option<(u64, Counter)>, LedgerError> {
        let Some(item) = self.table.get(key).await? else {
            return Ok(None);
        };
        let counter: Counter =
            serde_json::from_str(&item.data).map_err(|e| LedgerError::Corrupt(e.to_string()))?;
        Ok(Some((item.version, counter)))
    }

    /// Tokens `scope` has used in `month` (zero when nothing was counted).
    pub async fn usage(&self, scope: &UsageScope, month: Month) -> Result<Usage, LedgerError> {
        Ok(self
            .read(&Self::key(scope, month))
            .await?
            .map(|(_, c)| Usage {
                input_tokens: c.input_tokens,
                output_tokens: c.output_tokens,
            })
            .unwrap_or_default())
    }

    /// Adds `usage` to the counters of every scope in `scopes` for `month`,
    /// all or none. `id` names this increment: an increment whose id a
    /// counter has already counted is not counted again there, so the call
    /// may be retried safely.
    pub async fn add(
        &self,
        scopes: &[UsageScope],
        month: Month,
        usage: Usage,
        id: &str,
    ) -> Result<(), LedgerError> {
        let mut keys: Vec<Key> = scopes.iter().map(|s| Self::key(s, month)).collect();
        keys.sort();
        keys.dedup();
        if keys.is_empty() || usage.total() == 0 {
            return Ok(());
        }
        let expires_at = Some(month.start_secs() + KEEP_SECS);
        for attempt in 0..MAX_CONFLICT_RETRIES {
            if attempt > 0 {
                // Many tasks of one workspace count into one item: back off
                // (jittered, exponential, at most a second) so they do not
                // collide again at once.
                let cap_ms = (10u64 << attempt.min(7)).min(1000);
                let jitter = (uuid::Uuid::new_v4().as_u128() % u128::from(cap_ms + 1)) as u64;
                tokio::time::sleep(std::time::Duration::from_millis(jitter)).await;
            }
            let mut writes = Vec::with_capacity(keys.len());
            for key in &keys {
                let (version, mut counter) = match self.read(key).await? {
                    Some((v, c)) => (Some(v), c),
                    None => (None, Counter::default()),
                };
                if counter.recent.iter().any(|r| r == id) {
                    continue; // Counted already (an earlier try applied).
                }
                counter.input_tokens = counter.input_tokens.saturating_add(usage.input_tokens);
                counter.output_tokens = counter.output_tokens.saturating_add(usage.output_tokens);
                counter.recent.push(id.to_owned());
                let excess = counter.recent.len().saturating_sub(RECENT_IDS);
                counter.recent.drain(..excess);
                let data = serde_json::to_string(&counter)
                    .map_err(|e| LedgerError::Corrupt(e.to_string()))?;
                writes.push(Write::Put {
                    item: Item {
                        key: key.clone(),
                        version: version.map_or(1, |v| v + 1),
                        data,
                        index: None,
                        expires_at,
                    },
                    condition: version.map_or(Condition::NotExists, Condition::VersionIs),
                });
            }
            if writes.is_empty() {
                return Ok(());
            }
            match self.table.transact(writes).await {
                Ok(()) => return Ok(()),
                // Someone else counted in between (or our own write applied
                // and its acknowledgement was lost): read again.
                Err(TableError::ConditionFailed { .. }) | Err(TableError::Contention) => {}
                Err(e) => return Err(e.into()),
            }
        }
        Err(LedgerError::Conflict)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::MemoryTable;

    fn slack() -> Origin {
        Origin::Slack {
            team_id: "T1".into(),
            channel: "C1".into(),
            thread_ts: "1.0".into(),
            user: "U1".into(),
        }
    }

    fn usage(i: u64, o: u64) -> Usage {
        Usage {
            input_tokens: i,
            output_tokens: o,
        }
    }

    #[test]
    fn months_are_utc_calendar_months() {
        // 2026-11-30T23:59:59.999Z and one millisecond later.
        let last = 1_796_083_199_999;
        assert_eq!(Month::of(last).to_string(), "2026-11");
        assert_eq!(Month::of(last + 1).to_string(), "2026-12");
        assert_eq!(Month::of(last).next().first_day(), "2026-12-01");
        let dec = Month::of(last + 1);
        assert_eq!(dec.next().to_string(), "2027-01");
        assert_eq!(dec.next().first_day(), "2027-01-01");
        assert_eq!(dec.start_secs(), (last + 1) / 1000);
    }

    #[test]
    fn scopes_of_origins() {
        assert_eq!(
            UsageScope::workspace_of(&slack()),
            UsageScope::Workspace {
                team_id: "T1".into()
            }
        );
        assert_eq!(
            UsageScope::user_of(&slack()),
            Some(UsageScope::User {
                team_id: "T1".into(),
                user: "U1".into()
            })
        );
        assert_eq!(UsageScope::workspace_of(&Origin::Http), UsageScope::Api);
        assert_eq!(UsageScope::user_of(&Origin::Http), None);
    }

    #[tokio::test]
    async fn adds_per_scope_and_month_once_per_id() {
        let table = Arc::new(MemoryTable::default());
        let ledger = UsageLedger::new(table.clone());
        let ws = UsageScope::workspace_of(&slack());
        let user = UsageScope::user_of(&slack()).unwrap();
        let nov = Month::of(1_795_000_000_000);
        assert_eq!(ledger.usage(&ws, nov).await.unwrap(), Usage::default());

        ledger
            .add(&[ws.clone(), user.clone()], nov, usage(10, 5), "a")
            .await
            .unwrap();
        ledger
            .add(std::slice::from_ref(&ws), nov, usage(1, 1), "b")
            .await
            .unwrap();
        // The same id again: already counted.
        ledger
            .add(&[ws.clone(), user.clone()], nov, usage(10, 5), "a")
            .await
            .unwrap();
        ledger
            .add(std::slice::from_ref(&ws), nov.next(), usage(7, 0), "c")
            .await
            .unwrap();

        assert_eq!(ledger.usage(&ws, nov).await.unwrap(), usage(11, 6));
        assert_eq!(ledger.usage(&user, nov).await.unwrap(), usage(10, 5));
        assert_eq!(ledger.usage(&ws, nov.next()).await.unwrap(), usage(7, 0));
        let pks: Vec<String> = table
            .keys()
            .into_iter()
            .map(|k| k.pk + "/" + &k.sk)
            .collect();
        assert_eq!(
            pks,
            [
                "USAGE#team:T1/M#2026-11",
                "USAGE#team:T1/M#2026-12",
                "USAGE#user:T1:U1/M#2026-11"
            ]
        );
    }

    #[tokio::test]
    async fn a_write_that_applied_but_reported_failure_is_not_counted_twice() {
        let table = Arc::new(MemoryTable::default());
        let ledger = UsageLedger::new(table.clone());
        let nov = Month::of(1_795_000_000_000);
        ledger
            .add(&[UsageScope::Api], nov, usage(3, 4), "x")
            .await
            .unwrap();
        table.lie_after_next_write();
        ledger
            .add(&[UsageScope::Api], nov, usage(100, 0), "y")
            .await
            .unwrap();
        assert_eq!(
            ledger.usage(&UsageScope::Api, nov).await.unwrap(),
            usage(103, 4)
        );
    }

    /// A table where another writer counts between our read and our
    /// write, once.
    struct Interloper {
        inner: Arc<MemoryTable>,
        armed: std::sync::atomic::AtomicBool,
    }

    #[async_trait::async_trait]
    impl Table for Interloper {
        async fn get(&self, key: &Key) -> Result<Option<Item>, TableError> {
            self.inner.get(key).await
        }
        async fn query(
            &self,
            pk: &str,
            prefix: &str,
            after: Option<&str>,
            limit: usize,
        ) -> Result<Vec<Item>, TableError> {
            self.inner.query(pk, prefix, after, limit).await
        }
        async fn query_index(&self, index: &str, limit: usize) -> Result<Vec<Item>, TableError> {
            self.inner.query_index(index, limit).await
        }
        async fn transact(&self, writes: Vec<Write>) -> Result<(), TableError> {
            if self.armed.swap(false, std::sync::atomic::Ordering::SeqCst) {
                let other = UsageLedger::new(self.inner.clone());
                let nov = Month::of(1_795_000_000_000);
                other
                    .add(&[UsageScope::Api], nov, usage(1000, 0), "other")
                    .await
                    .map_err(|e| TableError::Unavailable(e.to_string()))?;
            }
            self.inner.transact(writes).await
        }
    }

    #[tokio::test]
    async fn a_concurrent_increment_is_not_lost() {
        let inner = Arc::new(MemoryTable::default());
        let ledger = UsageLedger::new(Arc::new(Interloper {
            inner: inner.clone(),
            armed: true.into(),
        }));
        let nov = Month::of(1_795_000_000_000);
        ledger
            .add(&[UsageScope::Api], nov, usage(1, 2), "mine")
            .await
            .unwrap();
        assert_eq!(
            ledger.usage(&UsageScope::Api, nov).await.unwrap(),
            usage(1001, 2)
        );
    }
}
