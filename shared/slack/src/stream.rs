//! Streaming an answer into one Slack message: `chat.startStream`,
//! `chat.appendStream`, `chat.stopStream`.
//!
//! Shapes from Slack's method references (docs.slack.dev/reference/methods/
//! chat.startStream, chat.appendStream, chat.stopStream):
//!
//! - `chat.startStream {channel, thread_ts, markdown_text?,
//!   recipient_user_id?, recipient_team_id?}` → `{ok, channel, ts}`. A
//!   stream always answers in a thread; the recipient is required when
//!   streaming to a channel (not a DM).
//! - `chat.appendStream {channel, ts, markdown_text}` → `{ok, channel, ts}`;
//!   the text is *appended* to what was streamed so far.
//! - `chat.stopStream {channel, ts, markdown_text?, blocks?, metadata?}`
//!   ends the stream; the blocks render under the finished text.
//!
//! `markdown_text` is Markdown (not mrkdwn) and at most
//! [`MAX_STREAM_CHUNK_CHARS`] characters per call; longer text is sent in
//! several appends by the caller.
//!
//! **Chunks** (the plan, [`Chunk`]). All three methods also take `chunks`,
//! an array of structured pieces, and `chat.startStream` takes
//! `task_display_mode`: `"timeline"` (the default: each task a card between
//! the streamed text) or `"plan"` (the tasks together in one plan block).
//! What Slack documents (docs.slack.dev/reference/methods/chat.startStream
//! and chat.appendStream, "Using the chunks parameter") and python-slack-sdk
//! sends since 3.40.0 (`slack_sdk/models/messages/chunk.py`,
//! `slack_sdk/web/chat_stream.py`; the 3.40.0 notes show a stream in `plan`
//! mode updating its tasks by id):
//!
//! - `{"type": "markdown_text", "text"}`: text, as `markdown_text` is;
//! - `{"type": "plan_update", "title"}`: the plan block's title;
//! - `{"type": "task_update", "id", "title", "status", "details"?,
//!   "output"?, "sources"?}`, `status` one of `pending`, `in_progress`,
//!   `complete`, `error`: creates the task `id` in the stream, or updates
//!   it when sent again;
//! - `{"type": "blocks", "blocks"}` (Block Kit; not used here).
//!
//! Baton sends a call's text either as `markdown_text` or as a
//! `markdown_text` chunk, never both: the reference does not say how the
//! two combine. Tasks cannot be removed from a stream, only updated.
//!
//! Once the message is no longer streaming
//! (stopped, stopped by the user, or left idle too long) Slack answers
//! `message_not_in_streaming_state`: [`ApiErrorKind::NotStreaming`]
//! (see [`SlackError::is_not_streaming`]).
//!
//! [`ApiErrorKind::NotStreaming`]: crate::web::ApiErrorKind::NotStreaming

use crate::web::{ApiErrorKind, SlackClient, SlackError, POST_EVENT_TYPE};
use serde::Serialize;
use serde_json::{json, Value};

/// The most `markdown_text` one streaming call takes.
pub const MAX_STREAM_CHUNK_CHARS: usize = 12_000;

/// How streams show their tasks (`task_display_mode`): Baton's tasks are
/// the steps of a plan, so together in one plan block, whenever they come.
pub const TASK_DISPLAY_MODE: &str = "plan";

/// One piece of a streaming call's `chunks` (see the module's notes).
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum Chunk {
    /// Markdown appended to the message's text.
    MarkdownText { text: String },
    /// The plan block's title.
    PlanUpdate { title: String },
    /// A task of the plan, created or updated by its `id`.
    TaskUpdate {
        id: String,
        title: String,
        status: TaskStatus,
        /// A line under the title.
        #[serde(skip_serializing_if = "Option::is_none")]
        details: Option<String>,
    },
}

/// A task's state in a streamed plan.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum TaskStatus {
    Pending,
    InProgress,
    Complete,
    Error,
}

/// Who a stream in a channel is for (Slack requires it outside DMs).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Recipient {
    /// The user the answer is for.
    pub user_id: String,
    /// Their workspace.
    pub team_id: String,
}

/// How a stream ends: text still to add, blocks under it (feedback
/// buttons), and Baton's post key in the metadata (so a retry finds the
/// message, like [`SlackClient::post_message_keyed`]).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct StreamEnd<'a> {
    /// Markdown appended before the stream stops.
    pub markdown_text: Option<&'a str>,
    /// Blocks rendered at the bottom of the finished message.
    pub blocks: Option<Value>,
    /// The post key, carried as `metadata` (`event_type`
    /// [`POST_EVENT_TYPE`], `event_payload.key`).
    pub key: Option<&'a str>,
}

