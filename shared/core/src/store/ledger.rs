//! Monthly usage counters: tokens used, and their estimated cost, per Slack
//! workspace and per user in each calendar month (UTC), kept in the task
//! table over the [`Table`] port so both backends share the logic.
//!
//! Item layout:
//!
//! | item | pk | sk | data |
//! | --- | --- | --- | --- |
//! | workspace month | `USAGE#team:{team_id}#{shard}` | `M#{yyyy-mm}` | `{input_tokens, output_tokens, cost_micros, recent}` |
//! | user month | `USAGE#user:{team_id}:{user}#{shard}` | `M#{yyyy-mm}` | same |
//! | HTTP API month | `USAGE#api#{shard}` | `M#{yyyy-mm}` | same |
//!
//! Each counter is spread over [`USAGE_SHARDS`] items, so the writes of a
//! busy workspace land on that many partitions instead of one: an
//! increment goes to the shard its id hashes to, and a read sums every
//! shard (one batch read) plus the unsharded item of earlier releases. The
//! sum is exact: sharding changes where counts are kept, not what they
//! add up to.
//!
//! An increment is a read and a write conditional on the version read,
//! retried on conflict; the items of one increment (workspace and user) are
//! written in one transaction. Each increment carries an id (one per LLM
//! call), and an item remembers the last [`RECENT_IDS`] ids it counted, so
//! an increment retried after an ambiguous failure (an SDK retry of a write
//! that had in fact applied) is not counted twice. A call's tokens and its
//! cost (integer micro-dollars, so sums are exact) are one increment under
//! one id, counted together or not at all. Items expire a little
//! over a year after their month began.

use crate::clock::Instant;
use crate::llm::Usage;
use crate::table::{Condition, Item, Key, Table, TableError, Write};
use crate::task::Origin;
use chrono::{Datelike, TimeZone, Utc};
use serde::{Deserialize, Serialize};
use std::fmt;
use std::sync::Arc;

/// Items each monthly counter is spread over. Eight partitions take about
/// 8,000 increments a second for one workspace, far past any provider's
/// rate limit for one account, while a budget check stays one batch read
/// of 9 items per scope (docs/scale.md).
pub const USAGE_SHARDS: u32 = 8;

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
    pub fn of(at: Instant) -> Month {
        let t = at.to_utc().unwrap_or(chrono::DateTime::UNIX_EPOCH);
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

/// What one LLM call, or a month of them, spent: tokens, and their
/// estimated cost in micro-dollars (US$ 0.000001; zero for an unpriced
/// model).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Spend {
    pub usage: Usage,
    pub cost_micros: u64,
}

impl Spend {
    /// `usage` costing `cost_usd` dollars (rounded to the micro-dollar; a
    /// negative or non-finite estimate counts as nothing).
    pub fn new(usage: Usage, cost_usd: f64) -> Spend {
        let micros = (cost_usd * 1_000_000.0).round();
        let cost_micros = if micros.is_finite() && micros > 0.0 {
            // Saturates at u64::MAX: far past any budget.
            micros as u64
        } else {
            0
        };
        Spend { usage, cost_micros }
    }

    fn is_nothing(&self) -> bool {
        self.usage.total() == 0 && self.cost_micros == 0
    }
}

impl From<Usage> for Spend {
    fn from(usage: Usage) -> Spend {
        Spend {
            usage,
            cost_micros: 0,
        }
    }
}

#[derive(Default, Serialize, Deserialize)]
struct Counter {
    #[serde(default)]
    input_tokens: u64,
    #[serde(default)]
    output_tokens: u64,
    /// Absent in items written before cost was counted: zero.
    #[serde(default)]
    cost_micros: u64,
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

    /// The shard of `scope`'s counter for `month` that increment `id`
    /// goes to.
    fn key(scope: &UsageScope, month: Month, id: &str) -> Key {
        let shard = crate::table::shard_of(id, USAGE_SHARDS);
        Key::new(format!("{}#{shard}", scope.pk()), format!("M#{month}"))
    }

    /// Every item `scope`'s counter for `month` may be kept in: its shards
    /// and the unsharded item of releases before sharding.
    fn all_keys(scope: &UsageScope, month: Month) -> Vec<Key> {
        let sk = format!("M#{month}");
        let mut keys: Vec<Key> = (0..USAGE_SHARDS)
            .map(|n| Key::new(format!("{}#{n}", scope.pk()), sk.clone()))
            .collect();
        keys.push(Key::new(scope.pk(), sk));
        keys
    }

    fn parse(item: &Item) -> Result<Counter, LedgerError> {
        serde_json::from_str(&item.data).map_err(|e| LedgerError::Corrupt(e.to_string()))
    }

