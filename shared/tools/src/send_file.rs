//! `send_file`: a file for the person the task serves. In Slack it is
//! uploaded into the task's thread (`files.getUploadURLExternal`, the
//! bytes, `files.completeUploadExternal`, through
//! [`baton_core::upload::FileUploads`]); for an HTTP client it is kept
//! with the task in the blob store, listed in the task's status (`files`)
//! and served by `GET /tasks/{id}/files/{name}`.
//!
//! **Exactly once.** The call is not safe to repeat, so the loop marks it
//! started before it runs; it is [`resumes_interrupted`]: after a crash
//! the same call (same idempotency key) runs again and finishes what the
//! interrupted attempt did instead of doing it twice.
//!
//! - Slack: the file id Slack gives the upload is recorded (an `UPLOAD#`
//!   item keyed by the call) *before* the bytes are sent. A re-run that
//!   finds it asks Slack whether that file was shared in the thread
//!   (`files.info`): if so the call is done; if not, the earlier upload
//!   never completed (Slack discards it, unseen) and a new one is made. A
//!   completion whose answer is lost is checked the same way.
//! - HTTP: the bytes go to a blob keyed by the call (a repeat overwrites
//!   them with the same bytes), then the name is claimed with a
//!   conditional write of its `FILE#` item, which lists it: a re-run finds
//!   its own claim and answers the same.
//!
//! [`resumes_interrupted`]: baton_core::Tool::resumes_interrupted

use crate::args::{input_schema, parse_args};
use crate::origin::task_origin;
use async_trait::async_trait;
use base64::Engine;
use baton_core::sent_file::{sanitize_name, SentFile};
use baton_core::sent_files::{blob_key, Recorded, Upload, MAX_SENT_FILES};
use baton_core::upload::{FileUploads, Thread};
use baton_core::{Origin, TaskStore, Tool, ToolContext, ToolOutput, ToolSpec};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use std::sync::Arc;

/// The tool's name as the model sees it.
pub const SEND_FILE: &str = baton_core::tool_names::SEND_FILE;

/// The longest `comment`, in characters (Slack cuts messages near 4,000).
pub const MAX_COMMENT_CHARS: usize = 3_000;
/// The longest media type (RFC 6838: 127 for each part).
const MAX_MEDIA_TYPE_CHARS: usize = 255;

/// Arguments of `send_file`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct SendFileArgs {
    /// The file's name, e.g. "report.csv". Made safe: no directories, only
    /// letters, digits, `.`, `_` and `-`, at most 100 characters.
    pub name: String,
    /// The file's content as text (UTF-8). Give this or `content_base64`.
    #[serde(default)]
    pub content: Option<String>,
    /// The file's bytes, base64-encoded (standard alphabet), for binary
    /// files. Give this or `content`.
    #[serde(default)]
    pub content_base64: Option<String>,
    /// The file's media type, e.g. "text/csv", "application/pdf".
    pub media_type: String,
    /// A short message introducing the file (Slack: posted with it).
    #[serde(default)]
    pub comment: Option<String>,
}

/// Why `send_file`'s arguments are refused; the text is the model's.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum FileArgsError {
    #[error("give the file's content: `content` (text) or `content_base64` (bytes)")]
    NoContent,
    #[error("give either `content` or `content_base64`, not both")]
    BothContents,
    #[error("`content_base64` is not valid base64: {0}")]
    BadBase64(String),
    #[error(
        "the file is {size} bytes, over the limit of {max} bytes: nothing was sent; \
         send a smaller file (split it, or summarise it)"
    )]
    TooLarge { size: u64, max: u64 },
    #[error("`media_type` must look like `type/subtype` (e.g. `text/csv`), got {0:?}")]
    BadMediaType(String),
    #[error("`comment` is longer than {MAX_COMMENT_CHARS} characters")]
    CommentTooLong,
}

/// A file ready to send: its arguments checked.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct OutFile {
    /// Sanitised.
    pub name: String,
    pub media_type: String,
    pub bytes: Vec<u8>,
    /// Not empty when present.
    pub comment: Option<String>,
}

