//! Schedules for the agent and the HTTP routes: validation with
//! `baton-schedule`, and the `schedule_create`, `schedule_list` and
//! `schedule_delete` tools.
//!
//! A schedule made by a tool belongs to the user who asked for it (the
//! task's origin: `slack:TEAM:USER`, or `api` for HTTP tasks); only that
//! owner, `api` or a configured admin may delete it. The tools look the
//! task up in the store to learn who is asking. People (not `api`, not an
//! admin) are held to the deployment's [`Quota`], and a schedule asked for
//! in Slack waits for approval unless the agent's approval rules say
//! otherwise: each one runs a task, and may post, at every firing.

use crate::args::{input_schema, run};
use async_trait::async_trait;
use baton_core::{Instant, Origin, TaskStore, Tool, ToolContext, ToolOutput, ToolSpec};
use baton_schedule::validate::*;
use baton_schedule::{
    Quota, Schedule, ScheduleError, ScheduleKind, ScheduleService, ScheduleState, ScheduleTarget,
};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use std::sync::Arc;

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
    /// What people may schedule.
    quota: Quota,
}

impl ScheduleTools {
    pub fn new(service: ScheduleService, tasks: TaskStore, admins: Vec<String>) -> Self {
        ScheduleTools {
            service,
            tasks,
            admins: Arc::new(admins),
            quota: Quota::default(),
        }
    }

    /// Holds people to `quota` (the agents file's `[schedules]`).
    pub fn with_quota(mut self, quota: Quota) -> Self {
        self.quota = quota;
        self
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

    /// The task a call is made for: where it answers, and whom it acts
    /// for (who owns what it schedules).
    async fn origin(&self, ctx: &ToolContext) -> Result<(Origin, baton_core::Actor), String> {
        match self.tasks.get(&ctx.task_id).await {
            Ok(Some(t)) => Ok((t.source.origin.clone(), t.actor())),
            Ok(None) => Err("this task is not in the store".into()),
            Err(e) => Err(format!("could not read the task: {e}")),
        }
    }

    async fn create(&self, args: ScheduleCreateArgs, ctx: &ToolContext) -> Result<String, String> {
        let (origin, actor) = self.origin(ctx).await?;
        let now = Instant::now();
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
        let owner = owner_of(&actor);
        if !self.is_admin(&owner) {
            let existing = self
                .service
                .store()
                .list()
                .await
                .map_err(|e| format!("could not count your schedules: {e}"))?;
            // A retried call finds the schedule it made: not one more.
            let id = schedule_id_from_key(&ctx.idempotency_key);
            if !existing.iter().any(|s| s.id == id) {
                self.quota.admits(&owner, &spec, &existing, now)?;
            }
        }
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
            owner,
            agent,
            now,
        );
        let s = self.service.create(record).await.map_err(|e| match e {
            ScheduleError::Scheduler(baton_schedule::SchedulerError::Invalid(m)) => m,
            e => format!("could not create the schedule: {e}"),
        })?;
        Ok(format!(
            "Created schedule {} ({} {}, {}); next run {}.",
            s.id,
            s.expression,
            s.timezone,
            s.kind.as_str(),
            s.next_fire_at
                .map_or_else(|| "never".into(), |t| t.to_string())
        ))
    }

    async fn list(&self, ctx: &ToolContext) -> Result<String, String> {
        let owner = owner_of(&self.origin(ctx).await?.1);
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
        let owner = owner_of(&self.origin(ctx).await?.1);
        let id = baton_schedule::parse_schedule_id(args.schedule_id.trim())
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
pub const SCHEDULE_CREATE: &str = baton_core::tool_names::SCHEDULE_CREATE;
/// The tool's name as the model sees it.
pub const SCHEDULE_LIST: &str = baton_core::tool_names::SCHEDULE_LIST;
/// The tool's name as the model sees it.
pub const SCHEDULE_DELETE: &str = baton_core::tool_names::SCHEDULE_DELETE;

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

    /// A schedule asked for in Slack waits for a person's approval (unless
    /// the agent's approval rules lift it); over the HTTP API it does not.
    fn needs_approval_for(&self, _arguments: &serde_json::Value, origin: &Origin) -> bool {
        matches!(origin, Origin::Slack { .. })
    }

    fn normalise(&self, arguments: serde_json::Value) -> serde_json::Value {
        crate::args::normalised::<ScheduleCreateArgs>(arguments)
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

    fn normalise(&self, arguments: serde_json::Value) -> serde_json::Value {
        crate::args::normalised::<ScheduleListArgs>(arguments)
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

    fn normalise(&self, arguments: serde_json::Value) -> serde_json::Value {
        crate::args::normalised::<ScheduleDeleteArgs>(arguments)
    }

    async fn call(&self, arguments: serde_json::Value, ctx: &ToolContext) -> ToolOutput {
        run(SCHEDULE_DELETE, arguments, |args| self.0.delete(args, ctx)).await
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use chrono::{TimeZone, Utc};
    use std::time::Duration;

    fn instant(y: i32, mo: u32, d: u32, h: u32, mi: u32) -> Instant {
        Utc.with_ymd_and_hms(y, mo, d, h, mi, 0)
            .single()
            .map_or(Instant(0), Instant::from)
    }

    #[test]
    fn validation_says_what_is_wrong() {
        let now = instant(2026, 3, 1, 12, 0);
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
        let now = instant(2026, 3, 1, 12, 0);
        let rate = validate("rate(5 minutes)", None, now).unwrap();
        assert_eq!(
            rate.next_fire_at,
            Some(now),
            "a rate schedule fires when created"
        );
        let at = validate("at(2026-12-01T09:00:00)", Some("Europe/Berlin"), now).unwrap();
        assert_eq!(at.next_fire_at, Some(instant(2026, 12, 1, 8, 0)));
        let cron = validate("cron(0 9 ? * MON-FRI *)", Some("Europe/Berlin"), now).unwrap();
        // 2026-03-01 is a Sunday; Monday 09:00 CET is 08:00 UTC.
        assert_eq!(cron.next_fire_at, Some(instant(2026, 3, 2, 8, 0)));
        assert_eq!(
            next_fire_after("rate(5 minutes)", "UTC", now, now),
            Some(now + Duration::from_secs(300))
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
        assert!(baton_schedule::parse_schedule_id(&a).is_some());
    }

    #[test]
    fn owners() {
        use baton_core::Actor;
        assert_eq!(owner_of(&Actor::Api { person: None }), "api");
        let named = Actor::Api {
            person: Some(baton_core::connection::PersonKey::new("api", "alice")),
        };
        assert_eq!(owner_of(&named), "api");
        let slack = Actor::Slack {
            team: "T1".into(),
            user: "U1".into(),
        };
        assert_eq!(owner_of(&slack), "slack:T1:U1");
    }
}
