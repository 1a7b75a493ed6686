//! Creates, idempotently, the AWS resources Baton runs on: the table, the
//! work queue and its dead-letter queue, the trace bucket, the scheduler
//! group and the KMS key sealing per-person connection tokens; and describes them as the `BATON_*` environment.
//!
//! Each step first looks the resource up and only creates (or, for queue
//! attributes and TTL, updates) what is missing or different, so running
//! [`bootstrap`] again with the same arguments changes nothing.

use crate::table::{
    ATTR_GSI1PK, ATTR_GSI3PK, ATTR_GSI3SK, ATTR_PK, ATTR_SK, ATTR_TTL, GSI_KEYS, GSI_LISTING,
};
use aws_config::SdkConfig;
use aws_sdk_dynamodb::client::Waiters;
use aws_sdk_dynamodb::types::{
    AttributeDefinition, BillingMode, CreateGlobalSecondaryIndexAction, GlobalSecondaryIndex,
    GlobalSecondaryIndexUpdate, IndexStatus, KeySchemaElement, KeyType, Projection, ProjectionType,
    ScalarAttributeType, TableDescription, TimeToLiveSpecification, TimeToLiveStatus,
};
use aws_sdk_s3::types::{BucketLocationConstraint, CreateBucketConfiguration};
use aws_sdk_sqs::types::QueueAttributeName;
use std::collections::HashMap;
use std::fmt;
use std::time::Duration;

/// How long messages stay in the dead-letter queue (14 days, SQS's maximum),
/// so a poison message can be inspected long after it failed.
pub const DLQ_RETENTION_SECS: u32 = 14 * 24 * 3600;
/// How long to wait for a new table to become active.
const TABLE_ACTIVE_TIMEOUT: Duration = Duration::from_secs(300);

/// Names of the resources of one Baton stack.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ResourceNames {
    /// DynamoDB table.
    pub table: String,
    /// SQS work queue.
    pub queue: String,
    /// SQS dead-letter queue of the work queue.
    pub dlq: String,
    /// S3 bucket for traces and offloaded payloads. Bucket names are global
    /// across AWS accounts: override this if the default is taken.
    pub bucket: String,
    /// EventBridge Scheduler schedule group.
    pub schedule_group: String,
    /// KMS alias of the key sealing connection tokens (`alias/…`).
    pub connections_key: String,
}

impl ResourceNames {
    /// The default names for stack `stack` (e.g. `baton-dev`): table and
    /// schedule group `baton-dev`, queues `baton-dev-work` and
    /// `baton-dev-dlq`, bucket `baton-dev-traces`, KMS alias
    /// `alias/baton-dev-connections`.
    pub fn for_stack(stack: &str) -> Self {
        ResourceNames {
            table: stack.to_owned(),
            queue: format!("{stack}-work"),
            dlq: format!("{stack}-dlq"),
            bucket: format!("{stack}-traces"),
            schedule_group: stack.to_owned(),
            connections_key: format!("alias/{stack}-connections"),
        }
    }

    /// Checks every name against its service's naming rules, so a bad name
    /// fails before anything is created.
    pub fn validate(&self) -> Result<(), BootstrapError> {
        let word = |c: char| c.is_ascii_alphanumeric() || c == '-' || c == '_';
        check("table", &self.table, 3, 255, |c| word(c) || c == '.')?;
        check("queue", &self.queue, 1, 80, word)?;
        check("dlq", &self.dlq, 1, 80, word)?;
        check("schedule_group", &self.schedule_group, 1, 64, |c| {
            word(c) || c == '.'
        })?;
        check("bucket", &self.bucket, 3, 63, |c| {
            c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-' || c == '.'
        })?;
        check("connections_key", &self.connections_key, 7, 256, |c| {
            word(c) || c == '/'
        })?;
        if !self.connections_key.starts_with("alias/")
            || self.connections_key.starts_with("alias/aws/")
        {
            return Err(BootstrapError::InvalidName {
                resource: "connections_key",
                name: self.connections_key.clone(),
                rule: "must be a KMS alias, `alias/…` (not `alias/aws/…`)".into(),
            });
        }
        let edge_ok = |c: Option<char>| c.is_some_and(|c| c.is_ascii_alphanumeric());
        if !edge_ok(self.bucket.chars().next()) || !edge_ok(self.bucket.chars().last()) {
            return Err(BootstrapError::InvalidName {
                resource: "bucket",
                name: self.bucket.clone(),
                rule: "must start and end with a lowercase letter or digit".into(),
            });
        }
        Ok(())
    }
}

