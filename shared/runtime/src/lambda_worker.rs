//! The worker Lambda's event loop (the `lambda` and `worker` features):
//! [`AppBuilder::run_worker_lambda`], so that a worker binary, Baton's own
//! or one with tools of its own, is a few lines.

use crate::{App, AppBuilder, BoxError};
use aws_lambda_events::sqs::{BatchItemFailure, SqsBatchResponse, SqsEvent, SqsMessage};
use baton_agent::{Disposition, SegmentBudget};
use baton_core::Delivery;
use lambda_runtime::LambdaEvent;
use std::sync::Arc;
use std::time::{Duration, SystemTime};

impl AppBuilder {
    /// The worker Lambda: a thin shell over [`baton_agent::Worker::handle`].
    ///
    /// Each SQS record is a wake message; the records of one batch run
    /// concurrently, each as one segment whose budget is the invocation's
    /// deadline minus a margin for checkpointing and handing over. Failed
    /// records are reported in `batchItemFailures`, so only they are
    /// retried. Records from the dead-letter queue (a second event source
    /// mapping) mark their task failed. Builds the app
    /// ([`AppBuilder::lambda_app`]) once, then serves until the process
    /// ends.
    pub async fn run_worker_lambda(self) -> Result<(), BoxError> {
        crate::init_tracing(true);
        let app = Arc::new(self.lambda_app().await.inspect_err(|e| {
            tracing::error!(error = %e, "start-up failed");
        })?);
        let margin = app.settings.lambda.segment_margin;
        let dlq_arn = app.settings.lambda.dlq_arn.clone();
        lambda_runtime::run(lambda_runtime::service_fn(
            move |event: LambdaEvent<SqsEvent>| {
                let app = app.clone();
                let dlq_arn = dlq_arn.clone();
                async move {
                    Ok::<_, BoxError>(handle_batch(&app, event, margin, dlq_arn.as_deref()).await)
                }
            },
        ))
        .await
    }
}

async fn handle_batch(
    app: &App,
    event: LambdaEvent<SqsEvent>,
    margin: Duration,
    dlq_arn: Option<&str>,
) -> SqsBatchResponse {
    let deadline = event.context.deadline();
    let left = deadline
        .duration_since(SystemTime::now())
        .unwrap_or_default()
        .saturating_sub(margin);
    let budget = app.settings.segment_budget.map_or(left, |b| b.min(left));
    let records = event.payload.records;
    let results = futures::future::join_all(records.into_iter().map(|record| async move {
        let id = record.message_id.clone().unwrap_or_default();
        let ok = if dlq_arn.is_some() && record.event_source_arn.as_deref() == dlq_arn {
            dead_letter(app, &record).await
        } else {
            segment(app, record, budget).await
        };
        (id, ok)
    }))
    .await;
    let batch_item_failures = results
        .into_iter()
        .filter(|(_, ok)| !ok)
        .map(|(item_identifier, _)| {
            let mut f = BatchItemFailure::default();
            f.item_identifier = item_identifier;
            f
        })
        .collect();
    let mut response = SqsBatchResponse::default();
    response.batch_item_failures = batch_item_failures;
    response
}

fn delivery(record: SqsMessage) -> Delivery {
    let receive_count = record
        .attributes
        .get("ApproximateReceiveCount")
        .and_then(|c| c.parse().ok())
        .unwrap_or(1);
    Delivery {
        message_id: record.message_id.unwrap_or_default(),
        receipt: record.receipt_handle.unwrap_or_default(),
        body: record.body.unwrap_or_default(),
        receive_count,
    }
}

/// Runs one segment; true when the record is done with.
async fn segment(app: &App, record: SqsMessage, budget: Duration) -> bool {
    let d = delivery(record);
    match app.worker.handle(&d, SegmentBudget::new(budget)).await {
        Disposition::Ack => true,
        Disposition::Retry { after, reason } => {
            tracing::warn!(%reason, "segment will be retried");
            // Shorter than the queue's visibility timeout, which must exceed
            // the function's timeout and would otherwise delay the retry.
            if let Err(e) = app.backend.queue.extend(&d.receipt, after).await {
                tracing::warn!(error = %e, "could not shorten the retry delay");
            }
            false
        }
        Disposition::Poison { reason } => {
            tracing::error!(%reason, "poison message left for the dead-letter queue");
            false
        }
    }
}

async fn dead_letter(app: &App, record: &SqsMessage) -> bool {
    let body = record.body.clone().unwrap_or_default();
    let count = record
        .attributes
        .get("ApproximateReceiveCount")
        .and_then(|c| c.parse().ok())
        .unwrap_or(0);
    match app.worker.dead_letter(&body, count).await {
        Ok(_) => true,
        Err(e) => {
            tracing::warn!(error = %e, "dead letter not handled; will be retried");
            false
        }
    }
}
