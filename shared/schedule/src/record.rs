//! Schedules: crons, rate schedules, one-time schedules and heartbeats.
//!
//! Two halves, kept consistent by [`ScheduleService`]:
//!
//! * the **record** ([`Schedule`]) in the table: what to run, for whom, and
//!   what happened at the last firing;
//! * the **plan** ([`SchedulePlan`]) in the [`Scheduler`] (EventBridge
//!   Scheduler on AWS, the embedded scheduler locally): when to send which
//!   message to the work queue.
//!
//! Item layout (same table as `baton_core::TaskStore`):
//!
//! | item | pk | sk | index |
//! | --- | --- | --- | --- |
//! | schedule | `SCHED#{id}` | `SCHED` | `schedule` |
//! | task → schedule link | `TASK#{task_id}` | `SCHEDULE` | |
//!
//! Expressions are stored as the canonical text `baton-schedule` produces;
//! this crate does not parse them (callers validate first).
//!
//! Creating writes the record as [`ScheduleState::Pending`], then the plan,
//! then marks the record active; deleting marks it
//! [`ScheduleState::Deleting`], deletes the plan, then the record. A crash
//! half-way leaves a pending or deleting record, which
//! [`ScheduleService::repair`] finishes (a pending create is rolled back:
//! whoever asked was not told it succeeded). A plan whose record is gone
//! fires into nothing: the firing handler deletes such orphans.

use async_trait::async_trait;
use baton_core::clock::{self, Instant};
use baton_core::TaskId;
use baton_core::{Condition, Item, Key, Table, TableError, Write};
use serde::{Deserialize, Serialize};
use std::sync::Arc;
use std::time::Duration;

/// The sparse index listing every schedule record.
pub const SCHEDULE_INDEX: &str = "schedule";
/// Most schedules [`ScheduleStore::list`] reads.
pub const MAX_SCHEDULES: usize = 10_000;
/// How many recent heartbeat findings a record remembers.
const MAX_RECENT_FINDINGS: usize = 20;
/// How often a conflicting update is retried.
const MAX_CONFLICT_RETRIES: usize = 20;
/// A pending or deleting record younger than this is left to the request
/// that is still working on it.
pub const REPAIR_GRACE: Duration = Duration::from_secs(60);

/// What a firing runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ScheduleKind {
    /// Runs the instruction and posts the answer.
    Task,
    /// A periodic check: posts only when there is something to report, and
    /// not the same finding twice within the repeat window.
    Heartbeat,
}

impl ScheduleKind {
    /// The name used in JSON (`task`, `heartbeat`).
    pub fn as_str(self) -> &'static str {
        match self {
            ScheduleKind::Task => "task",
            ScheduleKind::Heartbeat => "heartbeat",
        }
    }
}

/// Where a firing's answer goes.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ScheduleTarget {
    pub slack_channel: String,
    /// The thread to answer in; `None` posts a new top-level message.
    #[serde(default)]
    pub thread_ts: Option<String>,
}

/// Where a record is in its life.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ScheduleState {
    /// Written, its plan not yet confirmed.
    Pending,
    /// Record and plan both exist.
    Active,
    /// A one-time schedule that has fired (its plan deleted itself).
    Completed,
    /// Being deleted: the plan may or may not still exist.
    Deleting,
}

impl ScheduleState {
    /// The name used in JSON.
    pub fn as_str(self) -> &'static str {
        match self {
            ScheduleState::Pending => "pending",
            ScheduleState::Active => "active",
            ScheduleState::Completed => "completed",
            ScheduleState::Deleting => "deleting",
        }
    }
}

/// A heartbeat finding already reported: its normalised text hash and when.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Finding {
    pub hash: String,
    #[serde(with = "clock::as_millis")]
    pub at: Instant,
}

