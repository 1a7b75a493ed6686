//! Checking per-person OAuth settings: `[oauth.NAME]`, `auth` of
//! `[mcp.NAME]` and `[http_tools.NAME]`, and `[connection]`.

use super::checker::{check_url_template, Checker};
use super::duration::DurationSpec;
use super::mcp::McpSpec;
use crate::connection::{
    secure_or_loopback, ConnectionSettings, HttpToolAuth, McpAuth, McpOAuth, OAuthProviderDecl,
};
use crate::http_tool::{parse_template, valid_tool_name, TemplatePart};
use serde::Deserialize;
use std::collections::BTreeMap;

/// `[oauth.NAME]`: an OAuth 2 provider of an HTTP API. The key names are a
/// contract (docs/connections.md).
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct OAuthSpec {
    pub(super) authorize_url: Option<String>,
    pub(super) token_url: Option<String>,
    pub(super) client_id: Option<String>,
    pub(super) client_secret: Option<String>,
    pub(super) scopes: Option<Vec<String>>,
}

/// `[http_tools.NAME] auth = { oauth = "PROVIDER" }`.
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct HttpToolAuthSpec {
    pub(super) oauth: Option<String>,
}

/// `[connection]`.
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct ConnectionSpec {
    pub(super) expires_after: Option<DurationSpec>,
    pub(super) api_may_name_user: Option<bool>,
}

/// The literal text of a template with each `${NAME}` replaced by `x`.
fn sample(parts: &[TemplatePart]) -> String {
    parts
        .iter()
        .map(|p| match p {
            TemplatePart::Text(t) => t.as_str(),
            TemplatePart::Var(_) => "x",
        })
        .collect()
}

/// A scope as RFC 6749 allows it: printable ASCII, no space, `"` or `\`.
fn valid_scope(s: &str) -> bool {
    !s.is_empty()
        && s.bytes()
            .all(|b| (0x21..=0x7e).contains(&b) && b != b'"' && b != b'\\')
}

