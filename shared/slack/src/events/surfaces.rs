//! Events of Slack's agent surfaces: `agent_session_stopped` (a user
//! clicked the Stop button of an agent session) and
//! `assistant_thread_started` (a user opened a new assistant thread).
//!
//! Shapes from Slack's event references (docs.slack.dev/reference/events):
//!
//! ```json
//! {"type": "agent_session_stopped", "channel": "C0123ABC456",
//!  "thread_ts": "1782234671.392669", "user": "U123ABC456",
//!  "streaming_message_ts": ["1782234987.693923"], "event_ts": "1783536983.783769"}
//! {"type": "assistant_thread_started", "assistant_thread": {"user_id": "U123ABC456",
//!  "channel_id": "D123ABC456", "thread_ts": "1729999327.187299",
//!  "context": {"channel_id": "C123ABC456", "team_id": "T07XY8FPJ5C"}},
//!  "event_ts": "1715873754.429808"}
//! ```
//!
//! The workspace is the envelope's `team_id`.

use super::{EventCallback, EventError};
use serde::Deserialize;

/// A user clicked Stop on the agent session of a thread.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SessionStopped {
    pub team_id: String,
    /// The event's id: the same click redelivered has the same one.
    pub event_id: String,
    pub channel: String,
    /// The thread the session is scoped to.
    pub thread_ts: String,
    /// Who clicked.
    pub user: String,
    /// The app's streaming messages Slack stopped (empty when none was).
    pub streaming_message_ts: Vec<String>,
}

/// A user opened a new assistant thread.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ThreadStarted {
    pub team_id: String,
    pub event_id: String,
    /// The app's direct-message channel the thread is in.
    pub channel: String,
    pub thread_ts: String,
    pub user: String,
}

#[derive(Deserialize)]
struct RawStopped {
    #[serde(default)]
    channel: Option<String>,
    #[serde(default)]
    thread_ts: Option<String>,
    #[serde(default)]
    user: Option<String>,
    #[serde(default)]
    streaming_message_ts: Option<Vec<String>>,
}

#[derive(Deserialize)]
struct RawStarted {
    assistant_thread: Option<RawThread>,
}

#[derive(Deserialize)]
struct RawThread {
    #[serde(default)]
    user_id: Option<String>,
    #[serde(default)]
    channel_id: Option<String>,
    #[serde(default)]
    thread_ts: Option<String>,
}

fn required(v: Option<String>, name: &'static str) -> Result<String, EventError> {
    v.filter(|s| !s.is_empty())
        .ok_or(EventError::MissingField(name))
}

pub(super) fn session_stopped(cb: &EventCallback) -> Result<SessionStopped, EventError> {
    let raw: RawStopped = serde_json::from_value(cb.event.clone())
        .map_err(|e| EventError::Malformed(format!("event: {e}")))?;
    Ok(SessionStopped {
        team_id: cb.team_id.clone(),
        event_id: cb.event_id.clone(),
        channel: required(raw.channel, "event.channel")?,
        thread_ts: required(raw.thread_ts, "event.thread_ts")?,
        user: required(raw.user, "event.user")?,
        streaming_message_ts: raw.streaming_message_ts.unwrap_or_default(),
    })
}

pub(super) fn thread_started(cb: &EventCallback) -> Result<ThreadStarted, EventError> {
    let raw: RawStarted = serde_json::from_value(cb.event.clone())
        .map_err(|e| EventError::Malformed(format!("event: {e}")))?;
    let thread = raw
        .assistant_thread
        .ok_or(EventError::MissingField("event.assistant_thread"))?;
    Ok(ThreadStarted {
        team_id: cb.team_id.clone(),
        event_id: cb.event_id.clone(),
        channel: required(thread.channel_id, "event.assistant_thread.channel_id")?,
        thread_ts: required(thread.thread_ts, "event.assistant_thread.thread_ts")?,
        user: required(thread.user_id, "event.assistant_thread.user_id")?,
    })
}