/// The schedule record.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Schedule {
    /// A UUID; also the plan's name.
    pub id: String,
    /// Canonical expression text (`cron(...)`, `rate(...)`, `at(...)`).
    pub expression: String,
    /// IANA zone name.
    pub timezone: String,
    /// The instruction (for a heartbeat: its checklist).
    pub input: String,
    pub kind: ScheduleKind,
    #[serde(default)]
    pub target: Option<ScheduleTarget>,
    /// Who may delete it: `api` (the bearer-token API) or `slack:TEAM:USER`.
    pub owner: String,
    /// The agent configuration its tasks run with.
    #[serde(default = "default_agent")]
    pub agent: String,
    pub state: ScheduleState,
    // The record's instants are stored as integer milliseconds, as they
    // always were.
    #[serde(with = "clock::as_millis")]
    pub created_at: Instant,
    #[serde(default, with = "clock::as_millis_opt")]
    pub next_fire_at: Option<Instant>,
    #[serde(default, with = "clock::as_millis_opt")]
    pub last_fired_at: Option<Instant>,
    #[serde(default)]
    pub last_task_id: Option<TaskId>,
    /// The scheduled time of the last firing (its dedupe key part).
    #[serde(default)]
    pub last_scheduled_time: Option<String>,
    /// Heartbeats: the last finding posted (cut to 2000 characters) and when.
    #[serde(default)]
    pub last_finding: Option<String>,
    #[serde(default, with = "clock::as_millis_opt")]
    pub last_finding_at: Option<Instant>,
    /// Heartbeats: findings posted recently, newest last (bounded).
    #[serde(default)]
    pub recent_findings: Vec<Finding>,
    /// The record's version in the table; conditions compare against it.
    #[serde(skip)]
    pub version: u64,
}

fn default_agent() -> String {
    "default".to_owned()
}

impl Schedule {
    /// Whether the expression is a one-time `at(...)`.
    pub fn is_one_time(&self) -> bool {
        self.expression.starts_with("at(")
    }

    /// The schedule JSON of the HTTP API.
    pub fn to_json(&self) -> serde_json::Value {
        serde_json::json!({
            "schedule_id": self.id,
            "expression": self.expression,
            "timezone": self.timezone,
            "input": self.input,
            "kind": self.kind.as_str(),
            "target": self.target,
            "owner": self.owner,
            "agent": self.agent,
            "state": self.state.as_str(),
            "created_at": self.created_at.to_string(),
            "next_fire_at": self.next_fire_at.map(|t| t.to_string()),
            "last_fired_at": self.last_fired_at.map(|t| t.to_string()),
            "last_task_id": self.last_task_id,
            "last_finding": self.last_finding,
            "last_finding_at": self.last_finding_at.map(|t| t.to_string()),
        })
    }

    /// Whether a finding with this hash was reported within `window` of `now`.
    pub fn reported_recently(&self, hash: &str, now: Instant, window: Duration) -> bool {
        self.recent_findings
            .iter()
            .any(|f| f.hash == hash && now.since(f.at) < window)
    }

    /// Remembers a reported finding, forgetting ones older than `window`.
    pub fn record_finding(&mut self, text: &str, hash: &str, now: Instant, window: Duration) {
        self.recent_findings
            .retain(|f| f.hash != hash && now.since(f.at) < window);
        self.recent_findings.push(Finding {
            hash: hash.to_owned(),
            at: now,
        });
        let excess = self
            .recent_findings
            .len()
            .saturating_sub(MAX_RECENT_FINDINGS);
        self.recent_findings.drain(..excess);
        self.last_finding = Some(text.chars().take(2000).collect());
        self.last_finding_at = Some(now);
    }
}

/// Whether `s` is a well-formed schedule id (a UUID in hyphenated form).
pub fn parse_schedule_id(s: &str) -> Option<String> {
    uuid::Uuid::try_parse(s)
        .ok()
        .map(|u| u.hyphenated().to_string())
}

/// A new, time-ordered schedule id.
pub fn new_schedule_id() -> String {
    uuid::Uuid::now_v7().hyphenated().to_string()
}

