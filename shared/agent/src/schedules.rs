//! Schedule firings and heartbeat delivery.
//!
//! A firing (`{"kind":"schedule","schedule_id","scheduled_time"}` on the
//! work queue) creates the schedule's task under the dedupe key
//! `schedule:{id}:{scheduled_time}`, so a firing delivered twice creates one
//! task, then records the firing on the schedule (`last_fired_at`,
//! `last_task_id`, `next_fire_at`).
//!
//! Heartbeats speak only when there is something to report: an empty
//! report (`NO_REPLY`/`HEARTBEAT_OK`) posts nothing (as for every task), and
//! [`HeartbeatReplies`] keeps the same finding (normalised text hash) from
//! being posted again within the repeat window.

use crate::reply::{ReplyError, ReplySink};
use crate::sanitize::NO_REPLY;
use crate::worker::{Disposition, Worker};
use async_trait::async_trait;
use baton_core::schedule::{parse_schedule_id, ScheduleService, ScheduleState, ScheduleStore};
use baton_core::{
    now_ms, rfc3339, Created, EntryKind, Millis, Origin, Schedule, ScheduleFire, ScheduleKind,
    Task, TaskId, TaskStatus, Wake,
};
use sha2::{Digest, Sha256};
use std::sync::Arc;
use std::time::Duration;

/// How long a heartbeat does not repeat a finding, unless configured.
pub const DEFAULT_REPEAT_WINDOW: Duration = Duration::from_secs(24 * 3600);
/// The answer a heartbeat gives when nothing needs attention.
pub const HEARTBEAT_OK: &str = "HEARTBEAT_OK";
/// How long a firing of a schedule still being created waits.
const PENDING_RETRY: Duration = Duration::from_secs(5);

/// What a worker needs to fire schedules.
#[derive(Clone)]
pub struct WorkerSchedules {
    pub(crate) service: ScheduleService,
}

impl Worker {
    /// Enables schedule firings and heartbeat repeat suppression: answers of
    /// heartbeat tasks go through [`HeartbeatReplies`] with `repeat_window`.
    pub fn with_schedules(mut self, service: ScheduleService, repeat_window: Duration) -> Self {
        self.replies = Arc::new(HeartbeatReplies::new(
            service.store().clone(),
            self.replies.clone(),
            repeat_window,
        ));
        self.schedules = Some(WorkerSchedules { service });
        self
    }

    /// Handles one firing message.
    pub(crate) async fn fire(&self, fire: &ScheduleFire) -> Disposition {
        let Some(schedules) = &self.schedules else {
            return Disposition::Poison {
                reason: format!(
                    "schedule {} fired, but schedules are not enabled",
                    fire.schedule_id
                ),
            };
        };
        match self.fire_inner(&schedules.service, fire).await {
            Ok(d) => d,
            Err(reason) => {
                tracing::warn!(schedule_id = %fire.schedule_id, %reason, "firing failed; will retry");
                Disposition::Retry {
                    reason,
                    after: self.settings.retry_delay,
                }
            }
        }
    }