#[cfg(test)]
mod tests {
    use crate::events::{classify, EventError, Inbound};
    use serde_json::{json, Value};

    fn callback(event: Value) -> Vec<u8> {
        serde_json::to_vec(&json!({
            "type": "event_callback", "team_id": "T1", "api_app_id": "A1",
            "event_id": "Ev1", "event_time": 1, "event": event
        }))
        .unwrap()
    }

    #[test]
    fn a_stop_click_is_read_from_slacks_example() {
        let body = callback(json!({
            "channel": "C0123ABC456", "event_ts": "1783536983.783769",
            "streaming_message_ts": ["1782234987.693923"],
            "thread_ts": "1782234671.392669", "type": "agent_session_stopped",
            "user": "U123ABC456"
        }));
        let Ok(Inbound::SessionStopped(s)) = classify(&body, Some("UBOT")) else {
            panic!("expected a stop");
        };
        assert_eq!(
            (s.team_id.as_str(), s.event_id.as_str(), s.channel.as_str()),
            ("T1", "Ev1", "C0123ABC456")
        );
        assert_eq!(s.thread_ts, "1782234671.392669");
        assert_eq!(s.user, "U123ABC456");
        assert_eq!(s.streaming_message_ts, ["1782234987.693923"]);
        // No stream was running: an empty list, or none at all.
        let body = callback(json!({"type": "agent_session_stopped", "channel": "D1",
                                    "thread_ts": "1.0", "user": "U1"}));
        let Ok(Inbound::SessionStopped(s)) = classify(&body, None) else {
            panic!("expected a stop");
        };
        assert!(s.streaming_message_ts.is_empty());
    }

    #[test]
    fn a_new_assistant_thread_is_read_from_slacks_example() {
        let body = callback(json!({
            "type": "assistant_thread_started",
            "assistant_thread": {"user_id": "U123ABC456",
                "context": {"channel_id": "C123ABC456", "team_id": "T07XY8FPJ5C",
                            "enterprise_id": "E480293PS82"},
                "channel_id": "D123ABC456", "thread_ts": "1729999327.187299"},
            "event_ts": "1715873754.429808"
        }));
        let Ok(Inbound::ThreadStarted(t)) = classify(&body, None) else {
            panic!("expected a thread");
        };
        assert_eq!(
            (t.channel.as_str(), t.thread_ts.as_str(), t.user.as_str()),
            ("D123ABC456", "1729999327.187299", "U123ABC456")
        );
    }

    #[test]
    fn incomplete_or_malformed_events_are_errors() {
        for (event, field) in [
            (
                json!({"type": "agent_session_stopped", "thread_ts": "1.0", "user": "U1"}),
                "event.channel",
            ),
            (
                json!({"type": "agent_session_stopped", "channel": "C1", "user": "U1"}),
                "event.thread_ts",
            ),
            (
                json!({"type": "agent_session_stopped", "channel": "C1", "thread_ts": "1.0", "user": ""}),
                "event.user",
            ),
            (
                json!({"type": "assistant_thread_started"}),
                "event.assistant_thread",
            ),
            (
                json!({"type": "assistant_thread_started", "assistant_thread": {"channel_id": "D1", "user_id": "U1"}}),
                "event.assistant_thread.thread_ts",
            ),
        ] {
            assert_eq!(
                classify(&callback(event), None),
                Err(EventError::MissingField(field))
            );
        }
        let body = callback(json!({"type": "agent_session_stopped", "channel": 5,
                                    "thread_ts": "1.0", "user": "U1"}));
        assert!(matches!(
            classify(&body, None),
            Err(EventError::Malformed(_))
        ));
        let body = callback(json!({"type": "agent_session_stopped", "channel": "C1",
                                    "thread_ts": "1.0", "user": "U1", "streaming_message_ts": "x"}));
        assert!(matches!(
            classify(&body, None),
            Err(EventError::Malformed(_))
        ));
    }
}
