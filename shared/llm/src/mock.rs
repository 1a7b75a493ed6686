//! An in-process HTTP server that speaks the OpenAI Chat Completions,
//! Anthropic Messages and Bedrock Converse wire formats and answers with the
//! scripted engine ([`crate::script`]), for end-to-end tests in other crates.
//!
//! ```no_run
//! # async fn demo() {
//! use baton_llm::{mock::MockLlmServer, LlmConfig, RetryPolicy, Secret};
//! let server = MockLlmServer::start().await;
//! let config = LlmConfig::OpenAi {
//!     base_url: Some(server.openai_base_url()),
//!     api_key: Some(Secret::new("test-key")),
//!     model: "mock-model".into(),
//!     file_inputs: true,
//! };
//! let provider = baton_llm::build_provider(&config, RetryPolicy::default()).unwrap();
//! # }
//! ```
//!
//! The OpenAI and Anthropic routes require an API key header
//! (`Authorization: Bearer …` or `x-api-key`) and answer 401 without one,
//! so a test that passes proves the key is sent. The Bedrock route
//! (`POST /model/{modelId}/converse`) requires a SigV4 signature, for
//! service `bedrock`, made with [`MOCK_AWS_ACCESS_KEY_ID`] and
//! [`MOCK_AWS_SECRET_ACCESS_KEY`]: it recomputes the signature and answers
//! 403 like AWS when it is missing, malformed, made with other keys or
//! wrong. `#fail_first=N` in a conversation's first user message makes its
//! first N calls fail, all with `retry-after: 0`: 429 on the OpenAI route,
//! 529 `overloaded_error` on the Anthropic route, 429
//! `ThrottlingException` on the Bedrock route.
//!
//! A recap summary's request fails with `#recap_fail` in its input
//! ([`script::recap`]): a 400 rejection.
//!
//! Requests that ask to stream (`"stream": true` on the OpenAI and
//! Anthropic routes, `POST /model/{modelId}/converse-stream` on the Bedrock
//! one) get the scripted answer streamed: server-sent events, or AWS event
//! stream frames, the text in pieces and tool call arguments in pieces
//! (each event sent in two writes, to split it across reads).
//! [`MockLlmServer::streamed`] tells which requests streamed. `#chunk_ms=N`
//! waits N ms between events; `#stream_fail_after=N` breaks the
//! conversation's first streamed answer after N events;
//! `#stream_error_after=N` ends it after N events with the wire's error
//! event instead (OpenAI `server_error`, Anthropic `overloaded_error`,
//! Bedrock `serviceUnavailableException`). Failures and refusals come
//! before any streaming, as HTTP errors.
//!
//! A forced tool is read from each format (`tool_choice`
//! `{"type":"function","function":{"name"}}` on the OpenAI route,
//! `{"type":"tool","name"}` on the Anthropic one, `toolConfig.toolChoice`
//! `{"tool":{"name"}}` on the Bedrock one; a forced tool missing from the
//! request's tools is refused with a 400, as the APIs refuse it, and
//! choices the mock does not play — `required`, `any`, `none` — too). The
//! request is answered with a call of that tool as the conversation's
//! `#route=` / `#plan=` / `#supervise=` / `#verdict=` / `#grade=` directive says
//! ([`crate::script`]); the server counts the forced calls of each
//! directive ([`script::ForcedCalls`]) so that an array's entries are used
//! in order.
//!
//! A test can hold an answer back: [`MockLlmServer::hold_next`] makes the
//! next request of a kind (forcing a given tool, or forcing none) wait
//! before it is answered, so the test can kill the caller while the call
//! is in flight (it sees the request in [`MockLlmServer::received`] at
//! once).

use crate::bedrock::{self, AwsCredentials};
use crate::{anthropic, openai, script};
use aws_credential_types::Credentials;
use axum::body::{Body, Bytes};
use axum::extract::{Path, State};
use axum::http::{HeaderMap, StatusCode, Uri};
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use axum::{Json, Router};
use baton_core::CompletionRequest;
use serde::de::DeserializeOwned;
use std::collections::hash_map::DefaultHasher;
use std::collections::HashMap;
use std::hash::{Hash, Hasher};
use std::net::SocketAddr;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime};
use tokio::sync::oneshot;

