//! A test double of the AWS Lambda Runtime API (version `2018-06-01`): a
//! real HTTP server on `127.0.0.1:0` that a function binary talks to through
//! `AWS_LAMBDA_RUNTIME_API`, exactly as it would inside Lambda.
//!
//! It plays the Lambda service's side of the protocol:
//!
//! * `GET /2018-06-01/runtime/invocation/next` long-polls until an event is
//!   queued, then returns it with the `Lambda-Runtime-Aws-Request-Id`,
//!   `Lambda-Runtime-Deadline-Ms`, `Lambda-Runtime-Invoked-Function-Arn` and
//!   `Lambda-Runtime-Trace-Id` headers;
//! * `POST /2018-06-01/runtime/invocation/{id}/response` and
//!   `POST /2018-06-01/runtime/invocation/{id}/error` deliver the outcome of
//!   invocation `id` (202); an unknown or already answered id gets 400
//!   `InvalidRequestID` and is recorded as a protocol violation;
//! * `POST /2018-06-01/runtime/init/error` records an initialisation error.
//!
//! A response posted with `Lambda-Runtime-Function-Response-Mode:
//! streaming` (what `lambda_http::run_with_streaming_response` sends: a
//! chunked body of the HTTP prelude JSON, 8 NUL bytes, then the response
//! body) is an [`Outcome::Streamed`] as soon as its prelude arrived, its
//! body readable chunk by chunk while the function still writes it.
//!
//! ```ignore
//! let api = RuntimeApi::start().await;
//! // spawn the binary with AWS_LAMBDA_RUNTIME_API=api.address()
//! let outcome = api.invoke(&event, Duration::from_secs(10)).await?;
//! let body = outcome.json_response()?;
//! ```
//!
//! Shared by `tests/e2e/lambda_functions.rs` and `benches/ingest_cold_start.rs`
//! (through `#[path]`), so some items are unused in one of them.
#![allow(dead_code)]

pub(crate) mod functions;

use axum::body::Bytes;
use axum::extract::{Path, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::Router;
use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};
use tokio::sync::{mpsc, oneshot, Notify};

/// The function ARN every invocation carries.
pub(crate) const FUNCTION_ARN: &str = "arn:aws:lambda:us-east-1:123456789012:function:baton-test";

/// One queued invocation, as `next` hands it out.
struct Invocation {
    request_id: String,
    event: Vec<u8>,
    deadline_ms: u64,
}

/// How an invocation ended, as the function reported it.
#[derive(Clone, Debug)]
pub(crate) enum Outcome {
    /// A streamed response (response mode `streaming`), from when its
    /// prelude arrived.
    Streamed(Streamed),
    /// `POST .../response`: the handler's result.
    Response {
        /// The raw body the runtime posted.
        body: Vec<u8>,
        /// When the response arrived.
        at: Instant,
    },
    /// `POST .../error`: the handler failed.
    Error {
        /// The `Lambda-Runtime-Function-Error-Type` header, when sent.
        error_type: Option<String>,
        /// The raw error document (`{"errorType", "errorMessage"}`).
        body: Vec<u8>,
        /// When the error arrived.
        at: Instant,
    },
}

impl Outcome {
    /// The response body as JSON; an error outcome is an `Err` naming it.
    pub(crate) fn json_response(&self) -> Result<serde_json::Value, String> {
        match self {
            Outcome::Response { body, .. } => serde_json::from_slice(body).map_err(|e| {
                format!(
                    "response is not JSON ({e}): {}",
                    String::from_utf8_lossy(body)
                )
            }),
            Outcome::Error {
                error_type, body, ..
            } => Err(format!(
                "invocation failed ({error_type:?}): {}",
                String::from_utf8_lossy(body)
            )),
            Outcome::Streamed(s) => Err(format!("the response was streamed: {}", s.prelude)),
        }
    }

    /// When the outcome reached the Runtime API.
    pub(crate) fn at(&self) -> Instant {
        match self {
            Outcome::Response { at, .. } | Outcome::Error { at, .. } => *at,
            Outcome::Streamed(s) => s.at,
        }
    }
}

/// Where a streamed response's prelude ends.
const PRELUDE_END: &[u8] = &[0; 8];

/// A streamed response: the HTTP prelude lambda_http wrote
/// (`{"statusCode", "headers", "cookies"}`) and the body after it, as it
/// comes.
#[derive(Clone)]
pub(crate) struct Streamed {
    pub prelude: serde_json::Value,
    /// When the prelude arrived.
    pub at: Instant,
    body: Arc<tokio::sync::Mutex<mpsc::UnboundedReceiver<Bytes>>>,
}

