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
//! - **Per person** (`auth = "oauth"`, #24): listed and called with the
//!   task's person's bearer token ([`personal`]), one connection per
//!   (server, person); a person who has not connected is offered only
//!   `{server}__connect`, whose call waits for them to connect.

mod connection;
mod content;
mod naming;
mod personal;

use crate::declared::DeclaredToolError;
use crate::redact::Secrets;
use async_trait::async_trait;
use baton_core::connection::{Credentials, PersonKey};
use baton_core::{
    ListedTool, RemoteTools, Tool, ToolContext, ToolListing, ToolOutput, ToolSpec,
    UnavailableServer,
};
use connection::{Connection, Failure};
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
    /// `auth = "oauth"`: reached with each person's own token, the
    /// provider named as the server.
    pub oauth: bool,
}

impl McpServerDef {
    fn offers(&self, tool: &str) -> bool {
        self.tools
            .as_ref()
            .is_none_or(|list| list.iter().any(|t| t == tool))
    }
}

/// The declared MCP servers, by name.
pub struct McpServers {
    servers: BTreeMap<String, Arc<Connection>>,
    /// The per-person servers' connections.
    personal: personal::Personal,
}

impl McpServers {
    /// Checks what only resolved declarations can show (the URL, header
    /// values); connects to nothing yet.
    pub fn new(defs: Vec<McpServerDef>) -> Result<Self, (String, DeclaredToolError)> {
        let mut servers = BTreeMap::new();
        for def in defs {
            let name = def.name.clone();
            let conn = Connection::new(def).map_err(|e| (name.clone(), e))?;
            servers.insert(name, Arc::new(conn));
        }
        Ok(McpServers {
            servers,
            personal: Default::default(),
        })
    }

    /// Lists one server's offered tools (for `person`, with their token,
    /// when the server is per-person).
    async fn list_one(
        &self,
        server: &str,
        person: Option<&PersonKey>,
        credentials: Option<&Arc<dyn Credentials>>,
    ) -> Result<Vec<ListedTool>, String> {
        let conn = self
            .servers
            .get(server)
            .ok_or_else(|| "not configured".to_owned())?;
        let def = conn.def();
        let tools = if def.oauth {
            match self.personal.list(def, person, credentials).await? {
                personal::Listed::Tools(tools) => tools,
                personal::Listed::Connect => return Ok(vec![personal::connect_tool(def)]),
            }
        } else {
            conn.list_tools().await.map_err(Failure::text)?
        };
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
        self.list_for(servers, None, None).await
    }

    async fn list_for(
        &self,
        servers: &[&str],
        person: Option<&PersonKey>,
        credentials: Option<Arc<dyn Credentials>>,
    ) -> ToolListing {
        let credentials = credentials.as_ref();
        let listed = servers
            .iter()
            .map(|s| self.list_one(s, person, credentials));
        let results = join_all(listed).await;
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
        if listed.is_connect() {
            return conn
                .def()
                .oauth
                .then(|| Arc::new(personal::ConnectTool::new(listed.clone())) as Arc<dyn Tool>);
        }
        Some(Arc::new(McpTool {
            conn,
            listed: listed.clone(),
            personal: self.personal.clone(),
        }))
    }
}

/// One listed tool of an MCP server.
struct McpTool {
    conn: Arc<Connection>,
    listed: ListedTool,
    personal: personal::Personal,
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

