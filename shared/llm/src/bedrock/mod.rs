//! Amazon Bedrock Runtime Converse
//! (`POST {endpoint}/model/{modelId}/converse`, and `…/converse-stream`
//! for streamed answers: `stream`), signed with AWS SigV4.
//!
//! There is no API key: every request is signed (service `bedrock`, the
//! configured region) with credentials from an AWS credentials provider,
//! normally the default chain of `aws-config`, which in Lambda yields the
//! function role's credentials. The bodies are typed in [`wire`]; the
//! mapping to and from the neutral types lives in plain functions, and the
//! mock server runs it backwards ([`server`]).

#[cfg(any(test, feature = "mock-server"))]
mod server;
mod stream;
pub(crate) mod wire;

#[cfg(any(test, feature = "mock-server"))]
pub(crate) use server::from_wire_request;
#[cfg(any(test, feature = "mock-server"))]
pub use server::{decode_request, encode_response};
#[cfg(any(test, feature = "mock-server"))]
pub(crate) use server::{event_frame, exception_frame, to_wire_events, to_wire_response};

use crate::http;
use crate::mapping::{self, messages_to_send, object_arguments};
use async_trait::async_trait;
use aws_credential_types::provider::error::CredentialsError;
use aws_credential_types::provider::{ProvideCredentials, SharedCredentialsProvider};
use aws_credential_types::Credentials;
use aws_sigv4::http_request::{sign, SignableBody, SignableRequest, SigningSettings};
use aws_sigv4::sign::v4;
use baton_core::{
    AttachmentContent, Completion, CompletionRequest, DeltaSink, LlmError, LlmProvider, Message,
    ToolCall, Usage,
};
use reqwest::header::HeaderMap;
use std::fmt;
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime};
use wire::{ContentBlock, Role};

/// The SigV4 signing name of the Bedrock Runtime API.
pub const SIGNING_NAME: &str = "bedrock";

/// `inferenceConfig.maxTokens` when a request leaves `max_tokens` 0 (as
/// for Anthropic, so both providers behave alike).
pub const DEFAULT_MAX_TOKENS: u32 = 4096;

/// The text sent for a tool result that is empty: Converse refuses blank
/// text blocks, and a tool result needs some content.
pub const EMPTY_TOOL_RESULT: &str = "(no output)";

/// Credentials are fetched again this long before they expire.
const REFRESH_BEFORE_EXPIRY: Duration = Duration::from_secs(5 * 60);

/// Credentials without an expiry (environment variables, fixed keys) are
/// read again after this long, which is cheap and picks up rotations.
const REREAD_AFTER: Duration = Duration::from_secs(15 * 60);

/// Where AWS credentials come from: any `aws-config` credentials provider
/// (the default chain, a role, …) or fixed keys. `Debug` shows nothing of
/// them.
#[derive(Clone)]
pub struct AwsCredentials(SharedCredentialsProvider);

impl AwsCredentials {
    /// Credentials from `provider`, asked again whenever the last ones are
    /// about to expire.
    pub fn new(provider: impl ProvideCredentials + 'static) -> Self {
        AwsCredentials(SharedCredentialsProvider::new(provider))
    }

    /// Fixed keys (tests, local runs). Prefer a provider in production.
    pub fn from_keys(
        access_key_id: impl Into<String>,
        secret_access_key: impl Into<String>,
        session_token: Option<String>,
    ) -> Self {
        Self::new(Credentials::new(
            access_key_id,
            secret_access_key,
            session_token,
            None,
            "baton-fixed-keys",
        ))
    }
}

impl From<SharedCredentialsProvider> for AwsCredentials {
    fn from(provider: SharedCredentialsProvider) -> Self {
        AwsCredentials(provider)
    }
}

impl fmt::Debug for AwsCredentials {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("AwsCredentials([redacted])")
    }
}

/// The last credentials fetched, shared by clones of a provider.
struct CredentialCache {
    source: AwsCredentials,
    current: tokio::sync::Mutex<Option<(Credentials, Instant)>>,
}

impl CredentialCache {
    async fn get(&self) -> Result<Credentials, LlmError> {
        // Held across the fetch so concurrent calls make one fetch.
        let mut current = self.current.lock().await;
        if let Some((credentials, fetched)) = current.as_ref() {
            let fresh = match credentials.expiry() {
                Some(expiry) => expiry
                    .duration_since(SystemTime::now())
                    .is_ok_and(|left| left > REFRESH_BEFORE_EXPIRY),
                None => fetched.elapsed() < REREAD_AFTER,
            };
            if fresh {
                return Ok(credentials.clone());
            }
        }
        let credentials = self
            .source
            .0
            .provide_credentials()
            .await
            .map_err(credentials_error)?;
        *current = Some((credentials.clone(), Instant::now()));
        Ok(credentials)
    }

    /// Drops the cached credentials (AWS refused them).
    async fn forget(&self) {
        *self.current.lock().await = None;
    }
}

/// A credentials failure: configuration (none found) is final, a
/// provider that failed or timed out (IMDS, STS) may work next time.
fn credentials_error(e: CredentialsError) -> LlmError {
    let text = format!("AWS credentials: {}", http::describe(&e));
    match e {
        CredentialsError::CredentialsNotLoaded(_) | CredentialsError::InvalidConfiguration(_) => {
            LlmError::Config(text)
        }
        _ => LlmError::Transport(text),
    }
}

/// A client of the Bedrock Runtime Converse API.
#[derive(Clone)]
pub struct BedrockProvider {
    client: reqwest::Client,
    endpoint: String,
    region: String,
    model: String,
    credentials: Arc<CredentialCache>,
    timeout: Duration,
    idle_timeout: Duration,
}

impl fmt::Debug for BedrockProvider {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("BedrockProvider")
            .field("endpoint", &self.endpoint)
            .field("region", &self.region)
            .field("model", &self.model)
            .field("credentials", &self.credentials.source)
            .field("timeout", &self.timeout)
            .field("idle_timeout", &self.idle_timeout)
            .finish()
    }
}

impl BedrockProvider {
    /// The public endpoint of `region`.
    pub fn default_endpoint(region: &str) -> String {
        format!("https://bedrock-runtime.{region}.amazonaws.com")
    }

