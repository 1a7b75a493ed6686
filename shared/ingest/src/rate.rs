//! `[limits] tasks_per_hour`: how many new tasks one person may start in
//! a clock hour (UTC). The HTTP API, which has no person, counts as one
//! (`api`). Over it a new task is refused with a message saying so (HTTP:
//! 429; Slack: told in the thread) and nothing else changes; messages to
//! a running task are not new tasks and are never refused.
//!
//! One counter item per person and hour (`RATE#{person}#{yyyymmddhh}`),
//! incremented after the task was created (a request Slack retries finds
//! its task and is not counted twice), expiring a day later. One person's
//! counter takes only that person's writes: no hot key. The check reads
//! before the task is created, so requests arriving together may overshoot
//! by as many as arrive at that moment.

use baton_core::{Condition, Item, Key, Origin, Table, TableError, Write};
use chrono::{TimeZone, Utc};
use serde::{Deserialize, Serialize};
use std::sync::Arc;

/// How often a conflicting increment is retried before giving up.
const MAX_RETRIES: usize = 10;
/// Counters are kept a day (then TTL removes them).
const KEEP_SECS: i64 = 24 * 3600;

#[derive(Clone)]
pub(crate) struct TaskRate {
    table: Arc<dyn Table>,
    per_hour: u32,
}

#[derive(Default, Serialize, Deserialize)]
struct Count {
    n: u32,
}

impl TaskRate {
    pub(crate) fn new(table: Arc<dyn Table>, per_hour: u32) -> Self {
        TaskRate { table, per_hour }
    }

    /// The refusal to give when `origin`'s person has started
    /// `tasks_per_hour` tasks in the hour of `now_ms`.
    pub(crate) async fn refusal(
        &self,
        origin: &Origin,
        now_ms: i64,
    ) -> Result<Option<String>, TableError> {
        let key = key_of(origin, now_ms);
        let used = match self.table.get(&key).await? {
            Some(item) => count_of(&item)?.n,
            None => 0,
        };
        if used < self.per_hour {
            return Ok(None);
        }
        let next = Utc
            .timestamp_millis_opt(hour_start(now_ms) + 3_600_000)
            .single()
            .map(|t| t.format("%H:%M UTC").to_string())
            .unwrap_or_else(|| "the next hour".to_owned());
        let who = match origin {
            Origin::Slack { .. } => "You have",
            Origin::Http => "The HTTP API has",
        };
        Ok(Some(format!(
            "{who} started {} tasks this hour, the limit (`limits.tasks_per_hour`); \
             no task was started. Try again after {next}.",
            self.per_hour
        )))
    }

    /// Counts one task started by `origin`'s person now.
    pub(crate) async fn count(&self, origin: &Origin, now_ms: i64) -> Result<(), TableError> {
        let key = key_of(origin, now_ms);
        for _ in 0..MAX_RETRIES {
            let current = self.table.get(&key).await?;
            let (n, version, condition) = match &current {
                Some(item) => (
                    count_of(item)?.n,
                    item.version,
                    Condition::VersionIs(item.version),
                ),
                None => (0, 0, Condition::NotExists),
            };
            let item = Item {
                key: key.clone(),
                version: version + 1,
                data: serde_json::to_string(&Count { n: n + 1 })
                    .map_err(|e| TableError::Corrupt(e.to_string()))?,
                index: None,
                expires_at: Some(now_ms / 1000 + KEEP_SECS),
                listing: None,
            };
            match self
                .table
                .transact(vec![Write::Put { item, condition }])
                .await
            {
                Ok(()) => return Ok(()),
                Err(TableError::ConditionFailed { .. } | TableError::Contention) => continue,
                Err(e) => return Err(e),
            }
        }
        Err(TableError::Contention)
    }
}

fn hour_start(now_ms: i64) -> i64 {
    now_ms - now_ms.rem_euclid(3_600_000)
}

fn key_of(origin: &Origin, now_ms: i64) -> Key {
    let person = match origin {
        Origin::Slack { team_id, user, .. } => format!("user:{team_id}:{user}"),
        Origin::Http => "api".to_owned(),
    };
    let hour = Utc
        .timestamp_millis_opt(hour_start(now_ms))
        .single()
        .map(|t| t.format("%Y%m%d%H").to_string())
        .unwrap_or_default();
    Key::new(format!("RATE#{person}#{hour}"), "R")
}

fn count_of(item: &Item) -> Result<Count, TableError> {
    serde_json::from_str(&item.data).map_err(|e| TableError::Corrupt(e.to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use baton_core::testing::MemoryTable;

    /// 2026-11-18T11:06:40Z.
    const NOW: i64 = 1_795_000_000_000;

    fn slack(user: &str) -> Origin {
        Origin::Slack {
            team_id: "T1".into(),
            channel: "C1".into(),
            thread_ts: "1.0".into(),
            user: user.into(),
            channel_type: None,
        }
    }

    #[tokio::test]
    async fn the_person_over_the_hourly_rate_is_refused_until_the_next_hour() {
        let rate = TaskRate::new(Arc::new(MemoryTable::default()), 2);
        let alice = slack("UALICE");
        for _ in 0..2 {
            assert_eq!(rate.refusal(&alice, NOW).await.unwrap(), None);
            rate.count(&alice, NOW).await.unwrap();
        }
        assert_eq!(
            rate.refusal(&alice, NOW).await.unwrap().as_deref(),
            Some(
                "You have started 2 tasks this hour, the limit (`limits.tasks_per_hour`); \
                 no task was started. Try again after 12:00 UTC."
            )
        );
        // Another person, the HTTP API, and the next hour are not held.
        assert_eq!(rate.refusal(&slack("UBOB"), NOW).await.unwrap(), None);
        assert_eq!(rate.refusal(&Origin::Http, NOW).await.unwrap(), None);
        let next_hour = NOW + 3_600_000;
        assert_eq!(rate.refusal(&alice, next_hour).await.unwrap(), None);
    }
}
