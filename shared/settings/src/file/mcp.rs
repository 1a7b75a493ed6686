//! Checking the `[mcp.NAME]` tables.

use super::checker::{check_url_template, Checker};
use super::duration::DurationSpec;
use crate::http_tool::valid_tool_name;
use crate::mcp::{McpServerDecl, DEFAULT_MCP_TIMEOUT};
use serde::Deserialize;
use std::collections::BTreeMap;

/// `[mcp.NAME]`: an MCP server over streamable HTTP whose tools agents may
/// use (`tools = ["mcp:NAME"]`). The key names are a contract
/// (docs/tools.md).
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct McpSpec {
    pub(super) url: Option<String>,
    #[serde(default)]
    pub(super) headers: BTreeMap<String, String>,
    pub(super) tools: Option<Vec<String>>,
    pub(super) require_approval: Option<Vec<String>>,
    pub(super) timeout: Option<DurationSpec>,
    /// `"oauth"`: per-person connections.
    pub(super) auth: Option<String>,
    pub(super) scopes: Option<Vec<String>>,
    pub(super) client_id: Option<String>,
    pub(super) client_secret: Option<String>,
}

/// Headers the MCP transport sets itself (besides the HTTP client's).
fn reserved_mcp_header(header: &str) -> bool {
    baton_core::tool::CLIENT_MANAGED_HEADERS.contains(&header)
        || matches!(
            header,
            "accept" | "content-type" | "mcp-session-id" | "mcp-protocol-version" | "last-event-id"
        )
}

/// Whether a pattern of `require_approval` is well formed: tool-name
/// characters and `*`.
fn valid_pattern(p: &str) -> bool {
    !p.is_empty()
        && p.chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '.' | '/' | '*'))
}

