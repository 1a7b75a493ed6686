//! The embedded scheduler: EventBridge Scheduler's behaviour on one machine.
//!
//! Plans are items in the table (`SCHEDPLAN#{name}` / `PLAN`, sparse index
//! `schedule_plan`), so they survive restarts. [`EmbeddedScheduler::run`]
//! (driven by `baton dev`) sends each due firing's message to the work queue
//! with second precision, computing fire times with `baton-schedule` (the
//! same parser and next-fire computation as the validation of
//! `POST /schedules`). One-time plans are removed after they fire.
//!
//! Delivery is at least once: the message is sent *before* the plan's next
//! fire time is written, so a crash in between sends the firing again after
//! the restart. The `scheduled_time` the message carries is the same both
//! times, so the firing's dedupe key makes the repeat harmless.
//!
//! Like EventBridge Scheduler, missed firings are not replayed one by one:
//! after downtime a plan fires once (for the latest missed time) and then
//! continues from now.

use async_trait::async_trait;
use baton_core::clock::{self, Instant};
use baton_core::{Condition, Item, Key, Table, TableError, WorkQueue, Write};
use baton_schedule::validate::first_fire;
use baton_schedule::{Expression, Timezone};
use baton_schedule::{SchedulePlan, Scheduler, SchedulerError};
use chrono::{DateTime, SecondsFormat, Utc};
use serde::{Deserialize, Serialize};
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::Notify;

/// The sparse index listing every plan.
pub const PLAN_INDEX: &str = "schedule_plan";
/// Longest the loop sleeps before looking at the table again (plans written
/// by another process are noticed within this).
const MAX_IDLE: Duration = Duration::from_secs(1);

#[derive(Clone, Debug, Serialize, Deserialize)]
struct StoredPlan {
    name: String,
    expression: String,
    timezone: String,
    body: String,
    one_time: bool,
    /// When the plan was written: a rate plan's anchor (EventBridge's
    /// start), so `rate(5 minutes)` fires at start, start + 5 min, …
    /// Stored as integer milliseconds, as plans always were.
    #[serde(with = "clock::as_millis")]
    start: Instant,
    /// The next fire time; `None` never (the plan is removed).
    #[serde(default, with = "clock::as_millis_opt")]
    next_fire_at: Option<Instant>,
}

fn plan_key(name: &str) -> Key {
    Key::new(format!("SCHEDPLAN#{name}"), "PLAN")
}

fn unavailable(e: impl std::fmt::Display) -> SchedulerError {
    SchedulerError::Unavailable(e.to_string())
}

/// Parses a plan's expression and zone; errors read like EventBridge's.
fn parse(plan_expression: &str, timezone: &str) -> Result<(Expression, Timezone), SchedulerError> {
    let expr = Expression::parse(plan_expression)
        .map_err(|e| SchedulerError::Invalid(format!("invalid expression: {e}")))?;
    let tz = Timezone::parse(timezone)
        .map_err(|e| SchedulerError::Invalid(format!("invalid time zone: {e}")))?;
    Ok((expr, tz))
}

/// `body` with `scheduled_time` set, for `{"kind":"schedule"}` messages
/// (the local counterpart of `<aws.scheduler.scheduled-time>`).
pub fn with_scheduled_time(body: &str, at: DateTime<Utc>) -> String {
    let Ok(mut value) = serde_json::from_str::<serde_json::Value>(body) else {
        return body.to_owned();
    };
    let is_schedule = value.get("kind").and_then(|k| k.as_str()) == Some("schedule");
    match value.as_object_mut() {
        Some(obj) if is_schedule => {
            obj.insert(
                "scheduled_time".into(),
                at.to_rfc3339_opts(SecondsFormat::Secs, true).into(),
            );
            value.to_string()
        }
        _ => body.to_owned(),
    }
}

/// The embedded [`Scheduler`] over the shared table and work queue.
pub struct EmbeddedScheduler {
    table: Arc<dyn Table>,
    queue: Arc<dyn WorkQueue>,
    /// Wakes the loop when a plan changes, so a new plan's first firing is
    /// not late by the idle interval.
    changed: Notify,
}

impl EmbeddedScheduler {
    pub fn new(table: Arc<dyn Table>, queue: Arc<dyn WorkQueue>) -> Self {
        EmbeddedScheduler {
            table,
            queue,
            changed: Notify::new(),
        }
    }

