//! Per-person MCP servers (`[mcp.NAME] auth = "oauth"`, #24): each call
//! and listing carries the task's person's bearer token for the provider
//! named as the server, over a connection of that (server, person) alone.
//! A 401 hands the token back as rejected ([`Credentials::rejected`]) and
//! tries once more with the one that replaces it; refused again, or with
//! no connection at all, the person is asked to connect
//! ([`ToolOutput::needs_connection`]).

use super::connection::{Connection, Failure};
use super::McpServerDef;
use baton_core::connection::{connect_tool_name, CredentialError, Credentials, PersonKey};
use baton_core::{ListedTool, Tool, ToolContext, ToolOutput, ToolSpec};
use secrecy::{ExposeSecret, SecretString};
use std::collections::HashMap;
use std::sync::{Arc, Mutex};

/// Most per-person connections kept in a process; past it, all are
/// dropped and made again as needed (a connection is only a cache).
const MAX_KEPT: usize = 1_000;

/// A connection per (server, person), for the token it was made with.
#[derive(Clone, Default)]
pub(super) struct Personal {
    kept: Arc<Mutex<HashMap<(String, PersonKey), Kept>>>,
}

struct Kept {
    /// A digest of the token the connection carries: a refreshed token
    /// gets a new connection.
    token: String,
    conn: Arc<Connection>,
}

/// What listing a per-person server for someone gives.
pub(super) enum Listed {
    Tools(Vec<rmcp::model::Tool>),
    /// They have no working connection: offer `{server}__connect`.
    Connect,
}

impl Personal {
    /// The connection of `person` to `def`'s server carrying `token`.
    fn connection(
        &self,
        def: &McpServerDef,
        person: &PersonKey,
        token: &SecretString,
    ) -> Result<Arc<Connection>, String> {
        let digest = baton_core::connection::state_hash(token.expose_secret());
        let key = (def.name.clone(), person.clone());
        let mut kept = self
            .kept
            .lock()
            .map_err(|_| "the connection cache is unusable".to_owned())?;
        if let Some(k) = kept.get(&key).filter(|k| k.token == digest) {
            return Ok(k.conn.clone());
        }
        let conn = Arc::new(Connection::for_person(def, token).map_err(|e| e.to_string())?);
        if kept.len() >= MAX_KEPT {
            kept.clear();
        }
        kept.insert(
            key,
            Kept {
                token: digest,
                conn: conn.clone(),
            },
        );
        Ok(conn)
    }

    /// Runs `op` on `person`'s connection with their token; on a 401,
    /// once more with the token that replaces the rejected one.
    async fn with_token<T, F, Fut>(
        &self,
        def: &McpServerDef,
        person: &PersonKey,
        credentials: &Arc<dyn Credentials>,
        op: F,
    ) -> Result<Result<T, String>, CredentialError>
    where
        F: Fn(Arc<Connection>) -> Fut,
        Fut: std::future::Future<Output = Result<T, Failure>>,
    {
        let provider = def.name.as_str();
        let token = credentials.bearer(person, provider).await?;
        let conn = match self.connection(def, person, &token) {
            Ok(c) => c,
            Err(e) => return Ok(Err(e)),
        };
        match op(conn).await {
            Ok(v) => return Ok(Ok(v)),
            Err(Failure::Failed(e)) => return Ok(Err(e)),
            Err(Failure::Unauthorized) => {}
        }
        let fresh = credentials.rejected(person, provider, &token).await?;
        let conn = match self.connection(def, person, &fresh) {
            Ok(c) => c,
            Err(e) => return Ok(Err(e)),
        };
        match op(conn).await {
            Ok(v) => Ok(Ok(v)),
            Err(Failure::Failed(e)) => Ok(Err(e)),
            // Refused right after a refresh: the grant is gone.
            Err(Failure::Unauthorized) => Err(CredentialError::NotConnected {
                person: person.clone(),
                provider: provider.to_owned(),
            }),
        }
    }

    /// Lists `def`'s server for `person`. `Err`: unavailable, saying why
    /// (nobody to act for, the vault or the server down).
    pub(super) async fn list(
        &self,
        def: &McpServerDef,
        person: Option<&PersonKey>,
        credentials: Option<&Arc<dyn Credentials>>,
    ) -> Result<Listed, String> {
        let provider = def.name.clone();
        let Some(person) = person else {
            return Err(CredentialError::NoPerson { provider }.to_string());
        };
        let Some(credentials) = credentials else {
            return Err("per-person connections are not set up in this deployment".into());
        };
        let listed = self
            .with_token(def, person, credentials, |conn| async move {
                conn.list_tools().await
            })
            .await;
        match listed {
            Ok(Ok(tools)) => Ok(Listed::Tools(tools)),
            Ok(Err(e)) => Err(e),
            Err(CredentialError::NotConnected { .. }) => Ok(Listed::Connect),
            Err(e) => Err(e.to_string()),
        }
    }

