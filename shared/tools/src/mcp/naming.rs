//! What the model is shown of an MCP server's tool, and how Baton treats
//! its calls: its name (`SERVER__TOOL`), and from its annotations whether
//! it may run again after a crash and whether it waits for approval.

use super::McpServerDef;
use baton_core::{ListedTool, ToolSpec};

/// The longest tool name the model APIs accept.
const MAX_NAME: usize = 64;

/// `SERVER__TOOL` with every character outside `[A-Za-z0-9_-]` replaced
/// by `_`, cut to 64 characters.
pub(crate) fn exposed_name(server: &str, tool: &str) -> String {
    format!("{server}__{tool}")
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '_' || c == '-' {
                c
            } else {
                '_'
            }
        })
        .take(MAX_NAME)
        .collect()
}

/// The listed form of `tool`, from server `def`.
pub(crate) fn listed(def: &McpServerDef, tool: &rmcp::model::Tool) -> ListedTool {
    let hints = tool.annotations.as_ref();
    let read_only = hints.and_then(|a| a.read_only_hint).unwrap_or(false);
    let idempotent = hints.and_then(|a| a.idempotent_hint).unwrap_or(false);
    let needs_approval = match &def.require_approval {
        // The operator's patterns decide, over the server's word.
        Some(patterns) => patterns.iter().any(|p| glob_match(p, &tool.name)),
        // MCP's default is destructive: only what the server says is
        // read-only runs without a human.
        None => !read_only,
    };
    let mut description = tool
        .description
        .as_deref()
        .or(tool.title.as_deref())
        .unwrap_or_default()
        .to_owned();
    if description.trim().is_empty() {
        description = format!("The `{}` tool of MCP server `{}`.", tool.name, def.name);
    }
    ListedTool {
        server: def.name.clone(),
        remote_name: tool.name.to_string(),
        spec: ToolSpec {
            name: exposed_name(&def.name, &tool.name),
            description,
            input_schema: serde_json::Value::Object((*tool.input_schema).clone()),
        },
        repeatable: read_only || idempotent,
        needs_approval,
    }
}

/// Whether `name` matches `pattern`, where `*` stands for any run of
/// characters (none included) and everything else for itself.
pub(crate) fn glob_match(pattern: &str, name: &str) -> bool {
    let mut parts = pattern.split('*');
    let first = parts.next().unwrap_or_default();
    let Some(mut rest) = name.strip_prefix(first) else {
        return false;
    };
    let parts: Vec<&str> = parts.collect();
    let Some((last, middle)) = parts.split_last() else {
        // No `*`: the whole name must be the pattern.
        return rest.is_empty();
    };
    for part in middle {
        match rest.find(part) {
            Some(i) => rest = &rest[i + part.len()..],
            None => return false,
        }
    }
    rest.len() >= last.len() && rest.ends_with(last)
}

#[cfg(test)]
mod tests {
    use super::*;
    use rmcp::model::{Tool, ToolAnnotations};
    use serde_json::json;
    use serde_json::Value;
    use std::sync::Arc;

    fn def(require_approval: Option<Vec<&str>>) -> McpServerDef {
        McpServerDef {
            name: "tracker".into(),
            url: "http://127.0.0.1:1/mcp".to_owned().into(),
            url_template: "http://127.0.0.1:1/mcp".into(),
            headers: Vec::new(),
            tools: None,
            require_approval: require_approval.map(|p| p.into_iter().map(String::from).collect()),
            timeout: std::time::Duration::from_secs(5),
            secrets: Vec::new(),
            oauth: false,
        }
    }

    fn tool(name: &str, annotations: Option<ToolAnnotations>) -> Tool {
        let schema = json!({"type": "object", "properties": {"q": {"type": "string"}}});
        let serde_json::Value::Object(schema) = schema else {
            unreachable!()
        };
        let mut t = Tool::new(name.to_owned(), "Searches", Arc::new(schema));
        t.annotations = annotations;
        t
    }

    #[test]
    fn globs_match_runs_of_characters() {
        assert!(glob_match("create_*", "create_issue"));
        assert!(glob_match("create_*", "create_"));
        assert!(!glob_match("create_*", "recreate_issue"));
        assert!(glob_match("*", "anything"));
        assert!(glob_match("search", "search"));
        assert!(!glob_match("search", "search2"));
        assert!(glob_match("*_issue", "close_issue"));
        assert!(glob_match("a*b*c", "axxbyyc"));
        assert!(!glob_match("a*b*c", "axxcyyb"));
        assert!(!glob_match("ab*ba", "aba"));
        assert!(glob_match("ab*ba", "abba"));
    }

    #[test]
    fn names_are_prefixed_sanitised_and_cut() {
        assert_eq!(exposed_name("tracker", "search"), "tracker__search");
        assert_eq!(exposed_name("t", "get.issue/v2 now"), "t__get_issue_v2_now");
        assert_eq!(exposed_name("t", "é"), "t___");
        let long = exposed_name("tracker", &"x".repeat(100));
        assert_eq!(long.len(), 64);
        assert!(long.starts_with("tracker__xxx"));
    }

    #[test]
    fn annotations_decide_repeats_and_approvals() {
        let d = def(None);
        let hints = |v: Value| -> ToolAnnotations { serde_json::from_value(v).unwrap() };
        let read_only = hints(json!({"readOnlyHint": true}));
        let idempotent = hints(json!({"idempotentHint": true, "destructiveHint": false}));
        let l = listed(&d, &tool("search", Some(read_only)));
        assert!(l.repeatable && !l.needs_approval);
        assert_eq!(l.spec.name, "tracker__search");
        assert_eq!(l.remote_name, "search");
        assert_eq!(l.spec.input_schema["properties"]["q"]["type"], "string");
        let l = listed(&d, &tool("put", Some(idempotent)));
        assert!(l.repeatable && l.needs_approval, "not read-only: approval");
        let l = listed(&d, &tool("create_issue", None));
        assert!(
            !l.repeatable && l.needs_approval,
            "MCP's default: destructive"
        );

        // The operator's patterns decide instead.
        let d = def(Some(vec!["create_*"]));
        assert!(listed(&d, &tool("create_issue", None)).needs_approval);
        assert!(!listed(&d, &tool("close_issue", None)).needs_approval);
    }
}