impl std::fmt::Debug for Streamed {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Streamed({})", self.prelude)
    }
}

impl Streamed {
    /// The next piece of the body; `None` once the function ended it or
    /// after `timeout` without one.
    pub(crate) async fn next_chunk(&self, timeout: Duration) -> Option<Bytes> {
        let mut body = self.body.lock().await;
        tokio::time::timeout(timeout, body.recv())
            .await
            .ok()
            .flatten()
    }
}

/// Why waiting for an outcome failed.
#[derive(Debug)]
pub(crate) enum WaitError {
    /// No outcome within the time allowed.
    Timeout {
        request_id: String,
        waited: Duration,
    },
    /// The server stopped before an outcome arrived.
    Gone { request_id: String },
}

impl std::fmt::Display for WaitError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            WaitError::Timeout { request_id, waited } => {
                write!(
                    f,
                    "no response to invocation {request_id} within {waited:?}"
                )
            }
            WaitError::Gone { request_id } => write!(
                f,
                "runtime API stopped before invocation {request_id} ended"
            ),
        }
    }
}

impl std::error::Error for WaitError {}

/// A queued invocation whose outcome can be awaited.
pub(crate) struct Pending {
    /// The `Lambda-Runtime-Aws-Request-Id` it was given.
    pub request_id: String,
    rx: oneshot::Receiver<Outcome>,
}

impl Pending {
    /// Waits for the function's response or error, at most `timeout`.
    pub(crate) async fn wait(self, timeout: Duration) -> Result<Outcome, WaitError> {
        let request_id = self.request_id;
        match tokio::time::timeout(timeout, self.rx).await {
            Ok(Ok(outcome)) => Ok(outcome),
            Ok(Err(_)) => Err(WaitError::Gone { request_id }),
            Err(_) => Err(WaitError::Timeout {
                request_id,
                waited: timeout,
            }),
        }
    }
}

/// An `init/error` report.
#[derive(Clone, Debug)]
pub(crate) struct InitError {
    /// The `Lambda-Runtime-Function-Error-Type` header, when sent.
    pub error_type: Option<String>,
    /// The raw error document.
    pub body: Vec<u8>,
}

struct Shared {
    /// Events not yet handed out by `next`. A tokio mutex, because `next`
    /// holds it while it long-polls (one runtime loop per function).
    queue: tokio::sync::Mutex<mpsc::UnboundedReceiver<Invocation>>,
    waiting: Mutex<HashMap<String, oneshot::Sender<Outcome>>>,
    init_errors: Mutex<Vec<InitError>>,
    violations: Mutex<Vec<String>>,
    /// When `next` was called, in order (the first is the end of init).
    polls: Mutex<Vec<Instant>>,
    polled: Notify,
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    // A panicking test thread must not hide what was recorded.
    m.lock().unwrap_or_else(|p| p.into_inner())
}

/// The Runtime API double. Stops when dropped.
pub(crate) struct RuntimeApi {
    addr: SocketAddr,
    shared: Arc<Shared>,
    tx: mpsc::UnboundedSender<Invocation>,
    next_id: AtomicU64,
    shutdown: Option<oneshot::Sender<()>>,
}

impl RuntimeApi {
    /// Starts the server on a free loopback port (panics if none can be
    /// bound: test setup only).
    pub(crate) async fn start() -> RuntimeApi {
        let (tx, rx) = mpsc::unbounded_channel();
        let shared = Arc::new(Shared {
            queue: tokio::sync::Mutex::new(rx),
            waiting: Mutex::new(HashMap::new()),
            init_errors: Mutex::new(Vec::new()),
            violations: Mutex::new(Vec::new()),
            polls: Mutex::new(Vec::new()),
            polled: Notify::new(),
        });
        let app = Router::new()
            .route("/2018-06-01/runtime/invocation/next", get(next))
            .route(
                "/2018-06-01/runtime/invocation/{id}/response",
                post(response),
            )
            .route("/2018-06-01/runtime/invocation/{id}/error", post(error))
            .route("/2018-06-01/runtime/init/error", post(init_error))
            .fallback(unknown)
            .with_state(shared.clone());
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind the runtime API double on 127.0.0.1");
        let addr = listener.local_addr().expect("runtime API address");
        let (stop, stopped) = oneshot::channel::<()>();
        tokio::spawn(async move {
            let _ = axum::serve(listener, app)
                .with_graceful_shutdown(async {
                    let _ = stopped.await;
                })
                .await;
        });
        RuntimeApi {
            addr,
            shared,
            tx,
            next_id: AtomicU64::new(1),
            shutdown: Some(stop),
        }
    }

