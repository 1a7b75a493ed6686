//! Declared HTTP tools: an operator's `[http_tools.NAME]` (docs/tools.md)
//! called as a tool of its own. The model sees the declared name,
//! description and `parameters`; its arguments are checked against
//! `parameters` (JSON Schema) and sent as the JSON body, or as the query
//! string for GET, HEAD and DELETE, with the call's `Idempotency-Key`.
//!
//! The operator declared the host, so there is no SSRF refusal (unlike
//! `http_request`), but the credentials in the declaration never show:
//! header values and the URL are held as [`SecretString`], never logged,
//! and every value a `${NAME}` reference resolved to is replaced by
//! `[redacted]` in whatever the tool returns, encoded or not
//! ([`crate::redact::Secrets`]).
//!
//! With `auth = { oauth = "NAME" }` the call is made as the task's person
//! (#24): `Authorization: Bearer` with their token for provider `NAME`
//! from [`ToolContext::bearer`]; a 401 hands the token back as rejected
//! and retries once with a refreshed one, else the person is asked to
//! connect again ([`ToolOutput::needs_connection`]). The token is scrubbed
//! from the output like any declared secret.

use crate::args::parse_args;
use crate::http::{body_text, error_chain, HttpMethod};
use crate::redact::Secrets;
use async_trait::async_trait;
use baton_core::{Tool, ToolContext, ToolOutput, ToolSpec};
use reqwest::header::{HeaderMap, HeaderName, HeaderValue, CONTENT_TYPE};
use secrecy::{ExposeSecret, SecretString};
use std::fmt;
use std::time::Duration;
use url::Url;

const USER_AGENT: &str = concat!("baton-http-tool/", env!("CARGO_PKG_VERSION"));

/// A declared HTTP tool with its `${NAME}` references resolved. Plain
/// data: [`DeclaredHttpTool::new`] checks it and compiles its schema (the
/// worker's start-up; the ingest Lambda never builds tools, so it links no
/// JSON Schema code).
#[derive(Clone, Debug)]
pub struct HttpToolDef {
    pub name: String,
    pub description: String,
    pub method: HttpMethod,
    /// The URL with its references resolved: it may hold a secret.
    pub url: SecretString,
    /// The URL as declared (references unresolved): what logs show.
    pub url_template: String,
    /// Header name and resolved value.
    pub headers: Vec<(String, SecretString)>,
    /// JSON Schema of the arguments.
    pub parameters: serde_json::Value,
    pub timeout: Duration,
    /// Every value a reference resolved to; scrubbed from all outputs.
    pub secrets: Vec<SecretString>,
    /// `auth = { oauth = "NAME" }`: the provider whose per-person token
    /// the call carries.
    pub oauth: Option<String>,
}

/// Why a declaration cannot become a tool (or an MCP server); `field` is
/// the key under `http_tools.NAME` (`mcp.NAME`) at fault. Never holds a
/// secret value.
#[derive(Debug, thiserror::Error)]
#[error("{field}: {message}")]
pub struct DeclaredToolError {
    pub field: String,
    pub message: String,
}

fn decl_error(field: impl Into<String>, message: impl Into<String>) -> DeclaredToolError {
    DeclaredToolError {
        field: field.into(),
        message: message.into(),
    }
}

/// A declared endpoint (an HTTP tool's, an MCP server's) once its `${NAME}`
/// references are resolved: an http(s) URL with a host, and its headers,
/// each marked sensitive so the HTTP stack never shows its value. The
/// error names the key at fault, never a value.
pub(crate) fn resolved_endpoint(
    url: &SecretString,
    headers: &[(String, SecretString)],
) -> Result<(Url, Vec<(HeaderName, HeaderValue)>), DeclaredToolError> {
    // Url's parse errors never quote the input.
    let url = Url::parse(url.expose_secret().trim())
        .map_err(|e| decl_error("url", format!("not a URL once resolved: {e}")))?;
    if !matches!(url.scheme(), "http" | "https") || url.host_str().is_none() {
        return Err(decl_error(
            "url",
            "must be an http:// or https:// URL with a host once resolved",
        ));
    }
    let mut out = Vec::with_capacity(headers.len());
    for (name, value) in headers {
        let at = format!("headers.{name}");
        let header_name = HeaderName::from_bytes(name.trim().as_bytes())
            .map_err(|_| decl_error(&at, "not a valid HTTP header name"))?;
        let mut header_value = HeaderValue::from_str(value.expose_secret().trim())
            .map_err(|_| decl_error(&at, "not a valid header value once resolved"))?;
        header_value.set_sensitive(true);
        out.push((header_name, header_value));
    }
    Ok((url, out))
}

