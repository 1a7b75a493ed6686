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

use super::{Deps, Disposition};
use crate::error::WorkerError;
use crate::sanitize::NO_REPLY;
use async_trait::async_trait;
use baton_core::{
    Created, EntryKind, Instant, Origin, PostKey, ReplyError, ReplySink, ScheduleFire, Task,
    TaskId, TaskStatus, Wake,
};
use baton_schedule::validate::next_fire_after;
use baton_schedule::{
    parse_schedule_id, Schedule, ScheduleKind, ScheduleService, ScheduleState, ScheduleStore,
};
use sha2::{Digest, Sha256};
use std::sync::Arc;
use std::time::Duration;

/// How long a heartbeat does not repeat a finding, unless configured.
pub const DEFAULT_REPEAT_WINDOW: Duration = Duration::from_secs(24 * 3600);
/// The answer a heartbeat gives when nothing needs attention.
pub(super) const HEARTBEAT_OK: &str = "HEARTBEAT_OK";
/// How long a firing of a schedule still being created waits.
const PENDING_RETRY: Duration = Duration::from_secs(5);

/// Handles one firing message.
pub(super) async fn handle(deps: &Deps, fire: &ScheduleFire) -> Disposition {
    let Some(service) = &deps.schedules else {
        return Disposition::Poison {
            reason: format!(
                "schedule {} fired, but schedules are not enabled",
                fire.schedule_id
            ),
        };
    };
    match fire_once(deps, service, fire).await {
        Ok(d) => d,
        Err(e) if e.is_transient() => {
            tracing::warn!(schedule_id = %fire.schedule_id, error = %e, "firing failed; will retry");
            Disposition::Retry {
                reason: e.to_string(),
                after: deps.settings.retry_delay,
            }
        }
        Err(e) => {
            tracing::error!(schedule_id = %fire.schedule_id, error = %e, "firing failed for good");
            Disposition::Poison {
                reason: e.to_string(),
            }
        }
    }
}

async fn fire_once(
    deps: &Deps,
    service: &ScheduleService,
    fire: &ScheduleFire,
) -> Result<Disposition, WorkerError> {
    let Some(id) = parse_schedule_id(&fire.schedule_id) else {
        return Ok(Disposition::Poison {
            reason: format!("`{}` is not a schedule id", fire.schedule_id),
        });
    };
    let store = service.store();
    let Some(schedule) = store.get(&id).await? else {
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
    let now = Instant::now();
    let scheduled_time = fire
        .scheduled_time
        .clone()
        .filter(|t| !t.trim().is_empty())
        .unwrap_or_else(|| {
            // The start of the minute, as a scheduler's times are.
            let into_minute = now.millis().rem_euclid(60_000).unsigned_abs();
            (now - Duration::from_millis(into_minute)).to_string()
        });
    let dedupe = format!("schedule:{id}:{scheduled_time}");
    let task_id = create_task(deps, store, &schedule, &scheduled_time, &dedupe, now).await?;
    let fired_at = chrono::DateTime::parse_from_rfc3339(&scheduled_time)
        .map(Instant::from)
        .unwrap_or(now);
    let next = next_fire_after(
        &schedule.expression,
        &schedule.timezone,
        schedule.created_at,
        fired_at.max(now),
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
        .await?;
    tracing::info!(schedule_id = %id, task_id = %task_id, %scheduled_time, "schedule fired");
    Ok(Disposition::Ack)
}

/// Creates (once per dedupe key) and wakes the firing's task.
async fn create_task(
    deps: &Deps,
    schedules: &ScheduleStore,
    s: &Schedule,
    scheduled_time: &str,
    dedupe: &str,
    now: Instant,
) -> Result<TaskId, WorkerError> {
    let agent = deps.agents.resolve(&s.agent);
    let limits = agent.task_limits(now);
    let mut task = Task::new(
        TaskId::generate(),
        &agent.name,
        origin_of(s),
        None,
        limits,
        now,
    );
    task.source.schedule_id = Some(s.id.clone());
    task.source.schedule_owner = Some(s.owner.clone());
    // Written first so the answer's delivery can always find it.
    schedules.link_task(&task.id, &s.id).await?;
    let first = vec![EntryKind::UserMessage {
        text: task_input(s, scheduled_time),
        from: Some(baton_core::Author::Schedule {
            schedule_id: s.id.clone(),
        }),
    }];
    let id = match deps.store.create(&task, first, Some(dedupe.into())).await? {
        Created::New(id) => {
            deps.measure_created(&task.agent, &id);
            id
        }
        Created::Duplicate(id) => {
            tracing::info!(schedule_id = %s.id, task_id = %id, "duplicate firing: task exists");
            id
        }
    };
    // Re-sent for a duplicate whose task is still queued: the first
    // delivery may have died before sending (a duplicate wake is harmless).
    let queued = deps
        .store
        .get(&id)
        .await?
        .is_some_and(|t| t.status() == TaskStatus::Queued);
    if queued {
        deps.queue
            .send(&Wake::new(id.clone(), "schedule").to_body(), Duration::ZERO)
            .await?;
    }
    Ok(id)
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
                channel_type: None,
            }
        }
    }
}