    async fn read(&self, key: &Key) -> Result<Option<(u64, Counter)>, LedgerError> {
        let Some(item) = self.table.get(key).await? else {
            return Ok(None);
        };
        Ok(Some((item.version, Self::parse(&item)?)))
    }

    /// Tokens `scope` has used in `month` (zero when nothing was counted).
    pub async fn usage(&self, scope: &UsageScope, month: Month) -> Result<Usage, LedgerError> {
        Ok(self
            .usage_of(std::slice::from_ref(scope), month)
            .await?
            .pop()
            .unwrap_or_default())
    }

    /// Tokens each of `scopes` has used in `month`, in order, read in one
    /// batch (one request on DynamoDB).
    pub async fn usage_of(
        &self,
        scopes: &[UsageScope],
        month: Month,
    ) -> Result<Vec<Usage>, LedgerError> {
        Ok(self
            .spend_of(scopes, month)
            .await?
            .into_iter()
            .map(|s| s.usage)
            .collect())
    }

    /// What `scope` has spent in `month`: tokens and cost.
    pub async fn spend(&self, scope: &UsageScope, month: Month) -> Result<Spend, LedgerError> {
        Ok(self
            .spend_of(std::slice::from_ref(scope), month)
            .await?
            .pop()
            .unwrap_or_default())
    }

    /// What each of `scopes` has spent in `month`, in order, read in one
    /// batch (one request on DynamoDB).
    pub async fn spend_of(
        &self,
        scopes: &[UsageScope],
        month: Month,
    ) -> Result<Vec<Spend>, LedgerError> {
        let per_scope = USAGE_SHARDS as usize + 1;
        let keys: Vec<Key> = scopes
            .iter()
            .flat_map(|s| Self::all_keys(s, month))
            .collect();
        let items = self.table.get_many(&keys).await?;
        let mut out = Vec::with_capacity(scopes.len());
        for chunk in items.chunks(per_scope) {
            let mut spend = Spend::default();
            for item in chunk.iter().flatten() {
                let c = Self::parse(item)?;
                let usage = &mut spend.usage;
                usage.input_tokens = usage.input_tokens.saturating_add(c.input_tokens);
                usage.output_tokens = usage.output_tokens.saturating_add(c.output_tokens);
                spend.cost_micros = spend.cost_micros.saturating_add(c.cost_micros);
            }
            out.push(spend);
        }
        Ok(out)
    }

