//! Per-person OAuth connections (issue #24), as checked data: the
//! `[oauth.NAME]` providers of HTTP APIs, `auth = "oauth"` of an
//! `[mcp.NAME]` server, `auth = { oauth = "NAME" }` of a declared HTTP
//! tool, and the deployment's `[connection]` table. `${NAME}` references
//! in `client_id` / `client_secret` are still unresolved here; the
//! runtime resolves them at start-up.

use std::time::Duration;

/// How long a task waits for its person to connect when
/// `[connection] expires_after` is not set.
pub const DEFAULT_CONNECTION_EXPIRES_AFTER: Duration = Duration::from_secs(3600);

/// How an `[mcp.NAME]` server is authorised.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub enum McpAuth {
    /// Today's behaviour: the declared `headers`, the same for everyone.
    #[default]
    None,
    /// `auth = "oauth"`: each person connects their own account; the
    /// provider is named after the server.
    OAuth(McpOAuth),
}

impl McpAuth {
    /// The OAuth settings, when the server is per-person.
    pub fn oauth(&self) -> Option<&McpOAuth> {
        match self {
            McpAuth::None => None,
            McpAuth::OAuth(o) => Some(o),
        }
    }
}

/// `[mcp.NAME] auth = "oauth"`'s optional keys. Without `client_id`,
/// Baton registers itself (Client ID Metadata Document, else dynamic
/// registration).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct McpOAuth {
    /// Asked for at authorisation; empty: what the server's metadata
    /// says (or none).
    pub scopes: Vec<String>,
    /// As written, `${NAME}` references included.
    pub client_id: Option<String>,
    /// As written (normally `${NAME}`); only with `client_id`.
    pub client_secret: Option<String>,
}

/// One `[oauth.NAME]` table, checked: the provider of an HTTP API that
/// declared tools reach with the person's bearer token.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct OAuthProviderDecl {
    pub name: String,
    /// https (http only to a loopback host), `${NAME}` references included.
    pub authorize_url: String,
    pub token_url: String,
    /// As written, `${NAME}` references included.
    pub client_id: String,
    /// As written (normally `${NAME}`); `None`: a public client (PKCE).
    pub client_secret: Option<String>,
    pub scopes: Vec<String>,
}

/// `[http_tools.X] auth`: how a declared tool is authorised.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub enum HttpToolAuth {
    /// The declared `headers` only.
    #[default]
    None,
    /// `auth = { oauth = "NAME" }`: `Authorization: Bearer` with the
    /// person's token for the `[oauth.NAME]` provider.
    OAuth { provider: String },
}

impl HttpToolAuth {
    /// The provider whose connection the tool needs, if any.
    pub fn provider(&self) -> Option<&str> {
        match self {
            HttpToolAuth::None => None,
            HttpToolAuth::OAuth { provider } => Some(provider),
        }
    }
}

/// The `[connection]` table.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ConnectionSettings {
    /// How long a task waits for its person to connect (default 1h).
    pub expires_after: Duration,
    /// Whether the HTTP API's token may name a `user` in `POST /tasks`
    /// (the task then acts with that person's connections). Default
    /// false.
    pub api_may_name_user: bool,
}

impl Default for ConnectionSettings {
    fn default() -> Self {
        ConnectionSettings {
            expires_after: DEFAULT_CONNECTION_EXPIRES_AFTER,
            api_may_name_user: false,
        }
    }
}

/// Whether a URL may carry OAuth traffic: https, or http to a loopback
/// host (for tests and `baton dev` against a local provider).
pub fn secure_or_loopback(url: &url::Url) -> bool {
    match url.scheme() {
        "https" => true,
        "http" => match url.host() {
            Some(url::Host::Domain(d)) => d.eq_ignore_ascii_case("localhost"),
            Some(url::Host::Ipv4(ip)) => ip.is_loopback(),
            Some(url::Host::Ipv6(ip)) => ip.is_loopback(),
            None => false,
        },
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_https_or_loopback_carries_oauth() {
        let ok = |u: &str| secure_or_loopback(&url::Url::parse(u).unwrap());
        assert!(ok("https://as.example/token"));
        assert!(ok("http://127.0.0.1:8080/token"));
        assert!(ok("http://localhost/token"));
        assert!(ok("http://[::1]:9/x"));
        assert!(!ok("http://as.example/token"));
        assert!(!ok("http://10.0.0.1/token"));
        assert!(!ok("ftp://as.example/token"));
    }
}
