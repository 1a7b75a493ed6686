//! AWS adapters for Baton's ports: [`DynamoTable`] ([`baton_core::Table`]),
//! [`SqsQueue`] ([`baton_core::WorkQueue`]) and [`S3Blobs`]
//! ([`baton_core::BlobStore`]), plus [`bootstrap::bootstrap`], which creates
//! the resources they use, and [`EmfMetrics`] ([`baton_core::Metrics`] as
//! CloudWatch embedded metric format lines).
//!
//! Every client honours the SDK's standard configuration, including
//! `AWS_ENDPOINT_URL`, so the same code runs against AWS or a local
//! AWS-compatible server such as moto (see the `testing` feature).
//!
//! ```no_run
//! # async fn run() {
//! use std::sync::Arc;
//! let cfg = baton_aws::load_sdk_config().await;
//! let table = baton_aws::DynamoTable::new(baton_aws::dynamodb_client(&cfg), "baton-dev");
//! let blobs = baton_aws::S3Blobs::new(baton_aws::s3_client(&cfg), "baton-dev-traces", None);
//! let store = baton_core::TaskStore::new(Arc::new(table), Arc::new(blobs));
//! # let _ = store;
//! # }
//! ```

#![warn(missing_docs)]

pub mod blob;
pub mod bootstrap;
pub mod emf;
pub mod https;
mod lazy;
pub mod queue;
pub mod scheduler;
pub mod sealer;
pub mod table;
#[cfg(any(test, feature = "testing"))]
pub mod testing;

pub use blob::S3Blobs;
pub use bootstrap::{bootstrap, BootstrapError, Environment, ResourceNames};
pub use emf::EmfMetrics;
pub use queue::SqsQueue;
pub use scheduler::EventBridgeScheduler;
pub use sealer::KmsSealer;
pub use table::DynamoTable;

use aws_config::{BehaviorVersion, ConfigLoader, SdkConfig};

/// Loads the SDK configuration the standard way (environment, profile,
/// instance/Lambda role), including the `AWS_ENDPOINT_URL` override.
pub async fn load_sdk_config() -> SdkConfig {
    config_loader().load().await
}

/// The SDK configuration loader every Baton process starts from:
/// `aws_config::defaults` with its HTTPS client. That is Baton's own
/// ([`https::client`]: Mozilla's roots compiled in, *ring*, HTTP/1.1),
/// except with the `workstation` feature (`baton`'s build), which keeps
/// the SDK's default client: the system's trust store and `HTTPS_PROXY`,
/// as a laptop behind a corporate proxy may need.
pub fn config_loader() -> ConfigLoader {
    let loader = aws_config::defaults(BehaviorVersion::latest());
    #[cfg(not(feature = "workstation"))]
    let loader = loader.http_client(https::client());
    loader
}

/// A DynamoDB client for `cfg`.
pub fn dynamodb_client(cfg: &SdkConfig) -> aws_sdk_dynamodb::Client {
    aws_sdk_dynamodb::Client::new(cfg)
}

/// A KMS client for `cfg` (the connections' [`KmsSealer`]).
pub fn kms_client(cfg: &SdkConfig) -> aws_sdk_kms::Client {
    aws_sdk_kms::Client::new(cfg)
}

/// An SQS client for `cfg`.
pub fn sqs_client(cfg: &SdkConfig) -> aws_sdk_sqs::Client {
    aws_sdk_sqs::Client::new(cfg)
}

/// An EventBridge Scheduler client for `cfg`.
pub fn scheduler_client(cfg: &SdkConfig) -> aws_sdk_scheduler::Client {
    aws_sdk_scheduler::Client::new(cfg)
}

/// An S3 client for `cfg`. With a custom endpoint (`AWS_ENDPOINT_URL` or
/// `AWS_ENDPOINT_URL_S3`, e.g. moto or MinIO) it uses path-style addressing,
/// because virtual-host buckets (`bucket.127.0.0.1`) do not resolve there.
pub fn s3_client(cfg: &SdkConfig) -> aws_sdk_s3::Client {
    let custom_endpoint =
        cfg.endpoint_url().is_some() || std::env::var_os("AWS_ENDPOINT_URL_S3").is_some();
    let conf = aws_sdk_s3::config::Builder::from(cfg)
        .force_path_style(custom_endpoint)
        .build();
    aws_sdk_s3::Client::from_conf(conf)
}
