//! Schedules for the agent and the HTTP routes: validation with
//! `baton-schedule`, and the `schedule_create`, `schedule_list` and
//! `schedule_delete` tools.
//!
//! A schedule made by a tool belongs to the user who asked for it (the
//! task's origin: `slack:TEAM:USER`, or `api` for HTTP tasks); only that
//! owner, `api` or a configured admin may delete it. The tools look the
//! task up in the store to learn who is asking.

use crate::args::{input_schema, run};
use async_trait::async_trait;
use baton_core::schedule::{ScheduleService, ScheduleState, ScheduleTarget};
use baton_core::{
    now_ms, rfc3339, Millis, Origin, Schedule, ScheduleError, ScheduleKind, TaskStore, Tool,
    ToolContext, ToolOutput, ToolSpec,
};
use baton_schedule::{Expression, Timezone};
use chrono::{DateTime, Utc};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};
use std::sync::Arc;

/// Longest accepted schedule instruction, in characters.
pub const MAX_SCHEDULE_INPUT_CHARS: usize = 20_000;
/// The owner name of schedules made through the bearer-token API; it may
/// delete any schedule.
pub const API_OWNER: &str = "api";

/// A validated expression and zone, with the first fire time.
#[derive(Clone, Debug)]
pub struct ValidSpec {
    pub expression: Expression,
    pub timezone: Timezone,
    /// The first firing at or after `now`.
    pub next_fire_at: Option<Millis>,
}

fn utc(ms: Millis) -> Option<DateTime<Utc>> {
    DateTime::from_timestamp_millis(ms)
}

/// The first fire time at or after `start` (a rate schedule fires when it
/// is created, as EventBridge Scheduler's do without a start date).
pub fn first_fire(expression: &Expression, timezone: Timezone, start: Millis) -> Option<Millis> {
    expression
        .next_after(utc(start - 1)?, timezone.tz(), Some(utc(start)?))
        .map(|t| t.timestamp_millis())
}

/// The fire time after `after` of a schedule created at `start`; `None`
/// when it never fires again or does not parse.
pub fn next_fire_after(
    expression: &str,
    timezone: &str,
    start: Millis,
    after: Millis,
) -> Option<Millis> {
    let expr = Expression::parse(expression).ok()?;
    let tz = Timezone::parse(timezone).ok()?;
    expr.next_after(utc(after)?, tz.tz(), Some(utc(start)?))
        .map(|t| t.timestamp_millis())
}

/// Validates an expression and zone as EventBridge Scheduler would, and
/// refuses schedules that would never fire (an `at(...)` in the past).
/// The error says what is wrong, for a 400 or the model.
pub fn validate(
    expression: &str,
    timezone: Option<&str>,
    now: Millis,
) -> Result<ValidSpec, String> {
    let expression =
        Expression::parse(expression).map_err(|e| format!("invalid `expression`: {e}"))?;
    let timezone = match timezone {
        None => Timezone::UTC,
        Some(t) => Timezone::parse(t).map_err(|e| format!("invalid `timezone`: {e}"))?,
    };
    let next_fire_at = first_fire(&expression, timezone, now);
    if next_fire_at.is_none() {
        return Err(if expression.is_recurring() {
            format!(
                "`expression` {} never fires after now (in {})",
                expression.as_str(),
                timezone.name()
            )
        } else {
            format!(
                "`expression` {} is in the past (in {})",
                expression.as_str(),
                timezone.name()
            )
        });
    }
    Ok(ValidSpec {
        expression,
        timezone,
        next_fire_at,
    })
}

/// Checks a schedule's instruction and target; the error says what is wrong.
pub fn validate_content(input: &str, target: Option<&ScheduleTarget>) -> Result<(), String> {
    if input.trim().is_empty() {
        return Err("`input` must not be empty".into());
    }
    if input.chars().count() > MAX_SCHEDULE_INPUT_CHARS {
        return Err(format!(
            "`input` is longer than {MAX_SCHEDULE_INPUT_CHARS} characters"
        ));
    }
    if let Some(t) = target {
        let ok_channel = !t.slack_channel.is_empty()
            && t.slack_channel.len() <= 64
            && t.slack_channel.chars().all(|c| c.is_ascii_alphanumeric());
        if !ok_channel {
            return Err(
                "`target.slack_channel` must be a Slack channel id such as C0123456".into(),
            );
        }
        if let Some(ts) = &t.thread_ts {
            let ok_ts = !ts.is_empty()
                && ts.len() <= 32
                && ts.chars().all(|c| c.is_ascii_digit() || c == '.');
            if !ok_ts {
                return Err(
                    "`target.thread_ts` must be a Slack message ts such as 1700000000.000100"
                        .into(),
                );
            }
        }
    }
    Ok(())
}

