//! Which scheduler a backend uses, and the schedule settings.
//!
//! * AWS: EventBridge Scheduler when `BATON_SCHEDULE_GROUP`,
//!   `BATON_SCHEDULER_ROLE_ARN` and `BATON_QUEUE_ARN` are all set (the
//!   template sets them for the Lambda functions).
//! * Otherwise the embedded scheduler over the backend's own table and
//!   queue; `baton dev` drives its loop (also with `--backend aws` against a
//!   local emulator, which does not fire schedules itself). A build without
//!   the embedded backend (the `embedded` feature: the ingest Lambda's) has
//!   no scheduler then, and its schedule routes say so.
//!
//! Settings: `BATON_HEARTBEAT_REPEAT_WINDOW_SECS` (default 86400), how long a
//! heartbeat does not post the same finding again; `BATON_SCHEDULE_ADMINS`,
//! a comma list of owners (`slack:TEAM:USER`) who may delete anyone's
//! schedule with the agent tools.

use crate::aws_resources::AwsResources;
use baton_core::{Table, WorkQueue};
#[cfg(feature = "embedded")]
use baton_embedded::EmbeddedScheduler;
use baton_schedule::Scheduler;
use std::sync::Arc;

/// A backend's scheduler: the port (none when there is no scheduler), and
/// the embedded loop to drive if the scheduler is the embedded one.
#[derive(Clone)]
pub struct SchedulerChoice {
    pub scheduler: Option<Arc<dyn Scheduler>>,
    #[cfg(feature = "embedded")]
    pub embedded: Option<Arc<EmbeddedScheduler>>,
}

/// The embedded scheduler over `table` and `queue`.
#[cfg(feature = "embedded")]
pub fn embedded(table: Arc<dyn Table>, queue: Arc<dyn WorkQueue>) -> SchedulerChoice {
    let s = Arc::new(EmbeddedScheduler::new(table, queue));
    SchedulerChoice {
        scheduler: Some(s.clone()),
        embedded: Some(s),
    }
}

/// EventBridge Scheduler if its three settings are given, else the
/// embedded scheduler over `table` and `queue`.
pub fn for_aws(
    cfg: &aws_config::SdkConfig,
    aws: &AwsResources,
    table: Arc<dyn Table>,
    queue: Arc<dyn WorkQueue>,
) -> SchedulerChoice {
    match (&aws.schedule_group, &aws.scheduler_role_arn, &aws.queue_arn) {
        (Some(group), Some(role), Some(queue_arn)) => {
            let s = baton_aws::EventBridgeScheduler::from_config(
                cfg,
                group.clone(),
                queue_arn.clone(),
                role.clone(),
            );
            SchedulerChoice {
                scheduler: Some(Arc::new(s)),
                #[cfg(feature = "embedded")]
                embedded: None,
            }
        }
        #[cfg(feature = "embedded")]
        _ => {
            tracing::warn!(
                "BATON_SCHEDULE_GROUP, BATON_SCHEDULER_ROLE_ARN and BATON_QUEUE_ARN are not all set: \
                 schedules are fired by the in-process scheduler, which only `baton dev` runs"
            );
            embedded(table, queue)
        }
        #[cfg(not(feature = "embedded"))]
        _ => {
            // Nothing to store plans in: the table and queue are for the
            // embedded scheduler only.
            let _ = (table, queue);
            tracing::warn!(
                "BATON_SCHEDULE_GROUP, BATON_SCHEDULER_ROLE_ARN and BATON_QUEUE_ARN are not all set: \
                 schedules are off"
            );
            SchedulerChoice { scheduler: None }
        }
    }
}