    /// A provider for `region`, signing with `credentials`. `endpoint`
    /// overrides [`Self::default_endpoint`] (a VPC endpoint, a test
    /// server). `model` (a model id, inference profile id or ARN) is used
    /// when a request names none.
    pub fn new(
        region: &str,
        endpoint: Option<&str>,
        credentials: AwsCredentials,
        model: impl Into<String>,
    ) -> Result<Self, LlmError> {
        let region = region.trim();
        let valid = !region.is_empty()
            && region
                .bytes()
                .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-');
        if !valid {
            return Err(LlmError::Config(format!(
                "invalid AWS region `{region}`: expected something like us-east-1"
            )));
        }
        let endpoint = match endpoint {
            Some(e) => http::normalize_base_url(e)?,
            None => Self::default_endpoint(region),
        };
        // The signature covers the host; a URL without one cannot be signed.
        let has_host = reqwest::Url::parse(&endpoint)
            .ok()
            .is_some_and(|u| u.host_str().is_some_and(|h| !h.is_empty()));
        if !has_host {
            return Err(LlmError::Config(format!(
                "the Bedrock endpoint `{endpoint}` has no host"
            )));
        }
        Ok(BedrockProvider {
            client: http::build_client()?,
            endpoint,
            region: region.to_string(),
            model: model.into(),
            credentials: Arc::new(CredentialCache {
                source: credentials,
                current: tokio::sync::Mutex::new(None),
            }),
            timeout: Duration::from_secs(300),
            idle_timeout: http::DEFAULT_IDLE_TIMEOUT,
        })
    }

    /// The whole-request timeout (default 300 s).
    pub fn with_timeout(mut self, timeout: Duration) -> Self {
        self.timeout = timeout;
        self
    }

    /// The longest wait for the next piece of a streamed answer (default
    /// 60 s); the whole-request timeout bounds the lot.
    pub fn with_idle_timeout(mut self, idle: Duration) -> Self {
        self.idle_timeout = idle;
        self
    }

    /// The endpoint in use, without a trailing slash.
    pub fn endpoint(&self) -> &str {
        &self.endpoint
    }

    /// The region requests are signed for.
    pub fn region(&self) -> &str {
        &self.region
    }
}

#[async_trait]
impl LlmProvider for BedrockProvider {
    fn name(&self) -> &str {
        "bedrock"
    }

    async fn complete(&self, request: &CompletionRequest) -> Result<Completion, LlmError> {
        let model = http::pick_model(request, &self.model)?;
        let post = self.signed_post(request, model, "converse").await?;
        let answer = http::send(post, self.timeout, None).await?;
        if !(200..300).contains(&answer.status) {
            return Err(self.refused(&answer).await);
        }
        let answer: wire::Response = http::decode_json(&answer.body)?;
        let mut completion = decode_response(&answer)?;
        if completion.model.is_empty() {
            completion.model = model.to_string();
        }
        Ok(completion)
    }

    /// Streams the answer with `ConverseStream`
    /// (`POST /model/{modelId}/converse-stream`, the same body), whose
    /// events come in the AWS event stream framing.
    async fn complete_streaming(
        &self,
        request: &CompletionRequest,
        sink: &dyn DeltaSink,
    ) -> Result<Completion, LlmError> {
        let model = http::pick_model(request, &self.model)?;
        let post = self.signed_post(request, model, "converse-stream").await?;
        let chunks = match http::open_stream(post, self.timeout, self.idle_timeout, None).await? {
            http::Opened::Streaming(chunks) => chunks,
            http::Opened::Refused(answer) => return Err(self.refused(&answer).await),
        };
        let mut completion = stream::read(chunks, sink).await?;
        if completion.model.is_empty() {
            completion.model = model.to_string();
        }
        Ok(completion)
    }
}

impl BedrockProvider {
    /// The signed POST of `request`'s Converse body to `action`
    /// (`converse`, `converse-stream`) of `model`.
    async fn signed_post(
        &self,
        request: &CompletionRequest,
        model: &str,
        action: &str,
    ) -> Result<reqwest::RequestBuilder, LlmError> {
        let body = serde_json::to_vec(&encode_request(request)?)
            .map_err(|e| LlmError::Config(format!("cannot encode the request: {e}")))?;
        let url = format!(
            "{}/model/{}/{action}",
            self.endpoint,
            encode_model_id(model)
        );
        let credentials = self.credentials.get().await?;
        let (signed, _) = sign_request(
            &credentials,
            &self.region,
            "POST",
            &url,
            &[("content-type", "application/json")],
            &body,
            SystemTime::now(),
        )?;
        let mut builder = self
            .client
            .post(&url)
            .header("content-type", "application/json");
        for (name, value) in signed {
            builder = builder.header(name, value);
        }
        Ok(builder.body(body))
    }

    /// The error of a non-2xx answer.
    async fn refused(&self, answer: &http::Answer) -> LlmError {
        if matches!(
            error_type(&answer.headers, &answer.body).as_deref(),
            Some(
                "ExpiredTokenException"
                    | "UnrecognizedClientException"
                    | "InvalidSignatureException"
            )
        ) {
            // The cached credentials are stale: fetch fresh ones for the
            // next attempt instead of failing until they age out.
            self.credentials.forget().await;
        }
        map_error(answer.status, &answer.headers, &answer.body)
    }
}

/// Signs a request with SigV4 for service `bedrock` in `region`: returns
/// the headers to add (`authorization`, `x-amz-date` and, with temporary
/// credentials, `x-amz-security-token`) and the signature. `url` must be
/// the exact (already percent-encoded) URL sent; `headers` are signed too.
pub(crate) fn sign_request(
    credentials: &Credentials,
    region: &str,
    method: &str,
    url: &str,
    headers: &[(&str, &str)],
    body: &[u8],
    time: SystemTime,
) -> Result<(Vec<(String, String)>, String), LlmError> {
    let fail = |e: &dyn std::error::Error| {
        LlmError::Config(format!("cannot sign the request: {}", http::describe(e)))
    };
    let identity = credentials.clone().into();
    let params = v4::SigningParams::builder()
        .identity(&identity)
        .region(region)
        .name(SIGNING_NAME)
        .time(time)
        .settings(SigningSettings::default())
        .build()
        .map_err(|e| fail(&e))?
        .into();
    let signable = SignableRequest::new(
        method,
        url,
        headers.iter().copied(),
        SignableBody::Bytes(body),
    )
    .map_err(|e| fail(&e))?;
    let (instructions, signature) = sign(signable, &params).map_err(|e| fail(&e))?.into_parts();
    let (headers, _) = instructions.into_parts();
    let headers = headers
        .into_iter()
        .map(|h| (h.name().to_string(), h.value().to_string()))
        .collect();
    Ok((headers, signature))
}

