//! HTTP plumbing shared by the providers: sending a JSON request and mapping
//! the provider's HTTP answer to [`LlmError`].

use crate::secret::Secret;
use baton_core::CompletionRequest;
use baton_core::LlmError;
use reqwest::header::HeaderMap;
use serde::de::DeserializeOwned;
use serde::Serialize;
use std::time::{Duration, SystemTime};

/// Longest provider error text kept in an error message.
const MAX_ERROR_TEXT: usize = 500;

/// The longest wait for the next piece of a streamed answer: a model
/// writing sends something every few seconds at worst (Anthropic pings),
/// so a minute of silence is a stalled connection.
pub(crate) const DEFAULT_IDLE_TIMEOUT: Duration = Duration::from_secs(60);

/// The model a request asks for, else the provider's default.
pub(crate) fn pick_model<'a>(
    request: &'a CompletionRequest,
    default: &'a str,
) -> Result<&'a str, LlmError> {
    let model = if request.model.is_empty() {
        default
    } else {
        request.model.as_str()
    };
    if model.is_empty() {
        return Err(LlmError::Config("no model configured".into()));
    }
    Ok(model)
}

/// Builds the HTTP client the providers share.
pub(crate) fn build_client() -> Result<reqwest::Client, LlmError> {
    reqwest::Client::builder()
        .connect_timeout(Duration::from_secs(10))
        .build()
        .map_err(|e| LlmError::Config(format!("cannot build the HTTP client: {}", describe(&e))))
}

/// Checks a base URL and strips its trailing slashes.
pub(crate) fn normalize_base_url(base: &str) -> Result<String, LlmError> {
    let trimmed = base.trim().trim_end_matches('/');
    let url = reqwest::Url::parse(trimmed)
        .map_err(|e| LlmError::Config(format!("invalid base URL: {e}")))?;
    if url.scheme() != "http" && url.scheme() != "https" {
        return Err(LlmError::Config(format!(
            "base URL must be http or https, got {}",
            url.scheme()
        )));
    }
    Ok(trimmed.to_string())
}

/// POSTs `body` and returns the decoded answer, or the mapped error.
/// `key` is only used to scrub the provider's error text;
/// `is_context_overflow` is the provider's reading of a refusal's body and
/// text ([`overflowed`]).
pub(crate) async fn post_json<B, R>(
    request: reqwest::RequestBuilder,
    body: &B,
    timeout: Duration,
    key: Option<&Secret>,
    is_context_overflow: fn(&[u8], &str) -> bool,
) -> Result<R, LlmError>
where
    B: Serialize + ?Sized,
    R: DeserializeOwned,
{
    let answer = send(request.json(body), timeout, key).await?;
    if !(200..300).contains(&answer.status) {
        let error = map_error(answer.status, &answer.headers, &answer.body, key);
        return Err(overflowed(error, &answer.body, is_context_overflow));
    }
    decode_json(&answer.body)
}

/// A refusal the provider's `is_context_overflow` recognises (from the
/// error body and the error text) as a request too long for the model's
/// context window becomes [`LlmError::ContextOverflow`], with the same
/// status and text.
pub(crate) fn overflowed(
    error: LlmError,
    body: &[u8],
    is_context_overflow: fn(&[u8], &str) -> bool,
) -> LlmError {
    match error {
        LlmError::Rejected { status, message } if is_context_overflow(body, &message) => {
            LlmError::ContextOverflow { status, message }
        }
        other => other,
    }
}

/// A provider's HTTP answer, whatever its status.
pub(crate) struct Answer {
    pub status: u16,
    pub headers: HeaderMap,
    pub body: Vec<u8>,
}

/// Sends a ready request (body included) and reads the whole answer;
/// only a failure to talk to the server is an error here.
pub(crate) async fn send(
    request: reqwest::RequestBuilder,
    timeout: Duration,
    key: Option<&Secret>,
) -> Result<Answer, LlmError> {
    let response = request
        .timeout(timeout)
        .send()
        .await
        .map_err(|e| LlmError::Transport(scrub(describe(&e), key)))?;
    let status = response.status().as_u16();
    let headers = response.headers().clone();
    let body = response
        .bytes()
        .await
        .map_err(|e| LlmError::Transport(scrub(describe(&e), key)))?
        .to_vec();
    Ok(Answer {
        status,
        headers,
        body,
    })
}

