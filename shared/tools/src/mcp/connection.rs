//! One MCP server: its transport settings, and a connection kept for
//! reuse, made again after any failure. A per-person server has one such
//! connection per person, holding that person's bearer token
//! ([`Connection::for_person`]): never shared across people.

use super::content;
use super::{readable, McpServerDef};
use crate::declared::{resolved_endpoint, DeclaredToolError};
use crate::redact::Secrets;
use baton_core::ToolOutput;
use reqwest::header::{HeaderName, HeaderValue};
use rmcp::model::{CallToolRequestParams, ClientConfig, Implementation, ProtocolVersion};
use rmcp::service::{ClientLifecycleMode, ClientServiceExt, RoleClient, RunningService};
use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
use rmcp::transport::StreamableHttpClientTransport;
use secrecy::{ExposeSecret, SecretString};
use std::collections::HashMap;
use std::sync::Arc;
use tokio::sync::Mutex;

type Client = RunningService<RoleClient, ClientConfig>;

/// Why a server could not be used.
#[derive(Debug)]
pub(super) enum Failure {
    /// It answered 401 with a challenge: the token is not (or no longer)
    /// good (per-person servers).
    Unauthorized,
    /// Anything else, as text the model may read.
    Failed(String),
}

impl Failure {
    /// The text of a failure; an unauthorised answer reads as such.
    pub(super) fn text(self) -> String {
        match self {
            Failure::Unauthorized => "the server refused the credentials (HTTP 401)".to_owned(),
            Failure::Failed(text) => text,
        }
    }
}

pub(super) struct Connection {
    def: McpServerDef,
    url: Arc<str>,
    headers: HashMap<HeaderName, HeaderValue>,
    secrets: Secrets,
    live: Mutex<Option<Arc<Client>>>,
}

impl Connection {
    pub(super) fn new(def: McpServerDef) -> Result<Self, DeclaredToolError> {
        let (url, headers) = resolved_endpoint(&def.url, &def.headers)?;
        let headers: HashMap<HeaderName, HeaderValue> = headers.into_iter().collect();
        let secrets = Secrets::for_endpoint(def.secrets.clone(), &def.headers);
        Ok(Connection {
            url: Arc::from(url.as_str()),
            def,
            headers,
            secrets,
            live: Mutex::new(None),
        })
    }

    pub(super) fn def(&self) -> &McpServerDef {
        &self.def
    }

    /// A connection to `def`'s server carrying `token` as the bearer
    /// (`auth = "oauth"`): one person's, scrubbed from every output.
    pub(super) fn for_person(
        def: &McpServerDef,
        token: &SecretString,
    ) -> Result<Self, DeclaredToolError> {
        let mut def = def.clone();
        def.headers
            .retain(|(name, _)| !name.eq_ignore_ascii_case("authorization"));
        let value = format!("Bearer {}", token.expose_secret());
        def.headers.push(("Authorization".to_owned(), value.into()));
        def.secrets.push(token.clone());
        let mut conn = Connection::new(def)?;
        for value in conn.headers.values_mut() {
            value.set_sensitive(true);
        }
        Ok(conn)
    }

    /// The live connection, made now if there is none.
    async fn client(&self) -> Result<Arc<Client>, Failure> {
        let mut live = self.live.lock().await;
        if let Some(c) = live.as_ref() {
            return Ok(c.clone());
        }
        let config = StreamableHttpClientTransportConfig::with_uri(self.url.clone())
            .custom_headers(self.headers.clone())
            .max_concurrent_requests(8);
        let transport = StreamableHttpClientTransport::from_config(config);
        let info = ClientConfig::new(
            Default::default(),
            Implementation::new("baton", env!("CARGO_PKG_VERSION")),
        );
        // The stateless protocol when the server speaks it, else the
        // `initialize` handshake and a session.
        let lifecycle = ClientLifecycleMode::Auto {
            preferred_versions: vec![ProtocolVersion::V_2026_07_28],
            legacy_version: Some(ProtocolVersion::LATEST_WITH_INITIALIZE),
        };
        let connect = info.serve_with_lifecycle(transport, lifecycle);
        let client = match tokio::time::timeout(self.def.timeout, connect).await {
            Ok(Ok(c)) => Arc::new(c),
            Ok(Err(e)) if e.is_authorization_required() => return Err(Failure::Unauthorized),
            Ok(Err(e)) => {
                return Err(Failure::Failed(format!(
                    "cannot connect: {}",
                    readable(&self.secrets, &e)
                )))
            }
            Err(_) => {
                return Err(Failure::Failed(format!(
                    "no answer within {} s",
                    self.def.timeout.as_secs_f32()
                )))
            }
        };
        *live = Some(client.clone());
        Ok(client)
    }

    /// Forgets the connection after a failure: the next use makes a new
    /// one (a session the server dropped, a restarted server).
    async fn drop_client(&self) {
        self.live.lock().await.take();
    }

    /// The server's tools, every page.
    pub(super) async fn list_tools(&self) -> Result<Vec<rmcp::model::Tool>, Failure> {
        let client = self.client().await?;
        match tokio::time::timeout(self.def.timeout, client.list_all_tools()).await {
            Ok(Ok(tools)) => Ok(tools),
            Ok(Err(e)) => {
                self.drop_client().await;
                if e.is_authorization_required() {
                    return Err(Failure::Unauthorized);
                }
                Err(Failure::Failed(format!(
                    "cannot list its tools: {}",
                    readable(&self.secrets, &e)
                )))
            }
            Err(_) => {
                self.drop_client().await;
                Err(Failure::Failed(format!(
                    "no tool list within {} s",
                    self.def.timeout.as_secs_f32()
                )))
            }
        }
    }

    /// Calls `tool`. `Err` is a failure to reach the server or a protocol
    /// error, as text the model may read; a result the server marks
    /// `isError` is an `Ok` error output.
    pub(super) async fn call(
        &self,
        tool: &str,
        arguments: serde_json::Map<String, serde_json::Value>,
    ) -> Result<ToolOutput, Failure> {
        let server = &self.def.name;
        let client = match self.client().await {
            Ok(c) => c,
            Err(Failure::Failed(e)) => {
                return Err(Failure::Failed(format!("MCP server `{server}`: {e}")))
            }
            Err(unauthorized) => return Err(unauthorized),
        };
        let params = CallToolRequestParams::new(tool.to_owned()).with_arguments(arguments);
        match tokio::time::timeout(self.def.timeout, client.call_tool(params)).await {
            Ok(Ok(result)) => Ok(content::output(&result, &self.secrets)),
            Ok(Err(rmcp::ServiceError::McpError(e))) => {
                // The server answered with a JSON-RPC error (unknown tool,
                // bad arguments): the connection is fine.
                Err(Failure::Failed(format!(
                    "MCP server `{server}` refused the call: {}",
                    readable(&self.secrets, &e.message)
                )))
            }
            Ok(Err(e)) => {
                self.drop_client().await;
                if e.is_authorization_required() {
                    return Err(Failure::Unauthorized);
                }
                Err(Failure::Failed(format!(
                    "MCP server `{server}` failed: {}",
                    readable(&self.secrets, &e)
                )))
            }
            Err(_) => {
                self.drop_client().await;
                Err(Failure::Failed(format!(
                    "MCP server `{server}` did not answer within {} s; the call may or may not have happened",
                    self.def.timeout.as_secs_f32()
                )))
            }
        }
    }
}
