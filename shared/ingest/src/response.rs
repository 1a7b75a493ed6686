//! JSON answers and the errors every route may give.

use bytes::Bytes;
use http::{header, Response, StatusCode};

/// A refused request: a status and a message saying what is wrong.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{status}: {message}")]
pub struct ApiError {
    pub status: StatusCode,
    pub message: String,
}

impl ApiError {
    pub fn new(status: StatusCode, message: impl Into<String>) -> Self {
        ApiError {
            status,
            message: message.into(),
        }
    }
    pub fn bad_request(message: impl Into<String>) -> Self {
        Self::new(StatusCode::BAD_REQUEST, message)
    }
    pub fn unauthorized(message: impl Into<String>) -> Self {
        Self::new(StatusCode::UNAUTHORIZED, message)
    }
    pub fn not_found(message: impl Into<String>) -> Self {
        Self::new(StatusCode::NOT_FOUND, message)
    }
    /// The backend failed: the client may retry (with the same
    /// Idempotency-Key, which makes the retry safe).
    pub fn unavailable(e: impl std::fmt::Display) -> Self {
        tracing::error!(error = %e, "backend failure");
        Self::new(
            StatusCode::SERVICE_UNAVAILABLE,
            "temporarily unavailable, retry later",
        )
    }

    /// [`ApiError::unavailable`] for a request on a conversation, logged
    /// with the conversation's key so an operator can find whose message
    /// it was.
    pub fn unavailable_on(conversation: Option<&str>, e: impl std::fmt::Display) -> Self {
        tracing::error!(error = %e, conversation = conversation.unwrap_or("-"), "backend failure");
        Self::new(
            StatusCode::SERVICE_UNAVAILABLE,
            "temporarily unavailable, retry later",
        )
    }

    pub fn into_response(self) -> Response<Bytes> {
        json(self.status, &serde_json::json!({ "error": self.message }))
    }
}

/// A task id from a route or a button, or a 400 naming what was given.
pub(crate) fn parse_id(raw: &str) -> Result<baton_core::TaskId, ApiError> {
    baton_core::TaskId::parse(raw)
        .map_err(|_| ApiError::bad_request(format!("`{raw}` is not a task id")))
}

pub(crate) fn json(status: StatusCode, body: &serde_json::Value) -> Response<Bytes> {
    let bytes = serde_json::to_vec(body).unwrap_or_default();
    let mut r = Response::new(Bytes::from(bytes));
    *r.status_mut() = status;
    r.headers_mut().insert(
        header::CONTENT_TYPE,
        header::HeaderValue::from_static("application/json"),
    );
    r
}

/// A JSON request body: `Content-Type: application/json` and a body that
/// parses as `T` (415 and 400 otherwise, saying what is wrong).
pub(crate) fn json_body<T: serde::de::DeserializeOwned>(
    headers: &http::HeaderMap,
    body: &[u8],
) -> Result<T, ApiError> {
    let ct = headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("");
    if !ct
        .split(';')
        .next()
        .is_some_and(|m| m.trim().eq_ignore_ascii_case("application/json"))
    {
        return Err(ApiError::new(
            StatusCode::UNSUPPORTED_MEDIA_TYPE,
            "Content-Type must be application/json",
        ));
    }
    serde_json::from_slice(body)
        .map_err(|e| ApiError::bad_request(format!("invalid JSON body: {e}")))
}

pub(crate) type Answer = Result<Response<Bytes>, ApiError>;