fn check(
    resource: &'static str,
    name: &str,
    min: usize,
    max: usize,
    allowed: impl Fn(char) -> bool,
) -> Result<(), BootstrapError> {
    let rule = if name.len() < min || name.len() > max {
        format!("must be {min} to {max} characters long")
    } else if let Some(c) = name.chars().find(|c| !allowed(*c)) {
        format!("character {c:?} is not allowed")
    } else {
        return Ok(());
    };
    Err(BootstrapError::InvalidName {
        resource,
        name: name.to_owned(),
        rule,
    })
}

/// Why bootstrapping failed.
#[derive(Debug, Clone, thiserror::Error, PartialEq, Eq)]
pub enum BootstrapError {
    /// A resource name breaks its service's naming rules.
    #[error("invalid {resource} name {name:?}: {rule}")]
    InvalidName {
        /// Which [`ResourceNames`] field.
        resource: &'static str,
        /// The offending name.
        name: String,
        /// The rule it breaks.
        rule: String,
    },
    /// A call to AWS failed.
    #[error("{op}: {message}")]
    Aws {
        /// The operation, e.g. `SQS CreateQueue`.
        op: &'static str,
        /// The SDK's error with its causes.
        message: String,
    },
    /// The resource exists but is not set up the way Baton needs, and this
    /// cannot be fixed in place.
    #[error("{resource} exists but does not match: {detail}")]
    Mismatch {
        /// The resource, e.g. `table baton-dev`.
        resource: String,
        /// What differs.
        detail: String,
    },
}

fn aws<E: std::error::Error + 'static>(op: &'static str, e: E) -> BootstrapError {
    BootstrapError::Aws {
        op,
        message: aws_sdk_dynamodb::error::DisplayErrorContext(&e).to_string(),
    }
}

/// The resources of a stack, as the `BATON_*` environment variables the
/// binaries read.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Environment {
    /// `BATON_TABLE`: the DynamoDB table name.
    pub table: String,
    /// `BATON_QUEUE_URL`: the work queue's URL.
    pub queue_url: String,
    /// `BATON_QUEUE_ARN`: the work queue's ARN (schedules target it).
    pub queue_arn: String,
    /// `BATON_DLQ_URL`: the dead-letter queue's URL.
    pub dlq_url: String,
    /// `BATON_TRACE_BUCKET`: the S3 bucket for traces and offloaded entries.
    pub trace_bucket: String,
    /// `BATON_SCHEDULE_GROUP`: the EventBridge Scheduler group.
    pub schedule_group: String,
    /// `BATON_CONNECTIONS_KEY`: the KMS key (alias) sealing connection tokens.
    pub connections_key: String,
}

/// The variables an [`Environment`] is read from and rendered to.
pub const ENV_VARS: [&str; 7] = [
    "BATON_TABLE",
    "BATON_QUEUE_URL",
    "BATON_QUEUE_ARN",
    "BATON_DLQ_URL",
    "BATON_TRACE_BUCKET",
    "BATON_SCHEDULE_GROUP",
    "BATON_CONNECTIONS_KEY",
];