    async fn plans(&self) -> Result<Vec<(StoredPlan, u64)>, SchedulerError> {
        let items = self
            .table
            .query_index(PLAN_INDEX, baton_schedule::MAX_SCHEDULES)
            .await
            .map_err(unavailable)?;
        let mut out = Vec::with_capacity(items.len());
        for item in items {
            match serde_json::from_str::<StoredPlan>(&item.data) {
                Ok(p) => out.push((p, item.version)),
                Err(e) => {
                    tracing::warn!(pk = %item.key.pk, error = %e, "unreadable schedule plan skipped")
                }
            }
        }
        Ok(out)
    }

    /// The next fire time of a plan, if any (for tests and status output).
    pub async fn next_fire_at(&self, name: &str) -> Result<Option<Instant>, SchedulerError> {
        let item = self.table.get(&plan_key(name)).await.map_err(unavailable)?;
        match item {
            Some(i) => Ok(serde_json::from_str::<StoredPlan>(&i.data)
                .map_err(unavailable)?
                .next_fire_at),
            None => Ok(None),
        }
    }

    /// Whether a plan with this name exists.
    pub async fn exists(&self, name: &str) -> Result<bool, SchedulerError> {
        Ok(self
            .table
            .get(&plan_key(name))
            .await
            .map_err(unavailable)?
            .is_some())
    }

    /// One pass: sends every firing due at `now` and moves each plan on.
    /// Returns how many messages were sent and the earliest next fire time.
    pub async fn run_due(&self, now: Instant) -> Result<(usize, Option<Instant>), SchedulerError> {
        let mut sent = 0;
        let mut earliest: Option<Instant> = None;
        for (plan, version) in self.plans().await? {
            let Some(due) = plan.next_fire_at else {
                self.remove(&plan.name, version).await?;
                continue;
            };
            if due > now {
                earliest = Some(earliest.map_or(due, |e| e.min(due)));
                continue;
            }
            let Some(due_t) = due.to_utc() else { continue };
            let body = with_scheduled_time(&plan.body, due_t);
            self.queue
                .send(&body, Duration::ZERO)
                .await
                .map_err(unavailable)?;
            sent += 1;
            tracing::info!(plan = %plan.name, scheduled_time = %due_t, "schedule fired");
            let next = if plan.one_time {
                None
            } else {
                match parse(&plan.expression, &plan.timezone) {
                    Ok((expr, tz)) => {
                        // No replay of missed firings: continue after now.
                        let after = now.max(due).to_utc().unwrap_or(due_t);
                        expr.next_after(after, tz.tz(), plan.start.to_utc())
                            .map(Instant::from)
                    }
                    Err(e) => {
                        tracing::warn!(plan = %plan.name, error = %e, "plan no longer parses; removed");
                        None
                    }
                }
            };
            match next {
                None => self.remove(&plan.name, version).await?,
                Some(n) => {
                    let mut moved = plan.clone();
                    moved.next_fire_at = Some(n);
                    // A lost race means the plan was replaced meanwhile; the
                    // replacement's own times stand.
                    self.write(&moved, Condition::VersionIs(version), version + 1)
                        .await?;
                    earliest = Some(earliest.map_or(n, |e| e.min(n)));
                }
            }
        }
        Ok((sent, earliest))
    }

    /// Runs forever: fires due plans, sleeping until the next one is due
    /// (at most a second, or until a plan changes).
    pub async fn run(&self) {
        loop {
            let sleep = match self.run_due(Instant::now()).await {
                Ok((_, Some(next))) => next.since(Instant::now()).min(MAX_IDLE),
                Ok((_, None)) => MAX_IDLE,
                Err(e) => {
                    tracing::warn!(error = %e, "scheduler pass failed");
                    MAX_IDLE
                }
            };
            tokio::select! {
                _ = tokio::time::sleep(sleep) => {}
                _ = self.changed.notified() => {}
            }
        }
    }

    async fn remove(&self, name: &str, version: u64) -> Result<(), SchedulerError> {
        match self
            .table
            .transact(vec![Write::Delete {
                key: plan_key(name),
                condition: Condition::VersionIs(version),
            }])
            .await
        {
            Ok(()) | Err(TableError::ConditionFailed { .. }) => Ok(()),
            Err(e) => Err(unavailable(e)),
        }
    }