/// The access key id the Bedrock route accepts.
pub const MOCK_AWS_ACCESS_KEY_ID: &str = "AKIDMOCKBEDROCK0001";
/// The secret key the Bedrock route verifies signatures with.
pub const MOCK_AWS_SECRET_ACCESS_KEY: &str = "mock/bedrock/secret/key/0123456789abcdef";

/// How far `x-amz-date` may be from the server's clock (AWS allows 5 min).
const MAX_CLOCK_SKEW: Duration = Duration::from_secs(5 * 60);

#[derive(Default)]
struct Shared {
    requests: AtomicUsize,
    /// Failures injected so far, per conversation (hash of the first user
    /// message).
    failures: Mutex<HashMap<u64, u32>>,
    /// Every request that decoded, in arrival order, whether it asked to
    /// stream, and when it arrived.
    received: Mutex<Vec<(CompletionRequest, bool, SystemTime)>>,
    /// Forced calls so far, per directive.
    forced: script::ForcedCalls,
    /// Answers to hold back ([`MockLlmServer::hold_next`]): the forced
    /// tool of the request to hold (`None`: a request forcing none), and
    /// for how long.
    holds: Mutex<Vec<(Option<String>, Duration)>>,
}

/// A running mock LLM server on `127.0.0.1`; it shuts down when dropped.
pub struct MockLlmServer {
    addr: SocketAddr,
    shared: Arc<Shared>,
    shutdown: Option<oneshot::Sender<()>>,
}

impl MockLlmServer {
    /// Starts a server on a free port. Panics if no port can be bound
    /// (test setup only); see [`MockLlmServer::try_start`].
    pub async fn start() -> Self {
        match Self::try_start().await {
            Ok(server) => server,
            Err(e) => panic!("cannot start the mock LLM server: {e}"),
        }
    }

    /// Starts a server on a free port.
    pub async fn try_start() -> std::io::Result<Self> {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
        let addr = listener.local_addr()?;
        let shared = Arc::new(Shared::default());
        let app = Router::new()
            .route("/v1/chat/completions", post(openai_route))
            .route("/v1/messages", post(anthropic_route))
            .route("/model/{model}/converse", post(bedrock_route))
            .route("/model/{model}/converse-stream", post(bedrock_stream_route))
            .with_state(shared.clone());
        let (tx, rx) = oneshot::channel::<()>();
        tokio::spawn(async move {
            let served = axum::serve(listener, app)
                .with_graceful_shutdown(async {
                    let _ = rx.await;
                })
                .await;
            if let Err(e) = served {
                tracing::warn!(error = %e, "mock LLM server stopped");
            }
        });
        Ok(MockLlmServer {
            addr,
            shared,
            shutdown: Some(tx),
        })
    }

    /// The base URL for [`crate::OpenAiProvider`]: `http://127.0.0.1:PORT/v1`.
    pub fn openai_base_url(&self) -> String {
        format!("http://{}/v1", self.addr)
    }

