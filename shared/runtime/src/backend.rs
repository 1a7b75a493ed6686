//! The adapters of one backend, embedded or AWS.

use crate::aws_resources::AwsResources;
use baton_core::store::connections::ConnectionStore;
use baton_core::{QueueError, TaskStore, WorkQueue};
#[cfg(feature = "embedded")]
use baton_embedded::{EmbeddedBackend, EmbeddedQueue, QueueConfig};
#[cfg(feature = "embedded")]
use std::path::Path;
use std::sync::Arc;

#[derive(Debug, thiserror::Error)]
pub enum BackendError {
    #[cfg(feature = "embedded")]
    #[error("cannot open the embedded store: {0}")]
    Embedded(String),
    #[error("{0} is required for the AWS backend (run `baton bootstrap` to create the resources and print them)")]
    MissingVar(&'static str),
    #[error(transparent)]
    Queue(#[from] QueueError),
    #[cfg(feature = "embedded")]
    #[error("cannot use the connections key: {0}")]
    ConnectionsKey(#[from] baton_embedded::KeyFileError),
}

/// Where dead-lettered wake messages are found.
#[derive(Clone)]
pub enum DeadLetters {
    /// The embedded queue's dead-letter table.
    #[cfg(feature = "embedded")]
    Embedded(Arc<EmbeddedQueue>),
    /// The SQS dead-letter queue.
    Sqs(Arc<baton_aws::SqsQueue>),
}

#[cfg(feature = "worker")]
impl DeadLetters {
    /// Marks the task of every dead letter failed (telling its user), then
    /// removes the letter. Returns how many were handled.
    pub async fn drain(&self, worker: &baton_agent::Worker) -> Result<usize, BackendError> {
        use std::time::Duration;
        let mut handled = 0;
        match self {
            #[cfg(feature = "embedded")]
            DeadLetters::Embedded(q) => {
                for letter in q.dead_letters().await? {
                    match worker.dead_letter(&letter.body, letter.receive_count).await {
                        Ok(_) => {
                            q.delete_dead_letter(&letter.message_id).await?;
                            handled += 1;
                        }
                        Err(e) => tracing::warn!(error = %e, "dead letter kept for a later try"),
                    }
                }
            }
            DeadLetters::Sqs(q) => {
                for d in q.receive(10, Duration::ZERO).await? {
                    match worker.dead_letter(&d.body, d.receive_count).await {
                        Ok(_) => {
                            q.delete(&d.receipt).await?;
                            handled += 1;
                        }
                        Err(e) => tracing::warn!(error = %e, "dead letter kept for a later try"),
                    }
                }
            }
        }
        Ok(handled)
    }
}

/// A store, a work queue and where its dead letters go.
#[derive(Clone)]
pub struct Backend {
    pub store: TaskStore,
    pub queue: Arc<dyn WorkQueue>,
    pub dead_letters: Option<DeadLetters>,
    /// The embedded queue, when this backend is embedded (for `baton dev`'s
    /// status output and tests).
    #[cfg(feature = "embedded")]
    pub embedded_queue: Option<Arc<EmbeddedQueue>>,
    /// The schedules' scheduler (see [`crate::scheduling`]).
    pub scheduler: Option<Arc<dyn baton_schedule::Scheduler>>,
    /// The embedded scheduler, when that is the scheduler: `baton dev` runs its loop.
    #[cfg(feature = "embedded")]
    pub embedded_scheduler: Option<Arc<baton_embedded::EmbeddedScheduler>>,
    /// The embedded adapters, when this backend is embedded: `baton dev`
    /// prunes what retention lets go (DynamoDB TTL and S3 lifecycle rules
    /// do it on AWS).
    #[cfg(feature = "embedded")]
    pub embedded: Option<EmbeddedBackend>,
    /// Per-person OAuth connections, sealed at rest: under the key file of
    /// the data directory (embedded), or under `BATON_CONNECTIONS_KEY`
    /// (AWS). `None` on AWS without that key: per-person connections are
    /// then refused ([`baton_core::store::connections::NOT_CONFIGURED`]),
    /// never stored in clear.
    pub connections: Option<ConnectionStore>,
}

fn required(name: &'static str, value: &Option<String>) -> Result<String, BackendError> {
    value.clone().ok_or(BackendError::MissingVar(name))
}

impl Backend {
    /// Spreads the index of running tasks over `shards` shards
    /// (`BATON_ACTIVE_INDEX_SHARDS`).
    pub fn with_active_shards(mut self, shards: u32) -> Self {
        self.store = self.store.with_active_shards(shards);
        self
    }

    /// Keeps finished tasks as long as `retention` says
    /// (`BATON_TASK_RETENTION_DAYS`).
    pub fn with_retention(mut self, retention: baton_core::retention::Retention) -> Self {
        self.store = self.store.with_retention(retention);
        self
    }

    /// The durable embedded backend under `data_dir`.
    #[cfg(feature = "embedded")]
    pub fn embedded(data_dir: &Path, queue: QueueConfig) -> Result<Self, BackendError> {
        let b = EmbeddedBackend::open(data_dir, queue)
            .map_err(|e| BackendError::Embedded(e.to_string()))?;
        let scheduling = crate::scheduling::embedded(b.table.clone(), b.queue.clone());
        let sealer = baton_embedded::KeyFileSealer::open_or_create(data_dir)?;
        Ok(Backend {
            connections: Some(ConnectionStore::new(b.table.clone(), Arc::new(sealer))),
            scheduler: scheduling.scheduler,
            embedded_scheduler: scheduling.embedded,
            store: TaskStore::new(b.table.clone(), b.blobs.clone()),
            queue: b.queue.clone(),
            dead_letters: Some(DeadLetters::Embedded(b.queue.clone())),
            embedded_queue: Some(b.queue.clone()),
            embedded: Some(b),
        })
    }

    /// The AWS backend named by `BATON_TABLE`, `BATON_QUEUE_URL`,
    /// `BATON_TRACE_BUCKET` and (optionally) `BATON_DLQ_URL` (read into
    /// [`AwsResources`]), with clients built from the standard AWS
    /// configuration (`AWS_ENDPOINT_URL` included).
    pub async fn aws(aws: &AwsResources) -> Result<Self, BackendError> {
        Self::aws_with_config(aws, &baton_aws::load_sdk_config().await)
    }

    /// [`Backend::aws`] with an SDK configuration already loaded (the
    /// Lambda functions load one for the secrets and the backend both).
    /// The DynamoDB and SQS clients are built now; the S3 and EventBridge
    /// Scheduler clients at their first request, as few requests need them
    /// (docs/performance-lambda.md).
    pub fn aws_with_config(
        aws: &AwsResources,
        cfg: &aws_config::SdkConfig,
    ) -> Result<Self, BackendError> {
        let table = required("BATON_TABLE", &aws.table)?;
        let queue_url = required("BATON_QUEUE_URL", &aws.queue_url)?;
        let bucket = required("BATON_TRACE_BUCKET", &aws.trace_bucket)?;
        let dlq_url = aws.dlq_url.clone();
        let sqs = baton_aws::sqs_client(cfg);
        let table: Arc<dyn baton_core::Table> = Arc::new(baton_aws::DynamoTable::new(
            baton_aws::dynamodb_client(cfg),
            table,
        ));
        let store = TaskStore::new(
            table.clone(),
            Arc::new(baton_aws::S3Blobs::from_config(cfg, bucket, None)),
        );
        let connections = match &aws.connections_key {
            Some(key) => Some(ConnectionStore::new(
                table,
                Arc::new(baton_aws::KmsSealer::from_config(cfg, key)),
            )),
            None => {
                tracing::warn!("{}", baton_core::store::connections::NOT_CONFIGURED);
                None
            }
        };
        let queue: Arc<dyn WorkQueue> = Arc::new(baton_aws::SqsQueue::new(sqs.clone(), queue_url));
        let scheduling = crate::scheduling::for_aws(cfg, aws, store.table().clone(), queue.clone());
        Ok(Backend {
            connections,
            store,
            queue,
            scheduler: scheduling.scheduler,
            #[cfg(feature = "embedded")]
            embedded_scheduler: scheduling.embedded,
            dead_letters: dlq_url
                .map(|u| DeadLetters::Sqs(Arc::new(baton_aws::SqsQueue::new(sqs, u)))),
            #[cfg(feature = "embedded")]
            embedded_queue: None,
            #[cfg(feature = "embedded")]
            embedded: None,
        })
    }
}
