//! The fake's receiver of slash-command answers: what Slack's
//! `response_url` (`https://hooks.slack.com/commands/…`) takes. A test
//! names a URL with [`FakeSlack::response_url`], sends it in a signed
//! `/baton` request, and reads what was answered there with
//! [`FakeSlack::responses`].

use super::{FakeSlack, Shared};
use axum::body::Bytes;
use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use serde_json::Value;
use std::sync::Arc;

/// One answer posted to a response URL.
#[derive(Clone, Debug, PartialEq)]
pub struct CommandResponse {
    /// The `{id}` of the URL it was posted to.
    pub id: String,
    /// Its JSON body (`response_type`, `text`).
    pub body: Value,
}

impl FakeSlack {
    /// A response URL on this fake, told apart from others by `id`.
    pub fn response_url(&self, id: &str) -> String {
        format!("{}/commands/response/{id}", self.base_url())
    }

    /// Every answer posted to this fake's response URLs, in order.
    pub fn responses(&self) -> Vec<CommandResponse> {
        self.shared.lock().responses.clone()
    }
}

/// `POST /commands/response/{id}`: takes a JSON answer, like Slack (no
/// token: the URL is the secret). Anything but JSON is a 400.
pub(super) async fn receive(
    State(shared): State<Arc<Shared>>,
    Path(id): Path<String>,
    body: Bytes,
) -> Response {
    let Ok(body) = serde_json::from_slice::<Value>(&body) else {
        return (StatusCode::BAD_REQUEST, "invalid_payload").into_response();
    };
    shared.lock().responses.push(CommandResponse { id, body });
    (StatusCode::OK, "ok").into_response()
}
