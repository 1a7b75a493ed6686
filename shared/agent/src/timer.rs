//! Waiting at zero compute: the `sleep` tool.
//!
//! A task that must wait does not keep a worker: the step records the
//! call's result and puts the task in `waiting` (with `waiting_for` a
//! timer) in one checkpoint, and a wake is arranged for the time — a
//! delayed queue message when it is at most 15 minutes away, else a
//! one-time schedule. A wake that arrives early (a duplicate, or the
//! 15-minute hops used when no scheduler is configured) re-arms the timer.

use crate::error::WorkerError;
use baton_core::queue::MAX_DELAY;
use baton_core::{Instant, TaskId, ToolSpec, Wake, WorkQueue};
use baton_schedule::SchedulePlan;
use serde::Deserialize;
use std::time::Duration;

/// The tool's name.
pub const SLEEP: &str = baton_core::tool_names::SLEEP;
/// The longest wait accepted.
pub const MAX_SLEEP: Duration = Duration::from_secs(30 * 24 * 3600);

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct SleepArgs {
    #[serde(default)]
    seconds: Option<u64>,
    #[serde(default)]
    until: Option<String>,
}

pub fn sleep_spec() -> ToolSpec {
    ToolSpec {
        name: SLEEP.to_owned(),
        description: "Pause this task until a time, without using any compute, then continue. \
Give either `seconds` (how long to wait) or `until` (an RFC 3339 time). At most 30 days."
            .to_owned(),
        input_schema: serde_json::json!({
            "type": "object",
            "properties": {
                "seconds": {"type": "integer", "minimum": 1, "description": "how long to wait"},
                "until": {"type": "string", "format": "date-time", "description": "when to continue (RFC 3339)"}
            },
            "additionalProperties": false
        }),
    }
}

/// When a `sleep` call asks to wake, or why its arguments are wrong.
pub fn wake_time(arguments: &serde_json::Value, now: Instant) -> Result<Instant, String> {
    let args: SleepArgs = serde_json::from_value(if arguments.is_null() {
        serde_json::json!({})
    } else {
        arguments.clone()
    })
    .map_err(|e| format!("invalid arguments: {e}"))?;
    let until = match (args.seconds, args.until) {
        (Some(s), None) => now + Duration::from_secs(s).min(MAX_SLEEP),
        (None, Some(t)) => chrono::DateTime::parse_from_rfc3339(&t)
            .map(Instant::from)
            .map_err(|_| format!("`until` is not an RFC 3339 time: {t}"))?,
        _ => return Err("give exactly one of `seconds` or `until`".to_owned()),
    };
    if until.since(now) > MAX_SLEEP {
        return Err("a wait may last at most 30 days".to_owned());
    }
    Ok(until)
}

/// Arranges the wake of a task waiting until `until`.
pub async fn arm(
    queue: &dyn WorkQueue,
    scheduler: Option<&dyn baton_schedule::Scheduler>,
    id: &TaskId,
    until: Instant,
) -> Result<(), WorkerError> {
    let wake = Wake::new(id.clone(), "timer").to_body();
    let left = until.since(Instant::now());
    match scheduler {
        Some(s) if left > MAX_DELAY => {
            let at = until
                .to_utc()
                .unwrap_or_default()
                .format("at(%Y-%m-%dT%H:%M:%S)")
                .to_string();
            let plan = SchedulePlan {
                name: format!("wake-{}", id.as_str().replace('-', "")),
                expression: at,
                timezone: "UTC".to_owned(),
                body: wake,
                one_time: true,
            };
            Ok(s.upsert(&plan).await?)
        }
        // Without a scheduler, hop in 15-minute steps: each early wake re-arms.
        _ => Ok(queue.send(&wake, left.min(MAX_DELAY)).await?),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_seconds_and_until() {
        assert_eq!(
            wake_time(&serde_json::json!({"seconds": 60}), Instant(1_000)),
            Ok(Instant(61_000))
        );
        let zero = Instant(0);
        assert_eq!(
            wake_time(&serde_json::json!({"until": "1970-01-01T00:01:00Z"}), zero),
            Ok(Instant(60_000))
        );
        assert!(wake_time(&serde_json::json!({}), zero).is_err());
        assert!(wake_time(&serde_json::json!({"seconds": 1, "until": "x"}), zero).is_err());
        assert!(wake_time(&serde_json::json!({"until": "2999-01-01T00:00:00Z"}), zero).is_err());
        assert!(wake_time(&serde_json::json!({"minutes": 3}), zero).is_err());
    }

    use async_trait::async_trait;
    use baton_schedule::{Scheduler, SchedulerError};
    use std::sync::Mutex;

    #[derive(Default)]
    struct Recorder {
        plans: Mutex<Vec<SchedulePlan>>,
        queue: baton_core::testing::SentQueue,
    }

    #[async_trait]
    impl Scheduler for Recorder {
        async fn upsert(&self, plan: &SchedulePlan) -> Result<(), SchedulerError> {
            self.plans.lock().unwrap().push(plan.clone());
            Ok(())
        }
        async fn delete(&self, _: &str) -> Result<(), SchedulerError> {
            Ok(())
        }
    }

    #[tokio::test]
    async fn short_waits_use_a_delayed_message_long_ones_a_one_time_schedule() {
        let r = Recorder::default();
        let id = TaskId::generate();
        arm(
            &r.queue,
            Some(&r),
            &id,
            Instant::now() + Duration::from_secs(60),
        )
        .await
        .unwrap();
        assert_eq!(r.queue.sent().len(), 1);
        assert!(r.plans.lock().unwrap().is_empty());
        arm(
            &r.queue,
            Some(&r),
            &id,
            Instant::now() + Duration::from_secs(3 * 3600),
        )
        .await
        .unwrap();
        {
            let plans = r.plans.lock().unwrap();
            assert_eq!(plans.len(), 1);
            assert!(plans[0].one_time && plans[0].expression.starts_with("at("));
            assert!(plans[0].body.contains(id.as_str()));
        }
        // Without a scheduler: a 15-minute hop.
        arm(
            &r.queue,
            None,
            &id,
            Instant::now() + Duration::from_secs(3 * 3600),
        )
        .await
        .unwrap();
        assert_eq!(r.queue.sent().last().unwrap().1, MAX_DELAY);
    }
}