    /// Calls `tool` of `def`'s server as the call's person.
    pub(super) async fn call(
        &self,
        def: &McpServerDef,
        tool: &str,
        arguments: serde_json::Map<String, serde_json::Value>,
        ctx: &ToolContext,
    ) -> Result<ToolOutput, String> {
        let provider = def.name.as_str();
        let (Some(person), Some(credentials)) = (&ctx.person, &ctx.credentials) else {
            // Nobody to act for, or no connections here: says which.
            return match ctx.bearer(provider).await {
                Err(e) => Ok(ToolOutput::of_credential_error(&e)),
                Ok(_) => Err(format!("`{provider}` cannot be reached as this person")),
            };
        };
        let called = self
            .with_token(def, person, credentials, |conn| {
                let arguments = arguments.clone();
                async move { conn.call(tool, arguments).await }
            })
            .await;
        match called {
            Ok(result) => result,
            Err(e) => Ok(ToolOutput::of_credential_error(&e)),
        }
    }
}

/// The one tool offered for a per-person server its person has not
/// connected: calling it waits for the connection ([`ConnectTool`]).
pub(super) fn connect_tool(def: &McpServerDef) -> ListedTool {
    ListedTool {
        server: def.name.clone(),
        remote_name: String::new(),
        spec: ToolSpec {
            name: connect_tool_name(&def.name),
            description: format!(
                "Connect the user's own `{}` account, so that its tools can be used as them. \
                 Call it when the user asks for something `{}` offers: they are sent a link to \
                 connect, and the task waits until they did; then its tools are offered.",
                def.name, def.name
            ),
            input_schema: serde_json::json!({"type": "object", "properties": {}}),
        },
        repeatable: true,
        needs_approval: false,
    }
}

/// `{server}__connect`: answers once the task's person has a working
/// connection; until then it asks them to connect (the call waits).
pub(super) struct ConnectTool {
    listed: ListedTool,
}

impl ConnectTool {
    pub(super) fn new(listed: ListedTool) -> Self {
        ConnectTool { listed }
    }
}

#[async_trait::async_trait]
impl Tool for ConnectTool {
    fn spec(&self) -> ToolSpec {
        self.listed.spec.clone()
    }

