//! A small Slack Web API client: the calls Baton makes.
//!
//! Requests are JSON (`Content-Type: application/json; charset=utf-8`) with
//! the bot token as `Authorization: Bearer`. Slack answers HTTP 200 with
//! `{"ok": false, "error": "..."}` for most failures ([`SlackError::Api`]) and
//! HTTP 429 with `Retry-After` when rate limiting; a 429 means the call was
//! not processed, so it is safe to retry.

use secrecy::{ExposeSecret, SecretString};
use std::borrow::Cow;
use std::fmt;
use std::time::Duration;

use reqwest::header::{HeaderValue, AUTHORIZATION, CONTENT_TYPE, RETRY_AFTER};
use reqwest::StatusCode;
use serde_json::{json, Value};

/// Default Web API base (`SLACK_API_URL` overrides it).
pub const DEFAULT_API_URL: &str = "https://slack.com/api";
/// Slack truncates `text` longer than this many characters; Baton truncates
/// first so the cut is visible.
pub const MAX_TEXT_CHARS: usize = 40_000;
/// Appended to a text cut to [`MAX_TEXT_CHARS`].
pub const TRUNCATION_MARKER: &str = "\n… _(message truncated)_";
/// How many times a rate-limited call is retried by default.
pub const DEFAULT_MAX_RETRIES: u32 = 3;
/// The longest single wait for `Retry-After` by default.
pub const DEFAULT_MAX_RETRY_WAIT: Duration = Duration::from_secs(30);

const JSON_UTF8: &str = "application/json; charset=utf-8";
const FORM: &str = "application/x-www-form-urlencoded";
/// The `event_type` of the metadata Baton puts on the messages it posts.
pub const POST_EVENT_TYPE: &str = "baton_answer";
/// Pages of a thread read when looking for a message already posted.
const MAX_REPLY_PAGES: usize = 10;
/// When a 429 carries no usable `Retry-After`.
const FALLBACK_RETRY_AFTER: Duration = Duration::from_secs(1);
const REQUEST_TIMEOUT: Duration = Duration::from_secs(30);

/// A Slack bot token (`xoxb-...`): a [`SecretString`], so its `Debug` never
/// shows the value and it is zeroed on drop.
#[derive(Clone)]
pub struct BotToken(SecretString);

impl BotToken {
    /// Wraps a bot token.
    pub fn new(token: impl Into<String>) -> Self {
        Self(SecretString::from(token.into()))
    }

    /// The raw token, for code that must send it elsewhere. Do not log it.
    pub fn expose(&self) -> &str {
        self.0.expose_secret()
    }
}

impl fmt::Debug for BotToken {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("BotToken(<redacted>)")
    }
}

/// A failed Web API call. Never contains the token.
#[derive(Debug, thiserror::Error)]
pub enum SlackError {
    /// The client could not be set up (bad base URL, unusable token, ...).
    #[error("Slack client configuration: {0}")]
    Config(String),
    /// The request did not complete (connection, timeout, TLS).
    #[error("Slack {method} request failed: {source}")]
    Transport {
        /// Web API method.
        method: String,
        /// The underlying error (its URL holds no credentials).
        #[source]
        source: reqwest::Error,
    },
    /// An HTTP status other than 200 or 429.
    #[error("Slack {method} answered HTTP {status}")]
    Status {
        /// Web API method.
        method: String,
        /// HTTP status code.
        status: u16,
    },
    /// `{"ok": false, "error": code}`, e.g. `channel_not_found`, `not_authed`.
    #[error("Slack API error: {code}{}", needs(.needed))]
    Api {
        /// Slack's error code.
        code: String,
        /// What the code means for the caller ([`ApiErrorKind::of`]).
        kind: ApiErrorKind,
        /// The scopes Slack says the call needs (`needed`, sent with
        /// `missing_scope`).
        needed: Option<String>,
    },
    /// Still rate limited after the allowed retries.
    #[error("Slack rate limited the call (retry after {retry_after:?})")]
    RateLimited {
        /// Slack's last `Retry-After`, if it sent one.
        retry_after: Option<Duration>,
    },
    /// The answer was not the JSON Slack sends.
    #[error("Slack {method} answered with an unexpected body: {message}")]
    Decode {
        /// Web API method.
        method: String,
        /// What was wrong.
        message: String,
    },
}

/// " (needs SCOPES)" when Slack named the scopes a call needs.
fn needs(needed: &Option<String>) -> String {
    needed
        .as_deref()
        .map(|n| format!(" (needs {n})"))
        .unwrap_or_default()
}