impl SlackError {
    /// Whether Slack refused because the message is no longer streaming.
    pub fn is_not_streaming(&self) -> bool {
        matches!(
            self,
            SlackError::Api {
                kind: ApiErrorKind::NotStreaming,
                ..
            }
        )
    }
}

/// The `ts` of a successful answer to `method`.
fn ts_of(method: &str, answer: &Value) -> Result<String, SlackError> {
    answer
        .get("ts")
        .and_then(Value::as_str)
        .filter(|t| !t.is_empty())
        .map(str::to_owned)
        .ok_or_else(|| SlackError::Decode {
            method: method.into(),
            message: "no `ts` in the answer".into(),
        })
}

/// The start of a `chat.startStream` body. Every stream shows tasks as a
/// plan, so a plan that arrives after the text began still renders as one
/// block rather than as cards between the text.
fn start_body(channel: &str, thread_ts: &str, recipient: Option<&Recipient>) -> Value {
    let mut body = json!({
        "channel": channel,
        "thread_ts": thread_ts,
        "task_display_mode": TASK_DISPLAY_MODE,
    });
    if let Some(r) = recipient {
        body["recipient_user_id"] = json!(r.user_id);
        body["recipient_team_id"] = json!(r.team_id);
    }
    body
}

/// `chunks` as JSON for `method`, text cut like [`chunk`] cuts it.
fn chunks_json(method: &str, chunks: &[Chunk]) -> Result<Value, SlackError> {
    let cut: Vec<Chunk> = chunks
        .iter()
        .map(|c| match c {
            Chunk::MarkdownText { text } => Chunk::MarkdownText {
                text: chunk(text).to_owned(),
            },
            other => other.clone(),
        })
        .collect();
    serde_json::to_value(cut).map_err(|e| SlackError::Decode {
        method: method.into(),
        message: format!("chunks: {e}"),
    })
}

/// `text` cut to [`MAX_STREAM_CHUNK_CHARS`] (callers split longer text;
/// this only keeps an oversized chunk from being refused whole).
fn chunk(text: &str) -> &str {
    match text.char_indices().nth(MAX_STREAM_CHUNK_CHARS) {
        Some((end, _)) => &text[..end],
        None => text,
    }
}

impl SlackClient {
    /// Starts a streaming reply in the thread `thread_ts` of `channel`,
    /// optionally with its first Markdown, and returns the message's `ts`.
    /// `recipient` is needed in channels (Slack: "Required when streaming
    /// to channels").
    pub async fn start_stream(
        &self,
        channel: &str,
        thread_ts: &str,
        recipient: Option<&Recipient>,
        markdown_text: Option<&str>,
    ) -> Result<String, SlackError> {
        let mut body = start_body(channel, thread_ts, recipient);
        if let Some(text) = markdown_text.filter(|t| !t.is_empty()) {
            body["markdown_text"] = json!(chunk(text));
        }
        let answer = self.call("chat.startStream", &body).await?;
        ts_of("chat.startStream", &answer)
    }

    /// [`start_stream`](Self::start_stream) with `chunks` instead of text
    /// (text goes in a [`Chunk::MarkdownText`]).
    pub async fn start_stream_chunks(
        &self,
        channel: &str,
        thread_ts: &str,
        recipient: Option<&Recipient>,
        chunks: &[Chunk],
    ) -> Result<String, SlackError> {
        let mut body = start_body(channel, thread_ts, recipient);
        body["chunks"] = chunks_json("chat.startStream", chunks)?;
        let answer = self.call("chat.startStream", &body).await?;
        ts_of("chat.startStream", &answer)
    }

    /// Appends `chunks` to the streaming message `ts`.
    pub async fn append_stream_chunks(
        &self,
        channel: &str,
        ts: &str,
        chunks: &[Chunk],
    ) -> Result<(), SlackError> {
        let body = json!({ "channel": channel, "ts": ts, "chunks": chunks_json("chat.appendStream", chunks)? });
        self.call("chat.appendStream", &body).await.map(drop)
    }

    /// Appends Markdown to the streaming message `ts`.
    pub async fn append_stream(
        &self,
        channel: &str,
        ts: &str,
        markdown_text: &str,
    ) -> Result<(), SlackError> {
        let body = json!({ "channel": channel, "ts": ts, "markdown_text": chunk(markdown_text) });
        self.call("chat.appendStream", &body).await.map(drop)
    }