impl SendFileArgs {
    /// The file these arguments describe, at most `max_bytes` long.
    pub fn into_file(self, max_bytes: u64) -> Result<OutFile, FileArgsError> {
        let media_type = self.media_type.trim().to_ascii_lowercase();
        if !valid_media_type(&media_type) {
            return Err(FileArgsError::BadMediaType(self.media_type));
        }
        let comment = self.comment.filter(|c| !c.trim().is_empty());
        if comment
            .as_ref()
            .is_some_and(|c| c.chars().count() > MAX_COMMENT_CHARS)
        {
            return Err(FileArgsError::CommentTooLong);
        }
        let too_large = |size: u64| FileArgsError::TooLarge {
            size,
            max: max_bytes,
        };
        let bytes = match (self.content, self.content_base64) {
            (None, None) => return Err(FileArgsError::NoContent),
            (Some(_), Some(_)) => return Err(FileArgsError::BothContents),
            (Some(text), None) => text.into_bytes(),
            (None, Some(b64)) => {
                let b64: String = b64.split_ascii_whitespace().collect();
                // Refused before decoding when even its decoded size is over.
                let at_least = (b64.len() as u64 / 4).saturating_mul(3).saturating_sub(2);
                if at_least > max_bytes {
                    return Err(too_large(at_least));
                }
                base64::engine::general_purpose::STANDARD
                    .decode(b64.as_bytes())
                    .map_err(|e| FileArgsError::BadBase64(e.to_string()))?
            }
        };
        if bytes.len() as u64 > max_bytes {
            return Err(too_large(bytes.len() as u64));
        }
        Ok(OutFile {
            name: sanitize_name(&self.name),
            media_type,
            bytes,
            comment,
        })
    }
}

/// `type/subtype` of RFC 6838's restricted name characters, parameters
/// allowed after `;` (printable ASCII).
fn valid_media_type(m: &str) -> bool {
    let token = |t: &str| {
        !t.is_empty()
            && t.len() <= 127
            && t.chars()
                .all(|c| c.is_ascii_alphanumeric() || "!#$&-^_.+".contains(c))
    };
    let (essence, params) = m.split_once(';').unwrap_or((m, ""));
    m.len() <= MAX_MEDIA_TYPE_CHARS
        && essence
            .split_once('/')
            .is_some_and(|(t, s)| token(t.trim()) && token(s.trim()))
        && params.chars().all(|c| c.is_ascii_graphic() || c == ' ')
}

/// The `send_file` tool.
#[derive(Clone)]
pub struct SendFileTool {
    tasks: TaskStore,
    uploads: Option<Arc<dyn FileUploads>>,
    max_bytes: u64,
}

impl SendFileTool {
    /// Keeps files for HTTP clients in `tasks`' blob store; files of Slack
    /// tasks are refused until [`with_uploads`](Self::with_uploads).
    pub fn new(tasks: TaskStore, max_bytes: u64) -> Self {
        SendFileTool {
            tasks,
            uploads: None,
            max_bytes,
        }
    }

    /// Uploads the files of Slack tasks through `uploads`.
    pub fn with_uploads(mut self, uploads: Arc<dyn FileUploads>) -> Self {
        self.uploads = Some(uploads);
        self
    }

    async fn send(&self, args: SendFileArgs, ctx: &ToolContext) -> Result<String, String> {
        let asked = args.name.clone();
        let file = args.into_file(self.max_bytes).map_err(|e| e.to_string())?;
        let renamed = if file.name == asked {
            String::new()
        } else {
            format!(" (named {:?}: file names are made safe)", file.name)
        };
        match task_origin(&self.tasks, ctx).await? {
            Origin::Http => self.keep(file, ctx).await.map(|s| s + &renamed),
            Origin::Slack {
                channel, thread_ts, ..
            } => {
                let thread = Thread {
                    channel: &channel,
                    thread_ts: &thread_ts,
                };
                self.upload(file, thread, ctx).await.map(|s| s + &renamed)
            }
        }
    }

