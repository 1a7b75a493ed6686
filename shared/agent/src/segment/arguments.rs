//! The arguments a call runs with, decided once, before the plan: the
//! model's, with `{{callback_url}}` replaced by the turn's callback URL
//! ([`super::callback`]), then as the tool reads them
//! ([`Tool::normalise`]: `http_request`'s method upper-cased and its URL
//! parsed, a built-in tool's defaults filled in). The plan decides on
//! this form (`allow_hosts`, new hosts, the policies, approval rules), an
//! approval shows it, and the tool is called with it: what is checked is
//! what runs. The transcript keeps what the model wrote.

use crate::callback::CALLBACK_URL;
use baton_core::{Tool, ToolCall};
use serde_json::Value;

/// `call` as it will run: its placeholder replaced by `callback_url`
/// when the turn has one, then normalised by `tool`, the agent's tool of
/// that name. Without one (`sleep`, `delegate`, `ask_user`, an unknown
/// name) the arguments stay as written: the URL is handed to other
/// systems only, never to a sub-agent that could call it.
pub(super) fn as_run(
    mut call: ToolCall,
    tool: Option<&dyn Tool>,
    callback_url: Option<&str>,
) -> ToolCall {
    let Some(tool) = tool else {
        return call;
    };
    if let Some(url) = callback_url {
        with_url(&mut call.arguments, url);
    }
    call.arguments = tool.normalise(std::mem::take(&mut call.arguments));
    call
}

/// Whether `call` writes [`CALLBACK_URL`] in its arguments.
pub(super) fn asks_for_callback_url(call: &ToolCall) -> bool {
    call.arguments.to_string().contains(CALLBACK_URL)
}

/// Replaces [`CALLBACK_URL`] with `url` in every string of `value`.
fn with_url(value: &mut Value, url: &str) {
    match value {
        Value::String(s) if s.contains(CALLBACK_URL) => {
            *s = s.replace(CALLBACK_URL, url);
        }
        Value::Array(items) => items.iter_mut().for_each(|v| with_url(v, url)),
        Value::Object(map) => map.values_mut().for_each(|v| with_url(v, url)),
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use baton_tools::{AllowList, HttpRequestTool};
    use serde_json::json;

    fn call(name: &str, arguments: Value) -> ToolCall {
        ToolCall {
            id: "c".into(),
            name: name.into(),
            arguments,
        }
    }

    /// The placeholder is replaced first, so the URL the tool parses (and
    /// the policies see) is the real one.
    #[test]
    fn the_callback_url_is_put_in_then_the_tool_reads_the_arguments() {
        let tool = HttpRequestTool::new(AllowList::default());
        let c = call(
            "http_request",
            json!({"method": "post", "url": "HTTPS://CI.Example.com:443/run",
                   "body": "{\"hook\": \"{{callback_url}}\"}"}),
        );
        let run = as_run(c, Some(&tool), Some("https://baton.example/callbacks/t0k"));
        assert_eq!(
            run.arguments,
            json!({"method": "POST", "url": "https://ci.example.com/run",
                   "body": "{\"hook\": \"https://baton.example/callbacks/t0k\"}"})
        );
        // With no callback in the turn the placeholder stays; a call of no
        // tool (`delegate`, `sleep`, an unknown name) keeps its arguments.
        let c = call("x", json!({"u": ["{{callback_url}}"], "n": 1}));
        assert!(asks_for_callback_url(&c));
        let url = Some("https://b/callbacks/t");
        assert_eq!(as_run(c.clone(), None, url).arguments, c.arguments);
        let builtins = baton_tools::Toolset::builtins(AllowList::default());
        let time = builtins.get("current_time").expect("a built-in");
        assert_eq!(
            as_run(
                call("current_time", json!({"timezone": "{{callback_url}}"})),
                Some(time.as_ref()),
                None
            )
            .arguments,
            json!({"timezone": "{{callback_url}}"})
        );
        assert_eq!(
            as_run(
                call("current_time", json!({"timezone": "{{callback_url}}"})),
                Some(time.as_ref()),
                url
            )
            .arguments,
            json!({"timezone": "https://b/callbacks/t"})
        );
    }
}
