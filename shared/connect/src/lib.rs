//! Per-person OAuth connections (issue #24, docs/connections.md): how
//! Baton authorises as a person at an MCP server or an HTTP API, and the
//! [`baton_core::connection::Credentials`] tools use.
//!
//! - [`discovery`]: an MCP server's authorization server, as the MCP
//!   authorization spec says (rmcp's `auth` fetches the metadata).
//! - [`flow`]: which client Baton is, the authorization URL (PKCE S256,
//!   RFC 8707 `resource`), the code exchange and the refresh (oauth2).
//! - [`ConnectionVault`]: the person's bearer token, refreshed once
//!   across segments, over vault's `ConnectionStore`.

pub mod discovery;
mod error;
pub mod flow;
mod http;
pub mod provider;
mod vault;

pub use error::ConnectError;
pub use flow::{
    browser_secret, Authorization, ClientRegistry, Connector, RegisteredClient, CALLBACK_PATH,
    CLIENT_METADATA_PATH,
};
pub use provider::{Provider, ProviderKind, StaticClient};
pub use vault::{ConnectionVault, StoredClients};
