//! The fake's external uploads: `files.getUploadURLExternal`, the upload
//! URL (`POST /upload/{file_id}`), `files.completeUploadExternal` and
//! `files.info`, kept like Slack keeps them: an upload is seen nowhere
//! until completed, a completed file is shared in its channel, and
//! completing a file twice is refused (`already_completed`) so a test sees
//! a repeat.

use super::{slack_error, FakeSlack, Injected, Shared};
use axum::body::Bytes;
use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::Json;
use serde_json::{json, Value};
use std::collections::VecDeque;
use std::sync::Arc;

/// The `hold_next` key of the upload URL (it is no Web API method).
pub const UPLOAD_BYTES: &str = "upload";

/// An upload the fake was asked for.
#[derive(Clone, Debug, Default)]
struct Pending {
    name: String,
    length: u64,
    bytes: Option<Vec<u8>>,
    shared: Option<SharedFile>,
}

/// A file shared by `files.completeUploadExternal`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SharedFile {
    pub file_id: String,
    /// The `filename` of `files.getUploadURLExternal`.
    pub name: String,
    pub title: String,
    /// The bytes sent to the upload URL.
    pub bytes: Vec<u8>,
    pub channel: String,
    pub thread_ts: Option<String>,
    /// `initial_comment`, as sent.
    pub comment: Option<String>,
}

/// The uploads, in the order they were started.
#[derive(Default)]
pub(super) struct UploadState {
    files: Vec<(String, Pending)>,
}

impl UploadState {
    fn get(&mut self, id: &str) -> Option<&mut Pending> {
        self.files.iter_mut().find(|(i, _)| i == id).map(|(_, p)| p)
    }
}

impl FakeSlack {
    /// The files shared in channels, in the order their uploads started.
    pub fn shared_files(&self) -> Vec<SharedFile> {
        self.shared
            .lock()
            .uploads
            .files
            .iter()
            .filter_map(|(_, p)| p.shared.clone())
            .collect()
    }

    /// Whether the `n`th upload started (from 0) has received its bytes.
    pub fn upload_received(&self, n: usize) -> bool {
        self.shared
            .lock()
            .uploads
            .files
            .get(n)
            .is_some_and(|(_, p)| p.bytes.is_some())
    }

    /// How many uploads were started (`files.getUploadURLExternal`).
    pub fn uploads_started(&self) -> usize {
        self.shared.lock().uploads.files.len()
    }
}

/// `POST /upload/{file_id}`: the bytes of an upload (no token: Slack's
/// upload URLs are signed). Held like a method by `hold_next("upload")`.
pub(super) async fn receive(
    State(shared): State<Arc<Shared>>,
    Path(file_id): Path<String>,
    body: Bytes,
) -> Response {
    let hold = {
        let mut inner = shared.lock();
        let hold = match inner
            .injected
            .get_mut(UPLOAD_BYTES)
            .and_then(VecDeque::pop_front)
        {
            Some(Injected::Hold(d)) => Some(d),
            Some(_) => return StatusCode::INTERNAL_SERVER_ERROR.into_response(),
            None => None,
        };
        let Some(p) = inner.uploads.get(&file_id) else {
            return StatusCode::NOT_FOUND.into_response();
        };
        if p.length != body.len() as u64 {
            return (StatusCode::BAD_REQUEST, "length mismatch").into_response();
        }
        p.bytes = Some(body.to_vec());
        hold
    };
    if let Some(d) = hold {
        tokio::time::sleep(d).await;
    }
    (StatusCode::OK, "OK - uploaded").into_response()
}

/// The upload methods; `None` for any other.
pub(super) fn answer(
    shared: &Shared,
    base_url: &str,
    method: &str,
    body: &Value,
) -> Option<Response> {
    let field = |name: &str| {
        body.get(name)
            .and_then(Value::as_str)
            .filter(|s| !s.is_empty())
            .map(str::to_owned)
    };
    let response = match method {
        "files.getUploadURLExternal" => {
            let (Some(name), Some(length)) = (
                field("filename"),
                field("length").and_then(|l| l.parse::<u64>().ok()),
            ) else {
                return Some(slack_error("invalid_arguments"));
            };
            let n = shared
                .next_ts
                .fetch_add(1, std::sync::atomic::Ordering::SeqCst);
            let file_id = format!("F{n:08}");
            let mut inner = shared.lock();
            inner.calls.push((method.to_owned(), body.clone()));
            inner.uploads.files.push((
                file_id.clone(),
                Pending {
                    name,
                    length,
                    ..Pending::default()
                },
            ));
            Json(json!({"ok": true, "file_id": file_id,
                        "upload_url": format!("{base_url}/upload/{file_id}")}))
            .into_response()
        }
        "files.completeUploadExternal" => {
            let Some(files) = body.get("files").and_then(Value::as_array) else {
                return Some(slack_error("invalid_arguments"));
            };
            let Some(channel) = field("channel_id") else {
                return Some(slack_error("invalid_arguments"));
            };
            let mut inner = shared.lock();
            inner.calls.push((method.to_owned(), body.clone()));
            let mut done = Vec::new();
            for f in files {
                let Some(id) = f.get("id").and_then(Value::as_str) else {
                    return Some(slack_error("invalid_arguments"));
                };
                let Some(p) = inner.uploads.get(id) else {
                    return Some(slack_error("file_not_found"));
                };
                let Some(bytes) = p.bytes.clone() else {
                    return Some(slack_error("file_upload_not_completed"));
                };
                if p.shared.is_some() {
                    return Some(slack_error("already_completed"));
                }
                let title = f
                    .get("title")
                    .and_then(Value::as_str)
                    .unwrap_or(&p.name)
                    .to_owned();
                p.shared = Some(SharedFile {
                    file_id: id.to_owned(),
                    name: p.name.clone(),
                    title: title.clone(),
                    bytes,
                    channel: channel.clone(),
                    thread_ts: field("thread_ts"),
                    comment: field("initial_comment"),
                });
                done.push(json!({"id": id, "title": title}));
            }
            Json(json!({"ok": true, "files": done})).into_response()
        }
        "files.info" => {
            let Some(id) = field("file") else {
                return Some(slack_error("invalid_arguments"));
            };
            let mut inner = shared.lock();
            inner.calls.push((method.to_owned(), body.clone()));
            let Some(p) = inner.uploads.get(&id).cloned() else {
                return Some(slack_error("file_not_found"));
            };
            let mut file = json!({"id": id, "name": p.name, "size": p.length});
            if let Some(s) = &p.shared {
                let share = json!([{"ts": "1700000000.000001", "thread_ts": s.thread_ts}]);
                let kind = if s.channel.starts_with('G') {
                    "private"
                } else {
                    "public"
                };
                file["shares"] = json!({ kind: { s.channel.clone(): share } });
            }
            Json(json!({"ok": true, "file": file})).into_response()
        }
        _ => return None,
    };
    Some(response)
}