/// What an `{"ok": false}` answer means for the caller. Slack's error codes
/// are read here, once ([`ApiErrorKind::of`]); callers decide on the kind,
/// never on the code's text.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ApiErrorKind {
    /// No call of this kind can succeed anywhere until the app is
    /// reinstalled or reconfigured: a scope missing, a bad, revoked or
    /// wrong-type token, a method Slack does not offer.
    App,
    /// This conversation refuses the app: not a member, no such channel or
    /// thread, archived, read-only.
    Conversation,
    /// Slack could not handle the call just now: trying again may succeed.
    Transient,
    /// The message is no longer streaming (`message_not_in_streaming_state`):
    /// the stream was stopped, by the app, by the user's Stop button, or by
    /// Slack after it sat idle. Appending to it or stopping it again cannot
    /// succeed; a caller with more to say posts it as a new message.
    NotStreaming,
    /// Any other refusal (bad arguments, ...): the same call fails again.
    Other,
}

/// Codes after which no call of the kind can succeed, whatever the
/// conversation.
const APP_ERRORS: &[&str] = &[
    "missing_scope",
    "not_allowed_token_type",
    "not_authed",
    "invalid_auth",
    "account_inactive",
    "token_revoked",
    "token_expired",
    "no_permission",
    "ekm_access_denied",
    "team_access_not_granted",
    "unknown_method",
    "method_deprecated",
    "deprecated_endpoint",
];

/// Codes about the one conversation (or thread) the call names.
const CONVERSATION_ERRORS: &[&str] = &[
    "channel_not_found",
    "not_in_channel",
    "is_archived",
    "thread_not_found",
    "cannot_reply_to_message",
    "restricted_action",
    "restricted_action_read_only_channel",
    "restricted_action_thread_only_channel",
    "restricted_action_non_threadable_channel",
];

/// Codes Slack documents as its own momentary trouble.
const TRANSIENT_ERRORS: &[&str] = &[
    "ratelimited",
    "internal_error",
    "fatal_error",
    "service_unavailable",
];

/// Codes saying a streaming message is not streaming any more.
const NOT_STREAMING_ERRORS: &[&str] = &["message_not_in_streaming_state"];

impl ApiErrorKind {
    /// The kind of Slack error `code`.
    pub fn of(code: &str) -> Self {
        if NOT_STREAMING_ERRORS.contains(&code) {
            ApiErrorKind::NotStreaming
        } else if APP_ERRORS.contains(&code) {
            ApiErrorKind::App
        } else if CONVERSATION_ERRORS.contains(&code) {
            ApiErrorKind::Conversation
        } else if TRANSIENT_ERRORS.contains(&code) {
            ApiErrorKind::Transient
        } else {
            ApiErrorKind::Other
        }
    }
}

impl SlackError {
    /// The error of an `{"ok": false, "error": code}` answer.
    pub fn api(code: impl Into<String>) -> Self {
        let code = code.into();
        SlackError::Api {
            kind: ApiErrorKind::of(&code),
            code,
            needed: None,
        }
    }

    /// Whether the same call may succeed if made again later: Slack was
    /// busy or failing (rate limits, 5xx, its own transient codes), the
    /// network failed, or the answer came garbled. A refusal (a scope
    /// missing, no access to the conversation, bad arguments, a bad token)
    /// is not.
    pub fn is_transient(&self) -> bool {
        match self {
            SlackError::RateLimited { .. }
            | SlackError::Transport { .. }
            | SlackError::Decode { .. } => true,
            SlackError::Status { status, .. } => *status >= 500,
            SlackError::Api { kind, .. } => *kind == ApiErrorKind::Transient,
            SlackError::Config(_) => false,
        }
    }
}

/// Client for `chat.postMessage`, `chat.postEphemeral`, `chat.update` and
/// `assistant.threads.setStatus`; the streaming methods are in
/// [`crate::stream`], the agent-session and assistant-thread ones in
/// [`crate::assistant`]. Cheap to clone.
#[derive(Clone)]
pub struct SlackClient {
    http: reqwest::Client,
    base_url: String,
    auth: HeaderValue,
    max_retries: u32,
    max_retry_wait: Duration,
}

impl fmt::Debug for SlackClient {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SlackClient")
            .field("base_url", &self.base_url)
            .field("token", &"<redacted>")
            .field("max_retries", &self.max_retries)
            .field("max_retry_wait", &self.max_retry_wait)
            .finish()
    }
}

impl SlackClient {
    /// A client for the Web API at `base_url` (e.g. [`DEFAULT_API_URL`] or a
    /// fake's address), authenticating with `bot_token`.
    pub fn new(base_url: &str, bot_token: BotToken) -> Result<Self, SlackError> {
        let base_url = base_url.trim().trim_end_matches('/').to_string();
        if !(base_url.starts_with("http://") || base_url.starts_with("https://")) {
            return Err(SlackError::Config(format!(
                "API base URL must be http(s), got {base_url:?}"
            )));
        }
        let mut auth =
            HeaderValue::from_str(&format!("Bearer {}", bot_token.expose())).map_err(|_| {
                SlackError::Config("bot token contains characters not allowed in a header".into())
            })?;
        // Keeps the token out of reqwest's and http's Debug output.
        auth.set_sensitive(true);
        let http = reqwest::Client::builder()
            .timeout(REQUEST_TIMEOUT)
            .build()
            .map_err(|e| SlackError::Config(format!("HTTP client: {e}")))?;
        Ok(Self {
            http,
            base_url,
            auth,
            max_retries: DEFAULT_MAX_RETRIES,
            max_retry_wait: DEFAULT_MAX_RETRY_WAIT,
        })
    }