/// A `BATON_*` variable was not set.
#[derive(Debug, Clone, thiserror::Error, PartialEq, Eq)]
#[error("environment variable {0} is not set")]
pub struct MissingVar(pub &'static str);

impl Environment {
    /// `(name, value)` pairs, in [`ENV_VARS`] order.
    pub fn vars(&self) -> [(&'static str, &str); 7] {
        [
            (ENV_VARS[0], self.table.as_str()),
            (ENV_VARS[1], self.queue_url.as_str()),
            (ENV_VARS[2], self.queue_arn.as_str()),
            (ENV_VARS[3], self.dlq_url.as_str()),
            (ENV_VARS[4], self.trace_bucket.as_str()),
            (ENV_VARS[5], self.schedule_group.as_str()),
            (ENV_VARS[6], self.connections_key.as_str()),
        ]
    }

    /// `export K=V` lines (shell-quoted where needed), one per variable.
    pub fn exports(&self) -> String {
        self.vars()
            .iter()
            .map(|(k, v)| format!("export {k}={}\n", shell_quote(v)))
            .collect()
    }

    /// Reads the environment through `lookup` (e.g. a map, in tests).
    pub fn from_lookup(lookup: impl Fn(&str) -> Option<String>) -> Result<Environment, MissingVar> {
        let get = |k: &'static str| lookup(k).filter(|v| !v.is_empty()).ok_or(MissingVar(k));
        Ok(Environment {
            table: get(ENV_VARS[0])?,
            queue_url: get(ENV_VARS[1])?,
            queue_arn: get(ENV_VARS[2])?,
            dlq_url: get(ENV_VARS[3])?,
            trace_bucket: get(ENV_VARS[4])?,
            schedule_group: get(ENV_VARS[5])?,
            connections_key: get(ENV_VARS[6])?,
        })
    }
}

impl fmt::Display for Environment {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.exports())
    }
}

fn shell_quote(v: &str) -> String {
    let safe = |c: char| c.is_ascii_alphanumeric() || "_-./:@%+=,".contains(c);
    if !v.is_empty() && v.chars().all(safe) {
        v.to_owned()
    } else {
        format!("'{}'", v.replace('\'', r"'\''"))
    }
}

/// Creates what is missing of the stack `names` and returns its environment.
///
/// `max_receive_count`: deliveries of a message before SQS moves it to the
/// DLQ; `visibility_timeout_secs`: the work queue's visibility timeout.
pub async fn bootstrap(
    cfg: &SdkConfig,
    names: &ResourceNames,
    max_receive_count: u32,
    visibility_timeout_secs: u32,
) -> Result<Environment, BootstrapError> {
    names.validate()?;
    ensure_table(&crate::dynamodb_client(cfg), &names.table).await?;
    let sqs = crate::sqs_client(cfg);
    let dlq_url = ensure_queue(
        &sqs,
        &names.dlq,
        HashMap::from([(
            QueueAttributeName::MessageRetentionPeriod,
            DLQ_RETENTION_SECS.to_string(),
        )]),
    )
    .await?;
    let dlq_arn = queue_arn(&sqs, &dlq_url).await?;
    let redrive = serde_json::json!({
        "deadLetterTargetArn": dlq_arn,
        "maxReceiveCount": max_receive_count,
    })
    .to_string();
    let queue_url = ensure_queue(
        &sqs,
        &names.queue,
        HashMap::from([
            (
                QueueAttributeName::VisibilityTimeout,
                visibility_timeout_secs.to_string(),
            ),
            (QueueAttributeName::RedrivePolicy, redrive),
        ]),
    )
    .await?;
    let queue_arn = queue_arn(&sqs, &queue_url).await?;
    let region = cfg.region().map(|r| r.as_ref().to_owned());
    ensure_bucket(&crate::s3_client(cfg), &names.bucket, region.as_deref()).await?;
    ensure_schedule_group(&crate::scheduler_client(cfg), &names.schedule_group).await?;
    ensure_connections_key(&crate::kms_client(cfg), &names.connections_key).await?;
    Ok(Environment {
        table: names.table.clone(),
        queue_url,
        queue_arn,
        dlq_url,
        trace_bucket: names.bucket.clone(),
        schedule_group: names.schedule_group.clone(),
        connections_key: names.connections_key.clone(),
    })
}

