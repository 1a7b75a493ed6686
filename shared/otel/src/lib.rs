//! OpenTelemetry export: each task as one trace, sent over OTLP/HTTP
//! (protobuf) to any collector-compatible endpoint (an OpenTelemetry
//! Collector, Honeycomb, Langfuse, Datadog, …), with the GenAI semantic
//! conventions ([`convert`]).
//!
//! Baton records its spans itself (`baton_core::trace`); at the end of each
//! segment the worker hands them to [`OtlpExport`], which converts and
//! sends them and waits for the answer, bounded by [`EXPORT_TIMEOUT`]: on
//! Lambda, nothing is left in a buffer when the invocation freezes. There
//! is no tracer provider or batch processor to flush.
//!
//! Settings ([`OtlpSettings::from_vars`]): `OTEL_EXPORTER_OTLP_ENDPOINT`
//! (or `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT`), `OTEL_EXPORTER_OTLP_HEADERS`
//! (`key=value,…`, values URL-encoded: they carry API keys, so they are
//! held as secrets and scrubbed from every span), `OTEL_SERVICE_NAME` and
//! `BATON_TRACE_CONTENT` (prompts, answers, tool arguments and results
//! are left out unless it is `true`).

pub mod convert;

use baton_core::{SpanBatch, SpanExport};
use opentelemetry::{InstrumentationScope, KeyValue, Value as OtelValue};
use opentelemetry_otlp::{Protocol, WithExportConfig, WithHttpConfig};
use opentelemetry_sdk::trace::SpanExporter as _;
use secrecy::{ExposeSecret, SecretString};
use std::collections::HashMap;
use std::fmt;
use std::time::Duration;

/// The longest a segment waits for its spans to be accepted. Spans are
/// worth less than the task's time: past this they are dropped, logged.
pub const EXPORT_TIMEOUT: Duration = Duration::from_secs(5);
/// One HTTP attempt (the exporter retries a 429 / 503 within the above).
const REQUEST_TIMEOUT: Duration = Duration::from_secs(3);

/// A setting that cannot be used. Never quotes a header's value.
#[derive(Debug, thiserror::Error)]
#[error("{name}: {message}")]
pub struct OtlpSettingsError {
    pub name: &'static str,
    pub message: String,
}

fn invalid(name: &'static str, message: impl Into<String>) -> OtlpSettingsError {
    OtlpSettingsError {
        name,
        message: message.into(),
    }
}

/// Where and how spans are exported.
#[derive(Clone)]
pub struct OtlpSettings {
    /// The URL spans are POSTed to (`…/v1/traces`).
    pub traces_endpoint: String,
    /// Sent with every request; held as secrets.
    pub headers: Vec<(String, SecretString)>,
    /// `BATON_TRACE_CONTENT`: spans carry prompts, answers, tool arguments
    /// and results.
    pub content: bool,
    /// `OTEL_SERVICE_NAME` (default `baton`).
    pub service_name: String,
}

impl fmt::Debug for OtlpSettings {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // The endpoint may carry credentials (`https://user:key@…`).
        let host = url::Url::parse(&self.traces_endpoint)
            .ok()
            .and_then(|u| u.host_str().map(str::to_owned))
            .unwrap_or_default();
        let names: Vec<&str> = self.headers.iter().map(|(k, _)| k.as_str()).collect();
        f.debug_struct("OtlpSettings")
            .field("host", &host)
            .field("headers", &names)
            .field("content", &self.content)
            .field("service_name", &self.service_name)
            .finish()
    }
}

