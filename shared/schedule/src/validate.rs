//! Validation of what a schedule asks for (expression, zone, instruction,
//! target), shared by the HTTP routes and the schedule tools, and the
//! record a valid request becomes.

use crate::record::{Schedule, ScheduleKind, ScheduleState, ScheduleTarget};
use crate::{Expression, Timezone};
use baton_core::Instant;
use sha2::{Digest, Sha256};
use std::time::Duration;

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
    pub next_fire_at: Option<Instant>,
}

/// The first fire time at or after `start` (a rate schedule fires when it
/// is created, as EventBridge Scheduler's do without a start date).
pub fn first_fire(expression: &Expression, timezone: Timezone, start: Instant) -> Option<Instant> {
    let just_before = start - Duration::from_millis(1);
    expression
        .next_after(just_before.to_utc()?, timezone.tz(), Some(start.to_utc()?))
        .map(Instant::from)
}

/// The fire time after `after` of a schedule created at `start`; `None`
/// when it never fires again or does not parse.
pub fn next_fire_after(
    expression: &str,
    timezone: &str,
    start: Instant,
    after: Instant,
) -> Option<Instant> {
    let expr = Expression::parse(expression).ok()?;
    let tz = Timezone::parse(timezone).ok()?;
    expr.next_after(after.to_utc()?, tz.tz(), Some(start.to_utc()?))
        .map(Instant::from)
}

/// Validates an expression and zone as EventBridge Scheduler would, and
/// refuses schedules that would never fire (an `at(...)` in the past).
/// The error says what is wrong, for a 400 or the model.
pub fn validate(
    expression: &str,
    timezone: Option<&str>,
    now: Instant,
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
    now: Instant,
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

/// The owner name of whom a task acts for ([`baton_core::Task::actor`]):
/// `slack:TEAM:USER`, or `api` for the API's client.
pub fn owner_of(actor: &baton_core::Actor) -> String {
    match actor {
        baton_core::Actor::Api { .. } => API_OWNER.to_owned(),
        baton_core::Actor::Slack { team, user } => format!("slack:{team}:{user}"),
    }
}