fn key_element(name: &str, kind: KeyType) -> Result<KeySchemaElement, BootstrapError> {
    KeySchemaElement::builder()
        .attribute_name(name)
        .key_type(kind)
        .build()
        .map_err(|e| aws("building table definition", e))
}

fn string_attr(name: &str) -> Result<AttributeDefinition, BootstrapError> {
    AttributeDefinition::builder()
        .attribute_name(name)
        .attribute_type(ScalarAttributeType::S)
        .build()
        .map_err(|e| aws("building table definition", e))
}

pub(crate) async fn ensure_table(
    client: &aws_sdk_dynamodb::Client,
    name: &str,
) -> Result<(), BootstrapError> {
    let existing = match client.describe_table().table_name(name).send().await {
        Ok(out) => out.table,
        Err(e)
            if e.as_service_error()
                .is_some_and(|se| se.is_resource_not_found_exception()) =>
        {
            None
        }
        Err(e) => return Err(aws("DynamoDB DescribeTable", e)),
    };
    match existing {
        Some(desc) => {
            check_table(name, &desc)?;
            let has = |index: &str| {
                desc.global_secondary_indexes()
                    .iter()
                    .any(|g| g.index_name() == Some(index))
            };
            // DynamoDB adds one index per table update, so a table of an
            // older release gets them one after the other.
            if !has(GSI_KEYS) {
                // A table made by a release before the keys-only index.
                add_index(client, name, keys_index()?, &[ATTR_PK, ATTR_GSI1PK]).await?;
            }
            if !has(GSI_LISTING) {
                // A table made by a release before the task listing.
                add_index(client, name, listing_index()?, &[ATTR_GSI3PK, ATTR_GSI3SK]).await?;
            }
        }
        None => create_table(client, name).await?,
    }
    ensure_ttl(client, name).await
}

fn check_table(name: &str, desc: &TableDescription) -> Result<(), BootstrapError> {
    let keys: Vec<(Option<&str>, &KeyType)> = desc
        .key_schema()
        .iter()
        .map(|k| (Some(k.attribute_name()), k.key_type()))
        .collect();
    let want = [
        (Some(ATTR_PK), &KeyType::Hash),
        (Some(ATTR_SK), &KeyType::Range),
    ];
    if keys != want {
        return Err(BootstrapError::Mismatch {
            resource: format!("table {name}"),
            detail: format!("key schema is {keys:?}, want {ATTR_PK} (HASH), {ATTR_SK} (RANGE)"),
        });
    }
    Ok(())
}

/// The sparse index of live tasks and schedules: keys only
/// ([`crate::table::GSI_KEYS`]).
fn keys_index() -> Result<GlobalSecondaryIndex, BootstrapError> {
    GlobalSecondaryIndex::builder()
        .index_name(GSI_KEYS)
        .key_schema(key_element(ATTR_GSI1PK, KeyType::Hash)?)
        .key_schema(key_element(ATTR_PK, KeyType::Range)?)
        .projection(
            Projection::builder()
                .projection_type(ProjectionType::KeysOnly)
                .build(),
        )
        .build()
        .map_err(|e| aws("building table definition", e))
}

/// The sorted index of every task, newest first per shard, for the task
/// listing: keys only ([`crate::table::GSI_LISTING`]).
fn listing_index() -> Result<GlobalSecondaryIndex, BootstrapError> {
    GlobalSecondaryIndex::builder()
        .index_name(GSI_LISTING)
        .key_schema(key_element(ATTR_GSI3PK, KeyType::Hash)?)
        .key_schema(key_element(ATTR_GSI3SK, KeyType::Range)?)
        .projection(
            Projection::builder()
                .projection_type(ProjectionType::KeysOnly)
                .build(),
        )
        .build()
        .map_err(|e| aws("building table definition", e))
}