    /// Retries of a rate-limited call, and the cap on each wait.
    pub fn with_retry_policy(mut self, max_retries: u32, max_wait: Duration) -> Self {
        self.max_retries = max_retries;
        self.max_retry_wait = max_wait;
        self
    }

    /// Uses the given HTTP client (shared connection pool, custom timeouts).
    pub fn with_http_client(mut self, http: reqwest::Client) -> Self {
        self.http = http;
        self
    }

    /// The Web API base URL in use.
    pub fn base_url(&self) -> &str {
        &self.base_url
    }

    /// The HTTP client it calls with (for a slash command's
    /// `response_url`, [`crate::commands::respond`]).
    pub(crate) fn http_client(&self) -> &reqwest::Client {
        &self.http
    }

    /// Posts a message (in a thread when `thread_ts` is set) and returns its
    /// `ts`. `text` is the message, or the notification fallback when
    /// `blocks` are given; it is truncated to [`MAX_TEXT_CHARS`] with
    /// [`TRUNCATION_MARKER`].
    pub async fn post_message(
        &self,
        channel: &str,
        thread_ts: Option<&str>,
        text: &str,
        blocks: Option<Value>,
    ) -> Result<String, SlackError> {
        let mut body = json!({ "channel": channel, "text": truncate_text(text) });
        if let Some(ts) = thread_ts {
            body["thread_ts"] = json!(ts);
        }
        if let Some(blocks) = blocks {
            body["blocks"] = blocks;
        }
        let answer = self.call("chat.postMessage", &body).await?;
        answer
            .get("ts")
            .and_then(Value::as_str)
            .map(str::to_owned)
            .ok_or_else(|| SlackError::Decode {
                method: "chat.postMessage".into(),
                message: "no `ts` in the answer".into(),
            })
    }

    /// [`post_message`](Self::post_message) carrying `key` in the message's
    /// metadata (`event_type` [`POST_EVENT_TYPE`], `event_payload.key`), so
    /// [`find_post`](Self::find_post) can tell later whether it was posted.
    pub async fn post_message_keyed(
        &self,
        channel: &str,
        thread_ts: Option<&str>,
        text: &str,
        blocks: Option<Value>,
        key: &str,
    ) -> Result<String, SlackError> {
        let mut body = json!({
            "channel": channel,
            "text": truncate_text(text),
            "metadata": {"event_type": POST_EVENT_TYPE, "event_payload": {"key": key}},
        });
        if let Some(ts) = thread_ts {
            body["thread_ts"] = json!(ts);
        }
        if let Some(blocks) = blocks {
            body["blocks"] = blocks;
        }
        let answer = self.call("chat.postMessage", &body).await?;
        answer
            .get("ts")
            .and_then(Value::as_str)
            .map(str::to_owned)
            .ok_or_else(|| SlackError::Decode {
                method: "chat.postMessage".into(),
                message: "no `ts` in the answer".into(),
            })
    }

    /// The ts of the message carrying `key` in the thread `thread_ts` (or
    /// among the channel's recent messages when there is no thread), if
    /// one was posted.
    pub async fn find_post(
        &self,
        channel: &str,
        thread_ts: Option<&str>,
        key: &str,
    ) -> Result<Option<String>, SlackError> {
        let mut cursor = String::new();
        for _ in 0..MAX_REPLY_PAGES {
            let mut fields = vec![
                ("channel", channel),
                ("include_all_metadata", "true"),
                ("limit", "200"),
            ];
            if !cursor.is_empty() {
                fields.push(("cursor", cursor.as_str()));
            }
            let answer = match thread_ts {
                Some(ts) => {
                    fields.push(("ts", ts));
                    self.call_form("conversations.replies", &fields).await?
                }
                None => self.call_form("conversations.history", &fields).await?,
            };
            let found = answer
                .get("messages")
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
                .find(|m| {
                    m["metadata"]["event_type"] == POST_EVENT_TYPE
                        && m["metadata"]["event_payload"]["key"] == key
                });
            if let Some(m) = found {
                return Ok(m.get("ts").and_then(Value::as_str).map(str::to_owned));
            }
            cursor = answer["response_metadata"]["next_cursor"]
                .as_str()
                .unwrap_or_default()
                .to_owned();
            if cursor.is_empty() || thread_ts.is_none() {
                break;
            }
        }
        Ok(None)
    }

