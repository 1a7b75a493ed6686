//! The names of the AWS backend's resources, read with the settings and
//! used by the backend and the scheduler built over them.

/// Where the AWS backend lives: the names the SAM stack (or `baton
/// bootstrap`) gives the functions. Checked when the AWS backend is built,
/// so `baton dev` on the embedded backend needs none of them.
#[derive(Clone, Debug, Default)]
pub struct AwsResources {
    /// `BATON_TABLE`.
    pub table: Option<String>,
    /// `BATON_QUEUE_URL`.
    pub queue_url: Option<String>,
    /// `BATON_TRACE_BUCKET`.
    pub trace_bucket: Option<String>,
    /// `BATON_DLQ_URL`: the dead-letter queue `baton dev --backend aws` drains.
    pub dlq_url: Option<String>,
    /// `BATON_SCHEDULE_GROUP`, `BATON_SCHEDULER_ROLE_ARN`, `BATON_QUEUE_ARN`:
    /// EventBridge Scheduler, when all three are set.
    pub schedule_group: Option<String>,
    pub scheduler_role_arn: Option<String>,
    pub queue_arn: Option<String>,
    /// `BATON_CONNECTIONS_KEY`: the KMS key (id, ARN or alias) sealing
    /// per-person connection tokens; without it they cannot be stored.
    pub connections_key: Option<String>,
}
