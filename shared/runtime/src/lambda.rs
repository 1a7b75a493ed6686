//! The ingest Lambda's event loop (the `lambda` feature), so that an
//! ingest binary, Baton's own or one with tools of its own, is a few
//! lines: [`AppBuilder::run_ingest_lambda`]. The worker's is in
//! lambda_worker.rs (`lambda` and `worker`).

use crate::{AppBuilder, BoxError};
use bytes::Bytes;
use lambda_http::{Body, Request, Response};
use std::convert::Infallible;

impl AppBuilder {
    /// The ingest Lambda: API Gateway HTTP API (payload 2.0) requests
    /// turned into `http::Request<Bytes>` for [`baton_ingest::Ingest::handle`].
    /// Builds the ingest handler alone ([`AppBuilder::lambda_ingest`]) once,
    /// before the runtime loop, then serves until the process ends.
    ///
    /// Call it from a single-threaded runtime
    /// (`#[tokio::main(flavor = "current_thread")]`): Lambda sends an
    /// execution environment one invocation at a time, and the handler's
    /// work is waiting on DynamoDB and SQS, so extra worker threads would
    /// only add start-up time and memory (docs/performance-lambda.md).
    pub async fn run_ingest_lambda(self) -> Result<(), BoxError> {
        crate::init_tracing(true);
        // Only the ingest handler: no LLM provider, tools or worker are
        // built, and without the `worker` feature their code is not even
        // linked (it was most of the size and peak RSS;
        // docs/performance-lambda.md).
        let ingest = self.lambda_ingest().await.inspect_err(|e| {
            // Readable, and in the function's JSON log, before the runtime
            // reports the failed init.
            tracing::error!(error = %e, "start-up failed");
        })?;
        lambda_http::run(lambda_http::service_fn(move |request: Request| {
            let ingest = ingest.clone();
            async move { Ok::<_, Infallible>(handle_request(&ingest, request).await) }
        }))
        .await
    }
}

/// API Gateway already base64-decoded the body (Slack's form-encoded
/// interactivity arrives that way); the handler sees the raw bytes the
/// signature was computed over.
async fn handle_request(ingest: &baton_ingest::Ingest, request: Request) -> Response<Body> {
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