    async fn call(&self, _: serde_json::Value, ctx: &ToolContext) -> ToolOutput {
        let server = &self.listed.server;
        match ctx.bearer(server).await {
            Ok(_) => ToolOutput::ok(format!(
                "connected: the tools of `{server}` are offered from now on, used as this person"
            )),
            Err(e) => ToolOutput::of_credential_error(&e),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::McpServers;
    use super::*;
    use baton_core::{RemoteTools, TaskId};
    use std::time::Duration;
    use wiremock::matchers::any;
    use wiremock::{Mock, MockServer, ResponseTemplate};

    /// Tokens by person; `rejected` never has a new one.
    #[derive(Default)]
    struct Fake {
        tokens: Mutex<HashMap<PersonKey, String>>,
        rejected: Mutex<Vec<String>>,
    }

    #[async_trait::async_trait]
    impl Credentials for Fake {
        async fn bearer(
            &self,
            person: &PersonKey,
            provider: &str,
        ) -> Result<SecretString, CredentialError> {
            let found = self.tokens.lock().ok().and_then(|t| t.get(person).cloned());
            found
                .map(SecretString::from)
                .ok_or_else(|| CredentialError::NotConnected {
                    person: person.clone(),
                    provider: provider.to_owned(),
                })
        }

        async fn rejected(
            &self,
            person: &PersonKey,
            provider: &str,
            token: &SecretString,
        ) -> Result<SecretString, CredentialError> {
            if let Ok(mut r) = self.rejected.lock() {
                r.push(token.expose_secret().to_owned());
            }
            Err(CredentialError::NotConnected {
                person: person.clone(),
                provider: provider.to_owned(),
            })
        }
    }

    fn servers(url: String) -> McpServers {
        let def = McpServerDef {
            name: "docs".into(),
            url: url.clone().into(),
            url_template: url,
            headers: Vec::new(),
            tools: None,
            require_approval: None,
            timeout: Duration::from_secs(5),
            secrets: Vec::new(),
            oauth: true,
        };
        McpServers::new(vec![def]).unwrap_or_else(|_| panic!("valid"))
    }

    fn people() -> (PersonKey, PersonKey) {
        (PersonKey::new("T1", "alice"), PersonKey::new("T1", "bob"))
    }

    #[tokio::test]
    async fn nobody_unconnected_and_connected_people_are_listed_apart() {
        let server = MockServer::start().await;
        Mock::given(any())
            .respond_with(
                ResponseTemplate::new(401)
                    .insert_header("www-authenticate", "Bearer resource_metadata=\"x\""),
            )
            .mount(&server)
            .await;
        let servers = servers(format!("{}/mcp", server.uri()));
        let fake = Arc::new(Fake::default());
        let creds = Some(fake.clone() as Arc<dyn Credentials>);
        // Nobody to act for: unavailable, saying so.
        let listing = servers.list_for(&["docs"], None, creds.clone()).await;
        assert!(listing.tools.is_empty());
        assert!(listing.unavailable[0].reason.contains("acts for no person"));
        // Alice has not connected: only `docs__connect`, and nothing sent.
        let (alice, bob) = people();
        let listing = servers
            .list_for(&["docs"], Some(&alice), creds.clone())
            .await;
        let names: Vec<&str> = listing.tools.iter().map(|t| t.spec.name.as_str()).collect();
        assert_eq!(names, ["docs__connect"]);
        assert!(listing.tools[0].is_connect());
        assert!(server
            .received_requests()
            .await
            .unwrap_or_default()
            .is_empty());
        // Connected, but the server refuses the token and no refresh
        // helps: asked to connect again; each person's own token was sent.
        if let Ok(mut t) = fake.tokens.lock() {
            t.insert(alice.clone(), "tok-alice-0123456789".into());
            t.insert(bob.clone(), "tok-bob-0123456789".into());
        }
        let listing = servers
            .list_for(&["docs"], Some(&alice), creds.clone())
            .await;
        assert_eq!(listing.tools.len(), 1);
        assert!(listing.tools[0].is_connect());
        let listing = servers.list_for(&["docs"], Some(&bob), creds).await;
        assert!(listing.tools[0].is_connect());
        let sent: Vec<String> = server
            .received_requests()
            .await
            .unwrap_or_default()
            .iter()
            .filter_map(|r| {
                r.headers
                    .get("authorization")?
                    .to_str()
                    .ok()
                    .map(String::from)
            })
            .collect();
        assert!(
            sent.iter().any(|a| a == "Bearer tok-alice-0123456789"),
            "{sent:?}"
        );
        assert!(
            sent.iter().any(|a| a == "Bearer tok-bob-0123456789"),
            "{sent:?}"
        );
        assert!(
            sent.iter().all(|a| a.starts_with("Bearer tok-")),
            "{sent:?}"
        );
        let rejected = fake.rejected.lock().map(|r| r.clone()).unwrap_or_default();
        assert_eq!(rejected, ["tok-alice-0123456789", "tok-bob-0123456789"]);
    }

    #[tokio::test]
    async fn calls_wait_for_a_connection_and_the_connect_tool_answers_once_connected() {
        let server = MockServer::start().await;
        Mock::given(any())
            .respond_with(
                ResponseTemplate::new(401)
                    .insert_header("www-authenticate", "Bearer resource_metadata=\"x\""),
            )
            .mount(&server)
            .await;
        let servers = servers(format!("{}/mcp", server.uri()));
        let fake = Arc::new(Fake::default());
        let (alice, _) = people();
        let ctx = |person: Option<PersonKey>| {
            ToolContext::new(TaskId::generate(), 1, "c")
                .acting_for(person, Some(fake.clone() as Arc<dyn Credentials>))
        };
        let connect = servers
            .tool(&connect_tool(&McpServerDef {
                oauth: true,
                ..servers.servers["docs"].def().clone()
            }))
            .unwrap_or_else(|| panic!("a connect tool"));
        let out = connect
            .call(serde_json::json!({}), &ctx(Some(alice.clone())))
            .await;
        assert_eq!(out.needs_connection.as_deref(), Some("docs"));
        let out = connect.call(serde_json::json!({}), &ctx(None)).await;
        assert!(out.is_error && out.needs_connection.is_none(), "{out:?}");
        if let Ok(mut t) = fake.tokens.lock() {
            t.insert(alice.clone(), "tok-alice-0123456789".into());
        }
        let out = connect
            .call(serde_json::json!({}), &ctx(Some(alice.clone())))
            .await;
        assert!(
            !out.is_error && out.content.starts_with("connected"),
            "{out:?}"
        );
        // A listed tool refused with her token (revoked, no refresh):
        // she is asked to connect again; no token in what it says.
        let listed = ListedTool {
            server: "docs".into(),
            remote_name: "search".into(),
            spec: ToolSpec {
                name: "docs__search".into(),
                description: String::new(),
                input_schema: serde_json::json!({"type": "object"}),
            },
            repeatable: true,
            needs_approval: false,
        };
        let tool = servers.tool(&listed).unwrap_or_else(|| panic!("a tool"));
        let out = tool
            .call(serde_json::json!({"q": "x"}), &ctx(Some(alice)))
            .await;
        assert_eq!(out.needs_connection.as_deref(), Some("docs"), "{out:?}");
        assert!(!out.content.contains("tok-"), "{out:?}");
    }
}
