//! The files a task sent its HTTP client (`send_file`): listed in the
//! task's status (`files`) and served by `GET /tasks/{id}/files/{name}`,
//! behind the same bearer token as the other task routes.
//!
//! The bytes are answered in the response body, with the media type the
//! tool was given, `Content-Disposition: attachment` and a sandboxing CSP
//! (the media type is the model's: a browser must not run an HTML file
//! as a page of the API's origin). Through API Gateway a body that is not
//! UTF-8 goes base64-encoded with `isBase64Encoded` (the Lambda runtime's
//! `Body::Binary`), so on Lambda, whose responses are at most 6 MB, a
//! file is served whole up to about 4.5 MB; keep `BATON_MAX_FILE_BYTES`
//! at or under 4,000,000 on AWS if clients must download every file
//! (docs/api.md).

use crate::response::parse_id;
use crate::response::ApiError;
use crate::Ingest;
use baton_core::sent_file::{is_sanitized, SentFile};
use bytes::Bytes;
use http::{header, HeaderValue, Response, StatusCode};
use serde_json::{json, Value};

/// The status's `files`: each file's name, media type, size and the path
/// it is served at.
pub(crate) fn listed(task: &str, files: &[SentFile]) -> Value {
    Value::Array(
        files
            .iter()
            .map(|f| {
                json!({
                    "name": f.name,
                    "media_type": f.media_type,
                    "size": f.size,
                    "url": format!("/tasks/{task}/files/{}", f.name),
                })
            })
            .collect(),
    )
}

impl Ingest {
    /// `GET /tasks/{id}/files/{name}`.
    pub(crate) async fn task_file(&self, id: &str, name: &str) -> crate::response::Answer {
        let id = parse_id(id)?;
        let unknown = || ApiError::not_found(format!("task {id} sent no file named {name:?}"));
        // A name `send_file` could not have made is no file of any task.
        if !is_sanitized(name) {
            return Err(unknown());
        }
        let file = self
            .store
            .sent_file(&id, name)
            .await
            .map_err(ApiError::unavailable)?
            .ok_or_else(unknown)?;
        let bytes = self
            .store
            .blobs()
            .get(&file.blob_key)
            .await
            .map_err(ApiError::unavailable)?
            .ok_or_else(|| {
                ApiError::new(
                    StatusCode::GONE,
                    format!("the file {name:?} of task {id} has expired"),
                )
            })?;
        let mut r = Response::new(Bytes::from(bytes));
        let h = r.headers_mut();
        let media = HeaderValue::from_str(&file.media_type)
            .unwrap_or(HeaderValue::from_static("application/octet-stream"));
        h.insert(header::CONTENT_TYPE, media);
        // The name is sanitised: plain ASCII, no quotes.
        if let Ok(v) = HeaderValue::from_str(&format!("attachment; filename=\"{}\"", file.name)) {
            h.insert(header::CONTENT_DISPOSITION, v);
        }
        h.insert(
            header::X_CONTENT_TYPE_OPTIONS,
            HeaderValue::from_static("nosniff"),
        );
        h.insert(
            header::CONTENT_SECURITY_POLICY,
            HeaderValue::from_static("sandbox; default-src 'none'"),
        );
        h.insert(
            header::CACHE_CONTROL,
            HeaderValue::from_static("private, no-store"),
        );
        Ok(r)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_listing_names_where_each_file_is_served() {
        let f = SentFile {
            name: "a.csv".into(),
            media_type: "text/csv".into(),
            size: 3,
            blob_key: "tasks/t/sent/1".into(),
            call: "t:1:c".into(),
        };
        assert_eq!(
            listed("t1", &[f]),
            json!([{"name": "a.csv", "media_type": "text/csv", "size": 3,
                    "url": "/tasks/t1/files/a.csv"}])
        );
    }
}