    async fn call(&self, arguments: serde_json::Value, ctx: &ToolContext) -> ToolOutput {
        let arguments = match arguments {
            serde_json::Value::Object(map) => map,
            serde_json::Value::Null => serde_json::Map::new(),
            other => {
                return ToolOutput::error(format!("arguments must be a JSON object, not {other}"))
            }
        };
        let remote = &self.listed.remote_name;
        let called = if self.conn.def().oauth {
            self.personal
                .call(self.conn.def(), remote, arguments, ctx)
                .await
        } else {
            self.conn
                .call(remote, arguments)
                .await
                .map_err(Failure::text)
        };
        match called {
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
    let mut text = secrets.scrub(&error.to_string());
    // The SDK names its transport's Rust type (`Transport [rmcp::...]`):
    // noise to a reader.
    while let Some(start) = text.find(" [rmcp::") {
        match text[start..].find("] ") {
            Some(end) => text.replace_range(start..start + end + 1, ""),
            None => break,
        }
    }
    baton_core::tool::cut_middle(&text, 300, 100, |cut, _| {
        format!(" [... {cut} characters ...] ")
    })
    .0
}

#[cfg(test)]
mod tests {
    use super::*;
    use wiremock::matchers::any;
    use wiremock::{Mock, MockServer, ResponseTemplate};

    fn def(url: String, secret: &str) -> McpServerDef {
        McpServerDef {
            name: "tracker".into(),
            url: url.clone().into(),
            url_template: url,
            headers: vec![("Authorization".into(), format!("Bearer {secret}").into())],
            tools: None,
            require_approval: None,
            timeout: Duration::from_secs(5),
            secrets: vec![secret.to_owned().into()],
            oauth: false,
        }
    }

    /// Garbage, a refused connection and an unconfigured server: each is
    /// unavailable with a reason, none holding the secret, and a listed
    /// tool whose server went away answers with an error.
    #[tokio::test]
    async fn servers_that_fail_are_unavailable_with_a_readable_reason() {
        let secret = "tok-SECRET-123";
        let garbage = MockServer::start().await;
        Mock::given(any())
            .respond_with(
                ResponseTemplate::new(200)
                    .insert_header("content-type", "text/html")
                    .set_body_string(format!("<html>not MCP {secret}</html>")),
            )
            .mount(&garbage)
            .await;
        let mut down = def("http://127.0.0.1:9/mcp".into(), secret);
        down.name = "down".into();
        let servers = McpServers::new(vec![def(format!("{}/mcp", garbage.uri()), secret), down])
            .expect("valid declarations");
        let listing = servers.list(&["tracker", "down", "nowhere"]).await;
        assert!(listing.tools.is_empty());
        let reasons: Vec<(&str, &str)> = listing
            .unavailable
            .iter()
            .map(|u| (u.server.as_str(), u.reason.as_str()))
            .collect();
        assert_eq!(reasons.len(), 3, "{reasons:?}");
        assert_eq!(reasons[2], ("nowhere", "not configured"));
        for (server, reason) in &reasons[..2] {
            assert!(reason.starts_with("cannot connect"), "{server}: {reason}");
            assert!(!reason.contains("rmcp::"), "{server}: {reason}");
            assert!(!reason.contains(secret), "{server}: {reason}");
        }

        let listed = ListedTool {
            server: "down".into(),
            remote_name: "search".into(),
            spec: ToolSpec {
                name: "down__search".into(),
                description: String::new(),
                input_schema: serde_json::json!({"type": "object"}),
            },
            repeatable: true,
            needs_approval: false,
        };
        let tool = servers.tool(&listed).expect("configured server");
        let ctx = ToolContext::new(baton_core::TaskId::generate(), 1, "c1");
        let out = tool.call(serde_json::json!({"q": "x"}), &ctx).await;
        assert!(out.is_error);
        assert!(
            out.content.starts_with("MCP server `down`: cannot connect"),
            "{}",
            out.content
        );
        let out = tool.call(serde_json::json!("not an object"), &ctx).await;
        assert!(out.is_error && out.content.contains("must be a JSON object"));
        let mut gone = listed.clone();
        gone.server = "removed".into();
        assert!(servers.tool(&gone).is_none());
    }

    #[test]
    fn a_bad_resolved_declaration_names_its_key() {
        let Err((server, e)) = McpServers::new(vec![def("not a url".into(), "s")]) else {
            panic!("accepted")
        };
        assert_eq!((server.as_str(), e.field.as_str()), ("tracker", "url"));
        let mut d = def("http://127.0.0.1:9/mcp".into(), "s");
        d.headers = vec![("X-Key".into(), "bad\nvalue".to_owned().into())];
        let Err((_, e)) = McpServers::new(vec![d]) else {
            panic!("accepted")
        };
        assert_eq!(
            e.to_string(),
            "headers.X-Key: not a valid header value once resolved"
        );
    }
}
