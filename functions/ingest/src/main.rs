//! The ingest Lambda: a thin shell that turns API Gateway requests into
//! `http::Request<Bytes>` for [`baton_ingest::Ingest::handle`].
//!
//! Clients are built once per process (here, before the runtime loop), not
//! per request.
//!
//! The runtime is single-threaded: Lambda sends an execution environment
//! one invocation at a time, and the handler's work is waiting on DynamoDB
//! and SQS, so extra worker threads would only add start-up time and
//! memory (each thread's stack and allocator arena count towards peak RSS;
//! docs/performance-lambda.md).

use bytes::Bytes;
use lambda_http::{service_fn, Body, Request, Response};
use std::convert::Infallible;

#[tokio::main(flavor = "current_thread")]
async fn main() -> Result<(), lambda_http::Error> {
    baton_runtime::init_tracing(true);
    // Only the ingest handler: no LLM provider, tools or worker are built,
    // so their code is neither run nor linked (it was most of the peak RSS;
    // docs/performance-lambda.md).
    let ingest = baton_runtime::lambda_ingest().await.inspect_err(|e| {
        // Readable, and in the function's JSON log, before the runtime
        // reports the failed init.
        tracing::error!(error = %e, "start-up failed");
    })?;
    lambda_http::run(service_fn(move |request: Request| {
        let ingest = ingest.clone();
        async move { Ok::<_, Infallible>(handle(&ingest, request).await) }
    }))
    .await
}

/// API Gateway already base64-decoded the body (Slack's form-encoded
/// interactivity arrives that way); the handler sees the raw bytes the
/// signature was computed over.
async fn handle(ingest: &baton_ingest::Ingest, request: Request) -> Response<Body> {
    let (parts, body) = request.into_parts();
    let bytes = match body {
        Body::Empty => Bytes::new(),
        Body::Text(s) => Bytes::from(s),
        Body::Binary(b) => Bytes::from(b),
        _ => Bytes::new(),
    };
    let response = ingest.handle(http::Request::from_parts(parts, bytes)).await;
    response.map(|b| match String::from_utf8(b.to_vec()) {
        Ok(s) => Body::Text(s),
        Err(e) => Body::Binary(e.into_bytes()),
    })
}