    /// Keeps `file` with the task for its HTTP client.
    async fn keep(&self, file: OutFile, ctx: &ToolContext) -> Result<String, String> {
        let task = &ctx.task_id;
        let taken = |name: &str| {
            format!(
                "this task already sent a file named {name:?}; nothing was sent: \
                 send it under another name"
            )
        };
        // Checked first so a refused call leaves no bytes behind.
        match self.tasks.sent_file(task, &file.name).await {
            Ok(Some(f)) if f.call != ctx.idempotency_key => return Err(taken(&file.name)),
            Ok(_) => {}
            Err(e) => return Err(format!("could not keep the file: {e}")),
        }
        let sent = SentFile {
            name: file.name,
            media_type: file.media_type,
            size: file.bytes.len() as u64,
            blob_key: blob_key(task, &ctx.idempotency_key),
            call: ctx.idempotency_key.clone(),
        };
        self.tasks
            .blobs()
            .put(&sent.blob_key, file.bytes)
            .await
            .map_err(|e| format!("could not keep the file: {e}"))?;
        let recorded = self
            .tasks
            .record_sent_file(task, &sent)
            .await
            .map_err(|e| format!("could not keep the file: {e}"))?;
        match recorded {
            Recorded::New | Recorded::Again(_) => Ok(format!(
                "kept {:?} ({} bytes, {}) for the client: GET /tasks/{task}/files/{}",
                sent.name, sent.size, sent.media_type, sent.name
            )),
            Recorded::NameTaken => Err(taken(&sent.name)),
            Recorded::TooMany => Err(format!(
                "this task has sent {MAX_SENT_FILES} files, the most it may; nothing was sent"
            )),
        }
    }

    /// Uploads `file` into `thread`, once across crashes (module docs).
    async fn upload(
        &self,
        file: OutFile,
        thread: Thread<'_>,
        ctx: &ToolContext,
    ) -> Result<String, String> {
        let Some(uploads) = &self.uploads else {
            return Err("files cannot be sent to Slack here (no bot token is configured)".into());
        };
        let (task, call) = (&ctx.task_id, ctx.idempotency_key.as_str());
        let sent = format!(
            "sent {:?} ({} bytes, {}) to the thread",
            file.name,
            file.bytes.len(),
            file.media_type
        );
        let earlier = self
            .tasks
            .upload(task, call)
            .await
            .map_err(|e| format!("could not read the upload's record: {e}"))?;
        if let Some(earlier) = earlier {
            let shared = uploads
                .is_shared(&earlier.file_id, thread)
                .await
                .map_err(|e| e.to_string())?;
            if shared {
                tracing::info!(file_id = %earlier.file_id, "send_file: already shared by an interrupted attempt");
                return Ok(sent);
            }
        }
        let length = file.bytes.len() as u64;
        let slot = uploads
            .start(&file.name, length)
            .await
            .map_err(|e| e.to_string())?;
        // Recorded before any byte is sent: from here a re-run checks
        // this file before it uploads another.
        let record = Upload {
            file_id: slot.file_id.clone(),
        };
        self.tasks
            .record_upload(task, call, &record)
            .await
            .map_err(|e| format!("could not record the upload: {e}"))?;
        uploads
            .send_bytes(&slot, file.bytes)
            .await
            .map_err(|e| e.to_string())?;
        if let Err(e) = uploads
            .complete(&slot.file_id, &file.name, thread, file.comment.as_deref())
            .await
        {
            // The completion may have happened with its answer lost.
            if uploads
                .is_shared(&slot.file_id, thread)
                .await
                .unwrap_or(false)
            {
                return Ok(sent);
            }
            return Err(e.to_string());
        }
        Ok(sent)
    }
}

#[async_trait]
impl Tool for SendFileTool {
    fn spec(&self) -> ToolSpec {
        ToolSpec {
            name: SEND_FILE.to_owned(),
            description: format!(
                "Sends a file to the person you are helping: in Slack it is uploaded into \
                 this conversation's thread; for an API client it is kept with the task for \
                 download. Give `content` (text) or `content_base64` (bytes) and its \
                 `media_type`; at most {} bytes. Each name once per task.",
                self.max_bytes
            ),
            input_schema: input_schema::<SendFileArgs>(),
        }
    }

    /// Sending twice would show the file twice.
    fn idempotent(&self, _: &serde_json::Value) -> bool {
        false
    }

    fn normalise(&self, arguments: serde_json::Value) -> serde_json::Value {
        crate::args::normalised::<SendFileArgs>(arguments)
    }