impl OtlpSettings {
    /// The settings from `var` (the environment over the stored secrets);
    /// `None` when no endpoint is set, and then nothing is exported.
    pub fn from_vars(
        var: impl Fn(&str) -> Option<String>,
    ) -> Result<Option<Self>, OtlpSettingsError> {
        let set = |name: &str| var(name).filter(|v| !v.trim().is_empty());
        let traces_endpoint = match (
            set("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"),
            set("OTEL_EXPORTER_OTLP_ENDPOINT"),
        ) {
            // The signal's own URL is used as it is (the specification).
            (Some(url), _) => checked_url("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", url.trim())?,
            (None, Some(base)) => {
                let url = format!("{}/v1/traces", base.trim().trim_end_matches('/'));
                checked_url("OTEL_EXPORTER_OTLP_ENDPOINT", &url)?
            }
            (None, None) => return Ok(None),
        };
        let mut headers = parse_headers(&set("OTEL_EXPORTER_OTLP_HEADERS").unwrap_or_default())?;
        // The traces-only headers add to (and override) the general ones.
        for (k, v) in parse_headers(&set("OTEL_EXPORTER_OTLP_TRACES_HEADERS").unwrap_or_default())?
        {
            headers.retain(|(name, _)| !name.eq_ignore_ascii_case(&k));
            headers.push((k, v));
        }
        let content = match set("BATON_TRACE_CONTENT").as_deref().map(str::trim) {
            None | Some("false" | "0") => false,
            Some("true" | "1") => true,
            Some(_) => return Err(invalid("BATON_TRACE_CONTENT", "expected true or false")),
        };
        Ok(Some(OtlpSettings {
            traces_endpoint,
            headers,
            content,
            service_name: set("OTEL_SERVICE_NAME").unwrap_or_else(|| "baton".to_owned()),
        }))
    }
}

fn checked_url(name: &'static str, url: &str) -> Result<String, OtlpSettingsError> {
    match url::Url::parse(url) {
        Ok(u) if matches!(u.scheme(), "http" | "https") && u.host_str().is_some() => {
            Ok(url.to_owned())
        }
        // Not quoted: it may carry credentials.
        _ => Err(invalid(name, "not an http:// or https:// URL")),
    }
}

/// `key1=value1,key2=value2`, values URL-encoded (the OTLP exporter
/// specification's format). Errors name the key, never the value.
pub fn parse_headers(text: &str) -> Result<Vec<(String, SecretString)>, OtlpSettingsError> {
    let name = "OTEL_EXPORTER_OTLP_HEADERS";
    let mut out = Vec::new();
    for pair in text.split(',').map(str::trim).filter(|p| !p.is_empty()) {
        let Some((key, value)) = pair.split_once('=') else {
            return Err(invalid(
                name,
                "expected key=value pairs separated by commas",
            ));
        };
        let key = key.trim();
        if reqwest::header::HeaderName::from_bytes(key.as_bytes()).is_err() {
            return Err(invalid(name, format!("`{key}` is not a header name")));
        }
        let value = percent_decode(value.trim()).ok_or_else(|| {
            invalid(
                name,
                format!("the value of `{key}` is not URL-encoded UTF-8"),
            )
        })?;
        if reqwest::header::HeaderValue::from_str(&value).is_err() {
            return Err(invalid(
                name,
                format!("the value of `{key}` is not a header value"),
            ));
        }
        out.push((key.to_owned(), SecretString::from(value)));
    }
    Ok(out)
}

fn percent_decode(text: &str) -> Option<String> {
    let bytes = text.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%' {
            let hex = std::str::from_utf8(bytes.get(i + 1..i + 3)?).ok()?;
            out.push(u8::from_str_radix(hex, 16).ok()?);
            i += 3;
        } else {
            out.push(bytes[i]);
            i += 1;
        }
    }
    String::from_utf8(out).ok()
}

/// Secrets replaced by `[redacted]` in every string a span carries: the
/// exporter's own headers and whatever else the runtime knows to be
/// secret (API keys, tokens, the values of declared tools' references).
#[derive(Clone, Default)]
pub struct Scrub {
    secrets: Vec<SecretString>,
}

impl Scrub {
    /// Short values would redact unrelated text; real keys are long.
    const MIN_LEN: usize = 8;

    pub fn new(secrets: impl IntoIterator<Item = SecretString>) -> Self {
        let mut secrets: Vec<SecretString> = secrets
            .into_iter()
            .filter(|s| s.expose_secret().len() >= Self::MIN_LEN)
            .collect();
        // Longest first, so a secret containing another goes whole.
        secrets.sort_by_key(|s| std::cmp::Reverse(s.expose_secret().len()));
        Scrub { secrets }
    }