/// Errors of the schedule store and service.
#[derive(Debug, Clone, thiserror::Error, PartialEq, Eq)]
pub enum ScheduleError {
    #[error("schedule {0} not found")]
    NotFound(String),
    #[error("schedule {0} kept changing under concurrent writers")]
    Conflict(String),
    /// The requester may not do this (e.g. delete someone else's schedule).
    #[error("{0}")]
    Forbidden(String),
    #[error(transparent)]
    Table(#[from] TableError),
    #[error(transparent)]
    Scheduler(#[from] SchedulerError),
    #[error("stored schedule unreadable: {0}")]
    Corrupt(String),
}

fn corrupt(e: serde_json::Error) -> ScheduleError {
    ScheduleError::Corrupt(e.to_string())
}

fn schedule_key(id: &str) -> Key {
    Key::new(format!("SCHED#{id}"), "SCHED")
}

fn link_key(task_id: &TaskId) -> Key {
    Key::new(format!("TASK#{task_id}"), "SCHEDULE")
}

#[derive(Serialize, Deserialize)]
struct Link {
    schedule_id: String,
}

/// Typed access to schedule records. Cheap to clone.
#[derive(Clone)]
pub struct ScheduleStore {
    table: Arc<dyn Table>,
}

impl ScheduleStore {
    pub fn new(table: Arc<dyn Table>) -> Self {
        ScheduleStore { table }
    }

    fn item(s: &Schedule, version: u64) -> Result<Item, ScheduleError> {
        Ok(Item {
            key: schedule_key(&s.id),
            version,
            data: serde_json::to_string(s).map_err(corrupt)?,
            index: Some(SCHEDULE_INDEX.to_owned()),
            expires_at: None,
            listing: None,
        })
    }

    fn parse(item: Item) -> Result<Schedule, ScheduleError> {
        let mut s: Schedule = serde_json::from_str(&item.data).map_err(corrupt)?;
        s.version = item.version;
        Ok(s)
    }

    /// Writes a new record. `Ok(false)`: a record with this id exists.
    pub async fn create(&self, s: &mut Schedule) -> Result<bool, ScheduleError> {
        let item = Self::item(s, 1)?;
        match self
            .table
            .transact(vec![Write::Put {
                item,
                condition: Condition::NotExists,
            }])
            .await
        {
            Ok(()) => {
                s.version = 1;
                Ok(true)
            }
            Err(TableError::ConditionFailed { .. }) => Ok(false),
            Err(e) => Err(e.into()),
        }
    }

    pub async fn get(&self, id: &str) -> Result<Option<Schedule>, ScheduleError> {
        match self.table.get(&schedule_key(id)).await? {
            Some(item) => Ok(Some(Self::parse(item)?)),
            None => Ok(None),
        }
    }

    /// Every record (up to [`MAX_SCHEDULES`]), oldest first.
    pub async fn list(&self) -> Result<Vec<Schedule>, ScheduleError> {
        let items = self
            .table
            .query_index(SCHEDULE_INDEX, MAX_SCHEDULES)
            .await?;
        let mut out = items
            .into_iter()
            .filter(|i| i.key.sk == "SCHED")
            .map(Self::parse)
            .collect::<Result<Vec<_>, _>>()?;
        out.sort_by(|a, b| (a.created_at, &a.id).cmp(&(b.created_at, &b.id)));
        Ok(out)
    }

    /// Read-modify-write under the record's version, retried on conflict.
    /// `change` returns `false` for "nothing to write". The record after the
    /// change is returned; `None` if it does not exist.
    pub async fn update<F>(
        &self,
        id: &str,
        mut change: F,
    ) -> Result<Option<Schedule>, ScheduleError>
    where
        F: FnMut(&mut Schedule) -> bool,
    {
        for _ in 0..MAX_CONFLICT_RETRIES {
            let Some(mut s) = self.get(id).await? else {
                return Ok(None);
            };
            let read_version = s.version;
            if !change(&mut s) {
                return Ok(Some(s));
            }
            let item = Self::item(&s, read_version + 1)?;
            match self
                .table
                .transact(vec![Write::Put {
                    item,
                    condition: Condition::VersionIs(read_version),
                }])
                .await
            {
                Ok(()) => {
                    s.version = read_version + 1;
                    return Ok(Some(s));
                }
                Err(TableError::ConditionFailed { .. }) | Err(TableError::Contention) => continue,
                Err(e) => return Err(e.into()),
            }
        }
        Err(ScheduleError::Conflict(id.to_owned()))
    }

    /// Deletes a record (no error if it is gone).
    pub async fn delete(&self, id: &str) -> Result<(), ScheduleError> {
        self.table
            .transact(vec![Write::Delete {
                key: schedule_key(id),
                condition: Condition::None,
            }])
            .await?;
        Ok(())
    }

    /// Records that `task_id` was created by schedule `schedule_id`, so the
    /// delivery of its answer can find the schedule (heartbeat repeats).
    pub async fn link_task(
        &self,
        task_id: &TaskId,
        schedule_id: &str,
    ) -> Result<(), ScheduleError> {
        let data = serde_json::to_string(&Link {
            schedule_id: schedule_id.to_owned(),
        })
        .map_err(corrupt)?;
        let item = Item {
            key: link_key(task_id),
            version: 1,
            data,
            index: None,
            expires_at: None,
            listing: None,
        };
        self.table
            .transact(vec![Write::Put {
                item,
                condition: Condition::None,
            }])
            .await?;
        Ok(())
    }

    /// The schedule that created `task_id`, if one did.
    pub async fn schedule_of_task(
        &self,
        task_id: &TaskId,
    ) -> Result<Option<String>, ScheduleError> {
        match self.table.get(&link_key(task_id)).await? {
            Some(item) => {
                let link: Link = serde_json::from_str(&item.data).map_err(corrupt)?;
                Ok(Some(link.schedule_id))
            }
            None => Ok(None),
        }
    }
}

/// What the scheduler should do: send `body` to the work queue at the times
/// `expression` names, in `timezone`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SchedulePlan {
    /// Unique within the deployment (the schedule id, or `wake-{task}` for
    /// wake-ups); 1-64 characters of `[0-9A-Za-z._-]`.
    pub name: String,
    /// Canonical expression text.
    pub expression: String,
    /// IANA zone name.
    pub timezone: String,
    /// The work-queue message (a [`baton_core::WorkMessage`] JSON). For a
    /// `{"kind":"schedule"}` body the scheduler fills in `scheduled_time`
    /// per firing.
    pub body: String,
    /// An `at(...)` schedule: removed after it fires.
    pub one_time: bool,
}

/// Scheduler failures.
#[derive(Debug, Clone, thiserror::Error, PartialEq, Eq)]
pub enum SchedulerError {
    /// The scheduler refused the plan (bad expression, zone or name).
    #[error("schedule refused: {0}")]
    Invalid(String),
    #[error("scheduler unavailable: {0}")]
    Unavailable(String),
}

/// The scheduler port: cron/rate/one-time plans that enqueue a message.
#[async_trait]
pub trait Scheduler: Send + Sync {
    /// Creates the plan, or replaces the one with the same name.
    async fn upsert(&self, plan: &SchedulePlan) -> Result<(), SchedulerError>;
    /// Removes a plan. Removing a plan that does not exist succeeds.
    async fn delete(&self, name: &str) -> Result<(), SchedulerError>;
}

/// The plan of a schedule record: its firing message.
pub fn plan_for(s: &Schedule) -> SchedulePlan {
    let body = baton_core::WorkMessage::Schedule(baton_core::ScheduleFire {
        schedule_id: s.id.clone(),
        scheduled_time: None,
    })
    .to_body();
    SchedulePlan {
        name: s.id.clone(),
        expression: s.expression.clone(),
        timezone: s.timezone.clone(),
        body,
        one_time: s.is_one_time(),
    }
}

/// Records and plans together, kept consistent across failures.
#[derive(Clone)]
pub struct ScheduleService {
    store: ScheduleStore,
    scheduler: Arc<dyn Scheduler>,
}

impl ScheduleService {
    pub fn new(store: ScheduleStore, scheduler: Arc<dyn Scheduler>) -> Self {
        ScheduleService { store, scheduler }
    }

