//! Slash commands (`/baton WORD`): reading Slack's form-encoded request and
//! answering it through its `response_url`.
//!
//! A slash command is signed exactly like an event (verify the signature
//! over the raw body first, [`crate::signature`]). Slack does not retry
//! one; it shows the sender an error if the app does not answer within 3
//! seconds. The answer goes to `response_url`, a URL the request itself
//! names, so it is checked before anything is sent there
//! ([`response_url_allowed`]): only Slack's own host (or, in tests, the
//! host of the configured Web API, e.g. the fake Slack) is ever called.

use serde::Deserialize;
use serde_json::json;

/// The host of every `response_url` Slack gives.
pub const RESPONSE_HOST: &str = "hooks.slack.com";

/// Longest command text read (Slack's own limit is far below).
pub const MAX_TEXT_CHARS: usize = 4000;

/// A slash command as Slack sends it (form fields; the deprecated
/// verification `token` is ignored: the signature is what is trusted).
#[derive(Clone, Debug, PartialEq, Eq, Deserialize)]
pub struct SlashCommand {
    /// `/baton`.
    pub command: String,
    /// What follows the command, as typed.
    #[serde(default)]
    pub text: String,
    pub team_id: String,
    pub channel_id: String,
    /// `directmessage` in a direct message with the app, `privategroup`,
    /// or the channel's name.
    #[serde(default)]
    pub channel_name: String,
    pub user_id: String,
    /// Where the answer goes (at most 5 times within 30 minutes).
    pub response_url: String,
    /// Unique to this invocation: its dedupe key.
    pub trigger_id: String,
}

impl SlashCommand {
    /// Whether it was sent in a direct message (with the app, or between
    /// people, where Baton can only answer its sender alone).
    pub fn is_direct_message(&self) -> bool {
        self.channel_name == "directmessage" || self.channel_id.starts_with('D')
    }
}

