//! The ingest Lambda's event loop (the `lambda` feature), so that an
//! ingest binary, Baton's own or one with tools of its own, is a few
//! lines: [`AppBuilder::run_ingest_lambda`]. The worker's is in
//! lambda_worker.rs (`lambda` and `worker`).

use crate::{AppBuilder, BoxError};
use baton_ingest::{Delivery, Ingest};
use bytes::Bytes;
use futures::stream::{BoxStream, StreamExt};
use lambda_http::{Body, Request, RequestExt, Response};
use std::convert::Infallible;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// Set (to `1`) on the function that serves streamed responses through
/// its function URL (`InvokeMode: RESPONSE_STREAM`, `StreamFunction` in
/// infra/template.yaml): the same binary then runs lambda_http's
/// streaming loop, so `GET /tasks/{id}/stream` sends events as they come.
pub(crate) const STREAMING_ENV: &str = "BATON_INGEST_STREAMING";

/// A stream is closed this long before the invocation's deadline, so it
/// ends between events rather than being cut by Lambda.
const DEADLINE_MARGIN: Duration = Duration::from_secs(3);

/// API Gateway's limit ([`Delivery::BUFFERED`]): a buffered stream route
/// answers within it (and the function's own deadline), and the client
/// resumes.
const BUFFERED_WITHIN: Duration = Delivery::BUFFERED.within;

impl AppBuilder {
    /// The ingest Lambda: API Gateway HTTP API (payload 2.0) requests
    /// turned into `http::Request<Bytes>` for [`baton_ingest::Ingest::serve`].
    /// Builds the ingest handler alone ([`AppBuilder::lambda_ingest`]) once,
    /// before the runtime loop, then serves until the process ends. With
    /// [`STREAMING_ENV`] set, responses are streamed (a function URL in
    /// `RESPONSE_STREAM` mode).
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
        if std::env::var(STREAMING_ENV).is_ok_and(|v| v == "1" || v == "true") {
            return lambda_http::run_with_streaming_response(lambda_http::service_fn(
                move |request: Request| {
                    let ingest = ingest.clone();
                    async move { Ok::<_, Infallible>(stream_request(&ingest, request).await) }
                },
            ))
            .await;
        }
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
fn request_bytes(request: Request) -> http::Request<Bytes> {
    let (parts, body) = request.into_parts();
    let bytes = match body {
        Body::Empty => Bytes::new(),
        Body::Text(s) => Bytes::from(s),
        Body::Binary(b) => Bytes::from(b),
        _ => Bytes::new(),
    };
    http::Request::from_parts(parts, bytes)
}

/// A buffered answer (API Gateway): a stream route gives what came
/// within [`BUFFERED_WITHIN`].
async fn handle_request(ingest: &Ingest, request: Request) -> Response<Body> {
    let delivery = Delivery {
        streaming: false,
        within: within(&request, BUFFERED_WITHIN),
    };
    let (parts, body) = ingest
        .serve(request_bytes(request), delivery)
        .await
        .into_parts();
    let bytes = body.collect().await;
    Response::from_parts(parts, bytes).map(|b| match String::from_utf8(b.to_vec()) {
        Ok(s) => Body::Text(s),
        Err(e) => Body::Binary(e.into_bytes()),
    })
}

/// A streamed answer (a function URL in `RESPONSE_STREAM` mode): a stream
/// route may stay open until shortly before the invocation's deadline.
/// Only the stream route (and `/healthz`) is answered here: the function
/// may only read, and every other route is the HTTP API's.
async fn stream_request(ingest: &Ingest, request: Request) -> Response<StreamBody> {
    if !streamed_here(request.uri().path()) {
        let refused = baton_ingest::ApiError::not_found(
            "this URL serves GET /tasks/{id}/stream only; use the HTTP API for the rest",
        )
        .into_response();
        return refused.map(|b| StreamBody(futures::stream::once(async move { b }).boxed()));
    }
    let delivery = Delivery {
        streaming: true,
        within: within(&request, Duration::MAX),
    };
    ingest
        .serve(request_bytes(request), delivery)
        .await
        .map(|body| match body {
            baton_ingest::Body::Full(b) => {
                StreamBody(futures::stream::once(async move { b }).boxed())
            }
            baton_ingest::Body::Stream(s) => StreamBody(s),
        })
}

fn streamed_here(path: &str) -> bool {
    let segments: Vec<&str> = path.trim_end_matches('/').split('/').skip(1).collect();
    matches!(segments.as_slice(), ["tasks", _, "stream"] | ["healthz"])
}

/// How long a response may take: until shortly before the invocation's
/// deadline, and at most `cap`.
fn within(request: &Request, cap: Duration) -> Duration {
    request
        .lambda_context_ref()
        .map(|c| until_deadline(c.deadline))
        .unwrap_or(BUFFERED_WITHIN)
        .min(cap)
}

/// The time from now to `deadline_ms` (epoch milliseconds) less
/// [`DEADLINE_MARGIN`]; zero once past.
fn until_deadline(deadline_ms: u64) -> Duration {
    let now = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_millis() as u64)
        .unwrap_or(0);
    Duration::from_millis(deadline_ms.saturating_sub(now)).saturating_sub(DEADLINE_MARGIN)
}

/// A response body written as its pieces come.
struct StreamBody(BoxStream<'static, Bytes>);

impl http_body::Body for StreamBody {
    type Data = Bytes;
    type Error = Infallible;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<http_body::Frame<Bytes>, Infallible>>> {
        self.0
            .poll_next_unpin(cx)
            .map(|piece| piece.map(|b| Ok(http_body::Frame::data(b))))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_stream_ends_before_the_deadline_with_a_margin() {
        let now = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map(|d| d.as_millis() as u64)
            .unwrap_or(0);
        let left = until_deadline(now + 60_000);
        assert!(left <= Duration::from_secs(57) && left > Duration::from_secs(50));
        assert_eq!(until_deadline(now + 2_000), Duration::ZERO);
        assert_eq!(until_deadline(0), Duration::ZERO);
    }

    #[test]
    fn the_streaming_function_answers_the_stream_route_only() {
        assert!(streamed_here("/tasks/abc/stream"));
        assert!(streamed_here("/tasks/abc/stream/"));
        assert!(streamed_here("/healthz"));
        for other in [
            "/tasks",
            "/tasks/abc",
            "/tasks/abc/events",
            "/slack/events",
            "/",
        ] {
            assert!(!streamed_here(other), "{other}");
        }
    }
}
