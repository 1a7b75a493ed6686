//! The fake's agent surfaces: streaming messages (`chat.startStream`,
//! `chat.appendStream`, `chat.stopStream`), agent sessions
//! (`agents.sessions.setStatus`) and assistant threads
//! (`assistant.threads.setSuggestedPrompts`, `assistant.threads.setTitle`).
//!
//! A stream is a message of [`FakeSlack::posted`] with `streaming: true`
//! whose text grows with each append. It stops with `chat.stopStream`, or
//! by itself once idle for the expiry set with
//! [`FakeSlack::set_stream_expiry`] (Slack ends streams left idle; how long
//! it waits is not documented, so tests choose). An append or stop of a
//! message that is not streaming answers `message_not_in_streaming_state`.

use super::{slack_error, FakeSlack, PostedMessage, Shared};
use axum::response::{IntoResponse, Response};
use axum::Json;
use serde_json::{json, Value};
use std::collections::HashMap;
use std::time::{Duration, Instant};

/// The session statuses Slack accepts.
const SESSION_STATUSES: &[&str] = &["active", "processing", "suspended", "closed"];

#[derive(Default)]
pub(super) struct AgentState {
    /// Idle time after which a stream stops by itself; `None`: never.
    expiry: Option<Duration>,
    /// The last streaming call of each streaming message, by (channel, ts).
    active: HashMap<(String, String), Instant>,
    /// Each agent session's status, by (channel, thread_ts).
    sessions: HashMap<(String, String), String>,
}

impl FakeSlack {
    /// Streams idle for `expiry` stop by themselves: their next append or
    /// stop answers `message_not_in_streaming_state`.
    pub fn set_stream_expiry(&self, expiry: Duration) {
        self.shared.lock().agent.expiry = Some(expiry);
    }

    /// The status of the agent session of a thread, as last set.
    pub fn session(&self, channel: &str, thread_ts: &str) -> Option<String> {
        self.shared
            .lock()
            .agent
            .sessions
            .get(&(channel.to_owned(), thread_ts.to_owned()))
            .cloned()
    }
}

fn ok(v: Value) -> Option<Response> {
    Some(Json(v).into_response())
}

fn refuse(code: &str) -> Option<Response> {
    Some(slack_error(code))
}