    /// Stops the streaming message `ts`, appending `end`'s text and
    /// blocks first.
    pub async fn stop_stream(
        &self,
        channel: &str,
        ts: &str,
        end: StreamEnd<'_>,
    ) -> Result<(), SlackError> {
        let mut body = json!({ "channel": channel, "ts": ts });
        if let Some(text) = end.markdown_text.filter(|t| !t.is_empty()) {
            body["markdown_text"] = json!(chunk(text));
        }
        if let Some(blocks) = end.blocks {
            body["blocks"] = blocks;
        }
        if let Some(key) = end.key {
            body["metadata"] =
                json!({"event_type": POST_EVENT_TYPE, "event_payload": {"key": key}});
        }
        self.call("chat.stopStream", &body).await.map(drop)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::FakeSlack;
    use std::time::Duration;

    #[tokio::test]
    async fn a_stream_grows_then_ends_with_its_blocks() {
        let fake = FakeSlack::start().await;
        let c = fake.client();
        let who = Recipient {
            user_id: "U1".into(),
            team_id: "T1".into(),
        };
        let ts = c
            .start_stream("C1", "1.0", Some(&who), Some("Hello"))
            .await
            .expect("start");
        let m = fake.message("C1", &ts).expect("the message");
        assert!(m.streaming);
        assert_eq!(
            (m.text.as_str(), m.thread_ts.as_deref()),
            ("Hello", Some("1.0"))
        );
        assert_eq!(fake.posted().len(), 1, "a stream is a posted message");
        c.append_stream("C1", &ts, ", world").await.expect("append");
        assert_eq!(fake.message("C1", &ts).unwrap().text, "Hello, world");
        let blocks = json!([{"type": "context_actions", "elements": []}]);
        c.stop_stream(
            "C1",
            &ts,
            StreamEnd {
                markdown_text: Some("!"),
                blocks: Some(blocks.clone()),
                key: Some("task:answer:1"),
            },
        )
        .await
        .expect("stop");
        let m = fake.message("C1", &ts).unwrap();
        assert!(!m.streaming);
        assert_eq!(m.text, "Hello, world!");
        assert_eq!(m.blocks, Some(blocks));
        assert_eq!(m.metadata.unwrap()["event_payload"]["key"], "task:answer:1");
        let start = &fake.calls("chat.startStream")[0];
        assert_eq!(start["recipient_user_id"], "U1");
        assert_eq!(start["recipient_team_id"], "T1");
        // The finished message is found by its key like a posted one.
        let found = c.find_post("C1", Some("1.0"), "task:answer:1").await;
        assert_eq!(found.expect("lookup"), Some(ts.clone()));

        // Stopped: no more appends, no second stop.
        for err in [
            c.append_stream("C1", &ts, "more").await.expect_err("ended"),
            c.stop_stream("C1", &ts, StreamEnd::default())
                .await
                .expect_err("ended"),
        ] {
            assert!(err.is_not_streaming(), "{err}");
            assert!(!err.is_transient());
        }
        assert_eq!(fake.message("C1", &ts).unwrap().text, "Hello, world!");
    }

    #[tokio::test]
    async fn an_idle_stream_expires() {
        let fake = FakeSlack::start().await;
        fake.set_stream_expiry(Duration::from_millis(100));
        let c = fake.client();
        let ts = c
            .start_stream("D1", "1.0", None, None)
            .await
            .expect("start");
        c.append_stream("D1", &ts, "a").await.expect("in time");
        tokio::time::sleep(Duration::from_millis(150)).await;
        let err = c.append_stream("D1", &ts, "b").await.expect_err("expired");
        assert!(err.is_not_streaming(), "{err}");
        let err = c
            .stop_stream("D1", &ts, StreamEnd::default())
            .await
            .expect_err("expired");
        assert!(err.is_not_streaming(), "{err}");
        let m = fake.message("D1", &ts).unwrap();
        assert_eq!(m.text, "a");
        assert!(!m.streaming);
    }

    #[tokio::test]
    async fn streaming_calls_are_checked_like_slack_does() {
        let fake = FakeSlack::start().await;
        let c = fake.client();
        // No thread: Slack streams replies only.
        let err = c
            .start_stream("C1", "", None, None)
            .await
            .expect_err("no thread");
        assert!(matches!(&err, SlackError::Api { code, .. } if code == "invalid_thread_ts"));
        // Unknown message; a message that never streamed.
        let err = c
            .append_stream("C1", "9.9", "x")
            .await
            .expect_err("unknown");
        assert!(matches!(&err, SlackError::Api { code, .. } if code == "message_not_found"));
        let posted = c
            .post_message("C1", None, "plain", None)
            .await
            .expect("post");
        let err = c
            .append_stream("C1", &posted, "x")
            .await
            .expect_err("not a stream");
        assert!(err.is_not_streaming(), "{err}");
        // An append needs its text.
        let ts = c
            .start_stream("D1", "1.0", None, None)
            .await
            .expect("start");
        let err = c.append_stream("D1", &ts, "").await.expect_err("empty");
        assert!(matches!(&err, SlackError::Api { code, .. } if code == "invalid_arguments"));
        // chat.update replaces the text of a message it knows.
        c.update_message("C1", &posted, "edited", None)
            .await
            .expect("update");
        assert_eq!(fake.message("C1", &posted).unwrap().text, "edited");
    }

    /// The chunks go as Slack documents them, and the fake shows what
    /// they make: one plan block whose tasks are updated by id.
    #[tokio::test]
    async fn a_plan_streams_as_chunks_and_its_tasks_update_by_id() {
        let fake = FakeSlack::start().await;
        let c = fake.client();
        let task = |id: &str, status| Chunk::TaskUpdate {
            id: id.into(),
            title: format!("Task {id}"),
            status,
            details: None,
        };
        let ts = c
            .start_stream_chunks(
                "D1",
                "1.0",
                None,
                &[
                    Chunk::PlanUpdate {
                        title: "Plan".into(),
                    },
                    task("a", TaskStatus::InProgress),
                    task("b", TaskStatus::Pending),
                    Chunk::MarkdownText {
                        text: "Hello".into(),
                    },
                ],
            )
            .await
            .expect("start");
        let start = &fake.calls("chat.startStream")[0];
        assert_eq!(start["task_display_mode"], "plan");
        assert!(start.get("markdown_text").is_none(), "text in a chunk only");
        assert_eq!(
            start["chunks"],
            json!([
                {"type": "plan_update", "title": "Plan"},
                {"type": "task_update", "id": "a", "title": "Task a", "status": "in_progress"},
                {"type": "task_update", "id": "b", "title": "Task b", "status": "pending"},
                {"type": "markdown_text", "text": "Hello"},
            ])
        );
        c.append_stream_chunks(
            "D1",
            &ts,
            &[
                Chunk::PlanUpdate {
                    title: "Plan, half done".into(),
                },
                task("a", TaskStatus::Complete),
            ],
        )
        .await
        .expect("append");
        c.append_stream("D1", &ts, ", world").await.expect("text");
        assert_eq!(fake.message("D1", &ts).unwrap().text, "Hello, world");
        let plan = fake.stream_plan("D1", &ts).expect("a plan");
        assert_eq!(plan.display_mode.as_deref(), Some("plan"));
        assert_eq!(plan.title.as_deref(), Some("Plan, half done"));
        let tasks: Vec<(&str, &str)> = plan
            .tasks
            .iter()
            .map(|t| (t.id.as_str(), t.status.as_str()))
            .collect();
        assert_eq!(tasks, [("a", "complete"), ("b", "pending")]);
        // Text-only streams show tasks as a plan too, should some come.
        c.start_stream("D1", "2.0", None, Some("x")).await.unwrap();
        assert_eq!(
            fake.calls("chat.startStream")[1]["task_display_mode"],
            "plan"
        );
    }

    #[tokio::test]
    async fn chunks_slack_would_not_take_are_refused() {
        let fake = FakeSlack::start().await;
        let c = fake.client();
        let ts = c.start_stream("D1", "1.0", None, Some("a")).await.unwrap();
        for bad in [
            json!([{"type": "task_update", "id": "1", "title": "t", "status": "done"}]),
            json!([{"type": "task_update", "title": "t", "status": "pending"}]),
            json!([{"type": "plan_update"}]),
            json!([{"type": "thinking", "text": "x"}]),
            json!({"type": "markdown_text", "text": "x"}),
        ] {
            let body = json!({"channel": "D1", "ts": ts, "chunks": bad});
            let err = c
                .call("chat.appendStream", &body)
                .await
                .expect_err("refused");
            assert!(
                matches!(&err, SlackError::Api { code, .. } if code == "invalid_arguments"),
                "{bad}: {err}"
            );
        }
        // Nothing to add at all.
        let body = json!({"channel": "D1", "ts": ts, "chunks": []});
        assert!(c.call("chat.appendStream", &body).await.is_err());
        let body = json!({"channel": "D1", "thread_ts": "1.0", "task_display_mode": "grid"});
        assert!(c.call("chat.startStream", &body).await.is_err());
        let plan = fake.stream_plan("D1", &ts).expect("started in plan mode");
        assert_eq!((plan.title, plan.tasks), (None, vec![]), "nothing applied");
    }

    #[test]
    fn oversized_chunks_are_cut_on_a_character_boundary() {
        let long = "é".repeat(MAX_STREAM_CHUNK_CHARS + 5);
        assert_eq!(chunk(&long).chars().count(), MAX_STREAM_CHUNK_CHARS);
        assert_eq!(chunk("short"), "short");
    }
}
