//! The `http_request` tool: one HTTP(S) request on the model's behalf,
//! guarded against server-side request forgery.

use crate::args::{input_schema, parse_args};
use crate::guard::{vet, AllowList, Refusal, Vetted};
use crate::redact::{is_sensitive_name, redact_url};
use async_trait::async_trait;
use baton_core::{Tool, ToolContext, ToolOutput, ToolSpec};
use reqwest::header::{self, HeaderMap, HeaderName, HeaderValue};
use reqwest::{Method, StatusCode};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::fmt;
use std::time::Duration;
use url::Url;

/// The tool's name as the model sees it.
pub const HTTP_REQUEST: &str = baton_core::tool_names::HTTP_REQUEST;

const USER_AGENT: &str = concat!("baton-http-request/", env!("CARGO_PKG_VERSION"));

/// Response headers worth showing the model.
const SHOWN_HEADERS: &[&str] = &["content-type", "content-length", "location", "retry-after"];

/// An HTTP method the tool supports.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "UPPERCASE")]
#[schemars(inline)]
pub enum HttpMethod {
    #[default]
    #[serde(alias = "get")]
    Get,
    #[serde(alias = "head")]
    Head,
    #[serde(alias = "post")]
    Post,
    #[serde(alias = "put")]
    Put,
    #[serde(alias = "patch")]
    Patch,
    #[serde(alias = "delete")]
    Delete,
}

impl HttpMethod {
    /// GET and HEAD: repeating them is harmless, so the agent loop may re-run
    /// such a call after a crash.
    pub fn is_safe(self) -> bool {
        matches!(self, HttpMethod::Get | HttpMethod::Head)
    }

    /// The method as sent on the wire.
    pub fn as_str(self) -> &'static str {
        match self {
            HttpMethod::Get => "GET",
            HttpMethod::Head => "HEAD",
            HttpMethod::Post => "POST",
            HttpMethod::Put => "PUT",
            HttpMethod::Patch => "PATCH",
            HttpMethod::Delete => "DELETE",
        }
    }

    pub(crate) fn to_reqwest(self) -> Method {
        match self {
            HttpMethod::Get => Method::GET,
            HttpMethod::Head => Method::HEAD,
            HttpMethod::Post => Method::POST,
            HttpMethod::Put => Method::PUT,
            HttpMethod::Patch => Method::PATCH,
            HttpMethod::Delete => Method::DELETE,
        }
    }
}

impl fmt::Display for HttpMethod {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Arguments of `http_request`.
#[derive(Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct HttpRequestArgs {
    /// HTTP method. Defaults to GET.
    #[serde(default)]
    pub method: HttpMethod,
    /// Absolute http:// or https:// URL to request.
    pub url: String,
    /// Request headers, name to value (e.g. {"Accept": "application/json"}).
    /// Set Content-Type when sending a body.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub headers: Option<BTreeMap<String, String>>,
    /// Request body, sent as is.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub body: Option<String>,
}

/// Redacts credential-looking header values and shows only the body's size,
/// so arguments can be logged.
impl fmt::Debug for HttpRequestArgs {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let headers = self.headers.as_ref().map(|h| {
            h.iter()
                .map(|(k, v)| {
                    let v = if is_sensitive_name(k) {
                        "<redacted>"
                    } else {
                        v.as_str()
                    };
                    (k.as_str(), v)
                })
                .collect::<BTreeMap<_, _>>()
        });
        f.debug_struct("HttpRequestArgs")
            .field("method", &self.method)
            .field(
                "url",
                &Url::parse(&self.url).map_or_else(|_| self.url.clone(), |u| redact_url(&u)),
            )
            .field("headers", &headers)
            .field("body_len", &self.body.as_ref().map(String::len))
            .finish()
    }
}

/// `http_request`'s arguments as the request is made of them
/// ([`Tool::normalise`]): the method upper-cased (GET when none), the URL
/// parsed and written back as the `url` crate (and so the client) reads
/// it. Arguments the tool would refuse stay as they are.
fn normalised(arguments: serde_json::Value) -> serde_json::Value {
    let Ok(mut args) = parse_args::<HttpRequestArgs>(HTTP_REQUEST, arguments.clone()) else {
        return arguments;
    };
    if let Ok(url) = Url::parse(&args.url) {
        args.url = url.to_string();
    }
    serde_json::to_value(args).unwrap_or(arguments)
}

/// Limits and reach of `http_request`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct HttpConfig {
    /// Non-public `host:port` pairs that may be reached anyway.
    pub allow: AllowList,
    /// Whole-call deadline: resolution, every redirect hop and the body.
    pub timeout: Duration,
    /// Response body bytes kept; the rest is cut with a marker.
    pub max_body_bytes: usize,
    /// Redirects followed before giving up.
    pub max_redirects: usize,
}

