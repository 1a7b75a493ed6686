//! Secrets from SSM Parameter Store.
//!
//! In Lambda, secrets are never plain template parameters or environment
//! values: the template gives the functions `BATON_SECRETS_PATH` (e.g.
//! `/baton/prod/`), and each SecureString parameter under it provides the
//! variable named by its last path segment (`/baton/prod/SLACK_BOT_TOKEN`
//! provides `SLACK_BOT_TOKEN`). They are read once, at start-up.
//!
//! One setting that is not a secret may come from there too:
//! `BATON_AGENTS_TOML`, the agents file, which may outgrow the 4 KB Lambda
//! allows for all environment variables.

use std::collections::HashMap;

#[derive(Debug, thiserror::Error)]
#[error("cannot read secrets under {path} from SSM Parameter Store: {message}")]
pub struct SecretsError {
    path: String,
    message: String,
}

/// The settings a secrets path may provide. Other parameters under the
/// path provide variables for the `${NAME}` references of declared HTTP
/// tools, unless their names could be a setting ([`CONFIG_PREFIXES`]): a
/// stray parameter cannot reconfigure Baton.
pub const SECRET_NAMES: &[&str] = &[
    "SLACK_SIGNING_SECRET",
    "SLACK_BOT_TOKEN",
    // Sign in with Slack, for Connect links (docs/connections.md).
    "SLACK_CLIENT_ID",
    "SLACK_CLIENT_SECRET",
    "BATON_API_TOKEN",
    "ANTHROPIC_API_KEY",
    "OPENAI_API_KEY",
    // The agents file (docs/deploy.md): a parameter holds up to 8 KB.
    "BATON_AGENTS_TOML",
    // The OpenTelemetry collector's API key (docs/operations.md).
    "OTEL_EXPORTER_OTLP_HEADERS",
];

/// Prefixes of the variables Baton (and the AWS SDK) read as settings.
pub const CONFIG_PREFIXES: &[&str] = &[
    "BATON_",
    "AWS_",
    "SLACK_",
    "OPENAI_",
    "ANTHROPIC_",
    "BEDROCK_",
    "RUST_",
    "OTEL_",
];

/// Whether a parameter named `var` (its last path segment) is taken: one of
/// the [`SECRET_NAMES`], or a variable name (letters, digits, `_`) that no
/// setting has.
pub fn is_taken(var: &str) -> bool {
    if SECRET_NAMES.contains(&var) {
        return true;
    }
    let mut chars = var.chars();
    let is_var_name = chars
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_');
    is_var_name && !CONFIG_PREFIXES.iter().any(|p| var.starts_with(p))
}

/// Loads the secrets under `path` (recursively, decrypted).
pub async fn load(
    cfg: &aws_config::SdkConfig,
    path: &str,
) -> Result<HashMap<String, String>, SecretsError> {
    let client = aws_sdk_ssm::Client::new(cfg);
    let err = |e: String| SecretsError {
        path: path.to_owned(),
        message: e,
    };
    let mut out = HashMap::new();
    let mut next: Option<String> = None;
    loop {
        let page = client
            .get_parameters_by_path()
            .path(path)
            .recursive(true)
            .with_decryption(true)
            .set_next_token(next.take())
            .send()
            .await
            .map_err(|e| err(aws_sdk_ssm::error::DisplayErrorContext(e).to_string()))?;
        for p in page.parameters() {
            let (Some(name), Some(value)) = (p.name(), p.value()) else {
                continue;
            };
            let var = name.rsplit('/').next().unwrap_or_default();
            if is_taken(var) {
                out.insert(var.to_owned(), value.to_owned());
            } else {
                tracing::warn!(
                    parameter = name,
                    "ignoring a parameter that names a setting other than a secret"
                );
            }
        }
        match page.next_token() {
            Some(t) if !t.is_empty() => next = Some(t.to_owned()),
            _ => break,
        }
    }
    tracing::info!(path, count = out.len(), "secrets loaded");
    Ok(out)
}

