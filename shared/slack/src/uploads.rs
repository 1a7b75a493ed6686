//! Files sent into a thread (`send_file`): the
//! [`baton_core::upload::FileUploads`] port over Slack's external upload
//! (the app needs the `files:write` scope; `files.upload` is retired):
//!
//! 1. `files.getUploadURLExternal` (`filename`, `length`) answers an
//!    `upload_url` and a `file_id`;
//! 2. the bytes are POSTed to `upload_url` (no token: the URL is signed);
//! 3. `files.completeUploadExternal` (`files: [{id, title}]`, `channel_id`,
//!    `thread_ts`, `initial_comment`) shares the file in the thread.
//!
//! An upload never completed is discarded by Slack unseen. `files.info`
//! says whether a file was shared in a channel (its `shares`, or its
//! `channels`/`groups`/`ims`), which is how a re-run after a crash learns
//! that an earlier attempt finished. Bytes are only ever sent to Slack's
//! file host (`files.slack.com`) or the host of the configured API URL (a
//! fake Slack in tests).

use crate::web::{SlackClient, SlackError};
use baton_core::upload::{FileUploads, Thread, UploadError, UploadSlot};
use reqwest::Url;
use serde_json::{json, Value};
use std::time::Duration;

/// Slack's upload host.
pub const UPLOAD_HOST: &str = "files.slack.com";
const UPLOAD_TIMEOUT: Duration = Duration::from_secs(120);

/// [`FileUploads`] over the Web API.
#[derive(Clone, Debug)]
pub struct SlackUploads {
    client: SlackClient,
    http: reqwest::Client,
    hosts: Vec<String>,
}

impl SlackUploads {
    /// Uploads with `client` (its token and API URL).
    ///
    /// # Errors
    /// [`SlackError::Config`] when the HTTP client cannot be built.
    pub fn new(client: SlackClient) -> Result<Self, SlackError> {
        let mut hosts = vec![UPLOAD_HOST.to_owned()];
        if let Some(host) = Url::parse(client.base_url())
            .ok()
            .and_then(|u| u.host_str().map(str::to_owned))
        {
            hosts.push(host);
        }
        let http = reqwest::Client::builder()
            .redirect(reqwest::redirect::Policy::none())
            .timeout(UPLOAD_TIMEOUT)
            .build()
            .map_err(|e| SlackError::Config(e.to_string()))?;
        Ok(SlackUploads {
            client,
            http,
            hosts,
        })
    }

    fn allowed(&self, url: &Url) -> bool {
        matches!(url.scheme(), "https" | "http")
            && url
                .host_str()
                .is_some_and(|h| self.hosts.iter().any(|a| a.eq_ignore_ascii_case(h)))
    }
}

fn failed(e: SlackError) -> UploadError {
    let hint = match &e {
        SlackError::Api { code, .. } if code == "missing_scope" => {
            " (the Slack app needs the files:write scope: reinstall it)"
        }
        _ => "",
    };
    UploadError(format!("{e}{hint}"))
}

fn text<'a>(v: &'a Value, field: &str) -> Option<&'a str> {
    v.get(field)
        .and_then(Value::as_str)
        .filter(|s| !s.is_empty())
}

/// Whether `file` (a `files.info` file object) was shared in `channel`.
fn shared_in(file: &Value, channel: &str) -> bool {
    let in_shares = file
        .get("shares")
        .and_then(Value::as_object)
        .is_some_and(|s| {
            s.values()
                .filter_map(Value::as_object)
                .any(|by_channel| by_channel.contains_key(channel))
        });
    let listed = ["channels", "groups", "ims"].iter().any(|k| {
        file.get(*k)
            .and_then(Value::as_array)
            .is_some_and(|ids| ids.iter().any(|id| id.as_str() == Some(channel)))
    });
    in_shares || listed
}

#[async_trait::async_trait]
impl FileUploads for SlackUploads {
    async fn start(&self, name: &str, length: u64) -> Result<UploadSlot, UploadError> {
        let length = length.to_string();
        let answer = self
            .client
            .call_form(
                "files.getUploadURLExternal",
                &[("filename", name), ("length", &length)],
            )
            .await
            .map_err(failed)?;
        match (text(&answer, "file_id"), text(&answer, "upload_url")) {
            (Some(file_id), Some(upload_url)) => Ok(UploadSlot {
                file_id: file_id.to_owned(),
                upload_url: upload_url.to_owned(),
            }),
            _ => Err(UploadError(
                "Slack's files.getUploadURLExternal answered no file_id or upload_url".into(),
            )),
        }
    }

