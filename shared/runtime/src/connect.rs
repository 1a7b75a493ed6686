//! Per-person OAuth providers (`[mcp.NAME] auth = "oauth"`,
//! `[oauth.NAME]`), resolved: their `${NAME}` references replaced from the
//! environment (and the secrets loaded from SSM), every unset name refused
//! at start-up by its key (the flows and credentials built over them are
//! [`crate::Settings::connector`]'s and [`crate::Settings::credentials`]'s;
//! docs/connections.md). Sign in with Slack (`SLACK_CLIENT_ID`,
//! `SLACK_CLIENT_SECRET`) proves who opened a Slack person's Connect link.

use crate::source::{SettingsError, Source};
use baton_connect::{Provider, ProviderKind, StaticClient};
use baton_settings::{parse_template, AgentsConfig, Problem, TemplatePart};
use secrecy::SecretString;
use url::Url;

/// Sign in with Slack for Connect links: the Slack app's `SLACK_CLIENT_ID`
/// and `SLACK_CLIENT_SECRET` (from SSM on AWS, like the other Slack
/// secrets), its authorize page (`SLACK_OPENID_AUTHORIZE_URL`, Slack's by
/// default) and the Web API base (`SLACK_API_URL`).
#[derive(Clone)]
pub struct SignInSettings {
    pub client_id: String,
    pub(crate) client_secret: SecretString,
    pub api_url: String,
    pub authorize_url: String,
}

impl std::fmt::Debug for SignInSettings {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SignInSettings")
            .field("client_id", &self.client_id)
            .field("api_url", &self.api_url)
            .field("authorize_url", &self.authorize_url)
            .finish_non_exhaustive()
    }
}

/// `SLACK_CLIENT_ID` and `SLACK_CLIENT_SECRET`, both or neither; the URLs
/// https (http only to localhost).
pub(crate) fn sign_in_settings(src: &Source<'_>) -> Result<Option<SignInSettings>, SettingsError> {
    let (id, secret) = match (src.var("SLACK_CLIENT_ID"), src.var("SLACK_CLIENT_SECRET")) {
        (None, None) => return Ok(None),
        (Some(id), Some(secret)) => (id, secret),
        (Some(_), None) => return Err(SettingsError::Missing("SLACK_CLIENT_SECRET")),
        (None, Some(_)) => return Err(SettingsError::Missing("SLACK_CLIENT_ID")),
    };
    let url = |name: &'static str, default: &str| -> Result<String, SettingsError> {
        let value = src.var(name).unwrap_or_else(|| default.to_owned());
        match Url::parse(&value) {
            Ok(u) if baton_settings::connection::secure_or_loopback(&u) => Ok(value),
            _ => Err(SettingsError::Invalid {
                name,
                message: "must be an https:// URL (http:// only to localhost)".into(),
            }),
        }
    };
    Ok(Some(SignInSettings {
        client_id: id,
        client_secret: SecretString::from(secret),
        api_url: url("SLACK_API_URL", baton_slack::web::DEFAULT_API_URL)?,
        authorize_url: url(
            "SLACK_OPENID_AUTHORIZE_URL",
            baton_slack::openid::DEFAULT_AUTHORIZE_URL,
        )?,
    }))
}

/// `template` with its references replaced; an unset name is a problem at
/// `path`.
fn resolve(src: &Source<'_>, path: &str, template: &str, problems: &mut Vec<Problem>) -> String {
    let mut out = String::new();
    // The file was checked: references are well formed.
    for part in parse_template(template).unwrap_or_default() {
        match part {
            TemplatePart::Text(t) => out.push_str(&t),
            TemplatePart::Var(name) => match src.var(&name) {
                Some(value) => out.push_str(&value),
                None => problems.push(Problem {
                    path: path.to_owned(),
                    message: format!("${{{name}}} is not set"),
                }),
            },
        }
    }
    out
}

fn url_at(src: &Source<'_>, path: String, template: &str, problems: &mut Vec<Problem>) -> Url {
    let text = resolve(src, &path, template, problems);
    match Url::parse(&text) {
        Ok(u) if baton_settings::connection::secure_or_loopback(&u) => u,
        Ok(_) => {
            problems.push(Problem {
                path,
                message: "resolves to a URL that is not https:// (http:// only to localhost)"
                    .into(),
            });
            Url::parse("https://invalid.invalid").unwrap_or_else(|_| unreachable!())
        }
        Err(e) => {
            problems.push(Problem {
                path,
                message: format!("resolves to something that is not a URL: {e}"),
            });
            Url::parse("https://invalid.invalid").unwrap_or_else(|_| unreachable!())
        }
    }
}

/// The per-person providers of `loaded`, resolved; every problem at once.
pub(crate) fn resolve_providers(
    src: &Source<'_>,
    loaded: &AgentsConfig,
) -> Result<Vec<Provider>, Vec<Problem>> {
    let mut problems = Vec::new();
    let mut out = Vec::new();
    for d in &loaded.mcp_servers {
        let Some(o) = d.auth.oauth() else { continue };
        let at = format!("mcp.{}", d.name);
        let resource = url_at(src, format!("{at}.url"), &d.url, &mut problems);
        let client = o.client_id.as_ref().map(|id| StaticClient {
            client_id: resolve(src, &format!("{at}.client_id"), id, &mut problems),
            client_secret: o.client_secret.as_ref().map(|s| {
                SecretString::from(resolve(
                    src,
                    &format!("{at}.client_secret"),
                    s,
                    &mut problems,
                ))
            }),
        });
        out.push(Provider {
            name: d.name.clone(),
            kind: ProviderKind::Mcp { resource },
            scopes: o.scopes.clone(),
            client,
        });
    }
    for d in &loaded.oauth_providers {
        let at = format!("oauth.{}", d.name);
        let authorize_url = url_at(
            src,
            format!("{at}.authorize_url"),
            &d.authorize_url,
            &mut problems,
        );
        let token_url = url_at(src, format!("{at}.token_url"), &d.token_url, &mut problems);
        let client = StaticClient {
            client_id: resolve(src, &format!("{at}.client_id"), &d.client_id, &mut problems),
            client_secret: d.client_secret.as_ref().map(|s| {
                SecretString::from(resolve(
                    src,
                    &format!("{at}.client_secret"),
                    s,
                    &mut problems,
                ))
            }),
        };
        out.push(Provider {
            name: d.name.clone(),
            kind: ProviderKind::Declared {
                authorize_url,
                token_url,
            },
            scopes: d.scopes.clone(),
            client: Some(client),
        });
    }
    if problems.is_empty() {
        Ok(out)
    } else {
        Err(problems)
    }
}