/// The value of the stack's parameter `name` (not a secret: the ingest's
/// public URL, `BATON_PUBLIC_URL_PARAMETER`, which the stack writes since
/// the API cannot name itself to the function it routes to).
pub async fn parameter(cfg: &aws_config::SdkConfig, name: &str) -> Result<String, SecretsError> {
    let err = |e: String| SecretsError {
        path: name.to_owned(),
        message: e,
    };
    let got = aws_sdk_ssm::Client::new(cfg)
        .get_parameter()
        .name(name)
        .send()
        .await
        .map_err(|e| err(aws_sdk_ssm::error::DisplayErrorContext(e).to_string()))?;
    got.parameter()
        .and_then(|p| p.value())
        .map(str::to_owned)
        .ok_or_else(|| err("the parameter has no value".into()))
}

#[cfg(test)]
mod tests {
    use baton_aws::testing::MotoServer;

    #[test]
    fn secrets_and_tool_variables_are_taken_settings_are_not() {
        for name in [
            "SLACK_BOT_TOKEN",
            "OPENAI_API_KEY",
            "BATON_AGENTS_TOML",
            "OTEL_EXPORTER_OTLP_HEADERS",
            "TRACKER_TOKEN",
            "_X1",
        ] {
            assert!(super::is_taken(name), "{name}");
        }
        for name in ["SLACK_CLIENT_ID", "SLACK_CLIENT_SECRET"] {
            assert!(super::is_taken(name), "{name}");
        }
        for name in [
            "BATON_PUBLIC_URL",
            "SLACK_OPENID_AUTHORIZE_URL",
            "BATON_MAX_STEPS",
            "AWS_ENDPOINT_URL",
            "SLACK_API_URL",
            "OPENAI_BASE_URL",
            "RUST_LOG",
            "OTEL_EXPORTER_OTLP_ENDPOINT",
            "1ABC",
            "A-B",
            "",
        ] {
            assert!(!super::is_taken(name), "{name}");
        }
    }

    #[tokio::test(flavor = "multi_thread")]
    async fn loads_known_secrets_under_the_path_only() {
        let moto = MotoServer::start().expect("moto");
        let cfg = moto.sdk_config().await;
        let ssm = aws_sdk_ssm::Client::new(&cfg);
        for (name, value) in [
            ("/baton/test/SLACK_BOT_TOKEN", "xoxb-secret"),
            ("/baton/test/BATON_API_TOKEN", "token-0123456789abcdef"),
            ("/baton/test/BATON_AGENTS_TOML", "[agents.researcher]"),
            // For a declared HTTP tool's `${TRACKER_TOKEN}`.
            ("/baton/test/TRACKER_TOKEN", "tracker-secret"),
            // Settings that are not secrets are never taken from SSM.
            ("/baton/test/BATON_MAX_STEPS", "1"),
            ("/baton/test/AWS_ENDPOINT_URL", "http://evil.example"),
            ("/baton/other/OPENAI_API_KEY", "not-this-path"),
        ] {
            ssm.put_parameter()
                .name(name)
                .value(value)
                .r#type(aws_sdk_ssm::types::ParameterType::SecureString)
                .send()
                .await
                .expect("put parameter");
        }
        let secrets = super::load(&cfg, "/baton/test/").await.expect("load");
        assert_eq!(secrets.len(), 4, "{:?}", secrets.keys());
        assert_eq!(secrets["BATON_AGENTS_TOML"], "[agents.researcher]");
        assert_eq!(secrets["SLACK_BOT_TOKEN"], "xoxb-secret");
        assert_eq!(secrets["TRACKER_TOKEN"], "tracker-secret");
        assert_eq!(secrets["BATON_API_TOKEN"], "token-0123456789abcdef");
    }

    #[tokio::test(flavor = "multi_thread")]
    async fn the_stacks_public_url_is_read_from_its_parameter() {
        let moto = MotoServer::start().expect("moto");
        let cfg = moto.sdk_config().await;
        aws_sdk_ssm::Client::new(&cfg)
            .put_parameter()
            .name("/baton-stack/s1/public-url")
            .value("https://abc.execute-api.eu-west-1.amazonaws.com")
            .r#type(aws_sdk_ssm::types::ParameterType::String)
            .send()
            .await
            .expect("put parameter");
        assert_eq!(
            super::parameter(&cfg, "/baton-stack/s1/public-url")
                .await
                .expect("read"),
            "https://abc.execute-api.eu-west-1.amazonaws.com"
        );
        let missing = super::parameter(&cfg, "/baton-stack/nope/public-url").await;
        assert!(missing.is_err());
    }
}
