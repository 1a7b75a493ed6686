//! MCP servers as tools (`[mcp.NAME]` in the agents file, docs/tools.md),
//! over streamable HTTP with the official Rust SDK (`rmcp`).
//!
//! - **Listing.** [`McpServers::list`] connects to each server an agent
//!   names and lists its tools when a task starts; the worker keeps the
//!   listing with the task, so every segment offers the same tools. A
//!   server that is down, slow or answers garbage is reported unavailable
//!   (the model is told why); the task runs on without it.
//! - **Protocol.** Each connection first asks `server/discover` (the
//!   stateless 2026-07-28 protocol) and falls back to the `initialize`
//!   handshake with a session when the server is older. A connection is
//!   kept for reuse within a process and dropped at its first failure: no
//!   segment depends on one made by another.
//! - **Crash safety and approvals** come from the tool's annotations
//!   ([`naming::listed`]): read-only or idempotent tools may run again
//!   after a crash, any other never does; a tool that is not read-only
//!   waits for approval unless the server's `require_approval` patterns
//!   or the agent's approval rules decide.
//! - **Secrets.** Header values and the URL are held as [`SecretString`],
//!   marked sensitive on the wire, and every resolved `${NAME}` value is
//!   scrubbed from results and errors.

mod connection;
mod content;
mod naming;

use crate::redact::Secrets;
use async_trait::async_trait;
use baton_core::{
    ListedTool, RemoteTools, Tool, ToolContext, ToolListing, ToolOutput, ToolSpec,
    UnavailableServer,
};
use connection::Connection;
use futures::future::join_all;
use secrecy::SecretString;
use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::time::Duration;

/// One `[mcp.NAME]` server with its `${NAME}` references resolved.
#[derive(Clone, Debug)]
pub struct McpServerDef {
    pub name: String,
    /// The endpoint with its references resolved: it may hold a secret.
    pub url: SecretString,
    /// The endpoint as declared (references unresolved): what logs show.
    pub url_template: String,
    /// Header name and resolved value.
    pub headers: Vec<(String, SecretString)>,
    /// Only these of its tools are offered; `None`: all.
    pub tools: Option<Vec<String>>,
    /// Tools matching one of these wait for approval and no other does;
    /// `None`: those not annotated read-only wait.
    pub require_approval: Option<Vec<String>>,
    /// For connecting, listing, and each call.
    pub timeout: Duration,
    /// Every value a reference resolved to; scrubbed from all outputs.
    pub secrets: Vec<SecretString>,
}

impl McpServerDef {
    fn offers(&self, tool: &str) -> bool {
        self.tools
            .as_ref()
            .is_none_or(|list| list.iter().any(|t| t == tool))
    }
}

/// Why a server declaration cannot be used; `field` is the key under
/// `mcp.NAME` at fault. Never holds a secret value.
#[derive(Debug, thiserror::Error)]
#[error("{field}: {message}")]
pub struct McpServerError {
    pub field: String,
    pub message: String,
}

/// The declared MCP servers, by name.
pub struct McpServers {
    servers: BTreeMap<String, Arc<Connection>>,
}

impl McpServers {
    /// Checks what only resolved declarations can show (the URL, header
    /// values); connects to nothing yet.
    pub fn new(defs: Vec<McpServerDef>) -> Result<Self, (String, McpServerError)> {
        let mut servers = BTreeMap::new();
        for def in defs {
            let name = def.name.clone();
            let conn = Connection::new(def).map_err(|e| (name.clone(), e))?;
            servers.insert(name, Arc::new(conn));
        }
        Ok(McpServers { servers })
    }

    /// Lists one server's offered tools.
    async fn list_one(&self, server: &str) -> Result<Vec<ListedTool>, String> {
        let conn = self
            .servers
            .get(server)
            .ok_or_else(|| "not configured".to_owned())?;
        let tools = conn.list_tools().await?;
        let def = conn.def();
        Ok(tools
            .iter()
            .filter(|t| def.offers(&t.name))
            .map(|t| naming::listed(def, t))
            .collect())
    }
}

#[async_trait]
impl RemoteTools for McpServers {
    async fn list(&self, servers: &[&str]) -> ToolListing {
        let results = join_all(servers.iter().map(|s| self.list_one(s))).await;
        let mut listing = ToolListing::default();
        let mut names = BTreeSet::new();
        for (server, result) in servers.iter().zip(results) {
            match result {
                Ok(tools) => {
                    for t in tools {
                        // Two tools whose names read the same once
                        // sanitised and cut: the first keeps the name.
                        if names.insert(t.spec.name.clone()) {
                            listing.tools.push(t);
                        } else {
                            tracing::warn!(server = %server, tool = %t.remote_name, name = %t.spec.name, "MCP tool skipped: its name is taken");
                        }
                    }
                }
                Err(reason) => listing.unavailable.push(UnavailableServer {
                    server: (*server).to_owned(),
                    reason,
                }),
            }
        }
        listing
    }

    fn tool(&self, listed: &ListedTool) -> Option<Arc<dyn Tool>> {
        let conn = self.servers.get(&listed.server)?.clone();
        Some(Arc::new(McpTool {
            conn,
            listed: listed.clone(),
        }))
    }
}

/// One listed tool of an MCP server.
struct McpTool {
    conn: Arc<Connection>,
    listed: ListedTool,
}

#[async_trait]
impl Tool for McpTool {
    fn spec(&self) -> ToolSpec {
        self.listed.spec.clone()
    }

    fn idempotent(&self, _arguments: &serde_json::Value) -> bool {
        self.listed.repeatable
    }

    fn needs_approval(&self, _arguments: &serde_json::Value) -> bool {
        self.listed.needs_approval
    }

    async fn call(&self, arguments: serde_json::Value, _ctx: &ToolContext) -> ToolOutput {
        let arguments = match arguments {
            serde_json::Value::Object(map) => map,
            serde_json::Value::Null => serde_json::Map::new(),
            other => {
                return ToolOutput::error(format!("arguments must be a JSON object, not {other}"))
            }
        };
        match self.conn.call(&self.listed.remote_name, arguments).await {
            Ok(output) => output,
            Err(message) => {
                tracing::warn!(server = %self.listed.server, tool = %self.listed.remote_name, error = %message, "MCP tool call failed");
                ToolOutput::error(message)
            }
        }
    }
}

/// What a server's failure reads as: secrets scrubbed, at most a few
/// hundred characters (an SDK error may quote a whole response).
fn readable(secrets: &Secrets, error: &dyn std::fmt::Display) -> String {
    let text = secrets.scrub(&error.to_string());
    baton_core::tool::cut_middle(&text, 300, 100, |cut, _| {
        format!(" [... {cut} characters ...] ")
    })
    .0
}