    /// Adds `spend` (a [`Usage`], or a [`Spend`] with its cost) to the
    /// counters of every scope in `scopes` for `month`, all or none. `id`
    /// names this increment: an increment whose id a counter has already
    /// counted is not counted again there, so the call may be retried
    /// safely.
    pub async fn add(
        &self,
        scopes: &[UsageScope],
        month: Month,
        spend: impl Into<Spend>,
        id: &str,
    ) -> Result<(), LedgerError> {
        let spend: Spend = spend.into();
        let usage = spend.usage;
        let mut keys: Vec<Key> = scopes.iter().map(|s| Self::key(s, month, id)).collect();
        keys.sort();
        keys.dedup();
        if keys.is_empty() || spend.is_nothing() {
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
                counter.cost_micros = counter.cost_micros.saturating_add(spend.cost_micros);
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
                        listing: None,
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
            channel_type: None,
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
        let last = Instant(1_796_083_199_999);
        let first = last + std::time::Duration::from_millis(1);
        assert_eq!(Month::of(last).to_string(), "2026-11");
        assert_eq!(Month::of(first).to_string(), "2026-12");
        assert_eq!(Month::of(last).next().first_day(), "2026-12-01");
        let dec = Month::of(first);
        assert_eq!(dec.next().to_string(), "2027-01");
        assert_eq!(dec.next().first_day(), "2027-01-01");
        assert_eq!(dec.start_secs(), first.unix_secs());
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
        let nov = Month::of(Instant(1_795_000_000_000));
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
        let shard = |id: &str| crate::table::shard_of(id, USAGE_SHARDS);
        let mut want = vec![
            format!("USAGE#team:T1#{}/M#2026-11", shard("a")),
            format!("USAGE#team:T1#{}/M#2026-11", shard("b")),
            format!("USAGE#team:T1#{}/M#2026-12", shard("c")),
            format!("USAGE#user:T1:U1#{}/M#2026-11", shard("a")),
        ];
        want.sort();
        want.dedup();
        let pks: Vec<String> = table
            .keys()
            .into_iter()
            .map(|k| k.pk + "/" + &k.sk)
            .collect();
        assert_eq!(pks, want);
    }

    #[tokio::test]
    async fn cost_is_counted_with_the_tokens_once_per_id() {
        let table = Arc::new(MemoryTable::default());
        let ledger = UsageLedger::new(table.clone());
        let ws = UsageScope::workspace_of(&slack());
        let user = UsageScope::user_of(&slack()).unwrap();
        let nov = Month::of(Instant(1_795_000_000_000));
        let call = Spend::new(usage(1000, 100), 0.0045);
        assert_eq!(call.cost_micros, 4_500);
        ledger
            .add(&[ws.clone(), user.clone()], nov, call, "a")
            .await
            .unwrap();
        // Retried under the same id: neither tokens nor cost again.
        ledger
            .add(&[ws.clone(), user.clone()], nov, call, "a")
            .await
            .unwrap();
        // Cost alone (no tokens reported) still counts.
        ledger
            .add(
                std::slice::from_ref(&ws),
                nov,
                Spend::new(Usage::default(), 0.25),
                "b",
            )
            .await
            .unwrap();
        // A plain usage counts no cost.
        ledger
            .add(std::slice::from_ref(&user), nov, usage(1, 1), "c")
            .await
            .unwrap();
        assert_eq!(
            ledger.spend(&ws, nov).await.unwrap(),
            Spend {
                usage: usage(1000, 100),
                cost_micros: 254_500
            }
        );
        assert_eq!(
            ledger.spend(&user, nov).await.unwrap(),
            Spend {
                usage: usage(1001, 101),
                cost_micros: 4_500
            }
        );
        assert_eq!(
            ledger.spend(&ws, nov.next()).await.unwrap(),
            Spend::default()
        );
    }

    #[test]
    fn cost_estimates_round_to_the_micro_dollar_and_never_go_negative() {
        assert_eq!(Spend::new(Usage::default(), 0.000_000_4).cost_micros, 0);
        assert_eq!(Spend::new(Usage::default(), 0.000_000_6).cost_micros, 1);
        assert_eq!(Spend::new(Usage::default(), 50.0).cost_micros, 50_000_000);
        assert_eq!(Spend::new(Usage::default(), -1.0).cost_micros, 0);
        assert_eq!(Spend::new(Usage::default(), f64::NAN).cost_micros, 0);
        assert_eq!(Spend::new(Usage::default(), f64::INFINITY).cost_micros, 0);
    }

    #[tokio::test]
    async fn increments_spread_over_shards_and_sums_include_the_unsharded_item() {
        let table = Arc::new(MemoryTable::default());
        let ledger = UsageLedger::new(table.clone());
        let nov = Month::of(Instant(1_795_000_000_000));
        // What a release before sharding left for this month.
        table
            .transact(vec![Write::Put {
                item: Item {
                    key: Key::new("USAGE#api", "M#2026-11"),
                    version: 1,
                    data: r#"{"input_tokens":500,"output_tokens":50}"#.into(),
                    index: None,
                    expires_at: None,
                    listing: None,
                },
                condition: Condition::NotExists,
            }])
            .await
            .unwrap();
        for i in 0..64 {
            ledger
                .add(&[UsageScope::Api], nov, usage(1, 1), &format!("call-{i}"))
                .await
                .unwrap();
        }
        assert_eq!(
            ledger.usage(&UsageScope::Api, nov).await.unwrap(),
            usage(564, 114)
        );
        // Items written before cost was counted hold none.
        assert_eq!(
            ledger
                .spend(&UsageScope::Api, nov)
                .await
                .unwrap()
                .cost_micros,
            0
        );
        let shards = table
            .keys()
            .iter()
            .filter(|k| k.pk.starts_with("USAGE#api#"))
            .count();
        assert_eq!(
            shards, USAGE_SHARDS as usize,
            "64 increments use every shard"
        );
        let both = ledger
            .usage_of(&[UsageScope::Api, UsageScope::Api], nov)
            .await
            .unwrap();
        assert_eq!(both, vec![usage(564, 114); 2]);
    }

    #[tokio::test]
    async fn a_write_that_applied_but_reported_failure_is_not_counted_twice() {
        let table = Arc::new(MemoryTable::default());
        let ledger = UsageLedger::new(table.clone());
        let nov = Month::of(Instant(1_795_000_000_000));
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
                let nov = Month::of(Instant(1_795_000_000_000));
                // An id on the same shard as ours, so the writes collide.
                let mine = crate::table::shard_of("mine", USAGE_SHARDS);
                let id = (0..)
                    .map(|i| format!("other-{i}"))
                    .find(|id| crate::table::shard_of(id, USAGE_SHARDS) == mine)
                    .unwrap_or_default();
                other
                    .add(&[UsageScope::Api], nov, usage(1000, 0), &id)
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
        let nov = Month::of(Instant(1_795_000_000_000));
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