    pub fn store(&self) -> &ScheduleStore {
        &self.store
    }

    pub fn scheduler(&self) -> &Arc<dyn Scheduler> {
        &self.scheduler
    }

    /// Creates a schedule: record (pending), plan, record (active). The
    /// expression must already be validated. Idempotent on the id: creating
    /// an existing id finishes that schedule's creation and returns it.
    /// If the plan is refused, the record is removed again.
    pub async fn create(&self, mut s: Schedule) -> Result<Schedule, ScheduleError> {
        s.state = ScheduleState::Pending;
        if !self.store.create(&mut s).await? {
            let existing = self
                .store
                .get(&s.id)
                .await?
                .ok_or_else(|| ScheduleError::NotFound(s.id.clone()))?;
            if existing.state != ScheduleState::Pending {
                return Ok(existing);
            }
            s = existing;
        }
        if let Err(e) = self.scheduler.upsert(&plan_for(&s)).await {
            if matches!(e, SchedulerError::Invalid(_)) {
                // Refused for good: nothing to keep. Best effort; the repair
                // sweep removes the pending record if this fails too.
                let _ = self.store.delete(&s.id).await;
            }
            return Err(e.into());
        }
        let activated = self
            .store
            .update(&s.id, |r| {
                if r.state == ScheduleState::Pending {
                    r.state = ScheduleState::Active;
                    true
                } else {
                    false
                }
            })
            .await?;
        activated.ok_or_else(|| ScheduleError::NotFound(s.id.clone()))
    }

    /// Deletes a schedule if `requester` may: its owner, or an admin.
    /// Marks the record, deletes the plan, then the record.
    pub async fn delete(
        &self,
        id: &str,
        requester: &str,
        admin: bool,
    ) -> Result<Schedule, ScheduleError> {
        let s = self
            .store
            .get(id)
            .await?
            .ok_or_else(|| ScheduleError::NotFound(id.to_owned()))?;
        if !admin && s.owner != requester {
            return Err(ScheduleError::Forbidden(format!(
                "schedule {id} belongs to {}; only its owner or an admin may delete it",
                s.owner
            )));
        }
        self.store
            .update(id, |r| {
                if r.state == ScheduleState::Deleting {
                    return false;
                }
                r.state = ScheduleState::Deleting;
                true
            })
            .await?;
        self.scheduler.delete(id).await?;
        self.store.delete(id).await?;
        Ok(s)
    }