    async fn fire_inner(
        &self,
        service: &ScheduleService,
        fire: &ScheduleFire,
    ) -> Result<Disposition, String> {
        let Some(id) = parse_schedule_id(&fire.schedule_id) else {
            return Ok(Disposition::Poison {
                reason: format!("`{}` is not a schedule id", fire.schedule_id),
            });
        };
        let store = service.store();
        let Some(schedule) = store.get(&id).await.map_err(|e| e.to_string())? else {
            // Deleted: drop the firing, and the plan if it outlived the
            // record (best effort; deleting a missing plan is fine).
            tracing::info!(schedule_id = %id, "firing of a deleted schedule dropped");
            if let Err(e) = service.scheduler().delete(&id).await {
                tracing::warn!(schedule_id = %id, error = %e, "could not delete an orphaned plan");
            }
            return Ok(Disposition::Ack);
        };
        match schedule.state {
            ScheduleState::Deleting => return Ok(Disposition::Ack),
            // A rate schedule fires the moment its plan exists, possibly
            // before its record is marked active.
            ScheduleState::Pending => {
                return Ok(Disposition::Retry {
                    reason: "schedule is still being created".into(),
                    after: PENDING_RETRY,
                })
            }
            ScheduleState::Active | ScheduleState::Completed => {}
        }
        let now = now_ms();
        let scheduled_time = fire
            .scheduled_time
            .clone()
            .filter(|t| !t.trim().is_empty())
            .unwrap_or_else(|| rfc3339(now - now.rem_euclid(60_000)));
        let dedupe = format!("schedule:{id}:{scheduled_time}");
        let task_id = self
            .create_task(&schedule, &scheduled_time, &dedupe, now)
            .await?;
        let fired_at_ms = chrono::DateTime::parse_from_rfc3339(&scheduled_time)
            .map(|t| t.timestamp_millis())
            .unwrap_or(now);
        let next = baton_tools::schedule::next_fire_after(
            &schedule.expression,
            &schedule.timezone,
            schedule.created_at,
            fired_at_ms.max(now),
        );
        store
            .update(&id, |r| {
                if r.last_scheduled_time.as_deref() == Some(scheduled_time.as_str())
                    && r.last_task_id.as_ref() == Some(&task_id)
                {
                    return false;
                }
                r.last_fired_at = Some(now);
                r.last_task_id = Some(task_id.clone());
                r.last_scheduled_time = Some(scheduled_time.clone());
                r.next_fire_at = if r.is_one_time() { None } else { next };
                if r.is_one_time() && r.state == ScheduleState::Active {
                    r.state = ScheduleState::Completed;
                }
                true
            })
            .await
            .map_err(|e| e.to_string())?;
        tracing::info!(schedule_id = %id, task_id = %task_id, %scheduled_time, "schedule fired");
        Ok(Disposition::Ack)
    }

    /// Creates (once per dedupe key) and wakes the firing's task.
    async fn create_task(
        &self,
        s: &Schedule,
        scheduled_time: &str,
        dedupe: &str,
        now: Millis,
    ) -> Result<TaskId, String> {
        let agent = self.agents.resolve(&s.agent);
        let limits = agent.task_limits(now);
        let task = Task::new(
            TaskId::generate(),
            &agent.name,
            origin_of(s),
            None,
            limits,
            now,
        );
        let store = self.schedules_store();
        if let Some(store) = &store {
            // Written first so the answer's delivery can always find it.
            store
                .link_task(&task.id, &s.id)
                .await
                .map_err(|e| e.to_string())?;
        }
        let first = vec![EntryKind::UserMessage {
            text: task_input(s, scheduled_time),
        }];
        let id = match self
            .store
            .create(&task, first, Some(dedupe))
            .await
            .map_err(|e| e.to_string())?
        {
            Created::New(id) => id,
            Created::Duplicate(id) => {
                tracing::info!(schedule_id = %s.id, task_id = %id, "duplicate firing: task exists");
                id
            }
        };
        // Re-sent for a duplicate whose task is still queued: the first
        // delivery may have died before sending (a duplicate wake is harmless).
        let queued = self
            .store
            .get(&id)
            .await
            .map_err(|e| e.to_string())?
            .is_some_and(|t| t.status == TaskStatus::Queued);
        if queued {
            self.queue
                .send(&Wake::new(id.clone(), "schedule").to_body(), Duration::ZERO)
                .await
                .map_err(|e| e.to_string())?;
        }
        Ok(id)
    }

    fn schedules_store(&self) -> Option<ScheduleStore> {
        self.schedules.as_ref().map(|s| s.service.store().clone())
    }

    /// The repair sweep of half-done schedule creates and deletes (run with
    /// the reaper). Best effort.
    pub(crate) async fn repair_schedules(&self) {
        let Some(s) = &self.schedules else { return };
        match s.service.repair(now_ms()).await {
            Ok(0) => {}
            Ok(n) => tracing::info!(repaired = n, "schedules repaired"),
            Err(e) => tracing::warn!(error = %e, "schedule repair failed"),
        }
    }
}

