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
//!
//! Streaming calls may carry `chunks` (checked like Slack documents them:
//! `markdown_text` with `text`, `plan_update` with `title`, `task_update`
//! with `id`, `title`, a known `status`, text `details`/`output` and a
//! `sources` list when present, `blocks` with `blocks`;
//! anything else is `invalid_arguments`): text chunks grow the text, and
//! the plan and task updates make the stream's plan
//! ([`FakeSlack::stream_plan`]), each task updated by its id.

use super::{slack_error, FakeSlack, PostedMessage, Shared};
use axum::response::{IntoResponse, Response};
use axum::Json;
use serde_json::{json, Value};
use std::collections::HashMap;
use std::time::{Duration, Instant};

/// The session statuses Slack accepts.
const SESSION_STATUSES: &[&str] = &["active", "processing", "suspended", "closed"];

/// The statuses a `task_update` chunk may have.
const TASK_STATUSES: &[&str] = &["pending", "in_progress", "complete", "error"];

/// What a stream's plan and task chunks made of it, as Slack would show it.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct StreamPlan {
    /// `task_display_mode` as the stream was started with.
    pub display_mode: Option<String>,
    /// The last `plan_update` title.
    pub title: Option<String>,
    /// Tasks in the order they first came, each as last updated.
    pub tasks: Vec<StreamTask>,
}

/// One task of a [`StreamPlan`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct StreamTask {
    pub id: String,
    pub title: String,
    pub status: String,
    pub details: Option<String>,
}

impl StreamPlan {
    /// Applies the plan and task updates among `chunks`.
    fn apply(&mut self, chunks: &[Value]) {
        let text = |c: &Value, k: &str| c.get(k).and_then(Value::as_str).map(str::to_owned);
        for c in chunks {
            match c["type"].as_str() {
                Some("plan_update") => self.title = text(c, "title"),
                Some("task_update") => {
                    let task = StreamTask {
                        id: text(c, "id").unwrap_or_default(),
                        title: text(c, "title").unwrap_or_default(),
                        status: text(c, "status").unwrap_or_default(),
                        details: text(c, "details"),
                    };
                    match self.tasks.iter_mut().find(|t| t.id == task.id) {
                        Some(t) => *t = task,
                        None => self.tasks.push(task),
                    }
                }
                _ => {}
            }
        }
    }
}

/// The `chunks` of a streaming call, checked (`Err`: Slack's refusal).
fn chunks_of(body: &Value) -> Result<Vec<Value>, &'static str> {
    let Some(chunks) = body.get("chunks").filter(|c| !c.is_null()) else {
        return Ok(Vec::new());
    };
    let chunks = chunks.as_array().ok_or("invalid_arguments")?;
    let is_text = |c: &Value, k: &str| c.get(k).is_some_and(Value::is_string);
    let optional_text = |c: &Value, k: &str| c.get(k).is_none_or(Value::is_string);
    for c in chunks {
        let valid = match c.get("type").and_then(Value::as_str) {
            Some("markdown_text") => is_text(c, "text"),
            Some("plan_update") => is_text(c, "title"),
            Some("task_update") => {
                is_text(c, "id")
                    && is_text(c, "title")
                    && c["status"]
                        .as_str()
                        .is_some_and(|s| TASK_STATUSES.contains(&s))
                    && optional_text(c, "details")
                    && optional_text(c, "output")
                    && c.get("sources").is_none_or(Value::is_array)
            }
            Some("blocks") => c.get("blocks").is_some_and(Value::is_array),
            _ => false,
        };
        if !valid {
            return Err("invalid_arguments");
        }
    }
    Ok(chunks.clone())
}

/// The text of the `markdown_text` chunks among `chunks`.
fn chunk_text(chunks: &[Value]) -> String {
    chunks
        .iter()
        .filter(|c| c["type"] == "markdown_text")
        .filter_map(|c| c["text"].as_str())
        .collect()
}

#[derive(Default)]
pub(super) struct AgentState {
    /// Idle time after which a stream stops by itself; `None`: never.
    expiry: Option<Duration>,
    /// The last streaming call of each streaming message, by (channel, ts).
    active: HashMap<(String, String), Instant>,
    /// Each agent session's status, by (channel, thread_ts).
    sessions: HashMap<(String, String), String>,
    /// Each stream's plan, by (channel, ts).
    plans: HashMap<(String, String), StreamPlan>,
}

impl FakeSlack {
    /// Streams idle for `expiry` stop by themselves: their next append or
    /// stop answers `message_not_in_streaming_state`.
    pub fn set_stream_expiry(&self, expiry: Duration) {
        self.shared.lock().agent.expiry = Some(expiry);
    }

    /// The plan of streaming message `ts`, if its calls carried plan or
    /// task chunks (or a display mode).
    pub fn stream_plan(&self, channel: &str, ts: &str) -> Option<StreamPlan> {
        self.shared
            .lock()
            .agent
            .plans
            .get(&(channel.to_owned(), ts.to_owned()))
            .cloned()
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
            let chunks = match chunks_of(body) {
                Ok(c) => c,
                Err(code) => return refuse(code),
            };
            let mode = field("task_display_mode");
            if mode
                .as_deref()
                .is_some_and(|m| m != "timeline" && m != "plan")
            {
                return refuse("invalid_arguments");
            }
            let ts = shared.new_ts();
            let mut text = field("markdown_text").unwrap_or_default();
            text.push_str(&chunk_text(&chunks));
            let msg = PostedMessage {
                channel: channel.clone(),
                thread_ts: Some(thread_ts),
                text,
                blocks: None,
                ts: ts.clone(),
                metadata: None,
                streaming: true,
            };
            let mut inner = shared.lock();
            inner.calls.push((method.to_owned(), body.clone()));
            inner.posted.push(msg.clone());
            inner.messages.push(msg);
            let key = (channel.clone(), ts.clone());
            inner.agent.active.insert(key.clone(), Instant::now());
            if mode.is_some() || !chunks.is_empty() {
                let mut plan = StreamPlan {
                    display_mode: mode,
                    ..StreamPlan::default()
                };
                plan.apply(&chunks);
                inner.agent.plans.insert(key, plan);
            }
            ok(json!({"ok": true, "channel": channel, "ts": ts}))
        }
        "chat.appendStream" | "chat.stopStream" => {
            let (Some(channel), Some(ts)) = (field("channel"), field("ts")) else {
                return refuse("message_not_found");
            };
            let chunks = match chunks_of(body) {
                Ok(c) => c,
                Err(code) => return refuse(code),
            };
            let text = match (field("markdown_text"), chunk_text(&chunks)) {
                (Some(mut t), more) => {
                    t.push_str(&more);
                    Some(t)
                }
                (None, more) => (!more.is_empty()).then_some(more),
            };
            let stop = method == "chat.stopStream";
            // An append needs something to add: text or chunks.
            if !stop && text.is_none() && chunks.is_empty() {
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
            if !chunks.is_empty() {
                inner
                    .agent
                    .plans
                    .entry(key.clone())
                    .or_default()
                    .apply(&chunks);
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
