//! The per-person providers of a deployment, resolved: `[mcp.NAME]
//! auth = "oauth"` servers (endpoints discovered) and `[oauth.NAME]`
//! providers (endpoints given), their `${NAME}` references replaced.

use secrecy::SecretString;
use url::Url;

/// Where a provider's endpoints come from.
#[derive(Clone, Debug)]
pub enum ProviderKind {
    /// A per-person MCP server: its authorization server is discovered
    /// from `resource` (the server's URL, also sent as RFC 8707's
    /// `resource`).
    Mcp { resource: Url },
    /// An `[oauth.NAME]` provider.
    Declared { authorize_url: Url, token_url: Url },
}

/// A client registered at the provider by the operator (`client_id`, and
/// `client_secret` for a confidential client).
#[derive(Clone, Debug)]
pub struct StaticClient {
    pub client_id: String,
    pub client_secret: Option<SecretString>,
}

/// One per-person provider, resolved.
#[derive(Clone, Debug)]
pub struct Provider {
    /// The name connections are kept under (`[mcp.NAME]`/`[oauth.NAME]`).
    pub name: String,
    pub kind: ProviderKind,
    /// Asked for at authorisation; empty: none asked.
    pub scopes: Vec<String>,
    /// The table's client; `None`: Baton registers itself (MCP only).
    pub client: Option<StaticClient>,
}

impl Provider {
    /// The MCP server's URL, for a per-person MCP server.
    pub fn resource(&self) -> Option<&Url> {
        match &self.kind {
            ProviderKind::Mcp { resource } => Some(resource),
            ProviderKind::Declared { .. } => None,
        }
    }
}