    /// The base URL for [`crate::AnthropicProvider`]: `http://127.0.0.1:PORT`.
    pub fn anthropic_base_url(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// The endpoint for [`crate::BedrockProvider`]: `http://127.0.0.1:PORT`.
    pub fn bedrock_endpoint_url(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// Credentials the Bedrock route accepts.
    pub fn bedrock_credentials() -> AwsCredentials {
        AwsCredentials::from_keys(MOCK_AWS_ACCESS_KEY_ID, MOCK_AWS_SECRET_ACCESS_KEY, None)
    }

    /// The address the server listens on.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// POST requests received on any route, failed ones included.
    pub fn request_count(&self) -> usize {
        self.shared.requests.load(Ordering::SeqCst)
    }

    /// The requests that were authorised and decoded, in arrival order.
    pub fn received(&self) -> Vec<CompletionRequest> {
        self.shared
            .received
            .lock()
            .map(|r| r.iter().map(|(request, ..)| request.clone()).collect())
            .unwrap_or_default()
    }

    /// When each of [`MockLlmServer::received`] arrived, in the same
    /// order: to compare with what the caller did around it.
    pub fn arrived(&self) -> Vec<SystemTime> {
        self.shared
            .received
            .lock()
            .map(|r| r.iter().map(|(.., at)| *at).collect())
            .unwrap_or_default()
    }

    /// Whether each of [`MockLlmServer::received`] asked to stream, in the
    /// same order.
    pub fn streamed(&self) -> Vec<bool> {
        self.shared
            .received
            .lock()
            .map(|r| r.iter().map(|(_, streamed, _)| *streamed).collect())
            .unwrap_or_default()
    }
}

impl MockLlmServer {
    /// The next request forcing `forced` (a tool name; `None`: the next
    /// request that forces no tool, an ordinary step) is recorded at once
    /// but answered only after `hold`, so a test can kill its caller
    /// mid-call. Each hold is used once; holds of one kind go in order.
    /// [`script::recap::HOLD`] holds the next recap summary.
    pub fn hold_next(&self, forced: Option<&str>, hold: Duration) {
        if let Ok(mut holds) = self.shared.holds.lock() {
            holds.push((forced.map(str::to_owned), hold));
        }
    }
}

impl Drop for MockLlmServer {
    fn drop(&mut self) {
        if let Some(tx) = self.shutdown.take() {
            let _ = tx.send(());
        }
    }
}

/// The refusals the mock can be told to give.
#[derive(Clone, Copy, Debug)]
enum Refusal {
    Overflow,
    Other,
}

/// How a request wants its answer.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Reply {
    Whole,
    /// Streamed; `usage`: with the usage (OpenAI's `include_usage`; the
    /// other formats always send it).
    Stream {
        usage: bool,
    },
}

#[derive(Clone, Copy)]
enum Wire {
    OpenAi,
    Anthropic,
    Bedrock,
}

impl Wire {
    fn error(self, status: StatusCode, kind: &str, message: &str) -> Response {
        let mut response = match self {
            Wire::OpenAi => {
                let body = openai::wire::ErrorResponse {
                    error: openai::wire::ErrorDetail {
                        message: message.to_owned(),
                        kind: Some(kind.to_owned()),
                        code: None,
                    },
                };
                (status, Json(body)).into_response()
            }
            Wire::Anthropic => {
                let body = anthropic::wire::ErrorResponse {
                    kind: "error".to_owned(),
                    error: anthropic::wire::ErrorDetail {
                        kind: kind.to_owned(),
                        message: message.to_owned(),
                    },
                };
                (status, Json(body)).into_response()
            }
            Wire::Bedrock => {
                let body = bedrock::wire::ErrorResponse {
                    message: message.to_owned(),
                    kind: None,
                };
                (status, Json(body)).into_response()
            }
        };
        if matches!(self, Wire::Bedrock) {
            // AWS names the error type in a header; the body has only the message.
            if let Ok(v) = axum::http::HeaderValue::from_str(kind) {
                response.headers_mut().insert("x-amzn-errortype", v);
            }
        }
        response
    }

    /// A 400 as the provider words it: too long for the context window, or
    /// some other refusal whose body names the model and an account (which
    /// must never reach a user).
    fn refuse(self, kind: Refusal, model: &str) -> Response {
        let message = match (kind, self) {
            (Refusal::Overflow, Wire::OpenAi) => format!(
                "This model's maximum context length is 128000 tokens. However, your messages resulted in 131072 tokens. ({model})"
            ),
            (Refusal::Overflow, Wire::Anthropic) => {
                "prompt is too long: 210000 tokens > 200000 maximum".to_owned()
            }
            (Refusal::Overflow, Wire::Bedrock) => "Input is too long for requested model.".to_owned(),
            (Refusal::Other, _) => format!(
                "User: arn:aws:iam::123456789012:role/baton-worker is not authorized to use model {model} with these parameters"
            ),
        };
        self.invalid(&message)
    }