    async fn write(
        &self,
        plan: &StoredPlan,
        condition: Condition,
        version: u64,
    ) -> Result<(), SchedulerError> {
        let item = Item {
            key: plan_key(&plan.name),
            version,
            data: serde_json::to_string(plan).map_err(unavailable)?,
            index: Some(PLAN_INDEX.to_owned()),
            expires_at: None,
            listing: None,
        };
        match self
            .table
            .transact(vec![Write::Put { item, condition }])
            .await
        {
            Ok(()) | Err(TableError::ConditionFailed { .. }) => Ok(()),
            Err(e) => Err(unavailable(e)),
        }
    }
}

#[async_trait]
impl Scheduler for EmbeddedScheduler {
    async fn upsert(&self, plan: &SchedulePlan) -> Result<(), SchedulerError> {
        let (expr, tz) = parse(&plan.expression, &plan.timezone)?;
        if plan.one_time == expr.is_recurring() {
            return Err(SchedulerError::Invalid(
                "one_time must be set exactly for at(...) expressions".into(),
            ));
        }
        let start = Instant::now();
        let stored = StoredPlan {
            name: plan.name.clone(),
            expression: expr.as_str().to_owned(),
            timezone: tz.name().to_owned(),
            body: plan.body.clone(),
            one_time: plan.one_time,
            start,
            // An at() in the past still fires once, at once (a wake-up
            // computed a moment too late must not be lost).
            next_fire_at: first_fire(&expr, tz, start).or_else(|| {
                expr.at_local()
                    .and_then(|_| expr.next_after(DateTime::<Utc>::UNIX_EPOCH, tz.tz(), None))
                    .map(Instant::from)
            }),
        };
        let current = self
            .table
            .get(&plan_key(&plan.name))
            .await
            .map_err(unavailable)?;
        let (condition, version) = match current {
            Some(i) => (Condition::VersionIs(i.version), i.version + 1),
            None => (Condition::NotExists, 1),
        };
        let item = Item {
            key: plan_key(&plan.name),
            version,
            data: serde_json::to_string(&stored).map_err(unavailable)?,
            index: Some(PLAN_INDEX.to_owned()),
            expires_at: None,
            listing: None,
        };
        self.table
            .transact(vec![Write::Put { item, condition }])
            .await
            .map_err(|e| match e {
                TableError::ConditionFailed { .. } | TableError::Contention => {
                    SchedulerError::Unavailable("plan changed concurrently; retry".into())
                }
                e => unavailable(e),
            })?;
        self.changed.notify_one();
        Ok(())
    }