/// The first user message of a firing's task.
pub(super) fn task_input(s: &Schedule, scheduled_time: &str) -> String {
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
pub(super) fn finding_hash(text: &str) -> String {
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
    fn posts_for(&self, task: &Task) -> bool {
        self.inner.posts_for(task)
    }

    async fn answer(&self, task: &Task, text: &str, post: &PostKey) -> Result<(), ReplyError> {
        let Some(schedule_id) = self
            .store
            .schedule_of_task(&task.id)
            .await
            .map_err(reply_err)?
        else {
            return self.inner.answer(task, text, post).await;
        };
        let schedule = self.store.get(&schedule_id).await.map_err(reply_err)?;
        let Some(schedule) = schedule.filter(|s| s.kind == ScheduleKind::Heartbeat) else {
            return self.inner.answer(task, text, post).await;
        };
        let now = Instant::now();
        let window = self.window;
        let hash = finding_hash(text);
        if schedule.reported_recently(&hash, now, window) {
            tracing::info!(schedule_id = %schedule_id, task_id = %task.id, "heartbeat finding already reported; not posted again");
            return Ok(());
        }
        // Post, then remember: a crash in between finds the post (its key)
        // rather than posting it again.
        self.inner.answer(task, text, post).await?;
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

    async fn ended(&self, task: &Task, message: &str, post: &PostKey) -> Result<(), ReplyError> {
        self.inner.ended(task, message, post).await
    }

    async fn progress(&self, task: &Task, status: &str) {
        self.inner.progress(task, status).await
    }

    async fn phase(&self, task: &Task, phase: baton_core::TaskPhase<'_>) {
        self.inner.phase(task, phase).await
    }

    // The inner sink shows the plan its own way (Slack: in the stream).
    async fn plan(&self, task: &Task, steps: &[baton_core::judgment::PlanStep], done: &[bool]) {
        self.inner.plan(task, steps, done).await
    }

    async fn tool_call(&self, task: &Task, call: baton_core::ToolCallShown<'_>) -> bool {
        self.inner.tool_call(task, call).await
    }

    // Streaming passes through: a firing's task has no conversation, and
    // the inner sink streams only conversations, so what is held back
    // here was never shown.
    fn streams_for(&self, task: &Task) -> bool {
        self.inner.streams_for(task)
    }

    async fn stream_open(
        &self,
        task: &Task,
        text: &str,
    ) -> Result<baton_core::StreamedMessage, ReplyError> {
        self.inner.stream_open(task, text).await
    }

    async fn stream_append(
        &self,
        task: &Task,
        message: &baton_core::StreamedMessage,
        shown: &str,
        from: usize,
    ) -> Result<baton_core::Appended, ReplyError> {
        self.inner.stream_append(task, message, shown, from).await
    }

    async fn stream_replace(
        &self,
        task: &Task,
        message: &baton_core::StreamedMessage,
        text: &str,
    ) -> Result<(), ReplyError> {
        self.inner.stream_replace(task, message, text).await
    }

    async fn stream_find(
        &self,
        task: &Task,
        since: Instant,
    ) -> Option<baton_core::StreamedMessage> {
        self.inner.stream_find(task, since).await
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