    fn invalid(self, message: &str) -> Response {
        let kind = match self {
            Wire::Bedrock => "ValidationException",
            _ => "invalid_request_error",
        };
        self.error(StatusCode::BAD_REQUEST, kind, message)
    }
}

async fn openai_route(
    State(shared): State<Arc<Shared>>,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let n = shared.requests.fetch_add(1, Ordering::SeqCst) + 1;
    let authorised = header(&headers, "authorization")
        .and_then(|v| v.strip_prefix("Bearer "))
        .is_some_and(|k| !k.trim().is_empty());
    if !authorised {
        return unauthorised(Wire::OpenAi);
    }
    let decoded = parse(&body).and_then(|wire: openai::wire::Request| {
        let reply = match wire.stream {
            Some(true) => Reply::Stream {
                usage: wire.stream_options.is_some_and(|o| o.include_usage),
            },
            _ => Reply::Whole,
        };
        Ok((openai::from_wire_request(&wire)?, reply))
    });
    match decoded {
        Ok((request, reply)) => answer(Wire::OpenAi, &shared, request, n, reply).await,
        Err(e) => Wire::OpenAi.invalid(&e),
    }
}

async fn anthropic_route(
    State(shared): State<Arc<Shared>>,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let n = shared.requests.fetch_add(1, Ordering::SeqCst) + 1;
    if header(&headers, "x-api-key").is_none() {
        return unauthorised(Wire::Anthropic);
    }
    if header(&headers, "anthropic-version").is_none() {
        return Wire::Anthropic.invalid("anthropic-version header is required");
    }
    let decoded = parse(&body).and_then(|wire: anthropic::wire::Request| {
        let reply = match wire.stream {
            Some(true) => Reply::Stream { usage: true },
            _ => Reply::Whole,
        };
        Ok((anthropic::from_wire_request(&wire)?, reply))
    });
    match decoded {
        Ok((request, reply)) => answer(Wire::Anthropic, &shared, request, n, reply).await,
        Err(e) => Wire::Anthropic.invalid(&e),
    }
}

async fn bedrock_route(
    State(shared): State<Arc<Shared>>,
    Path(model): Path<String>,
    uri: Uri,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    bedrock_answer(&shared, &model, &uri, &headers, &body, Reply::Whole).await
}

/// `ConverseStream`: the same body, the answer in event stream frames.
async fn bedrock_stream_route(
    State(shared): State<Arc<Shared>>,
    Path(model): Path<String>,
    uri: Uri,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let reply = Reply::Stream { usage: true };
    bedrock_answer(&shared, &model, &uri, &headers, &body, reply).await
}

async fn bedrock_answer(
    shared: &Shared,
    model: &str,
    uri: &Uri,
    headers: &HeaderMap,
    body: &[u8],
    reply: Reply,
) -> Response {
    let n = shared.requests.fetch_add(1, Ordering::SeqCst) + 1;
    if let Err((kind, message)) = check_signature("POST", uri, headers, body) {
        return Wire::Bedrock.error(StatusCode::FORBIDDEN, kind, &message);
    }
    let decoded = parse(body).and_then(|wire| bedrock::from_wire_request(&wire, model));
    match decoded {
        Ok(request) => answer(Wire::Bedrock, shared, request, n, reply).await,
        Err(e) => Wire::Bedrock.invalid(&e),
    }
}

fn header<'a>(headers: &'a HeaderMap, name: &str) -> Option<&'a str> {
    headers
        .get(name)
        .and_then(|v| v.to_str().ok())
        .map(str::trim)
        .filter(|v| !v.is_empty())
}

fn unauthorised(wire: Wire) -> Response {
    wire.error(
        StatusCode::UNAUTHORIZED,
        "authentication_error",
        "missing API key",
    )
}

/// A request body in the route's wire format.
fn parse<T: DeserializeOwned>(body: &[u8]) -> Result<T, String> {
    serde_json::from_slice(body).map_err(|e| format!("invalid request: {e}"))
}

