//! Which scheduler a backend uses, and the schedule settings.
//!
//! * AWS: EventBridge Scheduler when `BATON_SCHEDULE_GROUP`,
//!   `BATON_SCHEDULER_ROLE_ARN` and `BATON_QUEUE_ARN` are all set (the
//!   template sets them for the Lambda functions).
//! * Otherwise the embedded scheduler over the backend's own table and
//!   queue; `baton dev` drives its loop (also with `--backend aws` against a
//!   local emulator, which does not fire schedules itself).
//!
//! Settings: `BATON_HEARTBEAT_REPEAT_WINDOW_SECS` (default 86400), how long a
//! heartbeat does not post the same finding again; `BATON_SCHEDULE_ADMINS`,
//! a comma list of owners (`slack:TEAM:USER`) who may delete anyone's
//! schedule with the agent tools.

use crate::config::ConfigError;
use baton_core::{Table, WorkQueue};
use baton_embedded::EmbeddedScheduler;
use baton_schedule::Scheduler;
use std::sync::Arc;
use std::time::Duration;

/// A backend's scheduler: the port, and the embedded loop to drive if the
/// scheduler is the embedded one.
#[derive(Clone)]
pub struct SchedulerChoice {
    pub scheduler: Arc<dyn Scheduler>,
    pub embedded: Option<Arc<EmbeddedScheduler>>,
}

fn var(name: &str) -> Option<String> {
    std::env::var(name)
        .ok()
        .map(|v| v.trim().to_owned())
        .filter(|v| !v.is_empty())
}

/// The embedded scheduler over `table` and `queue`.
pub fn embedded(table: Arc<dyn Table>, queue: Arc<dyn WorkQueue>) -> SchedulerChoice {
    let s = Arc::new(EmbeddedScheduler::new(table, queue));
    SchedulerChoice {
        scheduler: s.clone(),
        embedded: Some(s),
    }
}

/// EventBridge Scheduler if its three variables are set, else the embedded
/// scheduler over `table` and `queue`.
pub fn for_aws(
    cfg: &aws_config::SdkConfig,
    table: Arc<dyn Table>,
    queue: Arc<dyn WorkQueue>,
) -> SchedulerChoice {
    match (
        var("BATON_SCHEDULE_GROUP"),
        var("BATON_SCHEDULER_ROLE_ARN"),
        var("BATON_QUEUE_ARN"),
    ) {
        (Some(group), Some(role), Some(queue_arn)) => {
            let s = baton_aws::EventBridgeScheduler::new(
                baton_aws::scheduler_client(cfg),
                group,
                queue_arn,
                role,
            );
            SchedulerChoice {
                scheduler: Arc::new(s),
                embedded: None,
            }
        }
        _ => {
            tracing::warn!(
                "BATON_SCHEDULE_GROUP, BATON_SCHEDULER_ROLE_ARN and BATON_QUEUE_ARN are not all set: \
                 schedules are fired by the in-process scheduler, which only `baton dev` runs"
            );
            embedded(table, queue)
        }
    }
}

/// `BATON_HEARTBEAT_REPEAT_WINDOW_SECS`, default 24 hours.
pub fn repeat_window_from_env() -> Result<Duration, ConfigError> {
    const NAME: &str = "BATON_HEARTBEAT_REPEAT_WINDOW_SECS";
    match var(NAME) {
        None => Ok(baton_agent::DEFAULT_REPEAT_WINDOW),
        Some(v) => v
            .parse::<u64>()
            .map(Duration::from_secs)
            .map_err(|_| ConfigError::Invalid {
                name: NAME,
                message: format!("`{v}` is not a whole number of seconds"),
            }),
    }
}

/// `BATON_SCHEDULE_ADMINS`: owners who may delete any schedule.
pub fn admins_from_env() -> Vec<String> {
    var("BATON_SCHEDULE_ADMINS")
        .map(|v| {
            v.split(',')
                .map(|a| a.trim().to_owned())
                .filter(|a| !a.is_empty())
                .collect()
        })
        .unwrap_or_default()
}
