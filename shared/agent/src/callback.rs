//! The `wait_for_callback` tool: what the model is told of it, its
//! arguments, and its tokens. The loop runs it (`segment::callback`): a
//! one-time URL is minted and shown, the task waits at zero compute, and
//! the first POST's JSON body is the call's result.

use baton_core::ToolSpec;
use rand::RngCore;
use std::time::Duration;

pub use baton_core::callback::WAIT_FOR_CALLBACK;

/// How long a callback may be called when the call does not say.
pub const DEFAULT_EXPIRES_AFTER: Duration = Duration::from_secs(24 * 3600);
/// The longest a callback may wait.
pub const MAX_EXPIRES_AFTER: Duration = Duration::from_secs(7 * 24 * 3600);
/// The shortest (tests wait a second or two).
pub const MIN_EXPIRES_AFTER: Duration = Duration::from_secs(1);
/// What another call of the same turn writes where the callback's URL
/// goes: it gets the URL in its place before it runs.
pub const CALLBACK_URL: &str = "{{callback_url}}";
/// The longest description kept.
const MAX_DESCRIPTION_CHARS: usize = 1_000;

pub fn wait_for_callback_spec() -> ToolSpec {
    ToolSpec {
        name: WAIT_FOR_CALLBACK.to_owned(),
        description: "Wait, using no compute, until another system calls a one-time URL \
(POST with a JSON body), then continue: the body becomes this tool's result. The URL is \
shown to the person or client following this task, with your description, for them to hand \
to the system that will call it. To hand it over yourself, call the tool that tells the other \
system (a webhook registration, a CI trigger) in the same turn as this one and write \
{{callback_url}} where the URL goes: it is put in before that call runs. It works once; \
uncalled by `expires_after` (default 24h, at most 7d), the result says nobody called."
            .to_owned(),
        input_schema: serde_json::json!({
            "type": "object",
            "properties": {
                "description": {"type": "string", "description": "what the callback is for and who should call it"},
                "expires_after": {"type": "string", "description": "how long the URL works, e.g. \"30m\", \"2h\", \"1d\" (default 24h, at most 7d)"}
            },
            "required": ["description"],
            "additionalProperties": false
        }),
    }
}

/// The call's description and how long its URL works, or why its
/// arguments are wrong.
pub(crate) fn args_of(arguments: &serde_json::Value) -> Result<(String, Duration), String> {
    let description = arguments
        .get("description")
        .and_then(serde_json::Value::as_str)
        .map(str::trim)
        .unwrap_or_default();
    if description.is_empty() {
        return Err("invalid arguments: `description` must be a non-empty string".into());
    }
    if description.chars().count() > MAX_DESCRIPTION_CHARS {
        return Err(format!(
            "invalid arguments: `description` is longer than {MAX_DESCRIPTION_CHARS} characters"
        ));
    }
    let expires_after = match arguments.get("expires_after") {
        None | Some(serde_json::Value::Null) => DEFAULT_EXPIRES_AFTER,
        Some(serde_json::Value::String(s)) => baton_settings::file::parse_duration(s)
            .map_err(|e| format!("invalid arguments: `expires_after`: {e}"))?,
        Some(_) => {
            return Err(
                "invalid arguments: `expires_after` must be a duration such as \"2h\"".into(),
            )
        }
    };
    if !(MIN_EXPIRES_AFTER..=MAX_EXPIRES_AFTER).contains(&expires_after) {
        return Err("invalid arguments: `expires_after` must be from 1s to 7d".into());
    }
    Ok((description.to_owned(), expires_after))
}

/// A new token: 256 bits from a CSPRNG (`rand`'s thread generator,
/// ChaCha seeded from the operating system), hex.
pub(crate) fn mint_token() -> String {
    let mut bytes = [0u8; 32];
    rand::rng().fill_bytes(&mut bytes);
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// The URL a token is called on, under the deployment's public URL.
pub(crate) fn url_of(public_url: &str, token: &str) -> String {
    format!(
        "{}{}{token}",
        public_url.trim_end_matches('/'),
        baton_core::callback::CALLBACK_PATH
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn arguments_are_checked() {
        assert_eq!(
            args_of(&json!({"description": " CI "})).unwrap(),
            ("CI".to_owned(), DEFAULT_EXPIRES_AFTER)
        );
        assert_eq!(
            args_of(&json!({"description": "CI", "expires_after": "2h"}))
                .unwrap()
                .1,
            Duration::from_secs(7200)
        );
        assert!(args_of(&json!({})).is_err());
        assert!(args_of(&json!({"description": "x".repeat(1001)})).is_err());
        assert!(args_of(&json!({"description": "CI", "expires_after": "8d"})).is_err());
        assert!(args_of(&json!({"description": "CI", "expires_after": "500ms"})).is_err());
        assert!(args_of(&json!({"description": "CI", "expires_after": 60})).is_err());
        assert!(args_of(&json!({"description": "CI", "expires_after": "soon"})).is_err());
    }

    #[test]
    fn tokens_are_long_random_and_hex() {
        let (a, b) = (mint_token(), mint_token());
        assert_eq!(a.len(), 64);
        assert!(a.chars().all(|c| c.is_ascii_hexdigit()));
        assert_ne!(a, b);
        assert_eq!(
            url_of("http://h:3000/", &a),
            format!("http://h:3000/callbacks/{a}")
        );
    }
}