impl Default for HttpConfig {
    fn default() -> Self {
        HttpConfig {
            allow: AllowList::default(),
            timeout: Duration::from_secs(30),
            max_body_bytes: 256 * 1024,
            max_redirects: 5,
        }
    }
}

/// The `http_request` tool. See the crate docs for its guarantees.
#[derive(Clone, Debug, Default)]
pub struct HttpRequestTool {
    config: HttpConfig,
}

/// Why a request did not produce a response; shown to the model as is, so
/// it never contains header values and shows URLs redacted.
#[derive(Debug, thiserror::Error)]
enum RequestError {
    #[error("invalid url: {0}")]
    InvalidUrl(#[from] url::ParseError),
    #[error("invalid header name `{0}`")]
    HeaderName(String),
    #[error("invalid value for header `{0}` (must be visible ASCII or UTF-8 without control characters)")]
    HeaderValue(String),
    #[error("header `{0}` is managed by the HTTP client and cannot be set")]
    ReservedHeader(String),
    #[error("request to {url} {refusal}")]
    Refused { url: String, refusal: Refusal },
    #[error("redirect to {url} {refusal}")]
    RedirectRefused { url: String, refusal: Refusal },
    #[error("too many redirects (more than {0})")]
    TooManyRedirects(usize),
    #[error("redirect from {0} has an invalid Location header")]
    BadLocation(String),
    #[error("request to {url} failed: {reason}")]
    Transport { url: String, reason: String },
    #[error("could not build the HTTP client: {0}")]
    Client(String),
    /// A host outside the agent's `http_request.allow_hosts` (first hop or
    /// a redirect): the text names the host and the allowed patterns.
    #[error("{0}")]
    HostNotAllowed(String),
}

impl HttpRequestTool {
    /// The tool with default limits (30 s, 256 KiB, 5 redirects).
    pub fn new(allow: AllowList) -> Self {
        HttpRequestTool::with_config(HttpConfig {
            allow,
            ..HttpConfig::default()
        })
    }

    /// The tool with explicit limits.
    pub fn with_config(config: HttpConfig) -> Self {
        HttpRequestTool { config }
    }

    /// The limits in force.
    pub fn config(&self) -> &HttpConfig {
        &self.config
    }

    /// A client that connects only to the vetted addresses and follows no
    /// redirects (they are vetted hop by hop). No proxy either: a proxy
    /// would resolve the name again, out of our sight.
    fn client_for(&self, vetted: &Vetted) -> Result<reqwest::Client, RequestError> {
        let mut builder = reqwest::Client::builder()
            .redirect(reqwest::redirect::Policy::none())
            .no_proxy()
            .timeout(self.config.timeout)
            .connect_timeout(self.config.timeout.min(Duration::from_secs(10)))
            .user_agent(USER_AGENT);
        if let Some(domain) = &vetted.domain {
            builder = builder.resolve_to_addrs(domain, &vetted.addrs);
        }
        builder
            .build()
            .map_err(|e| RequestError::Client(error_chain(&e)))
    }