/// Adds an index (its key attributes `attrs`, all strings) to an existing
/// table and waits until it is active (DynamoDB fills it from the items
/// already there).
async fn add_index(
    client: &aws_sdk_dynamodb::Client,
    name: &str,
    gsi: GlobalSecondaryIndex,
    attrs: &[&str],
) -> Result<(), BootstrapError> {
    let index = gsi.index_name().to_owned();
    let create = CreateGlobalSecondaryIndexAction::builder()
        .index_name(&index)
        .set_key_schema(Some(gsi.key_schema().to_vec()))
        .set_projection(gsi.projection().cloned())
        .build()
        .map_err(|e| aws("building index definition", e))?;
    let mut update = client.update_table().table_name(name);
    for attr in attrs {
        update = update.attribute_definitions(string_attr(attr)?);
    }
    update
        .global_secondary_index_updates(
            GlobalSecondaryIndexUpdate::builder().create(create).build(),
        )
        .send()
        .await
        .map_err(|e| aws("DynamoDB UpdateTable (adding an index)", e))?;
    tracing::info!(table = name, index, "adding an index");
    let started = std::time::Instant::now();
    loop {
        let desc = client
            .describe_table()
            .table_name(name)
            .send()
            .await
            .map_err(|e| aws("DynamoDB DescribeTable", e))?;
        let active = desc.table().is_some_and(|t| {
            t.global_secondary_indexes().iter().any(|g| {
                g.index_name() == Some(index.as_str())
                    && g.index_status() == Some(&IndexStatus::Active)
            })
        });
        if active {
            return Ok(());
        }
        if started.elapsed() > TABLE_ACTIVE_TIMEOUT {
            return Err(BootstrapError::Mismatch {
                resource: format!("table {name}"),
                detail: format!("index {index} did not become active in time"),
            });
        }
        tokio::time::sleep(std::time::Duration::from_millis(500)).await;
    }
}

async fn create_table(client: &aws_sdk_dynamodb::Client, name: &str) -> Result<(), BootstrapError> {
    let created = client
        .create_table()
        .table_name(name)
        .billing_mode(BillingMode::PayPerRequest)
        .attribute_definitions(string_attr(ATTR_PK)?)
        .attribute_definitions(string_attr(ATTR_SK)?)
        .attribute_definitions(string_attr(ATTR_GSI1PK)?)
        .attribute_definitions(string_attr(ATTR_GSI3PK)?)
        .attribute_definitions(string_attr(ATTR_GSI3SK)?)
        .key_schema(key_element(ATTR_PK, KeyType::Hash)?)
        .key_schema(key_element(ATTR_SK, KeyType::Range)?)
        .global_secondary_indexes(keys_index()?)
        .global_secondary_indexes(listing_index()?)
        .send()
        .await;
    match created {
        Ok(_) => tracing::info!(table = name, "created table"),
        // Someone else created it between our describe and create.
        Err(e)
            if e.as_service_error()
                .is_some_and(|se| se.is_resource_in_use_exception()) => {}
        Err(e) => return Err(aws("DynamoDB CreateTable", e)),
    }
    client
        .wait_until_table_exists()
        .table_name(name)
        .wait(TABLE_ACTIVE_TIMEOUT)
        .await
        .map_err(|e| aws("waiting for the table to become active", e))?;
    Ok(())
}

