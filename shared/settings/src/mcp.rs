//! MCP servers: the `[mcp.NAME]` tables of the agents file, as checked
//! data. Their `${NAME}` references are still unresolved here; the runtime
//! resolves them at start-up, and the tools crate connects to the server.
//! An agent uses a server by listing `mcp:NAME` among its `tools`.

use std::collections::BTreeMap;
use std::time::Duration;

/// How an agent's `tools` list names a server: `mcp:NAME`.
pub const MCP_TOOLS_PREFIX: &str = "mcp:";

/// The timeout of a server that sets none: for connecting, listing and
/// each call.
pub const DEFAULT_MCP_TIMEOUT: Duration = Duration::from_secs(30);

/// One `[mcp.NAME]` table, checked.
#[derive(Clone, Debug, PartialEq)]
pub struct McpServerDecl {
    /// The server's name: `mcp:NAME` in `tools`, the `NAME__` prefix of
    /// its tools' names.
    pub name: String,
    /// The streamable HTTP endpoint as written, `${NAME}` references
    /// included.
    pub url: String,
    /// Header name to value as written, `${NAME}` references included.
    pub headers: BTreeMap<String, String>,
    /// Only these of the server's tools are offered; `None`: all.
    pub tools: Option<Vec<String>>,
    /// `None`: a tool waits for approval unless the server annotates it
    /// read-only. `Some`: the tools matching one of these patterns wait
    /// and no other does.
    pub require_approval: Option<Vec<String>>,
    pub timeout: Duration,
    /// `auth = "oauth"`: per-person connections (the provider is `name`).
    pub auth: crate::connection::McpAuth,
}

impl McpServerDecl {
    /// Whether the server's tool `tool` (its own name) is offered.
    pub fn offers(&self, tool: &str) -> bool {
        self.tools
            .as_ref()
            .is_none_or(|list| list.iter().any(|t| t == tool))
    }
}

/// The server an agent's `tools` entry names, if it names one.
pub fn server_of_entry(entry: &str) -> Option<&str> {
    entry.strip_prefix(MCP_TOOLS_PREFIX)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn entries_name_servers() {
        assert_eq!(server_of_entry("mcp:tracker"), Some("tracker"));
        assert_eq!(server_of_entry("http_request"), None);
        let decl = McpServerDecl {
            name: "t".into(),
            url: "http://x/mcp".into(),
            headers: BTreeMap::new(),
            tools: Some(vec!["search".into()]),
            require_approval: None,
            timeout: DEFAULT_MCP_TIMEOUT,
            auth: crate::McpAuth::None,
        };
        assert!(decl.offers("search"));
        assert!(!decl.offers("create_issue"));
    }
}
