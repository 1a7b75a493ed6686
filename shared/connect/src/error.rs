//! Why a connection could not be made or refreshed: readable, and never
//! a token, a client secret or a response body.

/// What went wrong connecting to a provider.
#[derive(Debug, thiserror::Error)]
pub enum ConnectError {
    /// No `[oauth.NAME]` nor per-person `[mcp.NAME]` of that name.
    #[error("no per-person provider is named `{0}`")]
    UnknownProvider(String),
    /// The MCP server's authorization metadata is missing or unusable.
    #[error("cannot discover how to authorise with `{provider}`: {reason}")]
    Discovery { provider: String, reason: String },
    /// No client could be registered, and none is configured.
    #[error("cannot register Baton as a client of `{provider}`: {reason}")]
    Registration { provider: String, reason: String },
    /// The authorization server refused the code or the refresh token
    /// (`invalid_grant`...): the person must connect again.
    #[error("`{provider}` refused: {reason}")]
    Refused { provider: String, reason: String },
    /// The authorization server could not be reached or answered
    /// something unreadable.
    #[error("`{provider}` could not be reached: {reason}")]
    Unreachable { provider: String, reason: String },
    /// The connection store failed.
    #[error("the connection store failed: {0}")]
    Store(String),
}