impl Checker<'_> {
    /// An OAuth endpoint: a URL template whose sample is https, or http to
    /// a loopback host.
    fn check_oauth_url(&mut self, path: String, url: Option<&str>) -> String {
        let Some(u) = url.map(str::trim) else {
            self.add(path, "required: an https:// URL");
            return String::new();
        };
        match check_url_template(u) {
            Err(m) => self.add(path, m),
            Ok(()) => {
                let secure = parse_template(u)
                    .ok()
                    .and_then(|parts| url::Url::parse(&sample(&parts)).ok())
                    .is_some_and(|parsed| secure_or_loopback(&parsed));
                if !secure {
                    self.add(
                        path,
                        "tokens travel here: must be an https:// URL (http:// only to localhost)",
                    );
                }
            }
        }
        u.to_owned()
    }

    /// `scopes` at `path`: each a valid OAuth scope.
    fn check_scopes(&mut self, path: &str, scopes: &[String]) {
        for (i, s) in scopes.iter().enumerate() {
            if !valid_scope(s) {
                self.add(
                    format!("{path}[{i}]"),
                    format!("`{s}` is not an OAuth scope (printable, no spaces)"),
                );
            }
        }
    }

    /// A `client_id` / `client_secret` value: not empty, `${NAME}` well
    /// formed.
    fn check_client_value(&mut self, path: String, value: &str) {
        if value.trim().is_empty() {
            self.add(path, "must not be empty");
        } else if let Err(m) = parse_template(value) {
            self.add(path, m);
        }
    }

    /// `[mcp.NAME]`'s `auth`, `scopes`, `client_id` and `client_secret`.
    pub(super) fn check_mcp_auth(&mut self, at: &str, spec: &McpSpec) -> McpAuth {
        match spec.auth.as_deref() {
            None => {
                for (key, set) in [
                    ("scopes", spec.scopes.is_some()),
                    ("client_id", spec.client_id.is_some()),
                    ("client_secret", spec.client_secret.is_some()),
                ] {
                    if set {
                        self.add(format!("{at}.{key}"), "only with auth = \"oauth\"");
                    }
                }
                McpAuth::None
            }
            Some("oauth") => {
                if let Some(h) = spec
                    .headers
                    .keys()
                    .find(|h| h.eq_ignore_ascii_case("authorization"))
                {
                    self.add(
                        format!("{at}.headers.{h}"),
                        "a server with auth = \"oauth\" is called with each person's token; remove the static Authorization header",
                    );
                }
                if let Some(u) = spec.url.as_deref().map(str::trim) {
                    let secure = parse_template(u)
                        .ok()
                        .and_then(|parts| url::Url::parse(&sample(&parts)).ok())
                        .is_none_or(|parsed| secure_or_loopback(&parsed));
                    if !secure {
                        self.add(
                            format!("{at}.url"),
                            "people's tokens travel here with auth = \"oauth\": must be an https:// URL (http:// only to localhost)",
                        );
                    }
                }
                let scopes = spec.scopes.clone().unwrap_or_default();
                self.check_scopes(&format!("{at}.scopes"), &scopes);
                if let Some(id) = &spec.client_id {
                    self.check_client_value(format!("{at}.client_id"), id);
                }
                if let Some(secret) = &spec.client_secret {
                    if spec.client_id.is_none() {
                        self.add(
                            format!("{at}.client_secret"),
                            "only with client_id (a registered client's secret)",
                        );
                    } else {
                        self.check_client_value(format!("{at}.client_secret"), secret);
                    }
                }
                McpAuth::OAuth(McpOAuth {
                    scopes,
                    client_id: spec.client_id.as_deref().map(|s| s.trim().to_owned()),
                    client_secret: spec.client_secret.clone(),
                })
            }
            Some(other) => {
                self.add(
                    format!("{at}.auth"),
                    format!("unknown `{other}`; the only value is \"oauth\""),
                );
                McpAuth::None
            }
        }
    }

    /// The `[oauth]` tables. A provider shares its name space with the
    /// per-person MCP servers (connections are kept per name).
    pub(super) fn check_oauth_providers(
        &mut self,
        providers: &BTreeMap<String, OAuthSpec>,
        mcp: &BTreeMap<String, McpSpec>,
    ) -> Vec<OAuthProviderDecl> {
        let mut out = Vec::with_capacity(providers.len());
        for (name, spec) in providers {
            let at = format!("oauth.{name}");
            let before = self.problems.len();
            if !valid_tool_name(name) || name.len() > 32 {
                self.add(
                    &at,
                    "provider names are letters, digits, `_` and `-` (1 to 32 characters)",
                );
            }
            if mcp
                .get(name)
                .is_some_and(|m| m.auth.as_deref() == Some("oauth"))
            {
                self.add(
                    &at,
                    format!("`{name}` is also an [mcp.{name}] with auth = \"oauth\"; connections are kept by name, so give the provider another"),
                );
            }
            let authorize_url =
                self.check_oauth_url(format!("{at}.authorize_url"), spec.authorize_url.as_deref());
            let token_url =
                self.check_oauth_url(format!("{at}.token_url"), spec.token_url.as_deref());
            let client_id = match &spec.client_id {
                None => {
                    self.add(
                        format!("{at}.client_id"),
                        "required: the client id registered at the provider",
                    );
                    String::new()
                }
                Some(id) => {
                    self.check_client_value(format!("{at}.client_id"), id);
                    id.trim().to_owned()
                }
            };
            if let Some(secret) = &spec.client_secret {
                self.check_client_value(format!("{at}.client_secret"), secret);
            }
            let scopes = spec.scopes.clone().unwrap_or_default();
            self.check_scopes(&format!("{at}.scopes"), &scopes);
            if self.problems.len() == before {
                out.push(OAuthProviderDecl {
                    name: name.clone(),
                    authorize_url,
                    token_url,
                    client_id,
                    client_secret: spec.client_secret.clone(),
                    scopes,
                });
            }
        }
        out
    }

    /// `[http_tools.NAME] auth`: a declared `[oauth]` provider, and no
    /// static Authorization header beside it.
    pub(super) fn check_http_tool_auth(
        &mut self,
        at: &str,
        auth: Option<&HttpToolAuthSpec>,
        headers: &BTreeMap<String, String>,
        providers: &BTreeMap<String, OAuthSpec>,
    ) -> HttpToolAuth {
        let Some(auth) = auth else {
            return HttpToolAuth::None;
        };
        let Some(provider) = auth.oauth.as_deref().map(str::trim) else {
            self.add(
                format!("{at}.auth"),
                "write auth = { oauth = \"NAME\" } with NAME an [oauth.NAME] provider",
            );
            return HttpToolAuth::None;
        };
        if !providers.contains_key(provider) {
            let declared: Vec<&str> = providers.keys().map(String::as_str).collect();
            self.add(
                format!("{at}.auth.oauth"),
                if declared.is_empty() {
                    format!("unknown provider `{provider}`; no [oauth.NAME] is declared")
                } else {
                    format!(
                        "unknown provider `{provider}`; declared: {}",
                        declared.join(", ")
                    )
                },
            );
        }
        if let Some(h) = headers
            .keys()
            .find(|h| h.eq_ignore_ascii_case("authorization"))
        {
            self.add(
                format!("{at}.headers.{h}"),
                "the tool sends each person's token (auth.oauth); remove the static Authorization header",
            );
        }
        HttpToolAuth::OAuth {
            provider: provider.to_owned(),
        }
    }

    /// `[connection]`.
    pub(super) fn check_connection(&mut self, spec: &ConnectionSpec) -> ConnectionSettings {
        let d = ConnectionSettings::default();
        ConnectionSettings {
            // Parsing refused a zero duration already.
            expires_after: spec
                .expires_after
                .map_or(d.expires_after, |DurationSpec(e)| e),
            api_may_name_user: spec.api_may_name_user.unwrap_or(d.api_may_name_user),
        }
    }
}