impl Checker<'_> {
    /// Whether `tool` names a tool of a declared MCP server
    /// (`SERVER__TOOL`); such names are only known at run time.
    pub(super) fn names_mcp_tool(&self, tool: &str) -> bool {
        tool.split_once("__").is_some_and(|(server, rest)| {
            !rest.is_empty() && self.mcp_servers.iter().any(|s| s == server)
        })
    }

    /// The `[mcp]` tables: names, URLs, headers, allow-lists, approval
    /// patterns and timeouts; `${NAME}` syntax (resolved later, by the
    /// runtime).
    pub(super) fn check_mcp_servers(
        &mut self,
        servers: &BTreeMap<String, McpSpec>,
    ) -> Vec<McpServerDecl> {
        let mut out = Vec::with_capacity(servers.len());
        for (name, spec) in servers {
            let at = format!("mcp.{name}");
            let before = self.problems.len();
            // `NAME__TOOL` must stay readable within the 64 characters a
            // tool name may have, and split back at the first `__`.
            if !valid_tool_name(name) || name.len() > 32 || name.contains("__") {
                self.add(
                    &at,
                    "server names are letters, digits, `_` and `-` (1 to 32 characters, no `__`)",
                );
            }
            let url = match spec.url.as_deref().map(str::trim) {
                None => {
                    self.add(
                        format!("{at}.url"),
                        "required: the server's streamable HTTP endpoint, an http:// or https:// URL",
                    );
                    String::new()
                }
                Some(u) => {
                    if let Err(m) = check_url_template(u) {
                        self.add(format!("{at}.url"), m);
                    }
                    u.to_owned()
                }
            };
            self.check_headers(&at, &spec.headers, reserved_mcp_header);
            let auth = self.check_mcp_auth(&at, spec);
            for (i, t) in spec.tools.iter().flatten().enumerate() {
                if t.trim().is_empty() {
                    self.add(format!("{at}.tools[{i}]"), "must not be empty");
                }
            }
            for (i, p) in spec.require_approval.iter().flatten().enumerate() {
                if !valid_pattern(p) {
                    self.add(
                        format!("{at}.require_approval[{i}]"),
                        format!("`{p}` is not a tool name or pattern (like `create_*`)"),
                    );
                }
            }
            // Parsing refused a zero duration already.
            let timeout = spec
                .timeout
                .map_or(DEFAULT_MCP_TIMEOUT, |DurationSpec(d)| d);
            if self.problems.len() == before {
                out.push(McpServerDecl {
                    name: name.clone(),
                    url,
                    headers: spec.headers.clone(),
                    tools: spec.tools.clone(),
                    require_approval: spec.require_approval.clone(),
                    timeout,
                    auth,
                });
            }
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use crate::file::AgentsSource;
    use crate::AgentConfig;
    use std::time::Duration;

    const KNOWN: &[&str] = &["current_time", "http_request"];

    fn load(text: &str) -> Result<crate::AgentsConfig, String> {
        AgentsSource::new("baton.toml", text, "/nonexistent")
            .load(&AgentConfig::new("default", "m"), KNOWN)
            .map_err(|e| e.to_string())
    }

    const TRACKER: &str = r#"
[mcp.tracker]
url = "https://mcp.example.com/mcp"
headers = { Authorization = "Bearer ${TRACKER_TOKEN}" }
tools = ["search", "create_issue"]
require_approval = ["create_*"]
timeout = "10s"
"#;

    #[test]
    fn servers_are_declared_and_used_by_name() {
        let text = format!(
            "{TRACKER}\n[agents.default]\ntools = [\"mcp:tracker\", \"current_time\"]\n\n\
             [agents.default.approval]\nrequire = [\"tracker__delete_all\"]\n\n\
             [agents.other]\nsystem_prompt = \"x\"\n"
        );
        let c = load(&text).unwrap();
        let s = &c.mcp_servers[0];
        assert_eq!(s.name, "tracker");
        assert_eq!(s.url, "https://mcp.example.com/mcp");
        assert_eq!(
            s.headers.get("Authorization").map(String::as_str),
            Some("Bearer ${TRACKER_TOKEN}")
        );
        assert_eq!(s.require_approval, Some(vec!["create_*".to_owned()]));
        assert_eq!(s.timeout, Duration::from_secs(10));
        assert!(s.offers("search") && !s.offers("delete_all"));
        let default = c.agents.get("default").unwrap();
        assert_eq!(default.mcp_servers().collect::<Vec<_>>(), vec!["tracker"]);
        // Without a `tools` list an agent keeps the built-ins only.
        let other = c.agents.get("other").unwrap();
        assert_eq!(other.mcp_servers().count(), 0);
        assert!(other.allows_tool("http_request"));
    }

    #[test]
    fn bad_server_declarations_name_the_key() {
        let cases: Vec<(String, &str)> =
            vec![
            (
                "[agents.default]\ntools = [\"mcp:tracker\"]\n".into(),
                "agents.default.tools[0]: unknown MCP server `tracker`; none is declared",
            ),
            (
                format!("{TRACKER}\n[agents.default]\ntools = [\"mcp:trackr\"]\n"),
                "agents.default.tools[0]: unknown MCP server `trackr`; declared: tracker",
            ),
            ("[mcp.t]\n".into(), "mcp.t.url: required"),
            ("[mcp.t]\nurl = \"not a url\"\n".into(), "mcp.t.url: not a URL"),
            (
                "[mcp.t]\nurl = \"ws://x.example/mcp\"\n".into(),
                "mcp.t.url: must be an http:// or https:// URL",
            ),
            (
                "[mcp.t]\nurl = \"https://x.example/mcp\"\ncommand = \"npx\"\n".into(),
                "mcp.t.command: unknown field `command`",
            ),
            (
                "[mcp.t]\nurl = \"https://x.example/mcp\"\nheaders = { Mcp-Session-Id = \"x\" }\n"
                    .into(),
                "mcp.t.headers.Mcp-Session-Id: set by Baton",
            ),
            (
                "[mcp.t]\nurl = \"https://x.example/mcp\"\nheaders = { X = \"${NO PE}\" }\n".into(),
                "mcp.t.headers.X: `${NO PE}` is not a variable reference",
            ),
            (
                "[mcp.t]\nurl = \"https://x.example/mcp\"\nrequire_approval = [\"a b\"]\n".into(),
                "mcp.t.require_approval[0]: `a b` is not a tool name or pattern",
            ),
            (
                "[mcp.t]\nurl = \"https://x.example/mcp\"\ntimeout = \"0s\"\n".into(),
                "mcp.t.timeout: `0s`: must be longer than zero",
            ),
            (
                "[mcp.a__b]\nurl = \"https://x.example/mcp\"\n".into(),
                "mcp.a__b: server names are letters, digits",
            ),
            (
                format!(
                    "{TRACKER}\n[agents.default]\ntools = [\"mcp:tracker\"]\n\
                     [agents.default.approval]\nrequire = [\"other__x\"]\n"
                ),
                "agents.default.approval.require[0]: unknown tool `other__x`",
            ),
        ];
        for (text, expected) in cases {
            let e = load(&text).map(|_| ()).expect_err(&text);
            assert!(e.contains(expected), "expected `{expected}` in:\n{e}");
        }
    }
}
