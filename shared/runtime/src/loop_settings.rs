//! The settings only the agent loop reads (the `worker` feature): the
//! tools' (`BATON_HTTP_ALLOW`, the agents file's `[http_tools]` and `[mcp]`
//! with their `${NAME}` references resolved) and the heartbeats'
//! (`BATON_HEARTBEAT_REPEAT_WINDOW_SECS`). Their types belong to the tools
//! and the loop, which the ingest Lambda does not link, so it neither reads
//! nor checks them; the worker and `baton dev` refuse to start on a bad one,
//! naming it.

use crate::source::{invalid, SettingsError, Source};
use baton_settings::{parse_template, AgentsConfig, ConfigFileError, Problem, TemplatePart};
use baton_settings::{HttpToolDecl, McpServerDecl};
use baton_tools::{AllowList, HttpMethod, HttpToolDef, McpServerDef};
use secrecy::SecretString;
use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::Duration;

/// What only the agent loop reads; [`crate::Settings::agent_loop`].
#[derive(Clone, Debug)]
pub struct LoopSettings {
    /// `BATON_HTTP_ALLOW`: what `http_request` may reach besides public
    /// addresses.
    pub http_allow: AllowList,
    /// `BATON_HEARTBEAT_REPEAT_WINDOW_SECS`: how long a heartbeat does not
    /// post the same finding again.
    pub heartbeat_repeat_window: Duration,
    /// The agents file's `[http_tools]`, their `${NAME}` references
    /// resolved from the environment and the stored secrets; built into
    /// tools by [`crate::Settings::http_tools`].
    pub http_tool_defs: Vec<HttpToolDef>,
    /// The agents file's `[mcp]` servers, their `${NAME}` references
    /// resolved (values held as secrets); connected to by the worker.
    pub mcp_server_defs: Vec<McpServerDef>,
    /// The agents file's `[policy]`, parsed and checked against Baton's
    /// Cedar schema and the deployment's tools and agents.
    pub policies: Option<Arc<baton_policy::Policies>>,
}

impl LoopSettings {
    /// Reads them from `src`, and resolves the references of the agents
    /// file `loaded` (from `origin`, which its errors name).
    pub(crate) fn load(
        src: &Source<'_>,
        loaded: &AgentsConfig,
        origin: &str,
        known_tools: &[&str],
    ) -> Result<Self, SettingsError> {
        let http_allow = match src.var("BATON_HTTP_ALLOW") {
            None => AllowList::default(),
            Some(v) => {
                AllowList::parse(&v).map_err(|e| invalid("BATON_HTTP_ALLOW", e.to_string()))?
            }
        };
        let in_file = |problems| ConfigFileError::Invalid {
            origin: origin.to_owned(),
            problems,
        };
        let http_tool_defs = resolve_http_tools(src, &loaded.http_tools).map_err(in_file)?;
        let mcp_server_defs = resolve_mcp_servers(src, &loaded.mcp_servers).map_err(in_file)?;
        let heartbeat_repeat_window = src
            .num::<u64>("BATON_HEARTBEAT_REPEAT_WINDOW_SECS")?
            .map_or(baton_agent::DEFAULT_REPEAT_WINDOW, Duration::from_secs);
        let policies = load_policies(loaded, known_tools).map_err(|e| {
            in_file(vec![Problem {
                path: "policy".to_owned(),
                message: e.to_string(),
            }])
        })?;
        Ok(LoopSettings {
            http_allow,
            heartbeat_repeat_window,
            http_tool_defs,
            mcp_server_defs,
            policies,
        })
    }

    /// Every value a declared tool's or server's reference resolved to.
    pub(crate) fn secrets(&self) -> impl Iterator<Item = &SecretString> {
        let tools = self.http_tool_defs.iter().flat_map(|d| d.secrets.iter());
        let servers = self.mcp_server_defs.iter().flat_map(|d| d.secrets.iter());
        tools.chain(servers)
    }
}

/// The `[policy]` set, checked: an invalid one refuses start-up, naming
/// the policy (docs/policies.md).
fn load_policies(
    loaded: &AgentsConfig,
    known_tools: &[&str],
) -> Result<Option<Arc<baton_policy::Policies>>, baton_policy::PolicyError> {
    let Some(source) = &loaded.policy else {
        return Ok(None);
    };
    let known = baton_policy::Known {
        tools: known_tools.iter().map(|t| (*t).to_owned()).collect(),
        http_tools: loaded.http_tools.iter().map(|d| d.name.clone()).collect(),
        mcp_servers: loaded.mcp_servers.iter().map(|d| d.name.clone()).collect(),
        agents: loaded.agents.names().map(str::to_owned).collect(),
        callable: Some(callable(loaded, known_tools)),
    };
    baton_policy::Policies::load(&source.origin, &source.text, known).map(|p| Some(Arc::new(p)))
}