/// Checks a request's SigV4 signature the way AWS does: the
/// `Authorization` header's shape and scope (service `bedrock`), the
/// `x-amz-date` (within five minutes), the access key, and then the
/// signature itself, recomputed over the signed headers and the body.
/// Errors are the AWS error type and message.
fn check_signature(
    method: &str,
    uri: &Uri,
    headers: &HeaderMap,
    body: &[u8],
) -> Result<(), (&'static str, String)> {
    let incomplete = |m: &str| ("IncompleteSignatureException", m.to_string());
    let Some(auth) = header(headers, "authorization") else {
        return Err((
            "MissingAuthenticationTokenException",
            "Missing Authentication Token".into(),
        ));
    };
    let rest = auth
        .strip_prefix("AWS4-HMAC-SHA256 ")
        .ok_or_else(|| incomplete("Authorization must use AWS4-HMAC-SHA256"))?;
    let (mut credential, mut signed_headers, mut signature) = (None, None, None);
    for part in rest.split(',').map(str::trim) {
        if let Some(v) = part.strip_prefix("Credential=") {
            credential = Some(v);
        } else if let Some(v) = part.strip_prefix("SignedHeaders=") {
            signed_headers = Some(v);
        } else if let Some(v) = part.strip_prefix("Signature=") {
            signature = Some(v);
        }
    }
    let (Some(credential), Some(signed_headers), Some(signature)) =
        (credential, signed_headers, signature)
    else {
        return Err(incomplete(
            "Authorization needs Credential, SignedHeaders and Signature",
        ));
    };
    let scope: Vec<&str> = credential.split('/').collect();
    let [key_id, day, region, service, terminator] = scope[..] else {
        return Err(incomplete(
            "Credential must be KEY/yyyymmdd/region/service/aws4_request",
        ));
    };
    let day_ok = day.len() == 8 && day.bytes().all(|b| b.is_ascii_digit());
    if !day_ok || region.is_empty() || terminator != "aws4_request" {
        return Err(incomplete("malformed credential scope"));
    }
    if service != bedrock::SIGNING_NAME {
        return Err((
            "InvalidSignatureException",
            format!("Credential should be scoped to correct service: 'bedrock', not '{service}'"),
        ));
    }
    let signature_ok = signature.len() == 64 && signature.bytes().all(|b| b.is_ascii_hexdigit());
    if !signature_ok {
        return Err(incomplete("Signature must be 64 hex digits"));
    }
    let amz_date =
        header(headers, "x-amz-date").ok_or_else(|| incomplete("x-amz-date is required"))?;
    let time = chrono::NaiveDateTime::parse_from_str(amz_date, "%Y%m%dT%H%M%SZ")
        .map_err(|_| incomplete("x-amz-date must be yyyymmddThhmmssZ"))?
        .and_utc();
    if !amz_date.starts_with(day) {
        return Err(incomplete(
            "the credential scope date is not the x-amz-date day",
        ));
    }
    let time = SystemTime::from(time);
    let skew = match SystemTime::now().duration_since(time) {
        Ok(d) => d,
        Err(e) => e.duration(),
    };
    if skew > MAX_CLOCK_SKEW {
        return Err(("InvalidSignatureException", "Signature expired".into()));
    }
    if key_id != MOCK_AWS_ACCESS_KEY_ID {
        return Err((
            "UnrecognizedClientException",
            "The security token included in the request is invalid.".into(),
        ));
    }
    let names: Vec<&str> = signed_headers.split(';').collect();
    if !names.contains(&"host") || !names.contains(&"x-amz-date") {
        return Err(incomplete("SignedHeaders must include host and x-amz-date"));
    }
    let mut signed = Vec::with_capacity(names.len());
    for name in &names {
        let value = header(headers, name)
            .ok_or_else(|| incomplete(&format!("signed header {name} is missing")))?;
        signed.push((*name, value));
    }
    let host = header(headers, "host").unwrap_or_default();
    let path = uri.path_and_query().map(|p| p.as_str()).unwrap_or("/");
    let url = format!("http://{host}{path}");
    let credentials = Credentials::new(
        MOCK_AWS_ACCESS_KEY_ID,
        MOCK_AWS_SECRET_ACCESS_KEY,
        header(headers, "x-amz-security-token").map(str::to_string),
        None,
        "mock",
    );
    let (_, expected) =
        bedrock::sign_request(&credentials, region, method, &url, &signed, body, time)
            .map_err(|e| incomplete(&e.to_string()))?;
    if expected != signature {
        return Err((
            "InvalidSignatureException",
            "The request signature we calculated does not match the signature you provided.".into(),
        ));
    }
    Ok(())
}