async fn ensure_ttl(client: &aws_sdk_dynamodb::Client, name: &str) -> Result<(), BootstrapError> {
    let out = client
        .describe_time_to_live()
        .table_name(name)
        .send()
        .await
        .map_err(|e| aws("DynamoDB DescribeTimeToLive", e))?;
    let desc = out.time_to_live_description();
    let status = desc.and_then(|d| d.time_to_live_status());
    let attr = desc.and_then(|d| d.attribute_name());
    match status {
        Some(TimeToLiveStatus::Enabled | TimeToLiveStatus::Enabling) if attr == Some(ATTR_TTL) => {
            Ok(())
        }
        Some(TimeToLiveStatus::Enabled | TimeToLiveStatus::Enabling) => {
            Err(BootstrapError::Mismatch {
                resource: format!("table {name}"),
                detail: format!("TTL is on attribute {attr:?}, want {ATTR_TTL}"),
            })
        }
        _ => {
            let spec = TimeToLiveSpecification::builder()
                .attribute_name(ATTR_TTL)
                .enabled(true)
                .build()
                .map_err(|e| aws("building TTL specification", e))?;
            client
                .update_time_to_live()
                .table_name(name)
                .time_to_live_specification(spec)
                .send()
                .await
                .map_err(|e| aws("DynamoDB UpdateTimeToLive", e))?;
            tracing::info!(table = name, "enabled TTL");
            Ok(())
        }
    }
}

/// The queue's URL, creating it with `want` attributes, or setting those of
/// `want` that differ on an existing queue.
async fn ensure_queue(
    client: &aws_sdk_sqs::Client,
    name: &str,
    want: HashMap<QueueAttributeName, String>,
) -> Result<String, BootstrapError> {
    let existing = match client.get_queue_url().queue_name(name).send().await {
        Ok(out) => out.queue_url,
        Err(e)
            if e.as_service_error()
                .is_some_and(|se| se.is_queue_does_not_exist()) =>
        {
            None
        }
        Err(e) => return Err(aws("SQS GetQueueUrl", e)),
    };
    let Some(url) = existing else {
        let out = client
            .create_queue()
            .queue_name(name)
            .set_attributes(Some(want))
            .send()
            .await
            .map_err(|e| aws("SQS CreateQueue", e))?;
        tracing::info!(queue = name, "created queue");
        return out.queue_url.ok_or_else(|| BootstrapError::Aws {
            op: "SQS CreateQueue",
            message: "no queue URL in the response".into(),
        });
    };
    let current = client
        .get_queue_attributes()
        .queue_url(&url)
        .attribute_names(QueueAttributeName::All)
        .send()
        .await
        .map_err(|e| aws("SQS GetQueueAttributes", e))?
        .attributes
        .unwrap_or_default();
    let changes: HashMap<QueueAttributeName, String> = want
        .into_iter()
        .filter(|(k, v)| !same_attribute(k, current.get(k), v))
        .collect();
    if !changes.is_empty() {
        tracing::info!(queue = name, changes = ?changes.keys().collect::<Vec<_>>(), "updating queue attributes");
        client
            .set_queue_attributes()
            .queue_url(&url)
            .set_attributes(Some(changes))
            .send()
            .await
            .map_err(|e| aws("SQS SetQueueAttributes", e))?;
    }
    Ok(url)
}

/// Compares attribute values; JSON ones (the redrive policy) by content, as
/// SQS may render numbers as strings.
fn same_attribute(name: &QueueAttributeName, current: Option<&String>, want: &str) -> bool {
    let Some(current) = current else {
        return false;
    };
    if *name != QueueAttributeName::RedrivePolicy {
        return current == want;
    }
    let norm = |s: &str| -> Option<(String, String)> {
        let v: serde_json::Value = serde_json::from_str(s).ok()?;
        let arn = v.get("deadLetterTargetArn")?.as_str()?.to_owned();
        let count = match v.get("maxReceiveCount")? {
            serde_json::Value::String(s) => s.clone(),
            other => other.to_string(),
        };
        Some((arn, count))
    };
    norm(current).is_some() && norm(current) == norm(want)
}

