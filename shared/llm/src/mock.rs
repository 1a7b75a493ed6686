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

use crate::bedrock::{self, AwsCredentials};
use crate::{anthropic, openai, script};
use aws_credential_types::Credentials;
use axum::body::Bytes;
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
    /// Every request that decoded, in arrival order.
    received: Mutex<Vec<CompletionRequest>>,
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
            .map(|r| r.clone())
            .unwrap_or_default()
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
    let decoded = parse(&body).and_then(|wire| openai::from_wire_request(&wire));
    match decoded {
        Ok(request) => answer(Wire::OpenAi, &shared, request, n).await,
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
    let decoded = parse(&body).and_then(|wire| anthropic::from_wire_request(&wire));
    match decoded {
        Ok(request) => answer(Wire::Anthropic, &shared, request, n).await,
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
    let n = shared.requests.fetch_add(1, Ordering::SeqCst) + 1;
    if let Err((kind, message)) = check_signature("POST", &uri, &headers, &body) {
        return Wire::Bedrock.error(StatusCode::FORBIDDEN, kind, &message);
    }
    let decoded = parse(&body).and_then(|wire| bedrock::from_wire_request(&wire, &model));
    match decoded {
        Ok(request) => answer(Wire::Bedrock, &shared, request, n).await,
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
async fn answer(wire: Wire, shared: &Shared, request: CompletionRequest, n: usize) -> Response {
    if let Ok(mut r) = shared.received.lock() {
        r.push(request.clone());
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

    let plan = script::respond(&request);
    if !plan.sleep.is_zero() {
        tokio::time::sleep(plan.sleep).await;
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