#[cfg(test)]
mod tests {
    use crate::file::AgentsSource;
    use crate::{AgentConfig, HttpToolAuth, McpAuth};
    use std::time::Duration;

    fn load(text: &str) -> Result<crate::AgentsConfig, String> {
        AgentsSource::new("baton.toml", text, "/nonexistent")
            .load(&AgentConfig::new("default", "m"), &["http_request"])
            .map_err(|e| e.to_string())
    }

    const TOOL: &str = "[http_tools.me]\ndescription = \"who\"\nmethod = \"GET\"\nurl = \"https://api.example/me\"\n";

    #[test]
    fn per_person_settings_are_typed() {
        let text = format!(
            "[mcp.docs]\nurl = \"https://docs.example/mcp\"\nauth = \"oauth\"\nscopes = [\"read\", \"write\"]\n\
             client_id = \"baton\"\nclient_secret = \"${{DOCS_SECRET}}\"\n\n\
             [mcp.plain]\nurl = \"https://plain.example/mcp\"\n\n\
             [oauth.api]\nauthorize_url = \"https://as.example/authorize\"\ntoken_url = \"http://127.0.0.1:9/token\"\n\
             client_id = \"${{API_ID}}\"\nscopes = [\"me\"]\n\n\
             {TOOL}auth = {{ oauth = \"api\" }}\n\n\
             [connection]\nexpires_after = \"30m\"\napi_may_name_user = true\n"
        );
        let c = load(&text).unwrap();
        let docs = c.mcp_servers.iter().find(|s| s.name == "docs").unwrap();
        let o = docs.auth.oauth().unwrap();
        assert_eq!(o.scopes, vec!["read", "write"]);
        assert_eq!(o.client_id.as_deref(), Some("baton"));
        assert_eq!(o.client_secret.as_deref(), Some("${DOCS_SECRET}"));
        let plain = c.mcp_servers.iter().find(|s| s.name == "plain").unwrap();
        assert_eq!(plain.auth, McpAuth::None);
        let p = &c.oauth_providers[0];
        assert_eq!(
            (p.name.as_str(), p.client_id.as_str()),
            ("api", "${API_ID}")
        );
        assert_eq!(p.client_secret, None);
        assert_eq!(
            c.http_tools[0].auth,
            HttpToolAuth::OAuth {
                provider: "api".into()
            }
        );
        assert_eq!(
            c.settings.connection.expires_after,
            Duration::from_secs(1800)
        );
        assert!(c.settings.connection.api_may_name_user);
        // Unset: one hour, and the API names nobody.
        let d = load("").unwrap();
        assert_eq!(
            d.settings.connection.expires_after,
            Duration::from_secs(3600)
        );
        assert!(!d.settings.connection.api_may_name_user);
    }

