//! The OpenTelemetry exporter (`baton-otel`), built once per process when
//! `OTEL_EXPORTER_OTLP_ENDPOINT` is set: by the worker (its segments'
//! spans) and by the ingest (one `baton.ingest` span per task it creates;
//! `baton dev` shares one exporter between the two). Without an endpoint
//! nothing is built, and neither handler does any work for it.

use crate::settings::Settings;
use crate::source::SettingsError;
use baton_core::SpanExport;
use secrecy::{ExposeSecret, SecretString};
use std::sync::Arc;

/// The exporter of `settings.otlp`, scrubbing every secret the settings
/// hold from what it sends; `None` when no endpoint is set.
pub(crate) fn span_export(
    settings: &Settings,
) -> Result<Option<Arc<dyn SpanExport>>, SettingsError> {
    let Some(otlp) = &settings.otlp else {
        return Ok(None);
    };
    let export = baton_otel::OtlpExport::new(otlp, secrets(settings)).map_err(|e| {
        SettingsError::Invalid {
            name: "OTEL_EXPORTER_OTLP_ENDPOINT",
            message: e.to_string(),
        }
    })?;
    tracing::info!(content = otlp.content, "exporting traces over OTLP/HTTP");
    Ok(Some(Arc::new(export)))
}

/// Every secret value the settings hold: none of them may reach a span,
/// even in content a model or a tool echoed.
fn secrets(settings: &Settings) -> Vec<SecretString> {
    let mut out: Vec<SecretString> = Vec::new();
    let mut add = |s: &str| out.push(SecretString::from(s.to_owned()));
    if let Some(k) = settings.llm.api_key() {
        add(k.expose_secret());
    }
    if let Some(t) = &settings.api_token {
        add(t.expose());
    }
    if let Some(t) = settings.slack.as_ref().and_then(|s| s.bot_token.as_ref()) {
        add(t.expose());
    }
    // The declared tools' and servers' resolved references: only where
    // the agent loop is built (the ingest neither resolves nor sees them).
    #[cfg(feature = "worker")]
    for s in settings.agent_loop.secrets() {
        add(s.expose_secret());
    }
    out
}