    /// Posts with `key` unless `maybe_posted` and a message with it is
    /// already there; the message's ts either way.
    pub async fn post_once(
        &self,
        channel: &str,
        thread_ts: Option<&str>,
        text: &str,
        blocks: Option<Value>,
        key: &str,
        maybe_posted: bool,
    ) -> Result<String, SlackError> {
        if maybe_posted {
            match self.find_post(channel, thread_ts, key).await {
                Ok(Some(ts)) => {
                    tracing::info!(%key, %ts, "message already posted; not posting it again");
                    return Ok(ts);
                }
                Ok(None) => {}
                // Slack may answer the lookup later: try the post again then.
                Err(e) if e.is_transient() => return Err(e),
                // It never will (a scope missing, no access to the
                // conversation): a lost message is worse than a rare
                // duplicate, so post without the check.
                Err(e) => tracing::warn!(
                    %key,
                    %channel,
                    error = %e,
                    "cannot look for a message already posted (reading conversations needs the \
                     channels:history, groups:history, im:history and mpim:history scopes); \
                     posting without duplicate protection"
                ),
            }
        }
        self.post_message_keyed(channel, thread_ts, text, blocks, key)
            .await
    }

    /// Shows `text` to `user` alone in `channel` (`chat.postEphemeral`), in
    /// the thread `thread_ts` when given. Slack does not keep such a
    /// message; it shows it only if the user is in the conversation.
    pub async fn post_ephemeral(
        &self,
        channel: &str,
        user: &str,
        thread_ts: Option<&str>,
        text: &str,
    ) -> Result<(), SlackError> {
        let mut body = json!({ "channel": channel, "user": user, "text": truncate_text(text) });
        if let Some(ts) = thread_ts {
            body["thread_ts"] = json!(ts);
        }
        self.call("chat.postEphemeral", &body).await.map(drop)
    }

    /// [`SlackClient::post_ephemeral`] with Block Kit `blocks` (`text`
    /// is the notification's fallback).
    pub async fn post_ephemeral_blocks(
        &self,
        channel: &str,
        user: &str,
        thread_ts: Option<&str>,
        text: &str,
        blocks: Value,
    ) -> Result<(), SlackError> {
        let mut body = json!({ "channel": channel, "user": user, "text": truncate_text(text), "blocks": blocks });
        if let Some(ts) = thread_ts {
            body["thread_ts"] = json!(ts);
        }
        self.call("chat.postEphemeral", &body).await.map(drop)
    }

    /// Replaces the text (and blocks, when given) of the message `ts`.
    pub async fn update_message(
        &self,
        channel: &str,
        ts: &str,
        text: &str,
        blocks: Option<Value>,
    ) -> Result<(), SlackError> {
        let mut body = json!({ "channel": channel, "ts": ts, "text": truncate_text(text) });
        if let Some(blocks) = blocks {
            body["blocks"] = blocks;
        }
        self.call("chat.update", &body).await.map(drop)
    }

    /// Shows `status` (e.g. "is thinking…") under the bot in an assistant
    /// thread; `""` clears it. Slack clears it by itself after two minutes or
    /// when the bot replies.
    pub async fn set_thread_status(
        &self,
        channel: &str,
        thread_ts: &str,
        status: &str,
    ) -> Result<(), SlackError> {
        let body = json!({ "channel_id": channel, "thread_ts": thread_ts, "status": status });
        self.call("assistant.threads.setStatus", &body)
            .await
            .map(drop)
    }

    /// Calls any Web API `method` with a JSON body and returns the answer
    /// (`ok: true` already checked), retrying on HTTP 429.
    pub async fn call(&self, method: &str, body: &Value) -> Result<Value, SlackError> {
        let payload = serde_json::to_vec(body).map_err(|e| SlackError::Decode {
            method: method.to_string(),
            message: format!("request body: {e}"),
        })?;
        self.send(method, JSON_UTF8, payload).await
    }

    /// [`call`](Self::call) with a form-encoded body, for the methods that
    /// read (Slack does not take JSON bodies for those).
    pub async fn call_form(
        &self,
        method: &str,
        fields: &[(&str, &str)],
    ) -> Result<Value, SlackError> {
        let payload = serde_urlencoded::to_string(fields).map_err(|e| SlackError::Decode {
            method: method.to_string(),
            message: format!("request body: {e}"),
        })?;
        self.send(method, FORM, payload.into_bytes()).await
    }