/// Why a slash command's body could not be read.
#[derive(Debug, thiserror::Error)]
pub enum CommandError {
    #[error("not a slash command form: {0}")]
    Form(String),
    #[error("field `{0}` is empty")]
    Empty(&'static str),
    #[error("the text is longer than {MAX_TEXT_CHARS} characters")]
    TooLong,
}

/// Reads a slash command's (verified) form body.
pub fn parse(body: &[u8]) -> Result<SlashCommand, CommandError> {
    let c: SlashCommand =
        serde_urlencoded::from_bytes(body).map_err(|e| CommandError::Form(e.to_string()))?;
    for (name, value) in [
        ("command", &c.command),
        ("team_id", &c.team_id),
        ("channel_id", &c.channel_id),
        ("user_id", &c.user_id),
        ("response_url", &c.response_url),
        ("trigger_id", &c.trigger_id),
    ] {
        if value.trim().is_empty() {
            return Err(CommandError::Empty(name));
        }
    }
    if c.text.chars().count() > MAX_TEXT_CHARS {
        return Err(CommandError::TooLong);
    }
    Ok(c)
}

/// Whether `response_url` may be called: `https://hooks.slack.com/…`, or
/// a URL on the same scheme, host and port as the Web API in use
/// (`api_url`: Slack's own, or a fake one in tests). Anything else — a
/// forged request naming another host — is never called.
pub fn response_url_allowed(response_url: &str, api_url: &str) -> bool {
    let Ok(url) = reqwest::Url::parse(response_url) else {
        return false;
    };
    if !url.username().is_empty() || url.password().is_some() {
        return false;
    }
    if url.scheme() == "https" && url.host_str() == Some(RESPONSE_HOST) && url.port().is_none() {
        return true;
    }
    let Ok(api) = reqwest::Url::parse(api_url) else {
        return false;
    };
    url.scheme() == api.scheme()
        && url.host_str().is_some()
        && url.host_str() == api.host_str()
        && url.port_or_known_default() == api.port_or_known_default()
}

/// Why an answer could not be sent.
#[derive(Debug, thiserror::Error)]
pub enum RespondError {
    #[error("response_url is not Slack's: refused to call it")]
    NotSlack,
    #[error("response_url call failed: {0}")]
    Transport(String),
    #[error("response_url answered {0}")]
    Status(u16),
}

/// Posts `text` to `response_url` as an answer only the sender sees
/// (`response_type: ephemeral`), with `http` (whose timeout bounds it).
pub async fn respond(
    http: &reqwest::Client,
    api_url: &str,
    response_url: &str,
    text: &str,
) -> Result<(), RespondError> {
    if !response_url_allowed(response_url, api_url) {
        return Err(RespondError::NotSlack);
    }
    let body = json!({"response_type": "ephemeral", "text": text}).to_string();
    let r = http
        .post(response_url)
        .header(reqwest::header::CONTENT_TYPE, "application/json")
        .body(body)
        .send()
        .await
        .map_err(|e| RespondError::Transport(e.without_url().to_string()))?;
    if !r.status().is_success() {
        return Err(RespondError::Status(r.status().as_u16()));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn form(fields: &[(&str, &str)]) -> Vec<u8> {
        serde_urlencoded::to_string(fields).unwrap().into_bytes()
    }

    const FIELDS: &[(&str, &str)] = &[
        ("token", "deprecated"),
        ("team_id", "T1"),
        ("channel_id", "C1"),
        ("channel_name", "general"),
        ("user_id", "U1"),
        ("command", "/baton"),
        ("text", "  Status "),
        ("response_url", "https://hooks.slack.com/commands/T1/1/abc"),
        ("trigger_id", "13345224609.738474920.8088930838d88f008e0"),
    ];

    #[test]
    fn a_command_is_read_and_its_fields_checked() {
        let c = parse(&form(FIELDS)).unwrap();
        assert_eq!(
            (c.command.as_str(), c.text.as_str()),
            ("/baton", "  Status ")
        );
        assert!(!c.is_direct_message());
        for missing in ["team_id", "user_id", "response_url", "trigger_id"] {
            let fields: Vec<_> = FIELDS
                .iter()
                .filter(|(k, _)| *k != missing)
                .copied()
                .collect();
            assert!(parse(&form(&fields)).is_err(), "{missing}");
        }
        let mut empty = FIELDS.to_vec();
        empty[4] = ("user_id", " ");
        assert!(matches!(
            parse(&form(&empty)),
            Err(CommandError::Empty("user_id"))
        ));
        let long = "x".repeat(MAX_TEXT_CHARS + 1);
        let mut too_long = FIELDS.to_vec();
        too_long[6] = ("text", &long);
        assert!(matches!(
            parse(&form(&too_long)),
            Err(CommandError::TooLong)
        ));
        assert!(parse(b"{\"json\": true}").is_err());
    }

    #[test]
    fn only_slacks_response_urls_are_called() {
        let api = "https://slack.com/api";
        assert!(response_url_allowed(
            "https://hooks.slack.com/commands/T1/1/x",
            api
        ));
        for bad in [
            "http://hooks.slack.com/commands/T1/1/x",
            "https://hooks.slack.com.evil.example/x",
            "https://user@hooks.slack.com/x",
            "https://hooks.slack.com:8443/x",
            "https://169.254.169.254/latest/meta-data",
            "https://slack.com.evil.example/api",
            "file:///etc/passwd",
            "not a url",
        ] {
            assert!(!response_url_allowed(bad, api), "{bad}");
        }
        // The configured Web API's host (the fake Slack in tests).
        let fake = "http://127.0.0.1:4567";
        assert!(response_url_allowed(
            "http://127.0.0.1:4567/commands/response/1",
            fake
        ));
        assert!(!response_url_allowed(
            "http://127.0.0.1:4568/commands/response/1",
            fake
        ));
        assert!(!response_url_allowed("http://localhost:4567/x", fake));
    }
}