    #[test]
    fn bad_per_person_settings_name_the_key() {
        let provider = "[oauth.api]\nauthorize_url = \"https://as.example/a\"\ntoken_url = \"https://as.example/t\"\nclient_id = \"x\"\n";
        let mcp = "[mcp.t]\nurl = \"https://x.example/mcp\"\n";
        let cases: Vec<(String, &str)> = vec![
            (format!("{mcp}auth = \"basic\"\n"), "mcp.t.auth: unknown `basic`"),
            (format!("{mcp}scopes = [\"a\"]\n"), "mcp.t.scopes: only with auth = \"oauth\""),
            (
                format!("{mcp}auth = \"oauth\"\nclient_secret = \"${{S}}\"\n"),
                "mcp.t.client_secret: only with client_id",
            ),
            (
                format!("{mcp}auth = \"oauth\"\nheaders = {{ Authorization = \"Bearer ${{T}}\" }}\n"),
                "mcp.t.headers.Authorization: a server with auth = \"oauth\"",
            ),
            (
                "[mcp.t]\nurl = \"http://x.example/mcp\"\nauth = \"oauth\"\n".into(),
                "mcp.t.url: people's tokens travel here",
            ),
            (
                format!("{mcp}auth = \"oauth\"\nscopes = [\"a b\"]\n"),
                "mcp.t.scopes[0]: `a b` is not an OAuth scope",
            ),
            (
                format!("{TOOL}auth = {{ oauth = \"nope\" }}\n"),
                "http_tools.me.auth.oauth: unknown provider `nope`; no [oauth.NAME] is declared",
            ),
            (
                format!("{provider}{TOOL}auth = {{ oauth = \"nope\" }}\n"),
                "http_tools.me.auth.oauth: unknown provider `nope`; declared: api",
            ),
            (
                format!("{provider}{TOOL}headers = {{ Authorization = \"x\" }}\nauth = {{ oauth = \"api\" }}\n"),
                "http_tools.me.headers.Authorization: the tool sends each person's token",
            ),
            (
                format!("{TOOL}auth = {{ bearer = \"x\" }}\n"),
                "unknown field `bearer`",
            ),
            (
                "[oauth.api]\nauthorize_url = \"http://as.example/a\"\ntoken_url = \"https://as.example/t\"\nclient_id = \"x\"\n".into(),
                "oauth.api.authorize_url: tokens travel here: must be an https:// URL",
            ),
            (
                "[oauth.api]\nauthorize_url = \"https://as.example/a\"\nclient_id = \"x\"\n".into(),
                "oauth.api.token_url: required",
            ),
            (
                "[oauth.api]\nauthorize_url = \"https://as.example/a\"\ntoken_url = \"https://as.example/t\"\n".into(),
                "oauth.api.client_id: required",
            ),
            (
                format!("{provider}client_secret = \"${{BAD NAME}}\"\n"),
                "oauth.api.client_secret: `${BAD NAME}` is not a variable reference",
            ),
            (
                format!("{provider}[mcp.api]\nurl = \"https://x.example/mcp\"\nauth = \"oauth\"\n"),
                "oauth.api: `api` is also an [mcp.api]",
            ),
            (
                "[connection]\nexpires_after = \"0s\"\n".into(),
                "connection.expires_after",
            ),
            ("[connection]\nwho = 1\n".into(), "connection.who: unknown field"),
        ];
        for (text, expected) in cases {
            let e = load(&text).map(|_| ()).expect_err(&text);
            assert!(e.contains(expected), "expected `{expected}` in:\n{e}");
        }
    }
}
