//! [`WorkQueue`] on an SQS standard queue.

use async_trait::async_trait;
use aws_sdk_sqs::error::{DisplayErrorContext, SdkError};
use aws_sdk_sqs::types::{Message, MessageSystemAttributeName};
use aws_sdk_sqs::Client;
use baton_core::queue::MAX_DELAY;
use baton_core::{Delivery, QueueError, WorkQueue};
use std::time::Duration;

/// The largest message body SQS accepts (1 MiB).
pub const MAX_MESSAGE_BYTES: usize = 1024 * 1024;
/// SQS returns at most this many messages per ReceiveMessage.
pub const MAX_RECEIVE_BATCH: usize = 10;
/// The longest long-poll SQS allows.
pub const MAX_WAIT: Duration = Duration::from_secs(20);
/// The longest visibility timeout SQS allows (12 hours).
pub const MAX_VISIBILITY: Duration = Duration::from_secs(12 * 3600);

/// A [`WorkQueue`] backed by one SQS queue. Cheap to clone.
#[derive(Clone, Debug)]
pub struct SqsQueue {
    client: Client,
    queue_url: String,
}

impl SqsQueue {
    /// Adapter for the queue at `queue_url`.
    pub fn new(client: Client, queue_url: impl Into<String>) -> Self {
        SqsQueue {
            client,
            queue_url: queue_url.into(),
        }
    }

    /// The queue's URL.
    pub fn queue_url(&self) -> &str {
        &self.queue_url
    }
}

fn unavailable<E, R>(op: &str, e: SdkError<E, R>) -> QueueError
where
    E: std::error::Error + 'static,
    R: std::fmt::Debug,
{
    QueueError::Unavailable(format!("SQS {op}: {}", DisplayErrorContext(&e)))
}

/// Whole seconds, rounded up so a delay or visibility is never shortened.
fn ceil_secs(d: Duration) -> u64 {
    d.as_secs() + u64::from(d.subsec_nanos() > 0)
}

fn delivery(m: &Message) -> Result<Delivery, QueueError> {
    let missing = |what: &str| QueueError::Unavailable(format!("SQS message without {what}"));
    let receive_count = match m
        .attributes()
        .and_then(|a| a.get(&MessageSystemAttributeName::ApproximateReceiveCount))
    {
        Some(n) => n.parse().map_err(|_| {
            QueueError::Unavailable(format!("SQS ApproximateReceiveCount not a number: {n}"))
        })?,
        None => return Err(missing("ApproximateReceiveCount")),
    };
    Ok(Delivery {
        message_id: m
            .message_id()
            .ok_or_else(|| missing("MessageId"))?
            .to_owned(),
        receipt: m
            .receipt_handle()
            .ok_or_else(|| missing("ReceiptHandle"))?
            .to_owned(),
        body: m.body().unwrap_or_default().to_owned(),
        receive_count,
    })
}

#[async_trait]
impl WorkQueue for SqsQueue {
    async fn send(&self, body: &str, delay: Duration) -> Result<(), QueueError> {
        if delay > MAX_DELAY {
            return Err(QueueError::InvalidDelay(delay));
        }
        if body.len() > MAX_MESSAGE_BYTES {
            return Err(QueueError::TooLarge(body.len()));
        }
        // ceil(delay) <= 900 because delay <= 900 s exactly.
        let delay_secs =
            i32::try_from(ceil_secs(delay)).map_err(|_| QueueError::InvalidDelay(delay))?;
        self.client
            .send_message()
            .queue_url(&self.queue_url)
            .message_body(body)
            .delay_seconds(delay_secs)
            .send()
            .await
            .map_err(|e| unavailable("SendMessage", e))?;
        Ok(())
    }

    async fn receive(&self, max: usize, wait: Duration) -> Result<Vec<Delivery>, QueueError> {
        if max == 0 {
            return Ok(Vec::new());
        }
        let max = i32::try_from(max.min(MAX_RECEIVE_BATCH)).unwrap_or(1);
        // Floor: waiting a little less than asked is allowed ("at most").
        let wait_secs = i32::try_from(wait.min(MAX_WAIT).as_secs()).unwrap_or(0);
        let resp = self
            .client
            .receive_message()
            .queue_url(&self.queue_url)
            .max_number_of_messages(max)
            .wait_time_seconds(wait_secs)
            .message_system_attribute_names(MessageSystemAttributeName::ApproximateReceiveCount)
            .send()
            .await
            .map_err(|e| unavailable("ReceiveMessage", e))?;
        resp.messages().iter().map(delivery).collect()
    }

    async fn delete(&self, receipt: &str) -> Result<(), QueueError> {
        self.client
            .delete_message()
            .queue_url(&self.queue_url)
            .receipt_handle(receipt)
            .send()
            .await
            .map_err(|e| unavailable("DeleteMessage", e))?;
        Ok(())
    }

    async fn extend(&self, receipt: &str, visibility: Duration) -> Result<(), QueueError> {
        let secs = i32::try_from(ceil_secs(visibility.min(MAX_VISIBILITY))).unwrap_or(0);
        self.client
            .change_message_visibility()
            .queue_url(&self.queue_url)
            .receipt_handle(receipt)
            .visibility_timeout(secs)
            .send()
            .await
            .map_err(|e| unavailable("ChangeMessageVisibility", e))?;
        Ok(())
    }
}

#[cfg(test)]
mod tests;