    pub fn text(&self, text: &str) -> String {
        let mut out = text.to_owned();
        for s in &self.secrets {
            if out.contains(s.expose_secret()) {
                out = out.replace(s.expose_secret(), "[redacted]");
            }
        }
        out
    }

    fn key_value(&self, kv: KeyValue) -> KeyValue {
        match &kv.value {
            OtelValue::String(s) => KeyValue::new(kv.key, self.text(s.as_str())),
            OtelValue::Array(opentelemetry::Array::String(items)) => {
                let items = items.iter().map(|i| self.text(i.as_str()).into()).collect();
                KeyValue::new(
                    kv.key,
                    OtelValue::Array(opentelemetry::Array::String(items)),
                )
            }
            _ => kv,
        }
    }
}

/// Why the exporter could not be built.
#[derive(Debug, thiserror::Error)]
#[error("OpenTelemetry exporter: {0}")]
pub struct OtlpBuildError(String);

/// Exports each segment's spans over OTLP/HTTP. Built once per process.
pub struct OtlpExport {
    exporter: opentelemetry_otlp::SpanExporter,
    scope: InstrumentationScope,
    scrub: Scrub,
    content: bool,
}

impl fmt::Debug for OtlpExport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("OtlpExport")
            .field("content", &self.content)
            .finish_non_exhaustive()
    }
}

impl OtlpExport {
    /// The exporter of `settings`; `secrets` are scrubbed from every span
    /// besides the headers' values.
    pub fn new(
        settings: &OtlpSettings,
        secrets: impl IntoIterator<Item = SecretString>,
    ) -> Result<Self, OtlpBuildError> {
        let headers: HashMap<String, String> = settings
            .headers
            .iter()
            .map(|(k, v)| (k.clone(), v.expose_secret().to_owned()))
            .collect();
        let client = reqwest::Client::builder()
            .timeout(REQUEST_TIMEOUT)
            .build()
            .map_err(|e| OtlpBuildError(format!("HTTP client: {e}")))?;
        let mut exporter = opentelemetry_otlp::SpanExporter::builder()
            .with_http()
            .with_http_client(client)
            .with_protocol(Protocol::HttpBinary)
            .with_endpoint(settings.traces_endpoint.clone())
            .with_headers(headers)
            .with_timeout(REQUEST_TIMEOUT)
            .build()
            // The builder's errors name settings, never header values.
            .map_err(|e| OtlpBuildError(e.to_string()))?;
        exporter.set_resource(
            &opentelemetry_sdk::Resource::builder_empty()
                .with_service_name(settings.service_name.clone())
                .build(),
        );
        let mut all: Vec<SecretString> = secrets.into_iter().collect();
        for (_, v) in &settings.headers {
            all.push(v.clone());
            // `Authorization=Bearer KEY`: the key alone too.
            if let Some((_, key)) = v.expose_secret().rsplit_once(' ') {
                all.push(SecretString::from(key.to_owned()));
            }
        }
        Ok(OtlpExport {
            exporter,
            scope: InstrumentationScope::builder("baton")
                .with_version(env!("CARGO_PKG_VERSION"))
                .build(),
            scrub: Scrub::new(all),
            content: settings.content,
        })
    }
}

#[async_trait::async_trait]
impl SpanExport for OtlpExport {
    fn wants_content(&self) -> bool {
        self.content
    }

    async fn export(&self, batch: SpanBatch) {
        let spans = convert::spans(&batch, &self.scope, &self.scrub);
        let count = spans.len();
        match tokio::time::timeout(EXPORT_TIMEOUT, self.exporter.export(spans)).await {
            Ok(Ok(())) => tracing::debug!(task_id = %batch.task_id, count, "spans exported"),
            // The exporter's errors say what failed (network, HTTP status),
            // never the headers.
            Ok(Err(e)) => {
                tracing::warn!(task_id = %batch.task_id, count, error = %e, "could not export spans")
            }
            Err(_) => tracing::warn!(
                task_id = %batch.task_id,
                count,
                "could not export spans: no answer within {} s",
                EXPORT_TIMEOUT.as_secs()
            ),
        }
    }
}

#[cfg(test)]
mod tests;
