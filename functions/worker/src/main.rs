//! The worker Lambda: SQS wake messages in, agent segments run, partial
//! batch response out ([`baton_runtime::AppBuilder::run_worker_lambda`]).
//!
//! Each SQS record is a wake message; the records of one batch run
//! concurrently, each as one segment whose budget is the invocation's
//! deadline minus a margin for checkpointing and handing over. Failed
//! records are reported in `batchItemFailures`, so only they are retried.
//! Records from the dead-letter queue (a second event source mapping) mark
//! their task failed.

#[tokio::main]
async fn main() -> Result<(), baton_runtime::BoxError> {
    baton_runtime::App::builder().run_worker_lambda().await
}