/// A declared HTTP tool, ready to call.
pub struct DeclaredHttpTool {
    name: String,
    description: String,
    method: HttpMethod,
    url: Url,
    url_template: String,
    headers: HeaderMap,
    parameters: serde_json::Value,
    validator: jsonschema::Validator,
    timeout: Duration,
    max_body_bytes: usize,
    secrets: Secrets,
    client: reqwest::Client,
    /// See [`HttpToolDef::oauth`].
    oauth: Option<String>,
}

impl fmt::Debug for DeclaredHttpTool {
    /// Names and the declared URL only: never a header value.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let headers: Vec<&str> = self.headers.keys().map(HeaderName::as_str).collect();
        f.debug_struct("DeclaredHttpTool")
            .field("name", &self.name)
            .field("method", &self.method)
            .field("url", &self.url_template)
            .field("headers", &headers)
            .field("timeout", &self.timeout)
            .finish_non_exhaustive()
    }
}

impl DeclaredHttpTool {
    /// Response body bytes kept, as `http_request`.
    pub const MAX_BODY_BYTES: usize = 256 * 1024;

    /// Checks what only a resolved declaration can show (the URL, the
    /// header values) and compiles the `parameters` schema.
    pub fn new(def: HttpToolDef) -> Result<Self, DeclaredToolError> {
        let (url, headers) = resolved_endpoint(&def.url, &def.headers)?;
        let mut header_map = HeaderMap::new();
        for (name, value) in headers {
            header_map.insert(name, value);
        }
        let headers = header_map;
        let validator = jsonschema::validator_for(&def.parameters)
            .map_err(|e| decl_error("parameters", format!("not a valid JSON Schema: {e}")))?;
        let client = reqwest::Client::builder()
            // The operator chose the host; a redirect is shown, not followed
            // (the credentials are for the declared URL only).
            .redirect(reqwest::redirect::Policy::none())
            .timeout(def.timeout)
            .connect_timeout(def.timeout.min(Duration::from_secs(10)))
            .user_agent(USER_AGENT)
            .build()
            .map_err(|e| decl_error("url", format!("cannot build the HTTP client: {e}")))?;
        let secrets = Secrets::for_endpoint(def.secrets, &def.headers);
        Ok(DeclaredHttpTool {
            name: def.name,
            description: def.description,
            method: def.method,
            url,
            url_template: def.url_template,
            headers,
            parameters: def.parameters,
            validator,
            timeout: def.timeout,
            max_body_bytes: Self::MAX_BODY_BYTES,
            secrets,
            client,
            oauth: def.oauth,
        })
    }

    /// The tool's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// `text` with every resolved secret value, in each of its encoded
    /// forms, replaced by `[redacted]`.
    pub fn scrub(&self, text: &str) -> String {
        self.secrets.scrub(text)
    }

    /// The arguments' problems against `parameters`, one line each, named
    /// by their path; `None` when they are valid.
    fn argument_errors(&self, args: &serde_json::Value) -> Option<String> {
        let problems: Vec<String> = self
            .validator
            .iter_errors(args)
            .take(10)
            .map(|e| {
                let path = e.instance_path().to_string();
                if path.is_empty() {
                    format!("- {e}")
                } else {
                    format!("- at `{path}`: {e}")
                }
            })
            .collect();
        (!problems.is_empty()).then(|| problems.join("\n"))
    }