async fn queue_arn(client: &aws_sdk_sqs::Client, url: &str) -> Result<String, BootstrapError> {
    client
        .get_queue_attributes()
        .queue_url(url)
        .attribute_names(QueueAttributeName::QueueArn)
        .send()
        .await
        .map_err(|e| aws("SQS GetQueueAttributes", e))?
        .attributes
        .and_then(|mut a| a.remove(&QueueAttributeName::QueueArn))
        .ok_or_else(|| BootstrapError::Aws {
            op: "SQS GetQueueAttributes",
            message: format!("no QueueArn for {url}"),
        })
}

async fn ensure_bucket(
    client: &aws_sdk_s3::Client,
    name: &str,
    region: Option<&str>,
) -> Result<(), BootstrapError> {
    match client.head_bucket().bucket(name).send().await {
        Ok(_) => return Ok(()),
        Err(e) if e.as_service_error().is_some_and(|se| se.is_not_found()) => {}
        Err(e) => return Err(aws("S3 HeadBucket", e)),
    }
    let mut req = client.create_bucket().bucket(name);
    // us-east-1 is the default location and must not be named.
    if let Some(region) = region.filter(|r| *r != "us-east-1") {
        req = req.create_bucket_configuration(
            CreateBucketConfiguration::builder()
                .location_constraint(BucketLocationConstraint::from(region))
                .build(),
        );
    }
    match req.send().await {
        Ok(_) => {
            tracing::info!(bucket = name, "created bucket");
            Ok(())
        }
        Err(e)
            if e.as_service_error()
                .is_some_and(|se| se.is_bucket_already_owned_by_you()) =>
        {
            Ok(())
        }
        Err(e) => Err(aws("S3 CreateBucket", e)),
    }
}

async fn ensure_schedule_group(
    client: &aws_sdk_scheduler::Client,
    name: &str,
) -> Result<(), BootstrapError> {
    match client.get_schedule_group().name(name).send().await {
        Ok(_) => return Ok(()),
        Err(e)
            if e.as_service_error()
                .is_some_and(|se| se.is_resource_not_found_exception()) => {}
        Err(e) => return Err(aws("Scheduler GetScheduleGroup", e)),
    }
    match client.create_schedule_group().name(name).send().await {
        Ok(_) => {
            tracing::info!(group = name, "created schedule group");
            Ok(())
        }
        Err(e)
            if e.as_service_error()
                .is_some_and(|se| se.is_conflict_exception()) =>
        {
            Ok(())
        }
        Err(e) => Err(aws("Scheduler CreateScheduleGroup", e)),
    }
}

/// A symmetric KMS key under `alias`, made (key, then alias) when the
/// alias names none.
async fn ensure_connections_key(
    client: &aws_sdk_kms::Client,
    alias: &str,
) -> Result<(), BootstrapError> {
    match client.describe_key().key_id(alias).send().await {
        Ok(_) => return Ok(()),
        Err(e)
            if e.as_service_error()
                .is_some_and(|se| se.is_not_found_exception()) => {}
        Err(e) => return Err(aws("KMS DescribeKey", e)),
    }
    let key = client
        .create_key()
        .description("Baton: seals per-person connection tokens")
        .send()
        .await
        .map_err(|e| aws("KMS CreateKey", e))?;
    let key_id = key
        .key_metadata()
        .map(|m| m.key_id().to_owned())
        .ok_or(BootstrapError::Aws {
            op: "KMS CreateKey",
            message: "no key id in the answer".into(),
        })?;
    match client
        .create_alias()
        .alias_name(alias)
        .target_key_id(&key_id)
        .send()
        .await
    {
        Ok(_) => {
            tracing::info!(alias, "created KMS key for connections");
            Ok(())
        }
        // Another bootstrap made it meanwhile: theirs is used.
        Err(e)
            if e.as_service_error()
                .is_some_and(|se| se.is_already_exists_exception()) =>
        {
            Ok(())
        }
        Err(e) => Err(aws("KMS CreateAlias", e)),
    }
}

#[cfg(test)]
mod tests;