/// Records a decoded request and answers it with the scripted engine, or
/// with an injected failure.
async fn answer(
    wire: Wire,
    shared: &Shared,
    request: CompletionRequest,
    n: usize,
    reply: Reply,
) -> Response {
    if let Ok(mut r) = shared.received.lock() {
        r.push((request.clone(), reply != Reply::Whole, SystemTime::now()));
    }
    let held = shared.holds.lock().ok().and_then(|mut holds| {
        // A recap summary forces no tool; it is held under its own name.
        let forced = if script::recap::is_recap_summary(&request) {
            Some(script::recap::HOLD)
        } else {
            request.tool_choice.forced()
        };
        let at = holds.iter().position(|(f, _)| f.as_deref() == forced)?;
        Some(holds.remove(at).1)
    });
    if let Some(hold) = held {
        tokio::time::sleep(hold).await;
    }

    if script::recap::fails(&request) {
        return wire.invalid("injected failure (#recap_fail)");
    }
    let first = script::first_user_message(&request).unwrap_or_default();
    let directives = script::Directives::parse(first);
    if directives.fail_first > 0 && should_fail(shared, first, directives.fail_first) {
        let (status, kind) = match wire {
            Wire::OpenAi => (StatusCode::TOO_MANY_REQUESTS, "rate_limit_error"),
            Wire::Anthropic => (
                StatusCode::from_u16(529).unwrap_or(StatusCode::SERVICE_UNAVAILABLE),
                "overloaded_error",
            ),
            Wire::Bedrock => (StatusCode::TOO_MANY_REQUESTS, "ThrottlingException"),
        };
        let mut response = wire.error(status, kind, "injected failure (#fail_first)");
        response
            .headers_mut()
            .insert("retry-after", axum::http::HeaderValue::from_static("0"));
        return response;
    }

    for (n, kind) in [
        (directives.overflow_first, Refusal::Overflow),
        (directives.reject_first, Refusal::Other),
    ] {
        if n > 0 && should_fail(shared, &format!("{kind:?}{first}"), n) {
            return wire.refuse(kind, &request.model);
        }
    }

    let plan = script::respond_counting(&request, &shared.forced);
    if !plan.sleep.is_zero() {
        tokio::time::sleep(plan.sleep).await;
    }
    if let Reply::Stream { usage } = reply {
        let events = stream_events(wire, &plan.completion, n, usage);
        // Each breaks one streamed answer of the conversation, the first.
        let once = |what: &str, after: Option<u32>| {
            after.filter(|_| should_fail(shared, &format!("{what}{first}"), 1))
        };
        let end = match (
            once("stream_fail", directives.stream_fail_after),
            once("stream_error", directives.stream_error_after),
        ) {
            (Some(after), _) => End::Break(after),
            (None, Some(after)) => End::Error(after),
            (None, None) => End::Complete,
        };
        let delay = directives.chunk_delay.unwrap_or_default();
        return stream_response(wire, events, end, delay);
    }
    match wire {
        Wire::OpenAi => {
            let body = openai::to_wire_response(&plan.completion, &format!("chatcmpl-mock-{n}"));
            (StatusCode::OK, Json(body)).into_response()
        }
        Wire::Anthropic => {
            let body = anthropic::to_wire_response(&plan.completion, &format!("msg_mock_{n}"));
            (StatusCode::OK, Json(body)).into_response()
        }
        Wire::Bedrock => {
            let body = bedrock::to_wire_response(&plan.completion);
            (StatusCode::OK, Json(body)).into_response()
        }
    }
}

/// Whether this call of the conversation should fail, counting it if so.
fn should_fail(shared: &Shared, first_message: &str, fail_first: u32) -> bool {
    let mut hasher = DefaultHasher::new();
    first_message.hash(&mut hasher);
    let key = hasher.finish();
    let Ok(mut failures) = shared.failures.lock() else {
        return false;
    };
    let count = failures.entry(key).or_insert(0);
    if *count < fail_first {
        *count += 1;
        true
    } else {
        false
    }
}