/// Where a firing's answer goes: the Slack target (its thread, or a new
/// top-level message when `thread_ts` is empty), else nowhere (HTTP).
fn origin_of(s: &Schedule) -> Origin {
    match &s.target {
        None => Origin::Http,
        Some(t) => {
            // `slack:TEAM:USER` owners name the team and user; API-made
            // schedules have neither.
            let mut parts = s.owner.splitn(3, ':');
            let (team_id, user) = match (parts.next(), parts.next(), parts.next()) {
                (Some("slack"), Some(team), Some(user)) => (team.to_owned(), user.to_owned()),
                _ => (String::new(), String::new()),
            };
            Origin::Slack {
                team_id,
                channel: t.slack_channel.clone(),
                thread_ts: t.thread_ts.clone().unwrap_or_default(),
                user,
            }
        }
    }
}

/// The first user message of a firing's task.
pub fn task_input(s: &Schedule, scheduled_time: &str) -> String {
    match s.kind {
        ScheduleKind::Task => format!(
            "Scheduled task (schedule {}, {} in {}, run for {scheduled_time}):\n\n{}",
            s.id, s.expression, s.timezone, s.input
        ),
        ScheduleKind::Heartbeat => format!(
            "This is a heartbeat: a periodic check (schedule {}, {} in {}, run for {scheduled_time}). \
             Work through this checklist:\n\n{}\n\n\
             If nothing needs attention, answer exactly {HEARTBEAT_OK} and nothing else \
             ({NO_REPLY} means the same). Otherwise report briefly only what needs attention.",
            s.id, s.expression, s.timezone, s.input
        ),
    }
}

/// The hash of a finding's normalised text (case and white space ignored).
pub fn finding_hash(text: &str) -> String {
    let normal = text
        .split_whitespace()
        .collect::<Vec<_>>()
        .join(" ")
        .to_lowercase();
    Sha256::digest(normal.as_bytes())
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// A [`ReplySink`] that keeps heartbeats from repeating themselves: the
/// answer of a heartbeat task whose finding was posted within the window
/// is not posted again. Everything else passes through.
pub struct HeartbeatReplies {
    store: ScheduleStore,
    inner: Arc<dyn ReplySink>,
    window: Duration,
}

impl HeartbeatReplies {
    pub fn new(store: ScheduleStore, inner: Arc<dyn ReplySink>, window: Duration) -> Self {
        HeartbeatReplies {
            store,
            inner,
            window,
        }
    }
}

fn reply_err(e: impl std::fmt::Display) -> ReplyError {
    ReplyError(e.to_string())
}

#[async_trait]
impl ReplySink for HeartbeatReplies {
    async fn answer(&self, task: &Task, text: &str) -> Result<(), ReplyError> {
        let Some(schedule_id) = self
            .store
            .schedule_of_task(&task.id)
            .await
            .map_err(reply_err)?
        else {
            return self.inner.answer(task, text).await;
        };
        let schedule = self.store.get(&schedule_id).await.map_err(reply_err)?;
        let Some(schedule) = schedule.filter(|s| s.kind == ScheduleKind::Heartbeat) else {
            return self.inner.answer(task, text).await;
        };
        let now = now_ms();
        let window = i64::try_from(self.window.as_millis()).unwrap_or(i64::MAX);
        let hash = finding_hash(text);
        if schedule.reported_recently(&hash, now, window) {
            tracing::info!(schedule_id = %schedule_id, task_id = %task.id, "heartbeat finding already reported; not posted again");
            return Ok(());
        }
        // Post, then remember: a crash in between posts once more rather
        // than never.
        self.inner.answer(task, text).await?;
        if let Err(e) = self
            .store
            .update(&schedule_id, |s| {
                s.record_finding(text, &hash, now, window);
                true
            })
            .await
        {
            tracing::warn!(schedule_id = %schedule_id, error = %e, "could not record the heartbeat finding");
        }
        Ok(())
    }

    async fn ended(&self, task: &Task, message: &str) -> Result<(), ReplyError> {
        self.inner.ended(task, message).await
    }

    async fn progress(&self, task: &Task, status: &str) {
        self.inner.progress(task, status).await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn findings_hash_ignores_case_and_spacing() {
        assert_eq!(
            finding_hash("Disk  FULL on\nhost-1"),
            finding_hash("disk full on host-1 ")
        );
        assert_ne!(
            finding_hash("disk full on host-1"),
            finding_hash("disk full on host-2")
        );
    }
}