    /// `host:port`, the value of `AWS_LAMBDA_RUNTIME_API`.
    pub(crate) fn address(&self) -> String {
        self.addr.to_string()
    }

    /// Queues `event` with a deadline `timeout` from now (the function's
    /// configured timeout, as Lambda computes it when handing the event out
    /// would be slightly later; close enough for tests).
    pub(crate) fn enqueue(&self, event: &serde_json::Value, timeout: Duration) -> Pending {
        self.enqueue_raw(event.to_string().into_bytes(), timeout)
    }

    /// [`RuntimeApi::enqueue`] with raw bytes (for malformed events).
    pub(crate) fn enqueue_raw(&self, event: Vec<u8>, timeout: Duration) -> Pending {
        let n = self.next_id.fetch_add(1, Ordering::Relaxed);
        let request_id = format!("00000000-0000-4000-8000-{n:012}");
        let deadline = SystemTime::now() + timeout;
        let deadline_ms = deadline
            .duration_since(UNIX_EPOCH)
            .map(|d| d.as_millis() as u64)
            .unwrap_or(0);
        let (otx, orx) = oneshot::channel();
        lock(&self.shared.waiting).insert(request_id.clone(), otx);
        // The receiver lives in `shared`, as long as `self`.
        let _ = self.tx.send(Invocation {
            request_id: request_id.clone(),
            event,
            deadline_ms,
        });
        Pending {
            request_id,
            rx: orx,
        }
    }

    /// Queues `event` (function timeout 60 s) and waits at most `timeout`
    /// for its outcome.
    pub(crate) async fn invoke(
        &self,
        event: &serde_json::Value,
        timeout: Duration,
    ) -> Result<Outcome, WaitError> {
        self.enqueue(event, Duration::from_secs(60))
            .wait(timeout)
            .await
    }

    /// Waits until `next` has been called at least `n` times in all (the
    /// first call marks the end of the function's init phase); returns the
    /// time of the `n`th call, or `None` after `timeout`.
    pub(crate) async fn wait_for_poll(&self, n: usize, timeout: Duration) -> Option<Instant> {
        let deadline = tokio::time::Instant::now() + timeout;
        loop {
            let notified = self.shared.polled.notified();
            if let Some(at) = lock(&self.shared.polls).get(n.saturating_sub(1)).copied() {
                return Some(at);
            }
            if tokio::time::timeout_at(deadline, notified).await.is_err() {
                return None;
            }
        }
    }

    /// The `init/error` reports received.
    pub(crate) fn init_errors(&self) -> Vec<InitError> {
        lock(&self.shared.init_errors).clone()
    }

    /// Requests that broke the protocol (unknown routes, answers to unknown
    /// or already answered invocations).
    pub(crate) fn violations(&self) -> Vec<String> {
        lock(&self.shared.violations).clone()
    }
}

impl Drop for RuntimeApi {
    fn drop(&mut self) {
        if let Some(stop) = self.shutdown.take() {
            let _ = stop.send(());
        }
    }
}

fn invalid_request_id(shared: &Shared, what: &str, id: &str) -> Response {
    lock(&shared.violations).push(format!(
        "{what} for unknown or already answered invocation {id}"
    ));
    let body = serde_json::json!({"errorMessage": format!("invalid request id {id}"), "errorType": "InvalidRequestID"});
    (StatusCode::BAD_REQUEST, body.to_string()).into_response()
}

async fn next(State(shared): State<Arc<Shared>>) -> Response {
    lock(&shared.polls).push(Instant::now());
    shared.polled.notify_waiters();
    // Long poll. If the client goes away (the process is killed) this
    // future is dropped; `recv` is cancel-safe, so no event is lost.
    let invocation = {
        let mut queue = shared.queue.lock().await;
        queue.recv().await
    };
    let Some(inv) = invocation else {
        return (
            StatusCode::INTERNAL_SERVER_ERROR,
            "runtime API shutting down",
        )
            .into_response();
    };
    let mut response = (StatusCode::OK, inv.event).into_response();
    let headers = response.headers_mut();
    let mut set = |name: &'static str, value: String| {
        if let Ok(v) = HeaderValue::from_str(&value) {
            headers.insert(name, v);
        }
    };
    set("lambda-runtime-aws-request-id", inv.request_id.clone());
    set("lambda-runtime-deadline-ms", inv.deadline_ms.to_string());
    set(
        "lambda-runtime-invoked-function-arn",
        FUNCTION_ARN.to_owned(),
    );
    set(
        "lambda-runtime-trace-id",
        "Root=1-5759e988-bd862e3fe1be46a994272793;Parent=53995c3f42cd8ad8;Sampled=0".to_owned(),
    );
    set("content-type", "application/json".to_owned());
    response
}

