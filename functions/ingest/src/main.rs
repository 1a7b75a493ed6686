//! The ingest Lambda: API Gateway HTTP API (payload 2.0) requests handed to
//! the shared ingest handler ([`baton_runtime::AppBuilder::run_ingest_lambda`]),
//! the one `baton dev` serves.
//!
//! Clients are built once per process, before the runtime loop, not per
//! request.
//!
//! The runtime is single-threaded: Lambda sends an execution environment
//! one invocation at a time, and the handler's work is waiting on DynamoDB
//! and SQS, so extra worker threads would only add start-up time and
//! memory (each thread's stack and allocator arena count towards peak RSS;
//! docs/performance-lambda.md).

#[tokio::main(flavor = "current_thread")]
async fn main() -> Result<(), baton_runtime::BoxError> {
    // Only the ingest handler: no LLM provider, tools or worker are built,
    // and baton-runtime without its `worker` feature does not even link
    // their code (it was most of the binary and of its peak RSS;
    // docs/performance-lambda.md).
    baton_runtime::AppBuilder::new().run_ingest_lambda().await
}