/// A model id as one URL path segment: everything but the unreserved
/// characters percent-encoded, so `:` in versions and `/` in ARNs survive.
pub fn encode_model_id(id: &str) -> String {
    let mut out = String::with_capacity(id.len());
    for b in id.bytes() {
        if b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.' | b'~') {
            out.push(char::from(b));
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

/// The AWS error type of an answer: the `x-amzn-errortype` header
/// (`ThrottlingException:http://internal.amazon.com/…`) or the body's
/// `__type` (`com.amazon…#ThrottlingException`).
fn error_type(headers: &HeaderMap, body: &[u8]) -> Option<String> {
    let raw = headers
        .get("x-amzn-errortype")
        .and_then(|v| v.to_str().ok())
        .map(str::to_string)
        .or_else(|| {
            serde_json::from_slice::<wire::ErrorResponse>(body)
                .ok()?
                .kind
        })?;
    let name = raw.split(':').next().unwrap_or_default();
    let name = name.rsplit('#').next().unwrap_or_default().trim();
    (!name.is_empty()).then(|| name.to_string())
}

/// Maps a non-2xx Bedrock answer to an [`LlmError`]. Throttling,
/// unavailability and a model still loading are retryable whatever the
/// status; the rest goes by status (validation and access errors are
/// final), and a `ValidationException` saying the input is too long for
/// the model is a [`LlmError::ContextOverflow`]. The AWS error type leads
/// the message.
pub fn map_error(status: u16, headers: &HeaderMap, body: &[u8]) -> LlmError {
    let kind = error_type(headers, body);
    let retry_after = http::parse_retry_after(headers, SystemTime::now());
    let (_, text) = http::error_text(status, body);
    let message = match &kind {
        Some(k) => format!("{k}: {text}"),
        None => text,
    };
    match kind.as_deref() {
        Some("ThrottlingException" | "TooManyRequestsException") => {
            LlmError::RateLimited { retry_after }
        }
        Some("ServiceUnavailableException" | "ModelNotReadyException") => {
            LlmError::Overloaded { retry_after }
        }
        Some("InternalServerException" | "ModelTimeoutException") => LlmError::Server {
            status,
            message,
            retry_after,
        },
        _ => match http::map_error(status, headers, body, None) {
            LlmError::Server {
                status,
                retry_after,
                ..
            } => LlmError::Server {
                status,
                message,
                retry_after,
            },
            LlmError::Rejected { status, .. }
                if kind.as_deref() == Some("ValidationException")
                    && mapping::mentions_context_overflow(&message) =>
            {
                // "Input is too long for requested model", "too many input
                // tokens", or the words of the model behind Converse.
                LlmError::ContextOverflow { status, message }
            }
            LlmError::Rejected { status, .. } => LlmError::Rejected { status, message },
            other => other,
        },
    }
}

/// A call as a `toolUse` block.
fn tool_use(call: &ToolCall) -> ContentBlock {
    ContentBlock::ToolUse(wire::ToolUse {
        tool_use_id: call.id.clone(),
        name: call.name.clone(),
        input: object_arguments(&call.arguments),
    })
}

/// The content blocks of one neutral message, and the role they go under.
fn blocks(message: &Message) -> (Role, Vec<ContentBlock>) {
    match message {
        Message::User { content } => (Role::User, text_block(content)),
        Message::Assistant {
            content,
            tool_calls,
        } => {
            let mut out = text_block(content);
            out.extend(tool_calls.iter().map(tool_use));
            (Role::Assistant, out)
        }
        Message::Tool {
            call_id,
            content,
            is_error,
            ..
        } => {
            let text = if content.trim().is_empty() {
                EMPTY_TOOL_RESULT
            } else {
                content.as_str()
            };
            let block = ContentBlock::ToolResult(wire::ToolResult {
                tool_use_id: call_id.clone(),
                content: vec![wire::ToolResultBlock::Text(text.to_owned())],
                status: Some(if *is_error {
                    wire::ToolResultStatus::Error
                } else {
                    wire::ToolResultStatus::Success
                }),
            });
            (Role::User, vec![block])
        }
        Message::Attachment {
            name,
            media_type,
            content,
        } => (Role::User, attachment_blocks(name, media_type, content)),
    }
}

/// An attached file: a labelled image or document block, or text.
fn attachment_blocks(
    name: &str,
    media_type: &str,
    content: &AttachmentContent,
) -> Vec<ContentBlock> {
    let label = ContentBlock::Text(AttachmentContent::label(name));
    let source = |data: &String| wire::BytesSource {
        bytes: data.clone(),
    };
    match content {
        AttachmentContent::Image { data_base64 } => vec![
            label,
            ContentBlock::Image(wire::ImageBlock {
                format: media_type.trim_start_matches("image/").to_owned(),
                source: source(data_base64),
            }),
        ],
        AttachmentContent::Document { data_base64 } => vec![
            label,
            ContentBlock::Document(wire::DocumentBlock {
                format: "pdf".to_owned(),
                name: document_name(name),
                source: source(data_base64),
            }),
        ],
        other => text_block(&other.as_text(name, media_type)),
    }
}

/// A file name as Converse takes a document's: letters, digits, single
/// spaces, hyphens, parentheses and square brackets (`q3 report.pdf` is
/// `q3 report-pdf`).
fn document_name(name: &str) -> String {
    let mut out = String::new();
    for c in name.chars() {
        let c = if c.is_alphanumeric() || matches!(c, '-' | '(' | ')' | '[' | ']') {
            c
        } else if c.is_whitespace() {
            ' '
        } else {
            '-'
        };
        if !(c == ' ' && (out.is_empty() || out.ends_with(' '))) {
            out.push(c);
        }
    }
    let out = out.trim_end().to_owned();
    if out.is_empty() {
        "document".to_owned()
    } else {
        out
    }
}

/// Converse refuses blank text blocks (empty or only whitespace), so blank
/// text becomes no block.
fn text_block(text: &str) -> Vec<ContentBlock> {
    if text.trim().is_empty() {
        Vec::new()
    } else {
        vec![ContentBlock::Text(text.to_owned())]
    }
}

/// The Converse request body for `request` (the model goes in the URL).
/// Tool results travel in user messages, and consecutive same-role
/// messages are merged because Converse wants roles to alternate. A
/// request without tools gets its tool turns as text
/// ([`mapping::messages_to_send`]): Converse refuses tool blocks without a
/// `toolConfig`. A forced tool goes as `toolConfig.toolChoice`
/// `{"tool": …}`, and must be among the tools ([`mapping::forced_tool`]).
pub(crate) fn encode_request(request: &CompletionRequest) -> Result<wire::Request, LlmError> {
    let forced = mapping::forced_tool(request)?;
    let mut messages: Vec<wire::Message> = Vec::new();
    for message in messages_to_send(request).iter() {
        let (role, content) = blocks(message);
        if content.is_empty() {
            continue;
        }
        match messages.last_mut() {
            Some(last) if last.role == role => last.content.extend(content),
            _ => messages.push(wire::Message { role, content }),
        }
    }
    let system = if request.system.trim().is_empty() {
        Vec::new()
    } else {
        vec![wire::SystemBlock {
            text: Some(request.system.clone()),
        }]
    };
    let max_tokens = if request.max_tokens == 0 {
        DEFAULT_MAX_TOKENS
    } else {
        request.max_tokens
    };
    let tool_config = (!request.tools.is_empty()).then(|| wire::ToolConfig {
        tools: request
            .tools
            .iter()
            .map(|t| wire::Tool {
                tool_spec: wire::ToolSpec {
                    name: t.name.clone(),
                    // Converse wants a description of at least one character.
                    description: (!t.description.trim().is_empty()).then(|| t.description.clone()),
                    input_schema: wire::InputSchema {
                        json: t.input_schema.clone(),
                    },
                },
            })
            .collect(),
        tool_choice: forced.map(|name| wire::ToolChoice {
            tool: Some(wire::SpecificToolChoice {
                name: name.to_owned(),
            }),
            ..wire::ToolChoice::default()
        }),
    });
    Ok(wire::Request {
        messages,
        system,
        inference_config: Some(wire::InferenceConfig {
            max_tokens: Some(max_tokens),
        }),
        tool_config,
    })
}

/// Reads a Converse response body. It names no model; the caller fills
/// in the one it asked for.
pub(crate) fn decode_response(body: &wire::Response) -> Result<Completion, LlmError> {
    let content = body
        .output
        .as_ref()
        .and_then(|o| o.message.as_ref())
        .and_then(|m| m.content.as_ref())
        .ok_or_else(|| LlmError::Decode("response has no output.message.content".into()))?;
    let mut text = String::new();
    let mut tool_calls = Vec::new();
    for block in content {
        match block {
            ContentBlock::Text(t) => text.push_str(t),
            ContentBlock::ToolUse(call) => tool_calls.push(ToolCall {
                id: call.tool_use_id.clone(),
                name: call.name.clone(),
                arguments: call.input.clone(),
            }),
            // reasoningContent, citations, images: not for us.
            ContentBlock::ToolResult(_)
            | ContentBlock::Image(_)
            | ContentBlock::Document(_)
            | ContentBlock::Other => {}
        }
    }
    let usage = body
        .usage
        .map(|u| Usage {
            // Cached prompt tokens are input too, for budgets.
            input_tokens: u
                .input_tokens
                .unwrap_or(0)
                .saturating_add(u.cache_read_input_tokens.unwrap_or(0))
                .saturating_add(u.cache_write_input_tokens.unwrap_or(0)),
            output_tokens: u.output_tokens.unwrap_or(0),
        })
        .unwrap_or_default();
    Ok(Completion {
        content: text,
        tool_calls,
        usage,
        stop_reason: body.stop_reason.clone().map(String::from),
        model: String::new(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fixtures::call;
    use crate::mock::{MockLlmServer, MOCK_AWS_ACCESS_KEY_ID, MOCK_AWS_SECRET_ACCESS_KEY};
    use crate::{RetryPolicy, Retrying};
    use aws_credential_types::provider::future;
    use baton_core::{ToolChoice, ToolSpec};
    use serde_json::{json, Value};
    use std::sync::atomic::{AtomicUsize, Ordering};
    use wiremock::matchers::{header, method, path};
    use wiremock::{Mock, MockServer, ResponseTemplate};

    const KEY_ID: &str = "AKIDTESTBEDROCK42";
    const SECRET: &str = "bedrock-secret-access-key-0123456789";
    const TOKEN: &str = "session-token-for-tests-abcdef";
    const MODEL: &str = "anthropic.claude-3-5-haiku-20241022-v1:0";

    fn conversation() -> CompletionRequest {
        crate::fixtures::conversation("tooluse_")
    }

    fn answer() -> Value {
        json!({
            "output": {"message": {"role": "assistant", "content": [
                {"reasoningContent": {"reasoningText": {"text": "hmm"}}},
                {"text": "It is "},
                {"toolUse": {"toolUseId": "tooluse_9", "name": "lookup", "input": {"q": "x"}}},
                {"text": "noon."}
            ]}},
            "stopReason": "tool_use",
            "usage": {"inputTokens": 30, "cacheReadInputTokens": 10, "outputTokens": 5, "totalTokens": 45},
            "metrics": {"latencyMs": 120}
        })
    }

    fn session_credentials() -> AwsCredentials {
        AwsCredentials::from_keys(KEY_ID, SECRET, Some(TOKEN.into()))
    }

    fn provider(server: &MockServer) -> BedrockProvider {
        BedrockProvider::new(
            "eu-west-3",
            Some(&server.uri()),
            session_credentials(),
            MODEL,
        )
        .unwrap()
    }

    /// `(key id, date, region, service, signed headers)` of an
    /// `Authorization` header.
    fn parse_authorization(value: &str) -> (String, String, String, String, String) {
        let rest = value.strip_prefix("AWS4-HMAC-SHA256 ").unwrap();
        let mut parts = rest.split(", ");
        let credential = parts.next().unwrap().strip_prefix("Credential=").unwrap();
        let signed = parts
            .next()
            .unwrap()
            .strip_prefix("SignedHeaders=")
            .unwrap();
        let signature = parts.next().unwrap().strip_prefix("Signature=").unwrap();
        assert_eq!(signature.len(), 64);
        let scope: Vec<&str> = credential.split('/').collect();
        assert_eq!(scope[4], "aws4_request");
        (
            scope[0].into(),
            scope[1].into(),
            scope[2].into(),
            scope[3].into(),
            signed.into(),
        )
    }

    #[tokio::test]
    async fn sends_a_signed_converse_request_and_reads_the_answer() {
        let server = MockServer::start().await;
        Mock::given(method("POST"))
            // The `:` of the model version is percent-encoded in the path.
            .and(path(
                "/model/anthropic.claude-3-5-haiku-20241022-v1%3A0/converse",
            ))
            .and(header("content-type", "application/json"))
            .and(header("x-amz-security-token", TOKEN))
            .respond_with(ResponseTemplate::new(200).set_body_json(answer()))
            .expect(1)
            .mount(&server)
            .await;
        let c = provider(&server).complete(&conversation()).await.unwrap();

        let received = server.received_requests().await.unwrap();
        let request = &received[0];
        let auth = request
            .headers
            .get("authorization")
            .unwrap()
            .to_str()
            .unwrap();
        let (key_id, day, region, service, signed) = parse_authorization(auth);
        assert_eq!(key_id, KEY_ID);
        assert_eq!(region, "eu-west-3");
        assert_eq!(service, "bedrock");
        assert_eq!(signed, "content-type;host;x-amz-date;x-amz-security-token");
        let amz_date = request.headers.get("x-amz-date").unwrap().to_str().unwrap();
        assert!(
            amz_date.starts_with(&day) && amz_date.ends_with('Z'),
            "{amz_date}"
        );
        assert!(!auth.contains(SECRET));

        let body: Value = serde_json::from_slice(&request.body).unwrap();
        assert_eq!(
            body,
            json!({
                "system": [{"text": "You are terse."}],
                "inferenceConfig": {"maxTokens": DEFAULT_MAX_TOKENS},
                "messages": [
                    {"role": "user", "content": [{"text": "time twice?"}]},
                    {"role": "assistant", "content": [
                        {"text": "Checking."},
                        {"toolUse": {"toolUseId": "tooluse_1", "name": "current_time", "input": {}}},
                        {"toolUse": {"toolUseId": "tooluse_2", "name": "current_time", "input": {}}}
                    ]},
                    // Both results and the steer message merged into one user turn.
                    {"role": "user", "content": [
                        {"toolResult": {"toolUseId": "tooluse_1", "content": [{"text": "12:00"}], "status": "success"}},
                        {"toolResult": {"toolUseId": "tooluse_2", "content": [{"text": "bad zone"}], "status": "error"}},
                        {"text": "hurry"}
                    ]}
                ],
                "toolConfig": {"tools": [{"toolSpec": {
                    "name": "current_time",
                    "description": "The time",
                    "inputSchema": {"json": {"type": "object"}}
                }}]}
            })
        );

        assert_eq!(c.content, "It is noon.");
        assert_eq!(
            c.tool_calls,
            vec![ToolCall {
                id: "tooluse_9".into(),
                name: "lookup".into(),
                arguments: json!({"q": "x"})
            }]
        );
        assert_eq!(
            c.usage,
            Usage {
                input_tokens: 40,
                output_tokens: 5
            }
        );
        assert_eq!(c.stop_reason.as_deref(), Some("tool_use"));
        // Converse names no model: the one asked for is reported.
        assert_eq!(c.model, MODEL);
    }

    #[tokio::test]
    async fn the_signature_verifies_and_tampering_is_refused() {
        // The mock server recomputes the signature with its own keys.
        let server = MockLlmServer::start().await;
        let good = BedrockProvider::new(
            "ap-southeast-2",
            Some(&server.bedrock_endpoint_url()),
            MockLlmServer::bedrock_credentials(),
            "arn:aws:bedrock:ap-southeast-2:123456789012:inference-profile/apac.model-v1:0",
        )
        .unwrap();
        let mut request = conversation();
        request.messages = vec![Message::User {
            content: "hello".into(),
        }];
        let c = good.complete(&request).await.unwrap();
        assert_eq!(c.content, "[scripted model] You said: hello");
        assert_eq!(
            server.received()[0].model,
            "arn:aws:bedrock:ap-southeast-2:123456789012:inference-profile/apac.model-v1:0"
        );

        // A body changed after signing no longer matches the signature.
        let url = format!("{}/model/m/converse", server.bedrock_endpoint_url());
        let credentials = Credentials::new(
            MOCK_AWS_ACCESS_KEY_ID,
            MOCK_AWS_SECRET_ACCESS_KEY,
            None,
            None,
            "test",
        );
        let body = serde_json::to_vec(&encode_request(&request).unwrap()).unwrap();
        let send = |headers: Vec<(String, String)>, body: Vec<u8>| {
            let mut b = reqwest::Client::new()
                .post(&url)
                .header("content-type", "application/json");
            for (k, v) in headers {
                b = b.header(k, v);
            }
            b.body(body).send()
        };
        let sign_for = |service_region: &str, body: &[u8]| {
            sign_request(
                &credentials,
                service_region,
                "POST",
                &url,
                &[("content-type", "application/json")],
                body,
                SystemTime::now(),
            )
            .unwrap()
            .0
        };
        let ok = send(sign_for("us-east-1", &body), body.clone())
            .await
            .unwrap();
        assert_eq!(ok.status(), 200);
        let mut tampered = body.clone();
        tampered.extend_from_slice(b" ");
        let r = send(sign_for("us-east-1", &body), tampered).await.unwrap();
        assert_eq!(r.status(), 403);
        assert_eq!(r.headers()["x-amzn-errortype"], "InvalidSignatureException");
        // No signature at all.
        let r = send(Vec::new(), body.clone()).await.unwrap();
        assert_eq!(r.status(), 403);
        // Signed with an unknown key.
        let stranger = Credentials::new("AKIDSTRANGER", "other", None, None, "test");
        let (headers, _) = sign_request(
            &stranger,
            "us-east-1",
            "POST",
            &url,
            &[],
            &body,
            SystemTime::now(),
        )
        .unwrap();
        let r = send(headers, body.clone()).await.unwrap();
        assert_eq!(r.status(), 403);
        assert_eq!(
            r.headers()["x-amzn-errortype"],
            "UnrecognizedClientException"
        );
        // Signed an hour ago.
        let (headers, _) = sign_request(
            &credentials,
            "us-east-1",
            "POST",
            &url,
            &[],
            &body,
            SystemTime::now() - Duration::from_secs(3600),
        )
        .unwrap();
        let r = send(headers, body).await.unwrap();
        assert_eq!(r.status(), 403);
    }

    #[tokio::test]
    async fn maps_aws_errors_by_type_and_status() {
        let server = MockServer::start().await;
        let p = provider(&server);
        let aws = |status: u16, kind: &str, message: &str| {
            ResponseTemplate::new(status)
                .insert_header(
                    "x-amzn-errortype",
                    format!("{kind}:http://internal.amazon.com/coral/com.amazon.bedrock/"),
                )
                .set_body_json(json!({"message": message}))
        };
        let cases = [
            (
                aws(429, "ThrottlingException", "Too many requests"),
                LlmError::RateLimited { retry_after: None },
            ),
            (
                aws(503, "ServiceUnavailableException", "Service unavailable"),
                LlmError::Overloaded { retry_after: None },
            ),
            (
                aws(429, "ModelNotReadyException", "Model is loading"),
                LlmError::Overloaded { retry_after: None },
            ),
            (
                aws(408, "ModelTimeoutException", "Model timed out"),
                LlmError::Server {
                    status: 408,
                    message: "ModelTimeoutException: Model timed out".into(),
                    retry_after: None,
                },
            ),
            (
                aws(500, "InternalServerException", "Internal"),
                LlmError::Server {
                    status: 500,
                    message: "InternalServerException: Internal".into(),
                    retry_after: None,
                },
            ),
            (
                aws(
                    400,
                    "ValidationException",
                    "The model returned the following errors: bad",
                ),
                LlmError::Rejected {
                    status: 400,
                    message: "ValidationException: The model returned the following errors: bad"
                        .into(),
                },
            ),
            (
                aws(
                    403,
                    "AccessDeniedException",
                    "You don't have access to the model",
                ),
                LlmError::Rejected {
                    status: 403,
                    message: "AccessDeniedException: You don't have access to the model".into(),
                },
            ),
            (
                // The type in the body, as some AWS front ends send it.
                ResponseTemplate::new(400).set_body_json(json!({
                    "__type": "com.amazon.coral.validate#ValidationException",
                    "Message": "1 validation error"
                })),
                LlmError::Rejected {
                    status: 400,
                    message: "ValidationException: 1 validation error".into(),
                },
            ),
            (
                ResponseTemplate::new(200).set_body_json(json!({"output": {}})),
                LlmError::Decode("response has no output.message.content".into()),
            ),
            (
                aws(400, "ValidationException", "Input is too long for requested model."),
                LlmError::ContextOverflow {
                    status: 400,
                    message: "ValidationException: Input is too long for requested model.".into(),
                },
            ),
            (
                aws(
                    400,
                    "ValidationException",
                    "The model returned the following errors: prompt is too long: 210000 tokens > 200000 maximum",
                ),
                LlmError::ContextOverflow {
                    status: 400,
                    message: "ValidationException: The model returned the following errors: prompt is too long: 210000 tokens > 200000 maximum".into(),
                },
            ),
            (
                // The words alone are not enough: not a validation error.
                aws(403, "AccessDeniedException", "Input is too long for requested model."),
                LlmError::Rejected {
                    status: 403,
                    message: "AccessDeniedException: Input is too long for requested model.".into(),
                },
            ),
        ];
        for (template, expected) in cases {
            server.reset().await;
            Mock::given(method("POST"))
                .respond_with(template)
                .mount(&server)
                .await;
            let err = p.complete(&conversation()).await.unwrap_err();
            assert_eq!(err, expected);
            let shown = format!("{err} {err:?}");
            assert!(!shown.contains(SECRET) && !shown.contains(TOKEN), "{shown}");
        }
        assert!(LlmError::RateLimited { retry_after: None }.is_retryable());
        assert!(!LlmError::Rejected {
            status: 400,
            message: String::new()
        }
        .is_retryable());
    }

    #[tokio::test]
    async fn throttling_is_retried_and_validation_is_not() {
        let server = MockServer::start().await;
        Mock::given(method("POST"))
            .respond_with(
                ResponseTemplate::new(429)
                    .insert_header("x-amzn-errortype", "ThrottlingException")
                    .insert_header("retry-after", "0"),
            )
            .up_to_n_times(2)
            .with_priority(1)
            .mount(&server)
            .await;
        Mock::given(method("POST"))
            .respond_with(ResponseTemplate::new(200).set_body_json(answer()))
            .mount(&server)
            .await;
        let p = Retrying::new(provider(&server), RetryPolicy::default());
        p.complete(&conversation()).await.unwrap();
        assert_eq!(server.received_requests().await.unwrap().len(), 3);

        server.reset().await;
        Mock::given(method("POST"))
            .respond_with(
                ResponseTemplate::new(400)
                    .insert_header("x-amzn-errortype", "ValidationException")
                    .set_body_json(json!({"message": "bad"})),
            )
            .mount(&server)
            .await;
        let err = p.complete(&conversation()).await.unwrap_err();
        assert!(!err.is_retryable(), "{err:?}");
        assert_eq!(server.received_requests().await.unwrap().len(), 1);
    }

    #[derive(Debug)]
    struct Counting {
        calls: Arc<AtomicUsize>,
        expires_in: Option<Duration>,
        fail: Option<fn() -> CredentialsError>,
    }

    impl ProvideCredentials for Counting {
        fn provide_credentials<'a>(&'a self) -> future::ProvideCredentials<'a>
        where
            Self: 'a,
        {
            self.calls.fetch_add(1, Ordering::SeqCst);
            if let Some(fail) = self.fail {
                return future::ProvideCredentials::ready(Err(fail()));
            }
            let expiry = self.expires_in.map(|d| SystemTime::now() + d);
            future::ProvideCredentials::ready(Ok(Credentials::new(
                KEY_ID,
                SECRET,
                Some(TOKEN.into()),
                expiry,
                "counting",
            )))
        }
    }

    fn counting(
        expires_in: Option<Duration>,
        fail: Option<fn() -> CredentialsError>,
    ) -> (AwsCredentials, Arc<AtomicUsize>) {
        let calls = Arc::new(AtomicUsize::new(0));
        let provider = Counting {
            calls: calls.clone(),
            expires_in,
            fail,
        };
        (AwsCredentials::new(provider), calls)
    }

    #[tokio::test]
    async fn credentials_are_cached_until_they_near_expiry() {
        let server = MockServer::start().await;
        Mock::given(method("POST"))
            .respond_with(ResponseTemplate::new(200).set_body_json(answer()))
            .mount(&server)
            .await;
        let cases = [
            (None, 1),
            (Some(Duration::from_secs(3600)), 1),
            // Less than the refresh margin left: fetched for every call.
            (Some(Duration::from_secs(60)), 3),
        ];
        for (expires_in, fetches) in cases {
            let (credentials, calls) = counting(expires_in, None);
            let p =
                BedrockProvider::new("us-east-1", Some(&server.uri()), credentials, MODEL).unwrap();
            for _ in 0..3 {
                p.clone().complete(&conversation()).await.unwrap();
            }
            assert_eq!(calls.load(Ordering::SeqCst), fetches, "{expires_in:?}");
        }
    }

    #[tokio::test]
    async fn refused_credentials_are_fetched_again_next_time() {
        let server = MockServer::start().await;
        Mock::given(method("POST"))
            .respond_with(
                ResponseTemplate::new(403)
                    .insert_header("x-amzn-errortype", "ExpiredTokenException:http://internal")
                    .set_body_json(
                        json!({"message": "The security token included in the request is expired"}),
                    ),
            )
            .up_to_n_times(1)
            .mount(&server)
            .await;
        Mock::given(method("POST"))
            .respond_with(ResponseTemplate::new(200).set_body_json(answer()))
            .mount(&server)
            .await;
        let (credentials, calls) = counting(None, None);
        let p = BedrockProvider::new("us-east-1", Some(&server.uri()), credentials, MODEL).unwrap();
        assert!(p.complete(&conversation()).await.is_err());
        p.complete(&conversation()).await.unwrap();
        assert_eq!(
            calls.load(Ordering::SeqCst),
            2,
            "fetched again after the refusal"
        );
    }

    #[tokio::test]
    async fn missing_credentials_are_a_config_error_and_flaky_ones_retryable() {
        let server = MockServer::start().await;
        let (credentials, _) = counting(None, Some(|| CredentialsError::not_loaded("no creds")));
        let p = BedrockProvider::new("us-east-1", Some(&server.uri()), credentials, MODEL).unwrap();
        let err = p.complete(&conversation()).await.unwrap_err();
        assert!(
            matches!(&err, LlmError::Config(m) if m.contains("AWS credentials")),
            "{err:?}"
        );
        let (credentials, _) = counting(
            None,
            Some(|| CredentialsError::provider_timed_out(Duration::from_secs(5))),
        );
        let p = BedrockProvider::new("us-east-1", Some(&server.uri()), credentials, MODEL).unwrap();
        let err = p.complete(&conversation()).await.unwrap_err();
        assert!(err.is_retryable(), "{err:?}");
        // Nothing was sent unsigned.
        assert!(server.received_requests().await.unwrap().is_empty());
    }

    #[test]
    fn debug_shows_no_credentials() {
        let p = BedrockProvider::new("us-east-1", None, session_credentials(), MODEL).unwrap();
        let shown = format!("{p:?}");
        for secret in [KEY_ID, SECRET, TOKEN] {
            assert!(!shown.contains(secret), "{shown}");
        }
        assert!(
            shown.contains("bedrock-runtime.us-east-1.amazonaws.com"),
            "{shown}"
        );
        assert_eq!(
            p.endpoint(),
            "https://bedrock-runtime.us-east-1.amazonaws.com"
        );
    }

    #[test]
    fn model_ids_are_one_path_segment() {
        assert_eq!(
            encode_model_id("us.anthropic.claude-3-5-haiku-20241022-v1:0"),
            "us.anthropic.claude-3-5-haiku-20241022-v1%3A0"
        );
        assert_eq!(
            encode_model_id("arn:aws:bedrock:us-east-1:1:inference-profile/x y"),
            "arn%3Aaws%3Abedrock%3Aus-east-1%3A1%3Ainference-profile%2Fx%20y"
        );
    }

    /// The bodies sent for `request`, to `converse` then
    /// `converse-stream`, by a server that refuses both (the answer does
    /// not matter here).
    async fn bodies_sent(request: &CompletionRequest) -> (Result<(), LlmError>, Vec<Value>) {
        let server = MockServer::start().await;
        Mock::given(method("POST"))
            .respond_with(
                ResponseTemplate::new(400)
                    .insert_header("x-amzn-errortype", "ValidationException")
                    .set_body_json(json!({"message": "no"})),
            )
            .mount(&server)
            .await;
        let p = provider(&server);
        let whole = p.complete(request).await.map(|_| ());
        let sink = crate::fixtures::Deltas::default();
        let streamed = p.complete_streaming(request, &sink).await.map(|_| ());
        assert_eq!(whole.is_ok(), streamed.is_ok());
        let received = server.received_requests().await.unwrap();
        let paths: Vec<&str> = received.iter().map(|r| r.url.path()).collect();
        if !paths.is_empty() {
            assert!(paths[0].ends_with("/converse") && paths[1].ends_with("/converse-stream"));
        }
        let bodies = received
            .iter()
            .map(|r| serde_json::from_slice(&r.body).unwrap())
            .collect();
        (whole.or(streamed), bodies)
    }

    #[tokio::test]
    async fn a_forced_tool_is_a_specific_tool_choice_whole_and_streamed() {
        let mut req = conversation();
        let (_, bodies) = bodies_sent(&req).await;
        assert!(
            bodies
                .iter()
                .all(|b| b["toolConfig"].get("toolChoice").is_none()),
            "{bodies:?}"
        );

        req.tool_choice = ToolChoice::tool("current_time");
        let (_, bodies) = bodies_sent(&req).await;
        assert_eq!(bodies.len(), 2);
        for body in &bodies {
            assert_eq!(
                body["toolConfig"]["toolChoice"],
                json!({"tool": {"name": "current_time"}})
            );
            assert_eq!(
                body["toolConfig"]["tools"][0]["toolSpec"]["name"],
                "current_time"
            );
        }

        // Forcing a tool the request does not offer sends nothing.
        req.tool_choice = ToolChoice::tool("route");
        let (result, bodies) = bodies_sent(&req).await;
        assert!(
            matches!(result, Err(LlmError::Config(ref m)) if m.contains("`route`")),
            "{result:?}"
        );
        assert!(bodies.is_empty());
    }

    #[test]
    fn request_decoder_inverts_the_encoder() {
        let mut req = conversation();
        req.model = "m".into();
        req.max_tokens = 100;
        let decoded = decode_request(&json!(encode_request(&req).unwrap()), "m").unwrap();
        assert_eq!(decoded, req);
        req.tool_choice = ToolChoice::tool("current_time");
        let mut body = json!(encode_request(&req).unwrap());
        assert_eq!(decode_request(&body, "m").unwrap(), req);
        // The mock refuses what Converse refuses, and kinds it does not play.
        body["toolConfig"]["toolChoice"]["tool"]["name"] = json!("route");
        assert!(decode_request(&body, "m").unwrap_err().contains("`route`"));
        body["toolConfig"]["toolChoice"] = json!({"any": {}});
        assert!(decode_request(&body, "m").is_err());
        body["toolConfig"]["toolChoice"] = json!({"auto": {}});
        assert_eq!(
            decode_request(&body, "m").unwrap().tool_choice,
            ToolChoice::Auto
        );
    }

    #[test]
    fn response_decoder_inverts_the_encoder() {
        let c = Completion {
            content: "see".into(),
            tool_calls: vec![call("tooluse_5")],
            usage: Usage {
                input_tokens: 3,
                output_tokens: 4,
            },
            stop_reason: Some("tool_use".into()),
            model: String::new(),
        };
        let body = serde_json::from_value(encode_response(&c)).unwrap();
        assert_eq!(decode_response(&body).unwrap(), c);
    }

    #[test]
    fn blank_texts_are_dropped_and_blank_results_filled() {
        let req = CompletionRequest {
            model: "m".into(),
            system: "  ".into(),
            messages: vec![
                Message::User {
                    content: "a".into(),
                },
                Message::Assistant {
                    content: "\n\n".into(),
                    tool_calls: vec![],
                },
                Message::User {
                    content: "b".into(),
                },
                Message::Assistant {
                    content: String::new(),
                    tool_calls: vec![ToolCall {
                        id: "t1".into(),
                        name: "n".into(),
                        arguments: json!("not an object"),
                    }],
                },
                Message::Tool {
                    call_id: "t1".into(),
                    name: "n".into(),
                    content: " \n".into(),
                    is_error: false,
                },
            ],
            tools: conversation().tools,
            max_tokens: 10,
            tool_choice: ToolChoice::Auto,
        };
        let body = serde_json::to_value(encode_request(&req).unwrap()).unwrap();
        assert!(body.get("system").is_none());
        assert_eq!(
            body["messages"],
            json!([
                {"role": "user", "content": [{"text": "a"}, {"text": "b"}]},
                {"role": "assistant", "content": [{"toolUse": {
                    "toolUseId": "t1", "name": "n", "input": {"_raw_arguments": "not an object"}
                }}]},
                {"role": "user", "content": [{"toolResult": {
                    "toolUseId": "t1", "content": [{"text": EMPTY_TOOL_RESULT}], "status": "success"
                }}]}
            ])
        );
        // The mock refuses blank text like Bedrock does.
        let blank = json!({"messages": [{"role": "user", "content": [{"text": " "}]}]});
        assert!(decode_request(&blank, "m").is_err());
    }

    #[test]
    fn a_tool_without_description_is_sent_without_one() {
        let req = CompletionRequest {
            model: "m".into(),
            system: "s".into(),
            messages: vec![Message::User {
                content: "a".into(),
            }],
            tools: vec![ToolSpec {
                name: "t".into(),
                description: " ".into(),
                input_schema: json!({"type": "object"}),
            }],
            max_tokens: 10,
            tool_choice: ToolChoice::Auto,
        };
        let body = serde_json::to_value(encode_request(&req).unwrap()).unwrap();
        let spec = &body["toolConfig"]["tools"][0]["toolSpec"];
        assert_eq!(spec["name"], "t");
        assert!(spec.get("description").is_none(), "{spec}");
    }

    #[test]
    fn without_tools_the_tool_turns_go_as_text() {
        let mut req = conversation();
        req.tools.clear();
        let body = serde_json::to_value(encode_request(&req).unwrap()).unwrap();
        assert_eq!(
            body["messages"],
            json!([
                {"role": "user", "content": [{"text": "time twice?"}]},
                {"role": "assistant", "content": [{"text":
                    "Checking.\n[called tool current_time with {}]\n[called tool current_time with {}]"}]},
                {"role": "user", "content": [
                    {"text": "[result of current_time: 12:00]"},
                    {"text": "[error from current_time: bad zone]"},
                    {"text": "hurry"}
                ]}
            ])
        );
        assert!(body.get("toolConfig").is_none());
        let shown = body.to_string();
        assert!(
            !shown.contains("toolUse") && !shown.contains("toolResult"),
            "{shown}"
        );
    }

    #[test]
    fn unknown_blocks_and_stop_reasons_are_tolerated() {
        let body = json!({
            "output": {"message": {"role": "assistant", "content": [
                {"reasoningContent": {"reasoningText": {"text": "hmm", "signature": "s"}}},
                {"citationsContent": {"content": []}},
                {"text": "ok"}
            ]}},
            "stopReason": "guardrail_intervened",
            "usage": {"inputTokens": 3, "outputTokens": 4, "serverToolUsage": {}},
            "trace": {}, "performanceConfig": {"latency": "standard"}
        });
        let c = decode_response(&serde_json::from_value(body).unwrap()).unwrap();
        assert_eq!(c.content, "ok");
        assert_eq!(c.stop_reason.as_deref(), Some("guardrail_intervened"));
        assert_eq!(
            c.usage,
            Usage {
                input_tokens: 3,
                output_tokens: 4
            }
        );
    }
}
