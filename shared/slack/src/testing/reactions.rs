//! The fake's reactions (`reactions.add`, `reactions.remove`): one per
//! name, message and app, answering `already_reacted` and `no_reaction`
//! like Slack.

use super::{slack_error, FakeSlack, Shared};
use axum::response::{IntoResponse, Response};
use axum::Json;
use serde_json::{json, Value};

/// The reactions on messages now: `(channel, ts, name)`, in the order added.
#[derive(Default)]
pub(super) struct Reactions {
    on: Vec<(String, String, String)>,
}

impl FakeSlack {
    /// The names of the reactions the app has on message `ts` of `channel`
    /// now, in the order added.
    pub fn reactions(&self, channel: &str, ts: &str) -> Vec<String> {
        self.shared
            .lock()
            .reactions
            .on
            .iter()
            .filter(|(c, t, _)| c == channel && t == ts)
            .map(|(_, _, n)| n.clone())
            .collect()
    }
}

/// `reactions.add` or `reactions.remove`, when `method` is one.
pub(super) fn answer(shared: &Shared, method: &str, body: &Value) -> Option<Response> {
    let add = match method {
        "reactions.add" => true,
        "reactions.remove" => false,
        _ => return None,
    };
    let field = |k: &str| {
        body.get(k)
            .and_then(Value::as_str)
            .filter(|s| !s.is_empty())
            .map(str::to_owned)
    };
    let Some(channel) = field("channel") else {
        return Some(slack_error("channel_not_found"));
    };
    let (Some(ts), Some(name)) = (field("timestamp"), field("name")) else {
        return Some(slack_error("no_item_specified"));
    };
    if name.contains(':') {
        return Some(slack_error("invalid_name"));
    }
    let mut inner = shared.lock();
    inner.calls.push((method.to_owned(), body.clone()));
    let key = (channel, ts, name);
    let at = inner.reactions.on.iter().position(|r| *r == key);
    match (add, at) {
        (true, Some(_)) => return Some(slack_error("already_reacted")),
        (false, None) => return Some(slack_error("no_reaction")),
        (true, None) => inner.reactions.on.push(key),
        (false, Some(i)) => {
            inner.reactions.on.remove(i);
        }
    }
    Some(Json(json!({"ok": true})).into_response())
}
