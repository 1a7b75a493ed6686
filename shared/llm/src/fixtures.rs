//! Conversations the providers' wire-format tests share.

use baton_core::{CompletionRequest, DeltaSink, Message, ToolCall, ToolSpec};
use serde_json::json;
use std::sync::Mutex;

/// A sink that keeps the pieces of text it is told (a restart clears them).
#[derive(Default)]
pub(crate) struct Deltas(Mutex<Vec<String>>);

impl Deltas {
    pub(crate) fn pieces(&self) -> Vec<String> {
        self.0.lock().unwrap().clone()
    }

    pub(crate) fn joined(&self) -> String {
        self.pieces().concat()
    }
}

impl DeltaSink for Deltas {
    fn text(&self, delta: &str) {
        self.0.lock().unwrap().push(delta.to_owned());
    }

    fn restart(&self) {
        self.0.lock().unwrap().clear();
    }
}

/// A `current_time` call with this id.
pub(crate) fn call(id: &str) -> ToolCall {
    ToolCall {
        id: id.into(),
        name: "current_time".into(),
        arguments: json!({}),
    }
}

/// Two parallel tool calls (ids `{prefix}1` and `{prefix}2`, the second
/// failed), then a steering message: every shape a provider must map.
pub(crate) fn conversation(prefix: &str) -> CompletionRequest {
    let (first, second) = (format!("{prefix}1"), format!("{prefix}2"));
    CompletionRequest {
        model: String::new(),
        system: "You are terse.".into(),
        messages: vec![
            Message::User {
                content: "time twice?".into(),
            },
            Message::Assistant {
                content: "Checking.".into(),
                tool_calls: vec![call(&first), call(&second)],
            },
            Message::Tool {
                call_id: first,
                name: "current_time".into(),
                content: "12:00".into(),
                is_error: false,
            },
            Message::Tool {
                call_id: second,
                name: "current_time".into(),
                content: "bad zone".into(),
                is_error: true,
            },
            // A steer message arriving between steps.
            Message::User {
                content: "hurry".into(),
            },
        ],
        tools: vec![ToolSpec {
            name: "current_time".into(),
            description: "The time".into(),
            input_schema: json!({"type": "object"}),
        }],
        max_tokens: 0,
        tool_choice: baton_core::ToolChoice::Auto,
    }
}