/// How a streamed answer ends.
#[derive(Clone, Copy, Debug)]
enum End {
    Complete,
    /// The connection breaks after this many events.
    Break(u32),
    /// The wire's error event comes after this many events.
    Error(u32),
}

/// The events of a streamed answer, each as its bytes on the wire.
fn stream_events(
    wire: Wire,
    completion: &baton_core::Completion,
    n: usize,
    usage: bool,
) -> Vec<Vec<u8>> {
    fn json<T: serde::Serialize>(value: &T) -> String {
        serde_json::to_string(value).unwrap_or_default()
    }
    match wire {
        Wire::OpenAi => openai::to_wire_chunks(completion, &format!("chatcmpl-mock-{n}"), usage)
            .iter()
            .map(|chunk| format!("data: {}\n\n", json(chunk)).into_bytes())
            .chain([b"data: [DONE]\n\n".to_vec()])
            .collect(),
        Wire::Anthropic => anthropic::to_wire_events(completion, &format!("msg_mock_{n}"))
            .iter()
            .map(|event| {
                let data = json(event);
                let kind = serde_json::from_str::<serde_json::Value>(&data)
                    .ok()
                    .and_then(|v| v["type"].as_str().map(str::to_owned))
                    .unwrap_or_default();
                format!("event: {kind}\ndata: {data}\n\n").into_bytes()
            })
            .collect(),
        Wire::Bedrock => bedrock::to_wire_events(completion)
            .iter()
            .map(|(kind, payload)| bedrock::event_frame(kind, payload.to_string().as_bytes()))
            .collect(),
    }
}

/// The wire's error event for `#stream_error_after`.
fn stream_error_event(wire: Wire) -> Vec<u8> {
    let message = "injected stream error (#stream_error_after)";
    match wire {
        Wire::OpenAi => format!(
            "data: {}\n\n",
            serde_json::json!({"error": {"message": message, "type": "server_error", "code": null}})
        )
        .into_bytes(),
        Wire::Anthropic => format!(
            "event: error\ndata: {}\n\n",
            serde_json::json!({"type": "error", "error": {"type": "overloaded_error", "message": message}})
        )
        .into_bytes(),
        Wire::Bedrock => bedrock::exception_frame("serviceUnavailableException", message),
    }
}

/// A 200 whose body is `events`, `delay` apart, each sent in two writes
/// (split mid-way, across a character or a frame header as it falls),
/// ended as `end` says.
fn stream_response(wire: Wire, mut events: Vec<Vec<u8>>, end: End, delay: Duration) -> Response {
    use futures::StreamExt;
    let mut broken = false;
    match end {
        End::Complete => {}
        End::Break(after) => {
            events.truncate(after as usize);
            broken = true;
        }
        End::Error(after) => {
            events.truncate(after as usize);
            events.push(stream_error_event(wire));
        }
    }
    let mut writes: Vec<(Duration, Result<Bytes, std::io::Error>)> = Vec::new();
    for (i, event) in events.into_iter().enumerate() {
        let wait = if i == 0 { Duration::ZERO } else { delay };
        let mid = event.len() / 2;
        let mut event = Bytes::from(event);
        let tail = event.split_off(mid);
        writes.push((wait, Ok(event)));
        writes.push((Duration::ZERO, Ok(tail)));
    }
    if broken {
        let reset = std::io::Error::new(
            std::io::ErrorKind::ConnectionReset,
            "injected broken stream (#stream_fail_after)",
        );
        // A pause first: hyper drops what it has not yet flushed when the
        // body fails, and the events before the break must arrive.
        writes.push((delay.max(Duration::from_millis(20)), Err(reset)));
    }
    let body = futures::stream::iter(writes).then(|(wait, write)| async move {
        if !wait.is_zero() {
            tokio::time::sleep(wait).await;
        }
        write
    });
    let content_type = match wire {
        Wire::Bedrock => "application/vnd.amazon.eventstream",
        _ => "text/event-stream",
    };
    (
        StatusCode::OK,
        [
            (axum::http::header::CONTENT_TYPE, content_type),
            (axum::http::header::CACHE_CONTROL, "no-cache"),
        ],
        Body::from_stream(body),
    )
        .into_response()
}