    async fn run(&self, args: HttpRequestArgs, ctx: &ToolContext) -> Result<String, RequestError> {
        let mut url = Url::parse(args.url.trim())?;
        let mut headers = request_headers(args.headers.as_ref())?;
        let idempotency_key = HeaderValue::from_str(&ctx.idempotency_key)
            .map_err(|_| RequestError::HeaderValue("Idempotency-Key".into()))?;
        headers.insert("idempotency-key", idempotency_key.clone());
        let method = args.method;
        let mut body = args.body;
        let mut redirects = 0usize;
        loop {
            if let Some(allowed) = &ctx.allowed_hosts {
                let host = url.host_str().unwrap_or_default().trim_matches(['[', ']']);
                if !allowed.allows(host) {
                    let why = allowed.refusal(host);
                    return Err(RequestError::HostNotAllowed(if redirects == 0 {
                        why
                    } else {
                        format!("the redirect to {}: {why}", redact_url(&url))
                    }));
                }
            }
            let vetted = vet(&url, &self.config.allow).await.map_err(|refusal| {
                let url = redact_url(&url);
                if redirects == 0 {
                    RequestError::Refused { url, refusal }
                } else {
                    RequestError::RedirectRefused { url, refusal }
                }
            })?;
            let header_names: Vec<&str> = headers.keys().map(HeaderName::as_str).collect();
            tracing::info!(
                tool = HTTP_REQUEST,
                method = method.as_str(),
                url = %redact_url(&url),
                headers = ?header_names,
                redirects,
                "sending request"
            );
            let client = self.client_for(&vetted)?;
            let mut request = client
                .request(method.to_reqwest(), url.clone())
                .headers(headers.clone());
            if let Some(body) = &body {
                request = request.body(body.clone());
            }
            let response = request.send().await.map_err(|e| RequestError::Transport {
                url: redact_url(&url),
                reason: error_chain(&e),
            })?;
            let status = response.status();
            let location = response.headers().get(header::LOCATION).cloned();
            // Only GET and HEAD follow: a person approved any other call for
            // its URL, and a redirect must not take its method and body (or
            // even a GET it turns into) somewhere nobody approved. Such a
            // call answers with the redirect itself, status and `location`,
            // and the model may ask for the new URL in a call of its own.
            let follow = method.is_safe() && is_followed_redirect(status);
            let Some(location) = location.filter(|_| follow) else {
                return self.render(response, method, &url, redirects).await;
            };
            if redirects >= self.config.max_redirects {
                return Err(RequestError::TooManyRedirects(self.config.max_redirects));
            }
            let next = location
                .to_str()
                .ok()
                .and_then(|l| url.join(l).ok())
                .ok_or_else(|| RequestError::BadLocation(redact_url(&url)))?;
            redirects += 1;
            if status == StatusCode::SEE_OTHER {
                // "See other" names a resource to read, not one to send
                // the body to.
                body = None;
                headers.remove(header::CONTENT_TYPE);
                headers.remove(header::CONTENT_ENCODING);
            }
            if next.origin() != url.origin() {
                // Credentials were meant for the original origin only.
                let sensitive: Vec<HeaderName> = headers
                    .keys()
                    .filter(|n| is_sensitive_name(n.as_str()))
                    .cloned()
                    .collect();
                for name in sensitive {
                    headers.remove(name);
                }
                headers.insert("idempotency-key", idempotency_key.clone());
            }
            url = next;
        }
    }

    /// Status line, a few headers, then the body (cut at the size limit).
    async fn render(
        &self,
        mut response: reqwest::Response,
        method: HttpMethod,
        url: &Url,
        redirects: usize,
    ) -> Result<String, RequestError> {
        let mut out = format!("{:?} {}\n", response.version(), response.status());
        if redirects > 0 {
            out.push_str(&format!("final-url: {}\n", redact_url(url)));
        }
        for name in SHOWN_HEADERS {
            if let Some(value) = response.headers().get(*name).and_then(|v| v.to_str().ok()) {
                out.push_str(&format!("{name}: {value}\n"));
            }
        }
        out.push('\n');
        if method == HttpMethod::Head {
            return Ok(out);
        }
        let content_type = response
            .headers()
            .get(header::CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .map(str::to_ascii_lowercase);
        let limit = self.config.max_body_bytes;
        let mut bytes: Vec<u8> = Vec::new();
        let mut truncated = false;
        loop {
            let chunk = response
                .chunk()
                .await
                .map_err(|e| RequestError::Transport {
                    url: redact_url(url),
                    reason: error_chain(&e),
                })?;
            let Some(chunk) = chunk else { break };
            let room = limit - bytes.len();
            if chunk.len() > room {
                bytes.extend_from_slice(&chunk[..room]);
                truncated = true;
                break;
            }
            bytes.extend_from_slice(&chunk);
        }
        out.push_str(&body_text(&bytes, content_type.as_deref()));
        if truncated {
            out.push_str(&format!("\n[truncated: response exceeded {limit} bytes]"));
        }
        Ok(out)
    }
}

#[async_trait]
impl Tool for HttpRequestTool {
    fn spec(&self) -> ToolSpec {
        let c = &self.config;
        ToolSpec {
            name: HTTP_REQUEST.into(),
            description: format!(
                "Send an HTTP or HTTPS request and get back the status line, the content-type \
                 and the response body as text (at most {} KiB; longer bodies are cut with a \
                 marker). GET and HEAD follow up to {} redirects; any other method does not \
                 follow one: its answer is the redirect (status and location), and a call to \
                 the new URL is a new request. Times out after {} s. Private, loopback and \
                 link-local addresses are refused. Every request carries an Idempotency-Key \
                 header that stays the same if this call is retried.",
                c.max_body_bytes / 1024,
                c.max_redirects,
                c.timeout.as_secs()
            ),
            input_schema: input_schema::<HttpRequestArgs>(),
        }
    }

    fn idempotent(&self, arguments: &serde_json::Value) -> bool {
        match arguments.get("method") {
            None | Some(serde_json::Value::Null) => true,
            // An unparseable method cannot be shown safe; call() rejects it anyway.
            Some(method) => {
                serde_json::from_value::<HttpMethod>(method.clone()).is_ok_and(HttpMethod::is_safe)
            }
        }
    }