async fn response(
    State(shared): State<Arc<Shared>>,
    Path(id): Path<String>,
    headers: HeaderMap,
    body: axum::body::Body,
) -> Response {
    let Some(tx) = lock(&shared.waiting).remove(&id) else {
        return invalid_request_id(&shared, "response", &id);
    };
    let streaming = headers
        .get("lambda-runtime-function-response-mode")
        .is_some_and(|v| v == "streaming");
    if streaming {
        return streamed_response(&shared, &id, tx, body).await;
    }
    let body = match axum::body::to_bytes(body, usize::MAX).await {
        Ok(b) => b,
        Err(e) => return (StatusCode::BAD_REQUEST, e.to_string()).into_response(),
    };
    let _ = tx.send(Outcome::Response {
        body: body.to_vec(),
        at: Instant::now(),
    });
    (StatusCode::ACCEPTED, r#"{"status":"OK"}"#).into_response()
}

/// Reads a streamed response as it comes: the prelude up to its 8 NUL
/// bytes makes the outcome, every later byte goes to its body. Answers
/// once the function ended the body, as Lambda does.
async fn streamed_response(
    shared: &Shared,
    id: &str,
    tx: oneshot::Sender<Outcome>,
    body: axum::body::Body,
) -> Response {
    use futures::StreamExt;
    let mut data = body.into_data_stream();
    let mut head: Vec<u8> = Vec::new();
    let mut tx = Some(tx);
    let (chunks, rx) = mpsc::unbounded_channel();
    let mut rx = Some(rx);
    while let Some(chunk) = data.next().await {
        let Ok(chunk) = chunk else { break };
        if tx.is_none() {
            let _ = chunks.send(chunk);
            continue;
        }
        head.extend_from_slice(&chunk);
        let Some(end) = head
            .windows(PRELUDE_END.len())
            .position(|w| w == PRELUDE_END)
        else {
            continue;
        };
        let prelude = match serde_json::from_slice(&head[..end]) {
            Ok(v) => v,
            Err(e) => {
                lock(&shared.violations).push(format!("streamed response {id}: bad prelude: {e}"));
                serde_json::Value::Null
            }
        };
        let rest = Bytes::copy_from_slice(&head[end + PRELUDE_END.len()..]);
        if !rest.is_empty() {
            let _ = chunks.send(rest);
        }
        if let (Some(tx), Some(rx)) = (tx.take(), rx.take()) {
            let _ = tx.send(Outcome::Streamed(Streamed {
                prelude,
                at: Instant::now(),
                body: Arc::new(tokio::sync::Mutex::new(rx)),
            }));
        }
    }
    if let Some(tx) = tx {
        lock(&shared.violations).push(format!("streamed response {id} without a prelude"));
        let _ = tx.send(Outcome::Response {
            body: head,
            at: Instant::now(),
        });
    }
    (StatusCode::ACCEPTED, r#"{"status":"OK"}"#).into_response()
}

fn error_type(headers: &HeaderMap) -> Option<String> {
    headers
        .get("lambda-runtime-function-error-type")
        .and_then(|v| v.to_str().ok())
        .map(str::to_owned)
}

async fn error(
    State(shared): State<Arc<Shared>>,
    Path(id): Path<String>,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let Some(tx) = lock(&shared.waiting).remove(&id) else {
        return invalid_request_id(&shared, "error", &id);
    };
    let _ = tx.send(Outcome::Error {
        error_type: error_type(&headers),
        body: body.to_vec(),
        at: Instant::now(),
    });
    (StatusCode::ACCEPTED, r#"{"status":"OK"}"#).into_response()
}

async fn init_error(
    State(shared): State<Arc<Shared>>,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    lock(&shared.init_errors).push(InitError {
        error_type: error_type(&headers),
        body: body.to_vec(),
    });
    (StatusCode::ACCEPTED, r#"{"status":"OK"}"#).into_response()
}

async fn unknown(State(shared): State<Arc<Shared>>, request: axum::extract::Request) -> Response {
    lock(&shared.violations).push(format!("unexpected {} {}", request.method(), request.uri()));
    (StatusCode::NOT_FOUND, "not a Runtime API route").into_response()
}