    async fn delete(&self, name: &str) -> Result<(), SchedulerError> {
        self.table
            .transact(vec![Write::Delete {
                key: plan_key(name),
                condition: Condition::None,
            }])
            .await
            .map_err(unavailable)?;
        self.changed.notify_one();
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{EmbeddedBackend, QueueConfig};
    use baton_core::{ScheduleFire, WorkMessage};

    fn setup() -> (tempfile::TempDir, EmbeddedBackend, EmbeddedScheduler) {
        let dir = tempfile::tempdir().unwrap();
        let b = EmbeddedBackend::open(dir.path(), QueueConfig::default()).unwrap();
        let s = EmbeddedScheduler::new(b.table.clone(), b.queue.clone());
        (dir, b, s)
    }

    fn fire_body(id: &str) -> String {
        WorkMessage::Schedule(ScheduleFire {
            schedule_id: id.into(),
            scheduled_time: None,
        })
        .to_body()
    }

    fn plan(name: &str, expression: &str, one_time: bool) -> SchedulePlan {
        SchedulePlan {
            name: name.into(),
            expression: expression.into(),
            timezone: "Europe/Berlin".into(),
            body: fire_body(name),
            one_time,
        }
    }

    #[tokio::test]
    async fn one_time_plan_fires_once_with_its_time_and_is_removed() {
        let (_d, b, s) = setup();
        let at = Utc::now() + chrono::TimeDelta::seconds(2);
        let local = at.with_timezone(&chrono_tz::Europe::Berlin);
        let expr = format!("at({})", local.format("%Y-%m-%dT%H:%M:%S"));
        s.upsert(&plan("p1", &expr, true)).await.unwrap();
        let due = s.next_fire_at("p1").await.unwrap().unwrap();
        assert_eq!(due, Instant(at.timestamp() * 1000), "second precision");
        assert_eq!(
            s.run_due(due - Duration::from_millis(1)).await.unwrap().0,
            0,
            "not before its time"
        );
        assert_eq!(s.run_due(due).await.unwrap().0, 1);
        assert!(!s.exists("p1").await.unwrap());
        assert_eq!(s.run_due(due + Duration::from_secs(10)).await.unwrap().0, 0);
        let got = b.queue.receive(10, Duration::ZERO).await.unwrap();
        assert_eq!(got.len(), 1);
        let WorkMessage::Schedule(fire) = WorkMessage::parse(&got[0].body).unwrap() else {
            panic!("not a firing: {}", got[0].body)
        };
        assert_eq!(fire.schedule_id, "p1");
        assert_eq!(
            fire.scheduled_time.as_deref(),
            Some(at.to_rfc3339_opts(SecondsFormat::Secs, true).as_str())
        );
    }

    #[tokio::test]
    async fn rate_plan_fires_at_start_then_every_interval_and_survives_reopen() {
        let dir = tempfile::tempdir().unwrap();
        let start;
        {
            let b = EmbeddedBackend::open(dir.path(), QueueConfig::default()).unwrap();
            let s = EmbeddedScheduler::new(b.table.clone(), b.queue.clone());
            s.upsert(&plan("r", "rate(5 minutes)", false))
                .await
                .unwrap();
            start = s.next_fire_at("r").await.unwrap().unwrap();
            assert!(Instant::now().since(start) < Duration::from_secs(5));
        }
        let b = EmbeddedBackend::open(dir.path(), QueueConfig::default()).unwrap();
        let s = EmbeddedScheduler::new(b.table.clone(), b.queue.clone());
        assert_eq!(s.next_fire_at("r").await.unwrap(), Some(start), "persisted");
        let (sent, next) = s.run_due(start).await.unwrap();
        assert_eq!(sent, 1);
        assert_eq!(next, Some(start + Duration::from_secs(300)));
        // Down for an hour: fires once, then continues from now.
        let later = start + Duration::from_millis(3_600_001);
        assert_eq!(s.run_due(later).await.unwrap().0, 1);
        assert_eq!(
            s.next_fire_at("r").await.unwrap(),
            Some(start + Duration::from_secs(3_900))
        );
        s.delete("r").await.unwrap();
        s.delete("r").await.unwrap(); // idempotent
        assert!(!s.exists("r").await.unwrap());
    }

    #[tokio::test]
    async fn refuses_what_eventbridge_refuses() {
        let (_d, _b, s) = setup();
        let e = s
            .upsert(&plan("x", "cron(0 9 * * MON *)", false))
            .await
            .unwrap_err();
        assert!(
            matches!(e, SchedulerError::Invalid(ref m) if m.contains("day-of-month")),
            "{e}"
        );
        let mut p = plan("y", "rate(1 hour)", false);
        p.timezone = "Mars/Olympus".into();
        assert!(matches!(
            s.upsert(&p).await,
            Err(SchedulerError::Invalid(_))
        ));
    }

    #[test]
    fn a_stored_plan_reads_and_writes_as_before() {
        for old in [
            r#"{"name":"r","expression":"rate(5 minutes)","timezone":"UTC","body":"{}","one_time":false,"start":1767225600000,"next_fire_at":1767225900000}"#,
            r#"{"name":"a","expression":"at(2026-01-01T00:00:00)","timezone":"UTC","body":"{}","one_time":true,"start":1767225600000,"next_fire_at":null}"#,
        ] {
            let plan: StoredPlan = serde_json::from_str(old).unwrap();
            assert_eq!(plan.start, Instant(1_767_225_600_000));
            assert_eq!(serde_json::to_string(&plan).unwrap(), old);
        }
    }

    #[test]
    fn scheduled_time_only_goes_into_schedule_messages() {
        let t = Utc::now();
        assert!(with_scheduled_time(&fire_body("a"), t).contains("scheduled_time"));
        let reap = r#"{"kind":"reap"}"#;
        assert_eq!(with_scheduled_time(reap, t), reap);
    }
}