/// A new schedule record (state pending) from validated parts.
#[allow(clippy::too_many_arguments)]
pub fn new_schedule(
    id: String,
    spec: &ValidSpec,
    input: String,
    kind: ScheduleKind,
    target: Option<ScheduleTarget>,
    owner: String,
    agent: String,
    now: Millis,
) -> Schedule {
    Schedule {
        id,
        expression: spec.expression.as_str().to_owned(),
        timezone: spec.timezone.name().to_owned(),
        input,
        kind,
        target,
        owner,
        agent,
        state: ScheduleState::Pending,
        created_at: now,
        next_fire_at: spec.next_fire_at,
        last_fired_at: None,
        last_task_id: None,
        last_scheduled_time: None,
        last_finding: None,
        last_finding_at: None,
        recent_findings: Vec::new(),
        version: 0,
    }
}

/// A schedule id derived from a stable key (a tool call's idempotency
/// key), so a retried call finds the schedule it made instead of making a
/// second one. UUID-shaped, like generated ids.
pub fn schedule_id_from_key(key: &str) -> String {
    let hex = hex_digest(key);
    format!(
        "{}-{}-{}-{}-{}",
        &hex[0..8],
        &hex[8..12],
        &hex[12..16],
        &hex[16..20],
        &hex[20..32]
    )
}

fn hex_digest(text: &str) -> String {
    Sha256::digest(text.as_bytes())
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// The owner name of whoever asked for a task: `slack:TEAM:USER` or `api`.
pub fn owner_of(origin: &Origin) -> String {
    match origin {
        Origin::Http => API_OWNER.to_owned(),
        Origin::Slack { team_id, user, .. } => format!("slack:{team_id}:{user}"),
    }
}

/// Where the answer of a tool-made schedule goes.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum PostTo {
    /// The Slack thread this conversation is in (the default in Slack).
    #[default]
    ThisThread,
    /// A new message in this Slack channel each time.
    ThisChannel,
    /// Nowhere: results are only kept (the default outside Slack).
    None,
}

/// Arguments of `schedule_create`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ScheduleCreateArgs {
    /// An EventBridge Scheduler expression: "cron(0 9 ? * MON-FRI *)"
    /// (minutes hours day-of-month month day-of-week year; one of
    /// day-of-month/day-of-week must be "?"; day-of-week 1 = Sunday),
    /// "rate(30 minutes)", or one time "at(2026-12-01T09:00:00)" (local time).
    pub expression: String,
    /// IANA time zone the expression is read in, e.g. "Europe/Berlin".
    /// Default UTC.
    #[serde(default)]
    pub timezone: Option<String>,
    /// What to do at each firing (for a heartbeat: the checklist to check).
    pub instruction: String,
    /// "task" runs the instruction and posts the answer; "heartbeat" is a
    /// periodic check that posts only when something needs attention.
    #[serde(default)]
    pub kind: Option<KindArg>,
    /// Where results are posted: "this_thread", "this_channel" or "none".
    #[serde(default)]
    pub post_to: Option<PostTo>,
}

/// The kind of a tool-made schedule.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum KindArg {
    /// Run the instruction and post the answer.
    Task,
    /// A periodic check that posts only when something needs attention.
    Heartbeat,
}

impl From<KindArg> for ScheduleKind {
    fn from(k: KindArg) -> Self {
        match k {
            KindArg::Task => ScheduleKind::Task,
            KindArg::Heartbeat => ScheduleKind::Heartbeat,
        }
    }
}

/// Arguments of `schedule_delete`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ScheduleDeleteArgs {
    /// The id `schedule_create` or `schedule_list` gave.
    pub schedule_id: String,
}

/// Arguments of `schedule_list` (none).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ScheduleListArgs {}

/// What the three tools share.
#[derive(Clone)]
pub struct ScheduleTools {
    service: ScheduleService,
    tasks: TaskStore,
    /// Owners (`slack:TEAM:USER`) who may delete any schedule.
    admins: Arc<Vec<String>>,
}

impl ScheduleTools {
    pub fn new(service: ScheduleService, tasks: TaskStore, admins: Vec<String>) -> Self {
        ScheduleTools {
            service,
            tasks,
            admins: Arc::new(admins),
        }
    }

    /// `schedule_create`, `schedule_list` and `schedule_delete`.
    pub fn tools(&self) -> Vec<Arc<dyn Tool>> {
        vec![
            Arc::new(ScheduleCreateTool(self.clone())),
            Arc::new(ScheduleListTool(self.clone())),
            Arc::new(ScheduleDeleteTool(self.clone())),
        ]
    }

    fn is_admin(&self, owner: &str) -> bool {
        owner == API_OWNER || self.admins.iter().any(|a| a == owner)
    }