/// A streamed answer's body, read piece by piece: each piece must come
/// within the idle timeout (the whole-request timeout set when it was
/// sent still bounds the lot).
pub(crate) struct Chunks {
    response: reqwest::Response,
    idle: Duration,
    key: Option<Secret>,
}

impl Chunks {
    /// The next piece of the body, `None` at its end. A broken connection
    /// and a server gone quiet are transient failures.
    pub(crate) async fn next(&mut self) -> Result<Option<bytes::Bytes>, LlmError> {
        match tokio::time::timeout(self.idle, self.response.chunk()).await {
            Ok(Ok(chunk)) => Ok(chunk),
            Ok(Err(e)) => Err(LlmError::Transport(scrub(
                format!("the answer's stream broke: {}", describe(&e)),
                self.key.as_ref(),
            ))),
            Err(_) => Err(LlmError::Transport(format!(
                "the answer's stream stalled: nothing for {} ms",
                self.idle.as_millis()
            ))),
        }
    }

    /// The answer's `content-type`, lower-cased.
    pub(crate) fn content_type(&self) -> String {
        self.response
            .headers()
            .get(reqwest::header::CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .unwrap_or_default()
            .to_ascii_lowercase()
    }

    /// The rest of the body at once (an answer that did not stream).
    pub(crate) async fn rest(self) -> Result<Vec<u8>, LlmError> {
        let key = self.key;
        self.response
            .bytes()
            .await
            .map(|b| b.to_vec())
            .map_err(|e| LlmError::Transport(scrub(describe(&e), key.as_ref())))
    }
}

/// What opening a stream gave: the body to read, or a refusal (read whole).
pub(crate) enum Opened {
    Streaming(Chunks),
    Refused(Answer),
}

/// Sends a ready request whose answer streams. A 2xx answer's body is
/// left to read ([`Chunks`], at most `idle` between pieces); any other is
/// read whole, to be mapped to an error.
pub(crate) async fn open_stream(
    request: reqwest::RequestBuilder,
    timeout: Duration,
    idle: Duration,
    key: Option<&Secret>,
) -> Result<Opened, LlmError> {
    let response = request
        .timeout(timeout)
        .send()
        .await
        .map_err(|e| LlmError::Transport(scrub(describe(&e), key)))?;
    let status = response.status().as_u16();
    if (200..300).contains(&status) {
        return Ok(Opened::Streaming(Chunks {
            response,
            idle,
            key: key.cloned(),
        }));
    }
    let headers = response.headers().clone();
    let body = response
        .bytes()
        .await
        .map_err(|e| LlmError::Transport(scrub(describe(&e), key)))?
        .to_vec();
    Ok(Opened::Refused(Answer {
        status,
        headers,
        body,
    }))
}

/// [`open_stream`] for the APIs whose refusals are JSON error bodies
/// (OpenAI, Anthropic): a refusal is mapped as [`post_json`] maps it.
pub(crate) async fn open_json_stream<B: Serialize + ?Sized>(
    request: reqwest::RequestBuilder,
    body: &B,
    timeout: Duration,
    idle: Duration,
    key: Option<&Secret>,
    is_context_overflow: fn(&[u8], &str) -> bool,
) -> Result<Chunks, LlmError> {
    match open_stream(request.json(body), timeout, idle, key).await? {
        Opened::Streaming(chunks) => Ok(chunks),
        Opened::Refused(answer) => {
            let error = map_error(answer.status, &answer.headers, &answer.body, key);
            Err(overflowed(error, &answer.body, is_context_overflow))
        }
    }
}

/// The stream ended before the answer did: transient, like a dropped
/// connection.
pub(crate) fn cut_short() -> LlmError {
    LlmError::Transport("the answer's stream ended before the answer did".into())
}

/// An error the provider reported inside a stream, after its 2xx status:
/// mapped as the same error body would be with `status`, the HTTP status
/// the provider gives that error type outside a stream.
pub(crate) fn stream_error(
    status: u16,
    body: &[u8],
    key: Option<&Secret>,
    is_context_overflow: fn(&[u8], &str) -> bool,
) -> LlmError {
    let error = map_error(status, &HeaderMap::new(), body, key);
    overflowed(error, body, is_context_overflow)
}

/// A successful answer's body, typed: text that is not JSON and JSON of
/// another shape are both undecodable answers, told apart.
pub(crate) fn decode_json<R: DeserializeOwned>(body: &[u8]) -> Result<R, LlmError> {
    serde_json::from_slice(body).map_err(|e| match e.classify() {
        serde_json::error::Category::Data => LlmError::Decode(format!("unexpected JSON: {e}")),
        _ => LlmError::Decode(format!("invalid JSON: {e}")),
    })
}

fn scrub(text: String, key: Option<&Secret>) -> String {
    match key {
        Some(k) => k.redact_in(&text),
        None => text,
    }
}

/// An error with its chain of causes, which is where reqwest puts the
/// useful part ("connection refused", "operation timed out").
pub(crate) fn describe(e: &dyn std::error::Error) -> String {
    let mut out = e.to_string();
    let mut source = e.source();
    while let Some(s) = source {
        let text = s.to_string();
        if !out.contains(&text) {
            out.push_str(": ");
            out.push_str(&text);
        }
        source = s.source();
    }
    out
}

/// Maps a non-2xx answer to an [`LlmError`]. Works for both OpenAI and
/// Anthropic error bodies (`{"error": {"type", "message"}}`).
pub(crate) fn map_error(
    status: u16,
    headers: &HeaderMap,
    body: &[u8],
    key: Option<&Secret>,
) -> LlmError {
    let retry_after = parse_retry_after(headers, SystemTime::now());
    let (kind, message) = error_text(status, body);
    let message = scrub(message, key);
    if status == 429 {
        LlmError::RateLimited { retry_after }
    } else if status == 529 || kind.as_deref() == Some("overloaded_error") {
        LlmError::Overloaded { retry_after }
    } else if status >= 500 || status == 408 {
        // 408 (request timeout) is transient too; the official SDKs retry it.
        LlmError::Server {
            status,
            message,
            retry_after,
        }
    } else {
        LlmError::Rejected { status, message }
    }
}

/// The error type and message from the provider's error JSON, or a short
/// excerpt of the body when it is not JSON. AWS services answer
/// `{"message": …}` or `{"Message": …}`.
pub(crate) fn error_text(status: u16, body: &[u8]) -> (Option<String>, String) {
    if let Ok(v) = serde_json::from_slice::<serde_json::Value>(body) {
        let err = v.get("error").unwrap_or(&v);
        let kind = err.get("type").and_then(|t| t.as_str()).map(str::to_string);
        let message = err
            .get("message")
            .and_then(|m| m.as_str())
            .or_else(|| err.as_str())
            .or_else(|| v.get("message").and_then(|m| m.as_str()))
            .or_else(|| v.get("Message").and_then(|m| m.as_str()));
        if let Some(m) = message {
            return (kind, truncate(m, MAX_ERROR_TEXT));
        }
        if let Some(k) = &kind {
            return (kind.clone(), k.clone());
        }
    }
    let text = String::from_utf8_lossy(body);
    let text = text.trim();
    if text.is_empty() {
        (None, format!("HTTP {status} with an empty body"))
    } else {
        (None, truncate(text, MAX_ERROR_TEXT))
    }
}

/// At most `max` characters of `s`, with an ellipsis when cut.
pub(crate) fn truncate(s: &str, max: usize) -> String {
    match s.char_indices().nth(max) {
        Some((i, _)) => format!("{}…", &s[..i]),
        None => s.to_string(),
    }
}

/// The wait a provider asked for: `retry-after-ms` (OpenAI), else
/// `retry-after` in seconds or as an HTTP-date.
pub(crate) fn parse_retry_after(headers: &HeaderMap, now: SystemTime) -> Option<Duration> {
    let value = |name: &str| {
        headers
            .get(name)
            .and_then(|v| v.to_str().ok())
            .map(str::trim)
    };
    if let Some(ms) = value("retry-after-ms").and_then(|v| v.parse::<f64>().ok()) {
        if ms.is_finite() && ms >= 0.0 {
            return Duration::try_from_secs_f64(ms / 1000.0).ok();
        }
    }
    let raw = value("retry-after")?;
    if let Ok(secs) = raw.parse::<f64>() {
        return Duration::try_from_secs_f64(secs).ok();
    }
    // HTTP-date (IMF-fixdate), e.g. "Wed, 21 Oct 2015 07:28:00 GMT".
    let date = chrono::DateTime::parse_from_rfc2822(raw).ok()?;
    let at = SystemTime::from(date.with_timezone(&chrono::Utc));
    Some(at.duration_since(now).unwrap_or(Duration::ZERO))
}

#[cfg(test)]
mod tests {
    use super::*;
    use reqwest::header::HeaderValue;