    async fn send(
        &self,
        method: &str,
        content_type: &'static str,
        payload: Vec<u8>,
    ) -> Result<Value, SlackError> {
        let url = format!("{}/{}", self.base_url, method);
        let mut attempt = 0u32;
        loop {
            tracing::debug!(method, attempt, "slack web api call");
            let response = self
                .http
                .post(&url)
                .header(AUTHORIZATION, self.auth.clone())
                .header(CONTENT_TYPE, content_type)
                .body(payload.clone())
                .send()
                .await
                .map_err(|source| SlackError::Transport {
                    method: method.to_string(),
                    source: source.without_url(),
                })?;
            let status = response.status();
            if status == StatusCode::TOO_MANY_REQUESTS {
                let retry_after = parse_retry_after(response.headers().get(RETRY_AFTER));
                if attempt >= self.max_retries {
                    tracing::warn!(
                        method,
                        attempts = attempt + 1,
                        "slack rate limited, giving up"
                    );
                    return Err(SlackError::RateLimited { retry_after });
                }
                let wait = retry_after
                    .unwrap_or(FALLBACK_RETRY_AFTER)
                    .min(self.max_retry_wait);
                tracing::info!(
                    method,
                    wait_ms = wait.as_millis() as u64,
                    "slack rate limited, retrying"
                );
                tokio::time::sleep(wait).await;
                attempt += 1;
                continue;
            }
            if !status.is_success() {
                return Err(SlackError::Status {
                    method: method.to_string(),
                    status: status.as_u16(),
                });
            }
            let bytes = response
                .bytes()
                .await
                .map_err(|source| SlackError::Transport {
                    method: method.to_string(),
                    source: source.without_url(),
                })?;
            let answer: Value = serde_json::from_slice(&bytes).map_err(|e| SlackError::Decode {
                method: method.to_string(),
                message: e.to_string(),
            })?;
            return match answer.get("ok").and_then(Value::as_bool) {
                Some(true) => Ok(answer),
                Some(false) => {
                    let code = answer
                        .get("error")
                        .and_then(Value::as_str)
                        .unwrap_or("unknown_error")
                        .to_string();
                    tracing::warn!(method, error = %code, "slack api error");
                    let needed = answer
                        .get("needed")
                        .and_then(Value::as_str)
                        .filter(|n| !n.is_empty())
                        .map(str::to_owned);
                    Err(SlackError::Api {
                        kind: ApiErrorKind::of(&code),
                        code,
                        needed,
                    })
                }
                None => Err(SlackError::Decode {
                    method: method.to_string(),
                    message: "no boolean `ok` field".into(),
                }),
            };
        }
    }
}

/// `Retry-After` in whole seconds (Slack's form); `None` if absent or not a
/// number.
fn parse_retry_after(value: Option<&HeaderValue>) -> Option<Duration> {
    let secs: u64 = value?.to_str().ok()?.trim().parse().ok()?;
    Some(Duration::from_secs(secs))
}

/// Cuts `text` to at most [`MAX_TEXT_CHARS`] characters, marker included.
/// The cut backs off so it does not split an `&amp;`-style entity or a
/// `<url|label>` link, which Slack would show garbled.
pub fn truncate_text(text: &str) -> Cow<'_, str> {
    truncate_to(text, MAX_TEXT_CHARS)
}

fn truncate_to(text: &str, max_chars: usize) -> Cow<'_, str> {
    if text.chars().count() <= max_chars {
        return Cow::Borrowed(text);
    }
    let keep = max_chars.saturating_sub(TRUNCATION_MARKER.chars().count());
    let end = text.char_indices().nth(keep).map_or(text.len(), |(i, _)| i);
    let mut head = &text[..end];
    // An entity is at most `&amp;`-sized; a link is bounded only loosely, so
    // look back a limited distance for an unclosed `<`.
    if let Some(amp) = head.rfind('&') {
        if head.len() - amp < 8 && !head[amp..].contains(';') {
            head = &head[..amp];
        }
    }
    if let Some(lt) = head.rfind('<') {
        if !head[lt..].contains('>') && head.len() - lt < 2048 {
            head = &head[..lt];
        }
    }
    let mut out = String::with_capacity(head.len() + TRUNCATION_MARKER.len());
    out.push_str(head);
    out.push_str(TRUNCATION_MARKER);
    Cow::Owned(out)
}

/// A Web API client for calls made while Slack waits for the ingest's
/// answer: built at its first use (a process that never makes such a call
/// pays nothing at start-up), each call once, without waiting for a rate
/// limit, within `timeout`.
pub(crate) struct QuickClient {
    api_url: String,
    token: BotToken,
    timeout: Duration,
    client: std::sync::OnceLock<Result<SlackClient, String>>,
}

impl QuickClient {
    pub(crate) fn new(api_url: impl Into<String>, token: BotToken, timeout: Duration) -> Self {
        QuickClient {
            api_url: api_url.into(),
            token,
            timeout,
            client: std::sync::OnceLock::new(),
        }
    }

    /// Where it calls (for `Debug`; the token is never shown).
    pub(crate) fn api_url(&self) -> &str {
        &self.api_url
    }