    /// The origin of the task a call serves.
    async fn origin(&self, ctx: &ToolContext) -> Result<Origin, String> {
        match self.tasks.get(&ctx.task_id).await {
            Ok(Some(t)) => Ok(t.origin),
            Ok(None) => Err("this task is not in the store".into()),
            Err(e) => Err(format!("could not read the task: {e}")),
        }
    }

    async fn create(&self, args: ScheduleCreateArgs, ctx: &ToolContext) -> Result<String, String> {
        let origin = self.origin(ctx).await?;
        let now = now_ms();
        let spec = validate(&args.expression, args.timezone.as_deref(), now)?;
        let post_to = args.post_to.unwrap_or(match origin {
            Origin::Slack { .. } => PostTo::ThisThread,
            Origin::Http => PostTo::None,
        });
        let target = match (&origin, post_to) {
            (_, PostTo::None) => None,
            (
                Origin::Slack {
                    channel, thread_ts, ..
                },
                PostTo::ThisThread,
            ) => Some(ScheduleTarget {
                slack_channel: channel.clone(),
                thread_ts: Some(thread_ts.clone()).filter(|t| !t.is_empty()),
            }),
            (Origin::Slack { channel, .. }, PostTo::ThisChannel) => Some(ScheduleTarget {
                slack_channel: channel.clone(),
                thread_ts: None,
            }),
            (Origin::Http, _) => {
                return Err("this conversation is not in Slack; use post_to \"none\"".into())
            }
        };
        validate_content(&args.instruction, target.as_ref())?;
        let agent = match self.tasks.get(&ctx.task_id).await {
            Ok(Some(t)) => t.agent,
            _ => "default".to_owned(),
        };
        let record = new_schedule(
            schedule_id_from_key(&ctx.idempotency_key),
            &spec,
            args.instruction,
            args.kind.map_or(ScheduleKind::Task, ScheduleKind::from),
            target,
            owner_of(&origin),
            agent,
            now,
        );
        let s = self.service.create(record).await.map_err(|e| match e {
            ScheduleError::Scheduler(baton_core::SchedulerError::Invalid(m)) => m,
            e => format!("could not create the schedule: {e}"),
        })?;
        Ok(format!(
            "Created schedule {} ({} {}, {}); next run {}.",
            s.id,
            s.expression,
            s.timezone,
            s.kind.as_str(),
            s.next_fire_at
                .map(rfc3339)
                .unwrap_or_else(|| "never".into())
        ))
    }

    async fn list(&self, ctx: &ToolContext) -> Result<String, String> {
        let owner = owner_of(&self.origin(ctx).await?);
        let all = self
            .service
            .store()
            .list()
            .await
            .map_err(|e| format!("could not list schedules: {e}"))?;
        let admin = self.is_admin(&owner);
        let mine: Vec<_> = all
            .iter()
            .filter(|s| admin || s.owner == owner)
            .filter(|s| s.state != ScheduleState::Deleting)
            .map(Schedule::to_json)
            .collect();
        Ok(serde_json::json!({ "schedules": mine }).to_string())
    }

    async fn delete(&self, args: ScheduleDeleteArgs, ctx: &ToolContext) -> Result<String, String> {
        let owner = owner_of(&self.origin(ctx).await?);
        let id = baton_core::schedule::parse_schedule_id(args.schedule_id.trim())
            .ok_or_else(|| format!("`{}` is not a schedule id", args.schedule_id))?;
        match self
            .service
            .delete(&id, &owner, self.is_admin(&owner))
            .await
        {
            Ok(s) => Ok(format!("Deleted schedule {} ({}).", s.id, s.expression)),
            Err(ScheduleError::NotFound(_)) => Err(format!("no schedule {id} (already deleted?)")),
            Err(ScheduleError::Forbidden(m)) => Err(m),
            Err(e) => Err(format!("could not delete the schedule: {e}")),
        }
    }
}

/// The tool's name as the model sees it.
pub const SCHEDULE_CREATE: &str = "schedule_create";
/// The tool's name as the model sees it.
pub const SCHEDULE_LIST: &str = "schedule_list";
/// The tool's name as the model sees it.
pub const SCHEDULE_DELETE: &str = "schedule_delete";

struct ScheduleCreateTool(ScheduleTools);
struct ScheduleListTool(ScheduleTools);
struct ScheduleDeleteTool(ScheduleTools);

#[async_trait]
impl Tool for ScheduleCreateTool {
    fn spec(&self) -> ToolSpec {
        ToolSpec {
            name: SCHEDULE_CREATE.into(),
            description: "Schedule recurring or one-time work for the user who asked: a cron, \
                rate or at() expression, an instruction to run at each firing, and where to \
                post. Use kind \"heartbeat\" for periodic checks that should speak only when \
                something needs attention."
                .into(),
            input_schema: input_schema::<ScheduleCreateArgs>(),
        }
    }

