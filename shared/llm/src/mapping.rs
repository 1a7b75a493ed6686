//! What the three wire mappings share: serde helpers, the string enums
//! providers extend without notice, tool history told as text, the
//! forced tool of a request, and the wording of context-window refusals.

use baton_core::{CompletionRequest, LlmError, Message};
use serde::{Deserialize, Deserializer};
use serde_json::{json, Value};
use std::borrow::Cow;

/// A provider's open set of strings (a stop reason, say) as an enum: the
/// values this crate knows by name, and any other kept as sent, so a new
/// value never fails a response and survives the round trip.
macro_rules! open_enum {
    ($(#[$meta:meta])* $name:ident { $($variant:ident = $wire:literal),* $(,)? }) => {
        $(#[$meta])*
        #[derive(Clone, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
        #[serde(from = "String", into = "String")]
        pub(crate) enum $name {
            $($variant,)*
            Other(String),
        }

        impl From<String> for $name {
            fn from(s: String) -> Self {
                match s.as_str() {
                    $($wire => $name::$variant,)*
                    _ => $name::Other(s),
                }
            }
        }

        impl From<$name> for String {
            fn from(v: $name) -> String {
                match v {
                    $($name::$variant => $wire.to_owned(),)*
                    $name::Other(s) => s,
                }
            }
        }
    };
}
pub(crate) use open_enum;

/// Reads `null` as the type's default, as an absent field (with
/// `#[serde(default)]`) already is: servers send either.
pub(crate) fn null_as_default<'de, D, T>(d: D) -> Result<T, D::Error>
where
    D: Deserializer<'de>,
    T: Default + Deserialize<'de>,
{
    Ok(Option::<T>::deserialize(d)?.unwrap_or_default())
}

/// `{}`: the arguments of a call that came without any, the schema of a
/// tool that came without one.
pub(crate) fn empty_object() -> Value {
    json!({})
}

/// Tool arguments as a JSON object, which Anthropic and Bedrock require:
/// arguments kept raw (the model sent invalid JSON) are wrapped rather than
/// dropped.
pub(crate) fn object_arguments(arguments: &Value) -> Value {
    if arguments.is_object() {
        arguments.clone()
    } else {
        json!({ "_raw_arguments": arguments })
    }
}

/// The tool `request` forces the model to call, checked to be among its
/// tools: forcing a tool the request does not offer is the caller's
/// mistake, refused before anything is sent (every provider would refuse
/// it too, less clearly).
pub(crate) fn forced_tool(request: &CompletionRequest) -> Result<Option<&str>, LlmError> {
    let Some(name) = request.tool_choice.forced() else {
        return Ok(None);
    };
    if request.tools.iter().any(|t| t.name == name) {
        return Ok(Some(name));
    }
    let offered: Vec<&str> = request.tools.iter().map(|t| t.name.as_str()).collect();
    Err(LlmError::Config(format!(
        "the request forces a call of `{name}`, which is not among its tools ({})",
        if offered.is_empty() {
            "none".to_owned()
        } else {
            offered.join(", ")
        }
    )))
}

/// The messages to send for `request`. When it offers no tools but its
/// history holds tool calls and results (the closing "sum up what was
/// done" call), they are told as text: Bedrock Converse refuses `toolUse`
/// and `toolResult` blocks without a `toolConfig`, and Anthropic may refuse
/// `tool_use` blocks without `tools`. OpenAI accepts them either way; it
/// gets the same text so that every provider sees the same conversation,
/// and OpenAI-compatible servers whose chat templates cannot render tool
/// turns without tools do not stumble on it.
///
/// A call becomes `[called tool NAME with ARGS]` in its assistant message;
/// a result becomes a user message `[result of NAME: …]` (`[error from
/// NAME: …]` when it failed). Otherwise the messages are sent as they are.
pub(crate) fn messages_to_send(request: &CompletionRequest) -> Cow<'_, [Message]> {
    let has_tool_turns = request.messages.iter().any(|m| match m {
        Message::Assistant { tool_calls, .. } => !tool_calls.is_empty(),
        Message::Tool { .. } => true,
        Message::User { .. } | Message::Attachment { .. } => false,
    });
    if !request.tools.is_empty() || !has_tool_turns {
        return Cow::Borrowed(&request.messages);
    }
    let told = request.messages.iter().map(|m| match m {
        Message::Assistant {
            content,
            tool_calls,
        } if !tool_calls.is_empty() => {
            let mut text = content.clone();
            for call in tool_calls {
                if !text.trim().is_empty() {
                    text.push('\n');
                }
                text.push_str(&format!(
                    "[called tool {} with {}]",
                    call.name, call.arguments
                ));
            }
            Message::Assistant {
                content: text,
                tool_calls: Vec::new(),
            }
        }
        Message::Tool {
            name,
            content,
            is_error,
            ..
        } => {
            let what = if *is_error { "error from" } else { "result of" };
            let content = if content.trim().is_empty() {
                "(no output)"
            } else {
                content.as_str()
            };
            Message::User {
                content: format!("[{what} {name}: {content}]"),
            }
        }
        other => other.clone(),
    });
    Cow::Owned(told.collect())
}

/// How providers word a refusal of a request longer than the model's
/// context window, lower-cased: OpenAI (and the servers that copy it),
/// Anthropic, Bedrock and the models behind it, llama.cpp. Each provider
/// checks these only on the refusals that may carry them (Anthropic's
/// `invalid_request_error`, Bedrock's `ValidationException`, …).
const CONTEXT_OVERFLOW_WORDING: &[&str] = &[
    "context_length_exceeded",
    "maximum context length",
    "context window",
    "prompt is too long",
    "input is too long",
    "too many input tokens",
    "exceed context limit",
    "exceeds the available context size",
];

/// Whether a provider's error message says the request was longer than
/// the model's context window.
pub(crate) fn mentions_context_overflow(message: &str) -> bool {
    let message = message.to_ascii_lowercase();
    CONTEXT_OVERFLOW_WORDING.iter().any(|w| message.contains(w))
}

/// A decoded request forcing a tool it does not offer, refused as the
/// providers refuse it (the mock server's reading of [`forced_tool`]).
#[cfg(any(test, feature = "mock-server"))]
pub(crate) fn check_forced(request: &CompletionRequest) -> Result<(), String> {
    forced_tool(request).map(|_| ()).map_err(|e| match e {
        LlmError::Config(m) => m,
        other => other.to_string(),
    })
}

/// The name of the tool call `call_id` among earlier assistant messages
/// (the wire formats name only the call's id in a result).
#[cfg(any(test, feature = "mock-server"))]
pub(crate) fn find_call_name(messages: &[Message], call_id: &str) -> String {
    messages
        .iter()
        .rev()
        .find_map(|m| match m {
            Message::Assistant { tool_calls, .. } => tool_calls
                .iter()
                .find(|c| c.id == call_id)
                .map(|c| c.name.clone()),
            _ => None,
        })
        .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;
    use baton_core::ToolSpec;

    #[test]
    fn tool_turns_are_told_as_text_only_without_tools() {
        let mut request = crate::fixtures::conversation("c");
        assert!(matches!(messages_to_send(&request), Cow::Borrowed(_)));
        request.tools.clear();
        let told = messages_to_send(&request);
        assert_eq!(
            told.as_ref(),
            [
                Message::User {
                    content: "time twice?".into()
                },
                Message::Assistant {
                    content: "Checking.\n[called tool current_time with {}]\n[called tool current_time with {}]".into(),
                    tool_calls: vec![]
                },
                Message::User {
                    content: "[result of current_time: 12:00]".into()
                },
                Message::User {
                    content: "[error from current_time: bad zone]".into()
                },
                Message::User {
                    content: "hurry".into()
                },
            ]
        );
        // Nothing to tell: borrowed as it is.
        request.messages.truncate(1);
        assert!(matches!(messages_to_send(&request), Cow::Borrowed(_)));
        request.tools.push(ToolSpec {
            name: "t".into(),
            description: String::new(),
            input_schema: empty_object(),
        });
        assert!(matches!(messages_to_send(&request), Cow::Borrowed(_)));
    }

    #[test]
    fn a_forced_tool_must_be_offered() {
        let mut request = crate::fixtures::conversation("c");
        assert_eq!(forced_tool(&request), Ok(None));
        request.tool_choice = baton_core::ToolChoice::tool("current_time");
        assert_eq!(forced_tool(&request), Ok(Some("current_time")));
        request.tool_choice = baton_core::ToolChoice::tool("route");
        assert_eq!(
            forced_tool(&request),
            Err(LlmError::Config(
                "the request forces a call of `route`, which is not among its tools (current_time)"
                    .into()
            ))
        );
        request.tools.clear();
        assert!(matches!(forced_tool(&request), Err(LlmError::Config(m)) if m.ends_with("(none)")));
    }

    #[test]
    fn overflow_wording_is_recognised_whatever_the_case() {
        assert!(mentions_context_overflow(
            "This model's maximum context length is 128000 tokens."
        ));
        assert!(mentions_context_overflow(
            "ValidationException: Input is too long for requested model."
        ));
        assert!(!mentions_context_overflow("invalid tool schema"));
    }
}