    fn resumes_interrupted(&self, _: &serde_json::Value) -> bool {
        true
    }

    async fn call(&self, arguments: serde_json::Value, ctx: &ToolContext) -> ToolOutput {
        let args = match parse_args::<SendFileArgs>(SEND_FILE, arguments) {
            Ok(a) => a,
            Err(e) => return ToolOutput::error(e),
        };
        match self.send(args, ctx).await {
            Ok(s) => ToolOutput::ok(s),
            Err(e) => ToolOutput::error(e),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn args(v: serde_json::Value) -> Result<OutFile, String> {
        parse_args::<SendFileArgs>(SEND_FILE, v)?
            .into_file(100)
            .map_err(|e| e.to_string())
    }

    #[test]
    fn text_or_base64_becomes_the_bytes() {
        let f = args(
            json!({"name": "../a b.csv", "content": "x,y", "media_type": "Text/CSV",
                            "comment": "here"}),
        )
        .unwrap();
        assert_eq!(
            f,
            OutFile {
                name: "a_b.csv".into(),
                media_type: "text/csv".into(),
                bytes: b"x,y".to_vec(),
                comment: Some("here".into()),
            }
        );
        let f = args(json!({"name": "p.png", "content_base64": "iVBO\nRw0=",
                            "media_type": "image/png", "comment": "  "}))
        .unwrap();
        assert_eq!(f.bytes, [0x89, 0x50, 0x4e, 0x47, 0x0d]);
        assert_eq!(f.comment, None);
    }

    #[test]
    fn bad_arguments_are_refused_with_what_to_do() {
        let cases = [
            (
                json!({"name": "a", "media_type": "text/plain"}),
                "give the file's content",
            ),
            (
                json!({"name": "a", "content": "x", "content_base64": "eA==", "media_type": "text/plain"}),
                "not both",
            ),
            (
                json!({"name": "a", "content_base64": "***", "media_type": "text/plain"}),
                "not valid base64",
            ),
            (
                json!({"name": "a", "content": "x", "media_type": "text"}),
                "type/subtype",
            ),
            (
                json!({"name": "a", "content": "x", "media_type": "text/pl ain"}),
                "type/subtype",
            ),
            (
                json!({"name": "a", "content": "x", "media_type": "text/plain", "comment": "c".repeat(3001)}),
                "longer than 3000",
            ),
            (
                json!({"name": "a", "content": "x"}),
                "missing field `media_type`",
            ),
            (
                json!({"name": "a", "content": "x", "media_type": "text/plain", "path": "/etc"}),
                "unknown field `path`",
            ),
            (
                json!({"content": "x", "media_type": "text/plain"}),
                "missing field `name`",
            ),
        ];
        for (v, want) in cases {
            let err = args(v.clone()).unwrap_err();
            assert!(err.contains(want), "{v}: {err}");
        }
    }

    #[test]
    fn oversized_files_are_refused_before_and_after_decoding() {
        let err =
            args(json!({"name": "a", "content": "x".repeat(101), "media_type": "text/plain"}))
                .unwrap_err();
        assert!(
            err.contains("101 bytes, over the limit of 100 bytes: nothing was sent"),
            "{err}"
        );
        let big = base64::engine::general_purpose::STANDARD.encode(vec![0u8; 1000]);
        let err = args(
            json!({"name": "a", "content_base64": big, "media_type": "application/octet-stream"}),
        )
        .unwrap_err();
        assert!(err.contains("over the limit of 100 bytes"), "{err}");
        let exact = base64::engine::general_purpose::STANDARD.encode(vec![7u8; 100]);
        let f = args(
            json!({"name": "a", "content_base64": exact, "media_type": "application/octet-stream"}),
        )
        .unwrap();
        assert_eq!(f.bytes.len(), 100);
    }

    #[test]
    fn media_types_are_checked() {
        for ok in [
            "text/csv",
            "application/vnd.ms-excel",
            "text/plain; charset=utf-8",
            "image/svg+xml",
        ] {
            assert!(valid_media_type(ok), "{ok}");
        }
        for bad in ["", "text", "/csv", "text/", "te xt/csv", "text/csv;\u{7}"] {
            assert!(!valid_media_type(bad), "{bad:?}");
        }
    }
}