    /// Anything but GET and HEAD changes something somewhere: a human
    /// approves it first (unless the agent's rules say otherwise).
    fn needs_approval(&self, arguments: &serde_json::Value) -> bool {
        !self.idempotent(arguments)
    }

    /// The method upper-cased (`"delete"` is `"DELETE"`, GET when none)
    /// and the URL as it is sent: parsed, so its scheme and host are
    /// lower-case, a default port is left out, `.` and `..` segments are
    /// resolved and what needs it is percent-encoded.
    fn normalise(&self, arguments: serde_json::Value) -> serde_json::Value {
        normalised(arguments)
    }

    async fn call(&self, arguments: serde_json::Value, ctx: &ToolContext) -> ToolOutput {
        let args: HttpRequestArgs = match parse_args(HTTP_REQUEST, arguments) {
            Ok(args) => args,
            Err(message) => return ToolOutput::error(message),
        };
        match tokio::time::timeout(self.config.timeout, self.run(args, ctx)).await {
            Ok(Ok(text)) => ToolOutput::ok(text),
            Ok(Err(err)) => {
                tracing::info!(tool = HTTP_REQUEST, error = %err, "request failed");
                ToolOutput::error(err.to_string())
            }
            Err(_) => ToolOutput::error(format!(
                "request timed out after {} ms",
                self.config.timeout.as_millis()
            )),
        }
    }
}

fn is_followed_redirect(status: StatusCode) -> bool {
    matches!(
        status,
        StatusCode::MOVED_PERMANENTLY
            | StatusCode::FOUND
            | StatusCode::SEE_OTHER
            | StatusCode::TEMPORARY_REDIRECT
            | StatusCode::PERMANENT_REDIRECT
    )
}

/// The model's headers, validated; errors name the header, never its value.
fn request_headers(given: Option<&BTreeMap<String, String>>) -> Result<HeaderMap, RequestError> {
    let mut headers = HeaderMap::new();
    for (name, value) in given.into_iter().flatten() {
        let header_name = HeaderName::from_bytes(name.trim().as_bytes())
            .map_err(|_| RequestError::HeaderName(name.clone()))?;
        if baton_core::tool::CLIENT_MANAGED_HEADERS.contains(&header_name.as_str()) {
            return Err(RequestError::ReservedHeader(name.clone()));
        }
        let mut header_value = HeaderValue::from_str(value.trim())
            .map_err(|_| RequestError::HeaderValue(name.clone()))?;
        if is_sensitive_name(header_name.as_str()) {
            // Keeps it out of hyper's Debug output.
            header_value.set_sensitive(true);
        }
        headers.insert(header_name, header_value);
    }
    Ok(headers)
}

/// The body as text: UTF-8 as is, other text lossily, binary not at all.
pub(crate) fn body_text(bytes: &[u8], content_type: Option<&str>) -> String {
    if bytes.is_empty() {
        return "(empty body)".into();
    }
    match std::str::from_utf8(bytes) {
        Ok(text) => text.to_owned(),
        // Only the last character is incomplete: the size limit split it.
        Err(e) if e.error_len().is_none() => {
            String::from_utf8_lossy(&bytes[..e.valid_up_to()]).into_owned()
        }
        Err(_) if content_type.is_some_and(is_textual) => {
            String::from_utf8_lossy(bytes).into_owned()
        }
        Err(_) => format!(
            "[binary body of {} bytes ({}) not shown]",
            bytes.len(),
            content_type.unwrap_or("no content-type")
        ),
    }
}

fn is_textual(content_type: &str) -> bool {
    content_type.starts_with("text/")
        || ["json", "xml", "javascript", "yaml", "csv", "html"]
            .iter()
            .any(|t| content_type.contains(t))
}

/// An error and its causes on one line, without the URL reqwest adds (it
/// may carry credentials in its query).
pub(crate) fn error_chain(err: &reqwest::Error) -> String {
    let mut parts: Vec<String> = Vec::new();
    if err.is_timeout() {
        parts.push("timed out".into());
    } else if err.is_connect() {
        parts.push("could not connect".into());
    }
    let mut source = std::error::Error::source(err);
    while let Some(cause) = source {
        let text = cause.to_string();
        if !parts.contains(&text) {
            parts.push(text);
        }
        source = cause.source();
    }
    if parts.is_empty() {
        let kind = if err.is_body() || err.is_decode() {
            "error reading the response body"
        } else if err.is_request() {
            "error sending the request"
        } else {
            "HTTP error"
        };
        parts.push(kind.into());
    }
    parts.join(": ")
}

#[cfg(test)]
mod tests;