    /// The request this call sends: the URL (with the arguments as its
    /// query for GET, HEAD and DELETE) and the body (JSON otherwise).
    fn request(
        &self,
        args: &serde_json::Value,
        ctx: &ToolContext,
        bearer: Option<&SecretString>,
    ) -> reqwest::RequestBuilder {
        let mut url = self.url.clone();
        let in_query = matches!(
            self.method,
            HttpMethod::Get | HttpMethod::Head | HttpMethod::Delete
        );
        if in_query {
            if let Some(map) = args.as_object().filter(|m| !m.is_empty()) {
                let mut pairs = url.query_pairs_mut();
                for (k, v) in map {
                    let values = match v {
                        serde_json::Value::Array(items) => items.clone(),
                        other => vec![other.clone()],
                    };
                    for v in values {
                        match v {
                            serde_json::Value::Null => {}
                            serde_json::Value::String(s) => {
                                pairs.append_pair(k, &s);
                            }
                            other => {
                                pairs.append_pair(k, &other.to_string());
                            }
                        }
                    }
                }
            }
        }
        let mut headers = self.headers.clone();
        if let Ok(key) = HeaderValue::from_str(&ctx.idempotency_key) {
            headers.insert("idempotency-key", key);
        }
        if let Some(token) = bearer {
            let value = format!("Bearer {}", token.expose_secret());
            if let Ok(mut value) = HeaderValue::from_str(&value) {
                value.set_sensitive(true);
                headers.insert(reqwest::header::AUTHORIZATION, value);
            }
        }
        let mut req = self
            .client
            .request(self.method.to_reqwest(), url)
            .headers(headers);
        if !in_query {
            req = req
                .header(CONTENT_TYPE, "application/json")
                .body(args.to_string());
        }
        req
    }