    fn headers(pairs: &[(&'static str, &str)]) -> HeaderMap {
        let mut h = HeaderMap::new();
        for (k, v) in pairs {
            h.insert(*k, HeaderValue::from_str(v).unwrap());
        }
        h
    }

    #[test]
    fn retry_after_seconds_ms_and_date() {
        let now = SystemTime::now();
        // Absurd values never panic; those beyond any duration are ignored.
        for huge in ["1e20", "1e300", "-1", "NaN", "inf"] {
            assert_eq!(
                parse_retry_after(&headers(&[("retry-after", huge)]), now),
                None,
                "{huge}"
            );
            let _ = parse_retry_after(&headers(&[("retry-after-ms", huge)]), now);
        }
        assert_eq!(
            parse_retry_after(&headers(&[("retry-after", "3")]), now),
            Some(Duration::from_secs(3))
        );
        assert_eq!(
            parse_retry_after(
                &headers(&[("retry-after", "3"), ("retry-after-ms", "250")]),
                now
            ),
            Some(Duration::from_millis(250))
        );
        let then = chrono::DateTime::parse_from_rfc2822("Wed, 21 Oct 2015 07:28:00 GMT").unwrap();
        let now = SystemTime::from(then.with_timezone(&chrono::Utc)) - Duration::from_secs(7);
        assert_eq!(
            parse_retry_after(
                &headers(&[("retry-after", "Wed, 21 Oct 2015 07:28:00 GMT")]),
                now
            ),
            Some(Duration::from_secs(7))
        );
        // A date in the past means "now".
        assert_eq!(
            parse_retry_after(
                &headers(&[("retry-after", "Wed, 21 Oct 2015 07:28:00 GMT")]),
                SystemTime::now()
            ),
            Some(Duration::ZERO)
        );
        assert_eq!(
            parse_retry_after(&headers(&[("retry-after", "soon")]), now),
            None
        );
        assert_eq!(
            parse_retry_after(&headers(&[("retry-after", "-1")]), now),
            None
        );
        assert_eq!(parse_retry_after(&HeaderMap::new(), now), None);
    }

    #[test]
    fn statuses_map_to_error_kinds() {
        let h = headers(&[("retry-after", "2")]);
        assert_eq!(
            map_error(429, &h, b"{}", None),
            LlmError::RateLimited {
                retry_after: Some(Duration::from_secs(2))
            }
        );
        assert_eq!(
            map_error(529, &HeaderMap::new(), b"", None),
            LlmError::Overloaded { retry_after: None }
        );
        let overloaded =
            br#"{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}"#;
        assert_eq!(
            map_error(503, &HeaderMap::new(), overloaded, None),
            LlmError::Overloaded { retry_after: None }
        );
        assert_eq!(
            map_error(500, &HeaderMap::new(), b"<html>oops</html>", None),
            LlmError::Server {
                status: 500,
                message: "<html>oops</html>".into(),
                retry_after: None
            }
        );
        let bad =
            br#"{"error":{"message":"max_tokens is too large","type":"invalid_request_error"}}"#;
        assert_eq!(
            map_error(400, &HeaderMap::new(), bad, None),
            LlmError::Rejected {
                status: 400,
                message: "max_tokens is too large".into()
            }
        );
        assert_eq!(
            map_error(404, &HeaderMap::new(), b"", None),
            LlmError::Rejected {
                status: 404,
                message: "HTTP 404 with an empty body".into()
            }
        );
    }

    #[test]
    fn error_text_never_repeats_the_key() {
        let key = Secret::new("sk-secret-123456");
        let body = br#"{"error":{"message":"Incorrect API key provided: sk-secret-123456"}}"#;
        let err = map_error(401, &HeaderMap::new(), body, Some(&key));
        assert!(!err.to_string().contains("sk-secret-123456"), "{err}");
    }

    #[test]
    fn long_error_text_is_cut() {
        let body = "x".repeat(2000);
        match map_error(502, &HeaderMap::new(), body.as_bytes(), None) {
            LlmError::Server { message, .. } => {
                assert!(message.chars().count() <= MAX_ERROR_TEXT + 1)
            }
            other => panic!("unexpected {other:?}"),
        }
    }
}
