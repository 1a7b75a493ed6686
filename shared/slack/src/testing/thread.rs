//! The fake's thread side: messages people wrote in a thread
//! ([`FakeSlack::add_thread_message`]), which `conversations.replies`
//! answers beside the bot's own posts, within its `oldest`/`latest` bounds
//! (exclusive; the thread's parent comes whatever the bounds, as Slack
//! does); and `chat.delete`, which removes a message.

use super::{slack_error, FakeSlack, Shared};
use axum::response::{IntoResponse, Response};
use axum::Json;
use serde_json::{json, Value};

/// A message someone other than Baton wrote.
#[derive(Clone, Debug)]
pub(super) struct OtherMessage {
    channel: String,
    thread_ts: String,
    ts: String,
    user: Option<String>,
    bot: bool,
    text: String,
    files: Vec<String>,
}

/// The messages people wrote, and the bot's messages deleted.
#[derive(Default)]
pub(super) struct ThreadState {
    others: Vec<OtherMessage>,
    /// `(channel, ts)` of messages `chat.delete` removed.
    deleted: Vec<(String, String)>,
}

impl FakeSlack {
    /// Adds a message by `user` (with files named `files`) at `ts` to the
    /// thread `thread_ts` of `channel` (the parent when `ts == thread_ts`).
    pub fn add_thread_message(
        &self,
        channel: &str,
        thread_ts: &str,
        ts: &str,
        user: &str,
        text: &str,
        files: &[&str],
    ) {
        self.add_other(channel, thread_ts, ts, Some(user), false, text, files);
    }

    /// Adds a message by this app's bot that the fake did not post itself
    /// (an answer from before the test).
    pub fn add_bot_thread_message(&self, channel: &str, thread_ts: &str, ts: &str, text: &str) {
        self.add_other(channel, thread_ts, ts, None, true, text, &[]);
    }

    #[allow(clippy::too_many_arguments)]
    fn add_other(
        &self,
        channel: &str,
        thread_ts: &str,
        ts: &str,
        user: Option<&str>,
        bot: bool,
        text: &str,
        files: &[&str],
    ) {
        self.shared.lock().thread.others.push(OtherMessage {
            channel: channel.to_owned(),
            thread_ts: thread_ts.to_owned(),
            ts: ts.to_owned(),
            user: user.map(str::to_owned),
            bot,
            text: text.to_owned(),
            files: files.iter().map(|f| (*f).to_owned()).collect(),
        });
    }

    /// `(channel, ts)` of the messages deleted with `chat.delete`.
    pub fn deleted(&self) -> Vec<(String, String)> {
        self.shared.lock().thread.deleted.clone()
    }
}

/// Slack ts as a number pair, for ordering and bounds.
fn ts_key(ts: &str) -> (u64, u64) {
    let (s, f) = ts.split_once('.').unwrap_or((ts, "0"));
    (s.parse().unwrap_or(0), f.parse().unwrap_or(0))
}

/// `messages` (a `conversations.replies` answer's, for `thread` of
/// `channel`) with the people's messages of the thread added, in ts order,
/// within `body`'s `oldest`/`latest`.
pub(super) fn replies(
    shared: &Shared,
    channel: &str,
    thread: &str,
    body: &Value,
    mut messages: Vec<Value>,
) -> Vec<Value> {
    let inner = shared.lock();
    for m in inner
        .thread
        .others
        .iter()
        .filter(|m| m.channel == channel && m.thread_ts == thread)
    {
        let mut v = json!({"type": "message", "text": m.text, "ts": m.ts,
                           "thread_ts": m.thread_ts});
        if let Some(user) = &m.user {
            v["user"] = json!(user);
        }
        if m.bot {
            v["bot_id"] = json!("B0FAKEBOT");
            v["user"] = json!("U0FAKEBOT");
        }
        if !m.files.is_empty() {
            v["subtype"] = json!("file_share");
            v["files"] = m.files.iter().map(|f| json!({"name": f})).collect();
        }
        messages.push(v);
    }
    let bound = |k: &str| body.get(k).and_then(Value::as_str).map(ts_key);
    let (oldest, latest) = (bound("oldest"), bound("latest"));
    messages.retain(|m| {
        let ts = m["ts"].as_str().unwrap_or_default();
        let key = ts_key(ts);
        ts == thread || (oldest.is_none_or(|o| key > o) && latest.is_none_or(|l| key < l))
    });
    messages.sort_by_key(|m| ts_key(m["ts"].as_str().unwrap_or_default()));
    messages
}

/// `chat.delete`, when `method` is it.
pub(super) fn answer(shared: &Shared, method: &str, body: &Value) -> Option<Response> {
    if method != "chat.delete" {
        return None;
    }
    let field = |k: &str| body.get(k).and_then(Value::as_str).map(str::to_owned);
    let (Some(channel), Some(ts)) = (field("channel"), field("ts")) else {
        return Some(slack_error("message_not_found"));
    };
    let mut inner = shared.lock();
    let before = inner.messages.len();
    inner
        .messages
        .retain(|m| !(m.channel == channel && m.ts == ts));
    if inner.messages.len() == before {
        return Some(slack_error("message_not_found"));
    }
    inner.calls.push((method.to_owned(), body.clone()));
    inner.thread.deleted.push((channel.clone(), ts.clone()));
    Some(Json(json!({"ok": true, "channel": channel, "ts": ts})).into_response())
}
