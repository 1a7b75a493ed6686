//! The agents file's `[mcp.NAME]` servers, resolved: `${NAME}` references
//! replaced from the environment (and the secrets loaded from SSM), every
//! unset name refused at start-up by its key.

use crate::loop_settings::resolve_endpoint;
use crate::settings::{Settings, SettingsError, Source};
use baton_settings::{ConfigFileError, McpServerDecl, Problem};
use baton_tools::{McpServerDef, McpServers};

impl Settings {
    /// The declared MCP servers, checked once resolved (URL, header
    /// values); `None` when there are none. Connects to nothing: the
    /// worker lists a server's tools when a task that uses it starts.
    pub fn mcp_servers(&self) -> Result<Option<McpServers>, SettingsError> {
        if self.agent_loop.mcp_server_defs.is_empty() {
            return Ok(None);
        }
        McpServers::new(self.agent_loop.mcp_server_defs.clone())
            .map(Some)
            .map_err(|(server, e)| {
                ConfigFileError::Invalid {
                    origin: self.agents_origin.clone(),
                    problems: vec![Problem {
                        path: format!("mcp.{server}.{}", e.field),
                        message: e.message,
                    }],
                }
                .into()
            })
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