/// What the agents may call, as their `tools` lists name it: an agent
/// without a list has the built-in and the binary's own tools (declared
/// HTTP tools and MCP servers only where a list names them), and
/// `delegate` only with `delegates` to start.
fn callable(loaded: &AgentsConfig, known_tools: &[&str]) -> BTreeSet<String> {
    let delegate = baton_core::tool_names::DELEGATE;
    loaded
        .agents
        .names()
        .filter_map(|name| loaded.agents.get(name))
        .flat_map(|agent| {
            let listed: Vec<String> = match &agent.tools {
                Some(tools) => tools.clone(),
                None => known_tools.iter().map(|t| (*t).to_owned()).collect(),
            };
            listed
                .into_iter()
                .filter(move |t| t != delegate || !agent.delegates.is_empty())
        })
        .collect()
}

/// A declared value with its `${NAME}` references replaced by the
/// variables' values (each also pushed to `secrets`, to be scrubbed from the
/// tool's outputs). An unset variable is a problem at `path`; the message
/// names the variable, never a value.
fn resolve_template(
    src: &Source<'_>,
    path: &str,
    template: &str,
    secrets: &mut Vec<SecretString>,
    problems: &mut Vec<Problem>,
) -> SecretString {
    let mut out = String::new();
    // The file was checked: references are well formed.
    for part in parse_template(template).unwrap_or_default() {
        match part {
            TemplatePart::Text(t) => out.push_str(&t),
            TemplatePart::Var(name) => match src.var(&name) {
                Some(value) => {
                    out.push_str(&value);
                    secrets.push(SecretString::from(value));
                }
                None => problems.push(Problem {
                    path: path.to_owned(),
                    message: format!("${{{name}}} is not set"),
                }),
            },
        }
    }
    SecretString::from(out)
}

/// A declared endpoint at `at` (a tool's or an MCP server's): its `url`
/// and `headers` with their references resolved, each resolved value
/// pushed to `secrets`, each unset name to `problems`.
pub(crate) fn resolve_endpoint(
    src: &Source<'_>,
    at: &str,
    url: &str,
    headers: &std::collections::BTreeMap<String, String>,
    secrets: &mut Vec<SecretString>,
    problems: &mut Vec<Problem>,
) -> (SecretString, Vec<(String, SecretString)>) {
    let url = resolve_template(src, &format!("{at}.url"), url, secrets, problems);
    let headers = headers
        .iter()
        .map(|(name, value)| {
            let path = format!("{at}.headers.{name}");
            let value = resolve_template(src, &path, value, secrets, problems);
            (name.clone(), value)
        })
        .collect();
    (url, headers)
}

/// The declared HTTP tools with their references resolved; every problem
/// at once.
fn resolve_http_tools(
    src: &Source<'_>,
    decls: &[HttpToolDecl],
) -> Result<Vec<HttpToolDef>, Vec<Problem>> {
    let mut problems = Vec::new();
    let mut defs = Vec::with_capacity(decls.len());
    for d in decls {
        let at = format!("http_tools.{}", d.name);
        let before = problems.len();
        let mut secrets = Vec::new();
        let (url, headers) =
            resolve_endpoint(src, &at, &d.url, &d.headers, &mut secrets, &mut problems);
        let method = match serde_json::from_value::<HttpMethod>(serde_json::json!(d.method)) {
            Ok(m) => m,
            Err(_) => {
                problems.push(Problem {
                    path: format!("{at}.method"),
                    message: format!("unknown HTTP method `{}`", d.method),
                });
                continue;
            }
        };
        if problems.len() > before {
            continue;
        }
        defs.push(HttpToolDef {
            name: d.name.clone(),
            description: d.description.clone(),
            method,
            url,
            url_template: d.url.clone(),
            headers,
            parameters: d.parameters.clone(),
            timeout: d.timeout,
            secrets,
            oauth: d.auth.provider().map(str::to_owned),
        });
    }
    if problems.is_empty() {
        Ok(defs)
    } else {
        Err(problems)
    }
}