    async fn call(&self, arguments: serde_json::Value, ctx: &ToolContext) -> ToolOutput {
        run(SCHEDULE_CREATE, arguments, |args| self.0.create(args, ctx)).await
    }
}

#[async_trait]
impl Tool for ScheduleListTool {
    fn spec(&self) -> ToolSpec {
        ToolSpec {
            name: SCHEDULE_LIST.into(),
            description: "List the schedules of the user who asked, with their next and last \
                run."
                .into(),
            input_schema: input_schema::<ScheduleListArgs>(),
        }
    }

    async fn call(&self, arguments: serde_json::Value, ctx: &ToolContext) -> ToolOutput {
        run(SCHEDULE_LIST, arguments, |_: ScheduleListArgs| {
            self.0.list(ctx)
        })
        .await
    }
}

#[async_trait]
impl Tool for ScheduleDeleteTool {
    fn spec(&self) -> ToolSpec {
        ToolSpec {
            name: SCHEDULE_DELETE.into(),
            description: "Delete a schedule by id. Only its owner (or an admin) may delete it."
                .into(),
            input_schema: input_schema::<ScheduleDeleteArgs>(),
        }
    }

    async fn call(&self, arguments: serde_json::Value, ctx: &ToolContext) -> ToolOutput {
        run(SCHEDULE_DELETE, arguments, |args| self.0.delete(args, ctx)).await
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use chrono::TimeZone;

    fn ms(y: i32, mo: u32, d: u32, h: u32, mi: u32) -> Millis {
        Utc.with_ymd_and_hms(y, mo, d, h, mi, 0)
            .single()
            .map(|t| t.timestamp_millis())
            .unwrap_or_default()
    }

    #[test]
    fn validation_says_what_is_wrong() {
        let now = ms(2026, 3, 1, 12, 0);
        let e = validate("cron(0 9 * * MON *)", None, now).unwrap_err();
        assert!(
            e.starts_with("invalid `expression`: day-of-month and day-of-week"),
            "{e}"
        );
        let e = validate("rate(1 hours)", None, now).unwrap_err();
        assert!(e.contains("invalid `expression`"), "{e}");
        let e = validate("rate(5 minutes)", Some("europe/berlin"), now).unwrap_err();
        assert!(
            e.contains("invalid `timezone`") && e.contains("Europe/Berlin"),
            "{e}"
        );
        let e = validate("at(2026-02-01T09:00:00)", Some("Europe/Berlin"), now).unwrap_err();
        assert!(e.contains("in the past"), "{e}");
        let e = validate("cron(0 9 ? * MON 2020)", None, now).unwrap_err();
        assert!(e.contains("never fires"), "{e}");
    }

    #[test]
    fn first_fire_follows_eventbridge() {
        let now = ms(2026, 3, 1, 12, 0);
        let rate = validate("rate(5 minutes)", None, now).unwrap();
        assert_eq!(
            rate.next_fire_at,
            Some(now),
            "a rate schedule fires when created"
        );
        let at = validate("at(2026-12-01T09:00:00)", Some("Europe/Berlin"), now).unwrap();
        assert_eq!(at.next_fire_at, Some(ms(2026, 12, 1, 8, 0)));
        let cron = validate("cron(0 9 ? * MON-FRI *)", Some("Europe/Berlin"), now).unwrap();
        // 2026-03-01 is a Sunday; Monday 09:00 CET is 08:00 UTC.
        assert_eq!(cron.next_fire_at, Some(ms(2026, 3, 2, 8, 0)));
        assert_eq!(
            next_fire_after("rate(5 minutes)", "UTC", now, now),
            Some(now + 300_000)
        );
    }

    #[test]
    fn content_checks() {
        assert!(validate_content(" ", None).is_err());
        let bad = ScheduleTarget {
            slack_channel: "#general".into(),
            thread_ts: None,
        };
        assert!(validate_content("x", Some(&bad))
            .unwrap_err()
            .contains("slack_channel"));
        let bad_ts = ScheduleTarget {
            slack_channel: "C1".into(),
            thread_ts: Some("abc".into()),
        };
        assert!(validate_content("x", Some(&bad_ts))
            .unwrap_err()
            .contains("thread_ts"));
    }

    #[test]
    fn ids_from_keys_are_stable_uuids() {
        let a = schedule_id_from_key("t:1:c");
        assert_eq!(a, schedule_id_from_key("t:1:c"));
        assert_ne!(a, schedule_id_from_key("t:1:d"));
        assert!(baton_core::schedule::parse_schedule_id(&a).is_some());
    }

    #[test]
    fn owners() {
        assert_eq!(owner_of(&Origin::Http), "api");
        let o = Origin::Slack {
            team_id: "T1".into(),
            channel: "C1".into(),
            thread_ts: "1.2".into(),
            user: "U1".into(),
        };
        assert_eq!(owner_of(&o), "slack:T1:U1");
    }
}