    /// The client, or why it could not be built.
    pub(crate) fn get(&self) -> Result<&SlackClient, &str> {
        self.client
            .get_or_init(|| {
                let http = reqwest::Client::builder()
                    .timeout(self.timeout)
                    .build()
                    .map_err(|e| format!("HTTP client: {e}"))?;
                SlackClient::new(&self.api_url, self.token.clone())
                    .map(|c| {
                        c.with_http_client(http)
                            .with_retry_policy(0, Duration::ZERO)
                    })
                    .map_err(|e| e.to_string())
            })
            .as_ref()
            .map_err(String::as_str)
    }
}
#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::FakeSlack;
    use wiremock::matchers::{body_partial_json, header, method, path};
    use wiremock::{Mock, MockServer, Respond, ResponseTemplate};

    const TOKEN: &str = "xoxb-test-secret-token";

    fn client(base: &str) -> SlackClient {
        SlackClient::new(base, BotToken::new(TOKEN))
            .expect("client")
            .with_retry_policy(3, Duration::from_millis(50))
    }

    #[test]
    fn token_is_redacted_in_debug() {
        let c = client("http://127.0.0.1:1");
        let dbg = format!("{c:?} {:?}", BotToken::new(TOKEN));
        assert!(!dbg.contains(TOKEN), "{dbg}");
        assert!(dbg.contains("redacted"));
    }

    #[test]
    fn bad_config_is_rejected_without_echoing_the_token() {
        let err = SlackClient::new("ftp://x", BotToken::new(TOKEN)).expect_err("bad url");
        assert!(matches!(err, SlackError::Config(_)));
        let err = SlackClient::new("https://slack.com/api", BotToken::new("xoxb-bad\ntoken"))
            .expect_err("bad token");
        assert!(!err.to_string().contains("xoxb-bad"), "{err}");
    }

    #[test]
    fn short_texts_are_untouched() {
        assert!(matches!(truncate_text("hello"), Cow::Borrowed("hello")));
        let exact = "x".repeat(MAX_TEXT_CHARS);
        assert!(matches!(truncate_text(&exact), Cow::Borrowed(_)));
    }

    #[test]
    fn long_texts_are_truncated_with_a_marker() {
        let long = "é".repeat(MAX_TEXT_CHARS + 10);
        let cut = truncate_text(&long);
        assert_eq!(cut.chars().count(), MAX_TEXT_CHARS);
        assert!(cut.ends_with(TRUNCATION_MARKER));
    }

    #[test]
    fn truncation_does_not_split_entities_or_links() {
        let marker = TRUNCATION_MARKER.chars().count();
        // The cut would land inside `&amp;`.
        let text = format!("{}&amp;{}", "a".repeat(10), "t".repeat(100));
        let cut = truncate_to(&text, 12 + marker);
        assert_eq!(cut, format!("{}{TRUNCATION_MARKER}", "a".repeat(10)));
        // ... and inside `<https://...|label>`.
        let text = format!("ab <https://example.com|site> {}", "z".repeat(50));
        let cut = truncate_to(&text, 15 + marker);
        assert_eq!(cut, format!("ab {TRUNCATION_MARKER}"));
    }

    #[tokio::test]
    async fn post_update_and_status_against_fake_slack() {
        let fake = FakeSlack::start().await;
        let c = fake.client();
        let ts = c
            .post_message("C1", None, "hello *world*", None)
            .await
            .expect("post");
        let reply = c
            .post_message(
                "C1",
                Some(&ts),
                "in thread",
                Some(json!([{"type": "section", "text": {"type": "mrkdwn", "text": "hi"}}])),
            )
            .await
            .expect("reply");
        assert_ne!(ts, reply);
        c.update_message("C1", &reply, "edited", None)
            .await
            .expect("update");
        c.set_thread_status("C1", &ts, "is thinking…")
            .await
            .expect("status");

        let posted = fake.posted();
        assert_eq!(posted.len(), 2);
        assert_eq!(posted[0].channel, "C1");
        assert_eq!(posted[0].text, "hello *world*");
        assert_eq!(posted[0].thread_ts, None);
        assert_eq!(posted[1].thread_ts.as_deref(), Some(ts.as_str()));
        assert_eq!(
            posted[1].blocks.as_ref().map(|b| b[0]["type"].clone()),
            Some(json!("section"))
        );
        let updates = fake.calls("chat.update");
        assert_eq!(updates.len(), 1);
        assert_eq!(updates[0]["text"], "edited");
        assert_eq!(
            fake.message("C1", &reply).map(|m| m.text),
            Some("edited".into())
        );
        let status = fake.calls("assistant.threads.setStatus");
        assert_eq!(status[0]["channel_id"], "C1");
        assert_eq!(status[0]["thread_ts"], json!(ts));
        assert_eq!(status[0]["status"], "is thinking…");
    }

    #[tokio::test]
    async fn wrong_token_is_not_authed_error_from_fake() {
        let fake = FakeSlack::start().await;
        let c = SlackClient::new(&fake.base_url(), BotToken::new("xoxb-wrong")).expect("client");
        let err = c
            .post_message("C1", None, "x", None)
            .await
            .expect_err("auth");
        assert!(
            matches!(&err, SlackError::Api { code, .. } if code == "invalid_auth"),
            "{err}"
        );
        assert!(fake.posted().is_empty());
    }

    #[tokio::test]
    async fn fake_errors_surface_as_api_errors() {
        let fake = FakeSlack::start().await;
        let c = fake.client();
        fake.fail_next("chat.postMessage", "channel_not_found");
        let err = c
            .post_message("C404", None, "x", None)
            .await
            .expect_err("fail");
        assert!(matches!(&err, SlackError::Api { code, .. } if code == "channel_not_found"));
        // Only the next call fails.
        c.post_message("C1", None, "x", None).await.expect("ok");
        let err = c
            .update_message("C1", "1.2", "x", None)
            .await
            .expect_err("unknown ts");
        assert!(matches!(&err, SlackError::Api { code, .. } if code == "message_not_found"));
    }

    #[tokio::test]
    async fn fake_rate_limit_is_retried() {
        let fake = FakeSlack::start().await;
        let c = fake.client();
        fake.rate_limit_next("chat.postMessage", 0);
        fake.rate_limit_next("chat.postMessage", 0);
        c.post_message("C1", None, "after retries", None)
            .await
            .expect("post");
        assert_eq!(fake.posted().len(), 1);
    }

    #[tokio::test]
    async fn sends_bearer_token_and_json_charset() {
        let server = MockServer::start().await;
        Mock::given(method("POST"))
            .and(path("/chat.postMessage"))
            .and(header("authorization", format!("Bearer {TOKEN}").as_str()))
            .and(header("content-type", "application/json; charset=utf-8"))
            .and(body_partial_json(
                json!({"channel": "C9", "thread_ts": "1.1", "text": "hi"}),
            ))
            .respond_with(
                ResponseTemplate::new(200)
                    .set_body_json(json!({"ok": true, "channel": "C9", "ts": "1700.0001"})),
            )
            .expect(1)
            .mount(&server)
            .await;
        let ts = client(&server.uri())
            .post_message("C9", Some("1.1"), "hi", None)
            .await
            .expect("post");
        assert_eq!(ts, "1700.0001");
    }

    #[tokio::test]
    async fn ok_false_is_an_api_error() {
        let server = MockServer::start().await;
        Mock::given(method("POST"))
            .and(path("/chat.update"))
            .respond_with(
                ResponseTemplate::new(200)
                    .set_body_json(json!({"ok": false, "error": "cant_update_message"})),
            )
            .mount(&server)
            .await;
        let err = client(&server.uri())
            .update_message("C1", "1.1", "x", None)
            .await
            .expect_err("api error");
        assert!(matches!(&err, SlackError::Api { code, .. } if code == "cant_update_message"));
        assert!(!err.to_string().contains(TOKEN));
    }

    /// 429 with `Retry-After: 0` for the first `n` requests, then success.
    struct RateLimitThenOk {
        remaining: std::sync::atomic::AtomicUsize,
    }

    impl Respond for RateLimitThenOk {
        fn respond(&self, _: &wiremock::Request) -> ResponseTemplate {
            use std::sync::atomic::Ordering;
            let left = self.remaining.load(Ordering::SeqCst);
            if left > 0 {
                self.remaining.store(left - 1, Ordering::SeqCst);
                ResponseTemplate::new(429).insert_header("Retry-After", "0")
            } else {
                ResponseTemplate::new(200).set_body_json(json!({"ok": true, "ts": "9.9"}))
            }
        }
    }

    #[tokio::test]
    async fn rate_limit_is_retried_then_succeeds() {
        let server = MockServer::start().await;
        Mock::given(method("POST"))
            .and(path("/chat.postMessage"))
            .respond_with(RateLimitThenOk {
                remaining: 3.into(),
            })
            .expect(4)
            .mount(&server)
            .await;
        let ts = client(&server.uri())
            .post_message("C1", None, "x", None)
            .await
            .expect("succeeds on the 4th attempt");
        assert_eq!(ts, "9.9");
    }

    #[tokio::test]
    async fn persistent_rate_limit_gives_up_after_three_retries() {
        let server = MockServer::start().await;
        Mock::given(method("POST"))
            .and(path("/chat.postMessage"))
            .respond_with(ResponseTemplate::new(429).insert_header("Retry-After", "7"))
            .expect(4)
            .mount(&server)
            .await;
        let started = std::time::Instant::now();
        let err = client(&server.uri())
            .post_message("C1", None, "x", None)
            .await
            .expect_err("rate limited");
        assert!(
            matches!(err, SlackError::RateLimited { retry_after: Some(d) } if d == Duration::from_secs(7))
        );
        // Each 7 s wait was capped at the configured 50 ms.
        assert!(started.elapsed() < Duration::from_secs(5));
    }

    #[tokio::test]
    async fn other_statuses_and_bodies_are_errors() {
        let server = MockServer::start().await;
        Mock::given(path("/chat.postMessage"))
            .respond_with(ResponseTemplate::new(500))
            .mount(&server)
            .await;
        Mock::given(path("/chat.update"))
            .respond_with(ResponseTemplate::new(200).set_body_string("<html>"))
            .mount(&server)
            .await;
        Mock::given(path("/assistant.threads.setStatus"))
            .respond_with(ResponseTemplate::new(200).set_body_json(json!({"ts": "1"})))
            .mount(&server)
            .await;
        let c = client(&server.uri());
        assert!(matches!(
            c.post_message("C1", None, "x", None).await,
            Err(SlackError::Status { status: 500, .. })
        ));
        assert!(matches!(
            c.update_message("C1", "1", "x", None).await,
            Err(SlackError::Decode { .. })
        ));
        assert!(matches!(
            c.set_thread_status("C1", "1", "x").await,
            Err(SlackError::Decode { .. })
        ));
    }

    #[tokio::test]
    async fn long_text_is_truncated_on_the_wire() {
        let fake = FakeSlack::start().await;
        let long = "y".repeat(MAX_TEXT_CHARS * 2);
        fake.client()
            .post_message("C1", None, &long, None)
            .await
            .expect("post");
        let posted = fake.posted();
        assert_eq!(posted[0].text.chars().count(), MAX_TEXT_CHARS);
        assert!(posted[0].text.ends_with(TRUNCATION_MARKER));
    }

    #[test]
    fn slack_error_codes_are_read_into_kinds() {
        for (code, kind) in [
            ("missing_scope", ApiErrorKind::App),
            ("invalid_auth", ApiErrorKind::App),
            ("not_in_channel", ApiErrorKind::Conversation),
            ("channel_not_found", ApiErrorKind::Conversation),
            ("ratelimited", ApiErrorKind::Transient),
            ("internal_error", ApiErrorKind::Transient),
            ("invalid_arguments", ApiErrorKind::Other),
            ("message_not_in_streaming_state", ApiErrorKind::NotStreaming),
        ] {
            assert_eq!(ApiErrorKind::of(code), kind, "{code}");
            let transient = kind == ApiErrorKind::Transient;
            assert_eq!(SlackError::api(code).is_transient(), transient, "{code}");
        }
        let status = |status| SlackError::Status {
            method: "m".into(),
            status,
        };
        assert!(status(503).is_transient());
        assert!(!status(404).is_transient());
        assert!(SlackError::RateLimited { retry_after: None }.is_transient());
        assert!(!SlackError::Config("x".into()).is_transient());
    }

    #[tokio::test]
    async fn a_missing_scope_is_typed_and_names_the_scopes() {
        let fake = FakeSlack::start().await;
        fake.fail_always("conversations.replies", "missing_scope");
        let err = fake
            .client()
            .find_post("C1", Some("1.0"), "k")
            .await
            .expect_err("no history scope");
        let SlackError::Api { kind, needed, .. } = &err else {
            panic!("expected an API error, got {err:?}");
        };
        assert_eq!(*kind, ApiErrorKind::App);
        assert!(needed
            .as_deref()
            .is_some_and(|n| n.contains("channels:history")));
        assert!(err.to_string().contains("channels:history"), "{err}");
        assert!(!err.is_transient());
    }

    #[tokio::test]
    async fn a_lookup_slack_refuses_for_good_does_not_stop_the_post() {
        let fake = FakeSlack::start().await;
        let c = fake.client();
        // A message was posted, the record of it was lost, and the app
        // cannot read the conversation: post again (a duplicate rather
        // than no message at all).
        let first = c
            .post_once("C1", Some("1.0"), "answer", None, "task:answer:1", false)
            .await
            .expect("post");
        fake.fail_always("conversations.replies", "missing_scope");
        let again = c
            .post_once("C1", Some("1.0"), "answer", None, "task:answer:1", true)
            .await
            .expect("posted without the lookup");
        assert_ne!(first, again);
        assert_eq!(fake.posted().len(), 2);
        assert!(fake.calls("conversations.replies").is_empty());
        // Any other refusal of the lookup is treated the same.
        fake.stop_failing("conversations.replies");
        fake.fail_next("conversations.history", "not_in_channel");
        c.post_once("C2", None, "notice", None, "task:ended", true)
            .await
            .expect("posted without the lookup");
        assert_eq!(fake.posted().len(), 3);
    }

    #[tokio::test]
    async fn a_lookup_that_fails_for_now_fails_the_post_for_a_retry() {
        let fake = FakeSlack::start().await;
        let c = fake
            .client()
            .with_retry_policy(1, Duration::from_millis(10));
        fake.rate_limit_next("conversations.replies", 0);
        fake.rate_limit_next("conversations.replies", 0);
        let err = c
            .post_once("C1", Some("1.0"), "answer", None, "task:answer:1", true)
            .await
            .expect_err("rate limited");
        assert!(err.is_transient(), "{err}");
        fake.fail_next("conversations.replies", "internal_error");
        let err = c
            .post_once("C1", Some("1.0"), "answer", None, "task:answer:1", true)
            .await
            .expect_err("slack trouble");
        assert!(err.is_transient(), "{err}");
        assert!(fake.posted().is_empty(), "nothing posted unchecked");
        // Once Slack answers, the post goes out (once).
        c.post_once("C1", Some("1.0"), "answer", None, "task:answer:1", true)
            .await
            .expect("post");
        c.post_once("C1", Some("1.0"), "answer", None, "task:answer:1", true)
            .await
            .expect("found");
        assert_eq!(fake.posted().len(), 1);
    }

    #[tokio::test]
    async fn transport_errors_do_not_leak_the_token() {
        // Nothing listens on port 1.
        let err = client("http://127.0.0.1:1")
            .post_message("C1", None, "x", None)
            .await
            .expect_err("no server");
        assert!(matches!(err, SlackError::Transport { .. }));
        assert!(!format!("{err} {err:?}").contains(TOKEN));
    }
}
