//! An in-process HTTP server that speaks the OpenAI Chat Completions and
//! Anthropic Messages wire formats and answers with the scripted engine
//! ([`crate::script`]), for end-to-end tests in other crates.
//!
//! ```no_run
//! # async fn demo() {
//! use baton_llm::{mock::MockLlmServer, LlmConfig, RetryPolicy, Secret};
//! let server = MockLlmServer::start().await;
//! let config = LlmConfig::OpenAi {
//!     base_url: Some(server.openai_base_url()),
//!     api_key: Some(Secret::new("test-key")),
//!     model: "mock-model".into(),
//!     fallback_models: vec![],
//! };
//! let provider = baton_llm::build_provider(&config, RetryPolicy::default()).unwrap();
//! # }
//! ```
//!
//! Both routes require an API key header (`Authorization: Bearer …` or
//! `x-api-key`) and answer 401 without one, so a test that passes proves
//! the key is sent. `#fail_first=N` in a conversation's first user message
//! makes its first N calls fail: 429 with `retry-after: 0` on the OpenAI
//! route, 529 `overloaded_error` (also with `retry-after: 0`) on the
//! Anthropic route.

use crate::{anthropic, openai, script};
use axum::body::Bytes;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use axum::{Json, Router};
use baton_core::CompletionRequest;
use serde_json::{json, Value};
use std::collections::hash_map::DefaultHasher;
use std::collections::HashMap;
use std::hash::{Hash, Hasher};
use std::net::SocketAddr;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use tokio::sync::oneshot;

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

    /// The address the server listens on.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// POST requests received on either route, failed ones included.
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

#[derive(Clone, Copy)]
enum Wire {
    OpenAi,
    Anthropic,
}

impl Wire {
    fn error(self, status: StatusCode, kind: &str, message: &str) -> Response {
        let body = match self {
            Wire::OpenAi => json!({"error": {"message": message, "type": kind, "code": null}}),
            Wire::Anthropic => {
                json!({"type": "error", "error": {"type": kind, "message": message}})
            }
        };
        (status, Json(body)).into_response()
    }
}

async fn openai_route(
    State(shared): State<Arc<Shared>>,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    handle(Wire::OpenAi, &shared, &headers, &body).await
}

async fn anthropic_route(
    State(shared): State<Arc<Shared>>,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    handle(Wire::Anthropic, &shared, &headers, &body).await
}

fn header<'a>(headers: &'a HeaderMap, name: &str) -> Option<&'a str> {
    headers
        .get(name)
        .and_then(|v| v.to_str().ok())
        .map(str::trim)
        .filter(|v| !v.is_empty())
}

async fn handle(wire: Wire, shared: &Shared, headers: &HeaderMap, body: &[u8]) -> Response {
    let n = shared.requests.fetch_add(1, Ordering::SeqCst) + 1;
    let authorised = match wire {
        Wire::OpenAi => header(headers, "authorization")
            .and_then(|v| v.strip_prefix("Bearer "))
            .is_some_and(|k| !k.trim().is_empty()),
        Wire::Anthropic => header(headers, "x-api-key").is_some(),
    };
    if !authorised {
        return wire.error(
            StatusCode::UNAUTHORIZED,
            "authentication_error",
            "missing API key",
        );
    }
    if matches!(wire, Wire::Anthropic) && header(headers, "anthropic-version").is_none() {
        return wire.error(
            StatusCode::BAD_REQUEST,
            "invalid_request_error",
            "anthropic-version header is required",
        );
    }
    let json: Value = match serde_json::from_slice(body) {
        Ok(v) => v,
        Err(e) => {
            return wire.error(
                StatusCode::BAD_REQUEST,
                "invalid_request_error",
                &format!("invalid JSON: {e}"),
            )
        }
    };
    let decoded = match wire {
        Wire::OpenAi => openai::decode_request(&json),
        Wire::Anthropic => anthropic::decode_request(&json),
    };
    let request = match decoded {
        Ok(r) => r,
        Err(e) => return wire.error(StatusCode::BAD_REQUEST, "invalid_request_error", &e),
    };
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
        };
        let mut response = wire.error(status, kind, "injected failure (#fail_first)");
        response
            .headers_mut()
            .insert("retry-after", axum::http::HeaderValue::from_static("0"));
        return response;
    }

    let plan = script::respond(&request);
    if !plan.sleep.is_zero() {
        tokio::time::sleep(plan.sleep).await;
    }
    let body = match wire {
        Wire::OpenAi => openai::encode_response(&plan.completion, &format!("chatcmpl-mock-{n}")),
        Wire::Anthropic => anthropic::encode_response(&plan.completion, &format!("msg_mock_{n}")),
    };
    (StatusCode::OK, Json(body)).into_response()
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
