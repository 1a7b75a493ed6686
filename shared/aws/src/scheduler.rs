//! [`Scheduler`] on Amazon EventBridge Scheduler.
//!
//! Each plan is one schedule in the project's schedule group
//! (`BATON_SCHEDULE_GROUP`) whose target is the work queue
//! (`BATON_QUEUE_ARN`), invoked with the role `BATON_SCHEDULER_ROLE_ARN`
//! (which may only send to that queue). The plan's body is the target's
//! `Input`; for a `{"kind":"schedule"}` body the adapter adds
//! `"scheduled_time": "<aws.scheduler.scheduled-time>"`, a context attribute
//! EventBridge fills in per invocation, so each firing carries its own
//! dedupe key. Flexible time window `OFF`; `ScheduleExpressionTimezone` is
//! the plan's zone; one-time `at(...)` plans get
//! `ActionAfterCompletion=DELETE`, so they remove themselves after firing.
//!
//! Upsert is create, or update when the schedule exists (`ConflictException`);
//! delete treats `ResourceNotFoundException` as success.

use async_trait::async_trait;
use aws_sdk_scheduler::error::{DisplayErrorContext, SdkError};
use aws_sdk_scheduler::types::{
    ActionAfterCompletion, FlexibleTimeWindow, FlexibleTimeWindowMode, Target,
};
use aws_sdk_scheduler::Client;
use baton_schedule::{SchedulePlan, Scheduler, SchedulerError};

use crate::lazy::LazyClient;

/// The context attribute EventBridge Scheduler replaces with a firing's
/// scheduled time.
pub const SCHEDULED_TIME_PLACEHOLDER: &str = "<aws.scheduler.scheduled-time>";

/// A [`Scheduler`] backed by EventBridge Scheduler. Cheap to clone.
#[derive(Clone, Debug)]
pub struct EventBridgeScheduler {
    client: LazyClient<Client>,
    group: String,
    queue_arn: String,
    role_arn: String,
}

impl EventBridgeScheduler {
    /// Adapter for schedules in `group` that send to the queue `queue_arn`
    /// as `role_arn`.
    pub fn new(
        client: Client,
        group: impl Into<String>,
        queue_arn: impl Into<String>,
        role_arn: impl Into<String>,
    ) -> Self {
        EventBridgeScheduler::new_with(LazyClient::ready(client), group, queue_arn, role_arn)
    }

    /// As [`EventBridgeScheduler::new`], with the client
    /// ([`crate::scheduler_client`] of `cfg`) built at its first request
    /// rather than now: only the schedule routes need it, so the ingest's
    /// start-up does not pay for it.
    pub fn from_config(
        cfg: &aws_config::SdkConfig,
        group: impl Into<String>,
        queue_arn: impl Into<String>,
        role_arn: impl Into<String>,
    ) -> Self {
        let cfg = cfg.clone();
        EventBridgeScheduler::new_with(
            LazyClient::new(move || crate::scheduler_client(&cfg)),
            group,
            queue_arn,
            role_arn,
        )
    }

    fn new_with(
        client: LazyClient<Client>,
        group: impl Into<String>,
        queue_arn: impl Into<String>,
        role_arn: impl Into<String>,
    ) -> Self {
        EventBridgeScheduler {
            client,
            group: group.into(),
            queue_arn: queue_arn.into(),
            role_arn: role_arn.into(),
        }
    }

    /// The schedule group.
    pub fn group(&self) -> &str {
        &self.group
    }

    fn target(&self, plan: &SchedulePlan) -> Result<Target, SchedulerError> {
        Target::builder()
            .arn(&self.queue_arn)
            .role_arn(&self.role_arn)
            .input(target_input(&plan.body))
            .build()
            .map_err(|e| SchedulerError::Invalid(e.to_string()))
    }
}

fn window() -> Result<FlexibleTimeWindow, SchedulerError> {
    FlexibleTimeWindow::builder()
        .mode(FlexibleTimeWindowMode::Off)
        .build()
        .map_err(|e| SchedulerError::Invalid(e.to_string()))
}

/// The target `Input` for a plan body: `{"kind":"schedule"}` bodies get the
/// scheduled-time placeholder; anything else is sent as is.
pub fn target_input(body: &str) -> String {
    let Ok(mut value) = serde_json::from_str::<serde_json::Value>(body) else {
        return body.to_owned();
    };
    let is_schedule = value.get("kind").and_then(|k| k.as_str()) == Some("schedule");
    match value.as_object_mut() {
        Some(obj) if is_schedule => {
            obj.insert("scheduled_time".into(), SCHEDULED_TIME_PLACEHOLDER.into());
            value.to_string()
        }
        _ => body.to_owned(),
    }
}

/// Maps an SDK error: validation problems are the caller's, the rest may
/// pass with a retry.
fn sdk_error<E, R>(op: &str, e: SdkError<E, R>, validation: bool) -> SchedulerError
where
    E: std::error::Error + 'static,
    R: std::fmt::Debug,
{
    let message = format!("EventBridge Scheduler {op}: {}", DisplayErrorContext(&e));
    if validation {
        SchedulerError::Invalid(message)
    } else {
        SchedulerError::Unavailable(message)
    }
}

#[async_trait]
impl Scheduler for EventBridgeScheduler {
    async fn upsert(&self, plan: &SchedulePlan) -> Result<(), SchedulerError> {
        let after = plan.one_time.then_some(ActionAfterCompletion::Delete);
        let created = self
            .client
            .get()
            .create_schedule()
            .name(&plan.name)
            .group_name(&self.group)
            .schedule_expression(&plan.expression)
            .schedule_expression_timezone(&plan.timezone)
            .flexible_time_window(window()?)
            .target(self.target(plan)?)
            .set_action_after_completion(after.clone())
            .send()
            .await;
        let err = match created {
            Ok(_) => return Ok(()),
            Err(e) => e,
        };
        let (conflict, validation) = err
            .as_service_error()
            .map(|se| (se.is_conflict_exception(), se.is_validation_exception()))
            .unwrap_or((false, false));
        if !conflict {
            return Err(sdk_error("CreateSchedule", err, validation));
        }
        // It exists: replace it (UpdateSchedule replaces every field).
        self.client
            .get()
            .update_schedule()
            .name(&plan.name)
            .group_name(&self.group)
            .schedule_expression(&plan.expression)
            .schedule_expression_timezone(&plan.timezone)
            .flexible_time_window(window()?)
            .target(self.target(plan)?)
            .set_action_after_completion(after)
            .send()
            .await
            .map(|_| ())
            .map_err(|e| {
                let validation = e
                    .as_service_error()
                    .is_some_and(|se| se.is_validation_exception());
                sdk_error("UpdateSchedule", e, validation)
            })
    }

    async fn delete(&self, name: &str) -> Result<(), SchedulerError> {
        match self
            .client
            .get()
            .delete_schedule()
            .name(name)
            .group_name(&self.group)
            .send()
            .await
        {
            Ok(_) => Ok(()),
            Err(e)
                if e.as_service_error()
                    .is_some_and(|se| se.is_resource_not_found_exception()) =>
            {
                Ok(())
            }
            Err(e) => Err(sdk_error("DeleteSchedule", e, false)),
        }
    }
}

#[cfg(test)]
mod tests;