/// The declared servers with their references resolved; every problem at
/// once.
pub(crate) fn resolve_mcp_servers(
    src: &Source<'_>,
    decls: &[McpServerDecl],
) -> Result<Vec<McpServerDef>, Vec<Problem>> {
    let mut problems = Vec::new();
    let mut defs = Vec::with_capacity(decls.len());
    for d in decls {
        let at = format!("mcp.{}", d.name);
        let before = problems.len();
        let mut secrets = Vec::new();
        let (url, headers) =
            resolve_endpoint(src, &at, &d.url, &d.headers, &mut secrets, &mut problems);
        if problems.len() > before {
            continue;
        }
        defs.push(McpServerDef {
            name: d.name.clone(),
            url,
            url_template: d.url.clone(),
            headers,
            tools: d.tools.clone(),
            require_approval: d.require_approval.clone(),
            timeout: d.timeout,
            secrets,
            oauth: d.auth.oauth().is_some(),
        });
    }
    if problems.is_empty() {
        Ok(defs)
    } else {
        Err(problems)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::settings::Settings;
    use baton_core::tool_names::BUILT_IN;
    use std::collections::HashMap;

    /// Values go in as stored secrets, which the process environment
    /// would override: these tests assume it sets none of them.
    fn env_has(names: &[&str]) -> bool {
        names.iter().any(|n| std::env::var_os(n).is_some())
    }

    const TICKET_TOOL: &str = r#"
[http_tools.create_ticket]
description = "Open a ticket in the tracker"
method = "POST"
url = "https://tracker.example.com/api/${TRACKER_PATH}"
headers = { Authorization = "Bearer ${TRACKER_TOKEN}" }
parameters = { type = "object", properties = { title = { type = "string" } }, required = ["title"] }

[agents.default]
tools = ["create_ticket", "current_time"]
"#;

    fn with_agents(file: &str, extra: &[(&str, &str)]) -> Result<Settings, SettingsError> {
        let values: HashMap<String, String> = [("BATON_AGENTS_TOML", file)]
            .iter()
            .chain(extra)
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        Settings::load(&values)
    }

    #[test]
    fn declared_http_tools_resolve_references_from_the_environment_and_secrets() {
        if env_has(&[
            "BATON_AGENTS_TOML",
            "BATON_AGENTS_FILE",
            "TRACKER_TOKEN",
            "TRACKER_PATH",
        ]) {
            eprintln!("skipped: the environment sets the variables");
            return;
        }
        let secret = "tok-9f8e7d6c5b4a";
        let s = with_agents(
            TICKET_TOOL,
            &[("TRACKER_TOKEN", secret), ("TRACKER_PATH", "tickets")],
        )
        .unwrap();
        let tools = s.http_tools().unwrap();
        assert_eq!(tools.len(), 1);
        let tool = &tools[0];
        assert_eq!(tool.name(), "create_ticket");
        assert_eq!(
            tool.scrub(&format!("echo: Bearer {secret} at tickets")),
            "echo: Bearer [redacted] at [redacted]",
            "every resolved value is scrubbed"
        );
        let shown = format!("{s:?}");
        assert!(!shown.contains(secret), "{shown}");
        assert!(s
            .agents
            .get("default")
            .unwrap()
            .allows_tool("create_ticket"));
    }

    #[test]
    fn an_unset_reference_is_refused_naming_tool_key_and_variable() {
        if env_has(&[
            "BATON_AGENTS_TOML",
            "BATON_AGENTS_FILE",
            "TRACKER_TOKEN",
            "TRACKER_PATH",
        ]) {
            eprintln!("skipped: the environment sets the variables");
            return;
        }
        let err = with_agents(TICKET_TOOL, &[("TRACKER_PATH", "tickets")]).unwrap_err();
        assert_eq!(
            err.to_string(),
            "agents file: BATON_AGENTS_TOML: http_tools.create_ticket.headers.Authorization: \
             ${TRACKER_TOKEN} is not set"
        );
        let err = with_agents(TICKET_TOOL, &[]).unwrap_err().to_string();
        assert!(err.contains("2 problems"), "{err}");
        assert!(
            err.contains("http_tools.create_ticket.url: ${TRACKER_PATH} is not set"),
            "{err}"
        );
        // A value that cannot be a header once resolved: named, not shown
        // (found where the tools are built).
        let err = with_agents(
            TICKET_TOOL,
            &[("TRACKER_PATH", "t"), ("TRACKER_TOKEN", "bad\nvalue-xyz")],
        )
        .unwrap()
        .http_tools()
        .unwrap_err()
        .to_string();
        assert!(
            err.contains(
                "http_tools.create_ticket.headers.Authorization: not a valid header value"
            ),
            "{err}"
        );
        assert!(!err.contains("value-xyz"), "{err}");
        // The schema is compiled when the tools are built.
        let bad_schema = TICKET_TOOL.replace(
            "title = { type = \"string\" }",
            "title = { type = \"text\" }",
        );
        let err = with_agents(
            &bad_schema,
            &[("TRACKER_PATH", "t"), ("TRACKER_TOKEN", "x")],
        )
        .unwrap()
        .http_tools()
        .unwrap_err()
        .to_string();
        assert!(
            err.contains("http_tools.create_ticket.parameters: not a valid JSON Schema"),
            "{err}"
        );
    }

    #[test]
    fn the_known_tools_are_the_tools_names() {
        // The agents file is checked against core's list of names (both
        // handlers see it), which the tools name themselves with: a tool
        // the toolset builds but the list lacks could never be named.
        for name in baton_tools::Toolset::builtins(Default::default()).names() {
            assert!(BUILT_IN.contains(&name.as_str()), "{name}");
        }
    }
}