    async fn send_bytes(&self, slot: &UploadSlot, bytes: Vec<u8>) -> Result<(), UploadError> {
        let url = Url::parse(&slot.upload_url)
            .map_err(|_| UploadError("Slack's upload URL is not a URL".into()))?;
        if !self.allowed(&url) {
            return Err(UploadError(format!(
                "Slack's upload URL is not on its file host ({})",
                url.host_str().unwrap_or("no host")
            )));
        }
        let resp = self
            .http
            .post(url)
            .header(reqwest::header::CONTENT_TYPE, "application/octet-stream")
            .body(bytes)
            .send()
            .await
            .map_err(|e| UploadError(format!("uploading the bytes: {}", e.without_url())))?;
        let status = resp.status();
        if !status.is_success() {
            return Err(UploadError(format!(
                "Slack's file host answered HTTP {status} to the bytes"
            )));
        }
        Ok(())
    }

    async fn complete(
        &self,
        file_id: &str,
        title: &str,
        thread: Thread<'_>,
        comment: Option<&str>,
    ) -> Result<(), UploadError> {
        let mut body = json!({
            "files": [{"id": file_id, "title": title}],
            "channel_id": thread.channel,
        });
        // An empty thread (a schedule's post to a channel): a new message.
        if !thread.thread_ts.is_empty() {
            body["thread_ts"] = json!(thread.thread_ts);
        }
        if let Some(c) = comment {
            body["initial_comment"] = json!(crate::mrkdwn::from_markdown(c));
        }
        self.client
            .call("files.completeUploadExternal", &body)
            .await
            .map(drop)
            .map_err(failed)
    }

    async fn is_shared(&self, file_id: &str, thread: Thread<'_>) -> Result<bool, UploadError> {
        match self
            .client
            .call_form("files.info", &[("file", file_id)])
            .await
        {
            Ok(answer) => Ok(answer
                .get("file")
                .is_some_and(|f| shared_in(f, thread.channel))),
            Err(SlackError::Api { code, .. })
                if code == "file_not_found" || code == "file_deleted" =>
            {
                Ok(false)
            }
            Err(e) => Err(failed(e)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::FakeSlack;

    const THREAD: Thread<'static> = Thread {
        channel: "C1",
        thread_ts: "1700000000.000100",
    };

    #[tokio::test]
    async fn an_upload_is_shared_in_the_thread_once_completed() {
        let fake = FakeSlack::start().await;
        let up = SlackUploads::new(fake.client()).unwrap();
        let slot = up.start("r.csv", 3).await.unwrap();
        assert!(!up.is_shared(&slot.file_id, THREAD).await.unwrap());
        up.send_bytes(&slot, b"a,b".to_vec()).await.unwrap();
        assert!(!up.is_shared(&slot.file_id, THREAD).await.unwrap());
        up.complete(&slot.file_id, "r.csv", THREAD, Some("**here**"))
            .await
            .unwrap();
        assert!(up.is_shared(&slot.file_id, THREAD).await.unwrap());
        let other = Thread {
            channel: "C2",
            ..THREAD
        };
        assert!(!up.is_shared(&slot.file_id, other).await.unwrap());
        assert!(!up.is_shared("F404", THREAD).await.unwrap());
        let files = fake.shared_files();
        assert_eq!(files.len(), 1);
        let f = &files[0];
        assert_eq!(
            (f.name.as_str(), f.bytes.as_slice(), f.channel.as_str()),
            ("r.csv", b"a,b".as_slice(), "C1")
        );
        assert_eq!(f.thread_ts.as_deref(), Some(THREAD.thread_ts));
        assert_eq!(f.comment.as_deref(), Some("*here*"));
    }

    #[tokio::test]
    async fn bytes_go_only_to_slacks_hosts_and_errors_say_what_to_do() {
        let fake = FakeSlack::start().await;
        let up = SlackUploads::new(fake.client()).unwrap();
        let slot = UploadSlot {
            file_id: "F1".into(),
            upload_url: "http://169.254.169.254/latest".into(),
        };
        let err = up.send_bytes(&slot, vec![1]).await.unwrap_err();
        assert!(err.0.contains("not on its file host"), "{err}");
        fake.fail_next("files.getUploadURLExternal", "missing_scope");
        let err = up.start("a", 1).await.unwrap_err();
        assert!(err.0.contains("files:write"), "{err}");
    }

    #[test]
    fn shares_are_read_from_every_place_slack_lists_them() {
        let by_shares = json!({"shares": {"private": {"G1": [{"ts": "1"}]}}});
        assert!(shared_in(&by_shares, "G1"));
        assert!(!shared_in(&by_shares, "C1"));
        assert!(shared_in(&json!({"ims": ["D1"]}), "D1"));
        assert!(!shared_in(&json!({"channels": []}), "C1"));
    }
}