    /// Sends the call; `Ok` with the status and what the model reads for
    /// any answer, `Err` when none came.
    async fn run(
        &self,
        args: &serde_json::Value,
        ctx: &ToolContext,
        bearer: Option<&SecretString>,
    ) -> Result<(reqwest::StatusCode, String), String> {
        tracing::info!(
            tool = %self.name,
            method = self.method.as_str(),
            url = %self.url_template,
            "calling a declared HTTP tool"
        );
        let mut response = self
            .request(args, ctx, bearer)
            .send()
            .await
            .map_err(|e| format!("request failed: {}", error_chain(&e)))?;
        let status = response.status();
        let content_type = response
            .headers()
            .get(CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .map(str::to_ascii_lowercase);
        let mut head = format!("HTTP {status}\n");
        if let Some(ct) = &content_type {
            head.push_str(&format!("content-type: {ct}\n"));
        }
        if let Some(loc) = response
            .headers()
            .get(reqwest::header::LOCATION)
            .and_then(|v| v.to_str().ok())
        {
            head.push_str(&format!("location: {loc}\n"));
        }
        head.push('\n');
        let mut body = String::new();
        if self.method != HttpMethod::Head {
            let limit = self.max_body_bytes;
            let mut bytes: Vec<u8> = Vec::new();
            let mut truncated = false;
            while let Some(chunk) = response
                .chunk()
                .await
                .map_err(|e| format!("reading the response failed: {}", error_chain(&e)))?
            {
                let room = limit - bytes.len();
                if chunk.len() > room {
                    bytes.extend_from_slice(&chunk[..room]);
                    truncated = true;
                    break;
                }
                bytes.extend_from_slice(&chunk);
            }
            body = body_text(&bytes, content_type.as_deref());
            if truncated {
                body.push_str(&format!("\n[truncated: response exceeded {limit} bytes]"));
            }
        }
        Ok((status, format!("{head}{body}")))
    }

    /// Sends the call as the task's person, with their token for
    /// `provider`: a 401 hands the token back as rejected and sends once
    /// more with the one that replaces it.
    async fn run_as_person(
        &self,
        provider: &str,
        args: &serde_json::Value,
        ctx: &ToolContext,
    ) -> Result<(reqwest::StatusCode, String, Secrets), ToolOutput> {
        let (person, token) = ctx
            .bearer(provider)
            .await
            .map_err(|e| ToolOutput::of_credential_error(&e))?;
        let sent = self.run(args, ctx, Some(&token)).await;
        let (status, text) = sent.map_err(|e| ToolOutput::error(scrubbed(&token, &e)))?;
        if status != reqwest::StatusCode::UNAUTHORIZED {
            return Ok((status, text, Secrets::new(vec![token])));
        }
        let Some(credentials) = &ctx.credentials else {
            return Err(ToolOutput::needs_connection(provider));
        };
        let fresh = credentials
            .rejected(&person, provider, &token)
            .await
            .map_err(|e| ToolOutput::of_credential_error(&e))?;
        let sent = self.run(args, ctx, Some(&fresh)).await;
        let secrets = Secrets::new(vec![token, fresh]);
        let (status, text) = sent.map_err(|e| ToolOutput::error(secrets.scrub(&e)))?;
        if status == reqwest::StatusCode::UNAUTHORIZED {
            // Refused again right after a refresh: the grant is gone.
            return Err(ToolOutput::needs_connection(provider));
        }
        Ok((status, text, secrets))
    }

    /// Sends the call (as the person, with `auth = { oauth }`), scrubbed.
    async fn send(&self, args: serde_json::Value, ctx: &ToolContext) -> ToolOutput {
        let (status, text, extra) = match &self.oauth {
            Some(provider) => match self.run_as_person(provider, &args, ctx).await {
                Ok(sent) => sent,
                Err(out) => return out,
            },
            None => match self.run(&args, ctx, None).await {
                Ok((status, text)) => (status, text, Secrets::default()),
                Err(e) => return ToolOutput::error(self.scrub(&e)),
            },
        };
        let text = self.scrub(&extra.scrub(&text));
        if status.is_client_error() || status.is_server_error() {
            tracing::info!(tool = %self.name, "declared HTTP tool failed");
            ToolOutput::error(text)
        } else {
            ToolOutput::ok(text)
        }
    }
}

/// `text` without `token` in any of its forms.
fn scrubbed(token: &SecretString, text: &str) -> String {
    Secrets::new(vec![token.clone()]).scrub(text)
}

#[async_trait]
impl Tool for DeclaredHttpTool {
    fn spec(&self) -> ToolSpec {
        ToolSpec {
            name: self.name.clone(),
            description: self.description.clone(),
            input_schema: self.parameters.clone(),
        }
    }

    /// GET and HEAD may run again after a crash; anything else is never
    /// repeated (an interrupted call is reported as such).
    fn idempotent(&self, _arguments: &serde_json::Value) -> bool {
        self.method.is_safe()
    }

    /// Anything but GET and HEAD waits for a human, unless the agent's
    /// approval rules say otherwise.
    fn needs_approval(&self, _arguments: &serde_json::Value) -> bool {
        !self.method.is_safe()
    }

    async fn call(&self, arguments: serde_json::Value, ctx: &ToolContext) -> ToolOutput {
        // `null` counts as `{}`, as for the built-in tools.
        let args: serde_json::Value = match parse_args(&self.name, arguments) {
            Ok(v) => v,
            Err(e) => return ToolOutput::error(self.scrub(&e)),
        };
        if let Some(problems) = self.argument_errors(&args) {
            return ToolOutput::error(self.scrub(&format!(
                "invalid arguments for {}; nothing was sent:\n{problems}",
                self.name
            )));
        }
        // A 401 is sent once more: up to twice the timeout, then.
        let limit = if self.oauth.is_some() {
            self.timeout * 2
        } else {
            self.timeout
        };
        match tokio::time::timeout(limit, self.send(args, ctx)).await {
            Ok(out) => out,
            Err(_) => ToolOutput::error(format!(
                "request timed out after {} ms",
                self.timeout.as_millis()
            )),
        }
    }
}

#[cfg(test)]
mod tests;

#[cfg(test)]
mod oauth_tests;