/// The fake's answer to `method`, when it is one of these (`None`: not).
pub(super) fn answer(shared: &Shared, method: &str, body: &Value) -> Option<Response> {
    let field = |name: &str| {
        body.get(name)
            .and_then(Value::as_str)
            .filter(|s| !s.is_empty())
            .map(str::to_owned)
    };
    let record = |shared: &Shared| shared.lock().calls.push((method.to_owned(), body.clone()));
    match method {
        "chat.startStream" => {
            let Some(channel) = field("channel") else {
                return refuse("channel_not_found");
            };
            // Slack: "Streamed messages should always be replies".
            let Some(thread_ts) = field("thread_ts") else {
                return refuse("invalid_thread_ts");
            };
            // Outside DMs Slack needs to know whom the stream is for.
            let in_channel = !channel.starts_with('D');
            if in_channel
                && (field("recipient_user_id").is_none() || field("recipient_team_id").is_none())
            {
                return refuse("missing_recipient_user_id");
            }
            let ts = shared.new_ts();
            let msg = PostedMessage {
                channel: channel.clone(),
                thread_ts: Some(thread_ts),
                text: field("markdown_text").unwrap_or_default(),
                blocks: None,
                ts: ts.clone(),
                metadata: None,
                streaming: true,
            };
            let mut inner = shared.lock();
            inner.calls.push((method.to_owned(), body.clone()));
            inner.posted.push(msg.clone());
            inner.messages.push(msg);
            inner
                .agent
                .active
                .insert((channel.clone(), ts.clone()), Instant::now());
            ok(json!({"ok": true, "channel": channel, "ts": ts}))
        }
        "chat.appendStream" | "chat.stopStream" => {
            let (Some(channel), Some(ts)) = (field("channel"), field("ts")) else {
                return refuse("message_not_found");
            };
            let text = field("markdown_text");
            let stop = method == "chat.stopStream";
            if !stop && text.is_none() {
                return refuse("invalid_arguments");
            }
            let mut guard = shared.lock();
            // A plain reference, so its fields borrow apart.
            let inner = &mut *guard;
            let key = (channel.clone(), ts.clone());
            if !inner
                .messages
                .iter()
                .any(|m| m.channel == channel && m.ts == ts)
            {
                return refuse("message_not_found");
            }
            let expiry = inner.agent.expiry;
            let live = inner
                .agent
                .active
                .get(&key)
                .is_some_and(|at| expiry.is_none_or(|e| at.elapsed() < e));
            if !live {
                // Expired (or never a stream, or stopped): it is over.
                inner.agent.active.remove(&key);
                set_streaming(&mut inner.posted, &key, false);
                set_streaming(&mut inner.messages, &key, false);
                return refuse("message_not_in_streaming_state");
            }
            let blocks = body.get("blocks").filter(|b| !b.is_null()).cloned();
            let metadata = body.get("metadata").filter(|m| !m.is_null()).cloned();
            for list in [&mut inner.posted, &mut inner.messages] {
                if let Some(m) = list
                    .iter_mut()
                    .find(|m| m.channel == key.0 && m.ts == key.1)
                {
                    if let Some(t) = &text {
                        m.text.push_str(t);
                    }
                    if stop {
                        m.streaming = false;
                        if blocks.is_some() {
                            m.blocks = blocks.clone();
                        }
                        if metadata.is_some() {
                            m.metadata = metadata.clone();
                        }
                    }
                }
            }
            if stop {
                inner.agent.active.remove(&key);
            } else {
                inner.agent.active.insert(key, Instant::now());
            }
            inner.calls.push((method.to_owned(), body.clone()));
            ok(json!({"ok": true, "channel": channel, "ts": ts}))
        }
        "agents.sessions.setStatus" => {
            let status = field("status").unwrap_or_default();
            if !SESSION_STATUSES.contains(&status.as_str()) {
                return refuse("invalid_arguments");
            }
            let Some(channel) = field("channel_id") else {
                return refuse("channel_not_found");
            };
            let Some(thread_ts) = field("thread_ts") else {
                return refuse("invalid_thread_ts");
            };
            record(shared);
            shared
                .lock()
                .agent
                .sessions
                .insert((channel, thread_ts), status.clone());
            ok(json!({"ok": true, "status": status, "agent_status": status}))
        }
        "assistant.threads.setSuggestedPrompts" => {
            if field("channel_id").is_none() {
                return refuse("channel_not_found");
            }
            let prompts = body.get("prompts").and_then(Value::as_array);
            let valid = prompts.is_some_and(|p| {
                (1..=4).contains(&p.len())
                    && p.iter().all(|p| {
                        p.get("title").is_some_and(Value::is_string)
                            && p.get("message").is_some_and(Value::is_string)
                    })
            });
            if !valid {
                return refuse("invalid_arguments");
            }
            record(shared);
            ok(json!({"ok": true}))
        }
        "assistant.threads.setTitle" => {
            if field("channel_id").is_none() {
                return refuse("channel_not_found");
            }
            if field("thread_ts").is_none() {
                return refuse("invalid_thread_ts");
            }
            if field("title").is_none() {
                return refuse("invalid_arguments");
            }
            record(shared);
            ok(json!({"ok": true}))
        }
        _ => None,
    }
}

fn set_streaming(list: &mut [PostedMessage], key: &(String, String), on: bool) {
    if let Some(m) = list
        .iter_mut()
        .find(|m| m.channel == key.0 && m.ts == key.1)
    {
        m.streaming = on;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_channel_stream_needs_its_recipient_and_refusals_are_not_recorded() {
        let fake = FakeSlack::start().await;
        let c = fake.client();
        let err = c
            .start_stream("C1", "1.0", None, None)
            .await
            .expect_err("recipient");
        assert!(
            err.to_string().contains("missing_recipient_user_id"),
            "{err}"
        );
        assert!(fake.calls("chat.startStream").is_empty());
        assert!(fake.posted().is_empty());
        // Statuses Slack does not know are refused.
        let body = json!({"status": "thinking", "channel_id": "C1", "thread_ts": "1.0"});
        assert!(c.call("agents.sessions.setStatus", &body).await.is_err());
        assert_eq!(fake.session("C1", "1.0"), None);
    }

    #[tokio::test]
    async fn a_stopped_stream_keeps_its_text_in_the_posts() {
        let fake = FakeSlack::start().await;
        let c = fake.client();
        let ts = c
            .start_stream("D1", "1.0", None, Some("a"))
            .await
            .expect("start");
        c.append_stream("D1", &ts, "b").await.expect("append");
        let posted = fake.posted();
        assert_eq!((posted[0].text.as_str(), posted[0].streaming), ("ab", true));
        c.stop_stream("D1", &ts, Default::default())
            .await
            .expect("stop");
        let posted = fake.posted();
        assert_eq!(
            (posted[0].text.as_str(), posted[0].streaming),
            ("ab", false)
        );
        assert_eq!(fake.calls("chat.appendStream").len(), 1);
        assert_eq!(fake.calls("chat.stopStream").len(), 1);
    }
}