    /// Finishes what a crash left half-done: pending records older than
    /// [`REPAIR_GRACE`] are rolled back (plan and record deleted),
    /// deleting ones are deleted. Returns how many were repaired.
    pub async fn repair(&self, now: Instant) -> Result<usize, ScheduleError> {
        let mut repaired = 0;
        for s in self.store.list().await? {
            let stale = now.since(s.created_at) >= REPAIR_GRACE;
            let broken = match s.state {
                ScheduleState::Pending => stale,
                ScheduleState::Deleting => true,
                ScheduleState::Active | ScheduleState::Completed => false,
            };
            if !broken {
                continue;
            }
            tracing::info!(schedule_id = %s.id, state = s.state.as_str(), "repairing a half-done schedule");
            self.scheduler.delete(&s.id).await?;
            self.store.delete(&s.id).await?;
            repaired += 1;
        }
        Ok(repaired)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Records as stored before their instants were [`Instant`]s: they
    /// read, and are written back byte for byte.
    const OLD_RECORDS: [&str; 2] = [
        concat!(
            r#"{"id":"0190a5e4-7f3b-7cc0-8a1e-2b3c4d5e6f70","expression":"rate(1 hour)","#,
            r#""timezone":"UTC","input":"check the queue","kind":"heartbeat","#,
            r#""target":{"slack_channel":"C1","thread_ts":null},"owner":"api","agent":"default","#,
            r#""state":"active","created_at":1767225600000,"next_fire_at":1767229200000,"#,
            r#""last_fired_at":1767225600000,"last_task_id":"0190a5e4-7f3b-7cc0-8a1e-2b3c4d5e6f71","#,
            r#""last_scheduled_time":"2026-01-01T00:00:00Z","last_finding":"the queue is stuck","#,
            r#""last_finding_at":1767225660000,"recent_findings":[{"hash":"ab12","at":1767225660000}]}"#,
        ),
        concat!(
            r#"{"id":"0190a5e4-7f3b-7cc0-8a1e-2b3c4d5e6f72","expression":"at(2026-02-01T09:00:00)","#,
            r#""timezone":"Europe/Berlin","input":"remind me","kind":"task","target":null,"#,
            r#""owner":"slack:T1:U1","agent":"default","state":"completed","#,
            r#""created_at":1767225600000,"next_fire_at":null,"last_fired_at":null,"#,
            r#""last_task_id":null,"last_scheduled_time":null,"last_finding":null,"#,
            r#""last_finding_at":null,"recent_findings":[]}"#,
        ),
    ];

    #[test]
    fn records_of_earlier_releases_read_and_write_back_the_same() {
        for old in OLD_RECORDS {
            let s: Schedule = serde_json::from_str(old).unwrap();
            assert_eq!(s.created_at, Instant(1_767_225_600_000));
            assert_eq!(serde_json::to_string(&s).unwrap(), old);
        }
        let s: Schedule = serde_json::from_str(OLD_RECORDS[0]).unwrap();
        assert_eq!(s.next_fire_at, Some(Instant(1_767_229_200_000)));
        assert_eq!(s.recent_findings[0].at, Instant(1_767_225_660_000));
        // The API shows them as text, as it always did.
        let v = s.to_json();
        assert_eq!(v["created_at"], "2026-01-01T00:00:00.000Z");
        assert_eq!(v["next_fire_at"], "2026-01-01T01:00:00.000Z");
        assert_eq!(v["last_finding_at"], "2026-01-01T00:01:00.000Z");
        let done: Schedule = serde_json::from_str(OLD_RECORDS[1]).unwrap();
        assert_eq!(done.to_json()["next_fire_at"], serde_json::Value::Null);
    }

    #[test]
    fn a_finding_is_not_repeated_within_its_window() {
        let mut s: Schedule = serde_json::from_str(OLD_RECORDS[0]).unwrap();
        let hour = Duration::from_secs(3600);
        let reported = Instant(1_767_225_660_000);
        assert!(s.reported_recently("ab12", reported + hour / 2, hour));
        assert!(!s.reported_recently("ab12", reported + hour, hour));
        assert!(!s.reported_recently("cd34", reported, hour));
        let later = reported + hour * 2;
        s.record_finding("another", "cd34", later, hour);
        assert_eq!(s.recent_findings.len(), 1, "the stale finding is forgotten");
        assert_eq!(s.last_finding_at, Some(later));
    }
}
