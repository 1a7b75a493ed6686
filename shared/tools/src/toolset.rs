//! The registry of tools an agent can call.

use crate::guard::AllowList;
use crate::http::HttpRequestTool;
use crate::time::CurrentTimeTool;
use baton_core::{Tool, ToolSpec};
use std::collections::BTreeMap;
use std::fmt;
use std::sync::Arc;

/// Tools by name. Names are unique; a tool inserted under an existing name
/// replaces the old one.
#[derive(Clone, Default)]
pub struct Toolset {
    // A BTreeMap keeps specs() and names() sorted, so the prompt (and the
    // provider's prompt cache) is stable across runs.
    tools: BTreeMap<String, Arc<dyn Tool>>,
}

impl Toolset {
    /// An empty set.
    pub fn new() -> Self {
        Toolset::default()
    }

    /// The built-in tools every agent has unless its configuration removes
    /// them: `http_request` (reaching the non-public `allow` pairs) and
    /// `current_time`.
    pub fn builtins(allow: AllowList) -> Self {
        let mut set = Toolset::new();
        set.insert(Arc::new(HttpRequestTool::new(allow)));
        set.insert(Arc::new(CurrentTimeTool::new()));
        set
    }

    /// Adds a tool under the name in its spec; returns the tool it replaced.
    pub fn insert(&mut self, tool: Arc<dyn Tool>) -> Option<Arc<dyn Tool>> {
        self.tools.insert(tool.spec().name, tool)
    }

    /// Removes a tool; returns it if it was there.
    pub fn remove(&mut self, name: &str) -> Option<Arc<dyn Tool>> {
        self.tools.remove(name)
    }

    /// The tool called `name` (cheap to clone into a task).
    pub fn get(&self, name: &str) -> Option<Arc<dyn Tool>> {
        self.tools.get(name).cloned()
    }

    /// Whether a tool called `name` is registered.
    pub fn contains(&self, name: &str) -> bool {
        self.tools.contains_key(name)
    }

    /// What the model is told, sorted by name.
    pub fn specs(&self) -> Vec<ToolSpec> {
        self.tools.values().map(|t| t.spec()).collect()
    }

    /// The tool names, sorted.
    pub fn names(&self) -> Vec<String> {
        self.tools.keys().cloned().collect()
    }

    /// Number of tools.
    pub fn len(&self) -> usize {
        self.tools.len()
    }

    /// Whether there are no tools.
    pub fn is_empty(&self) -> bool {
        self.tools.is_empty()
    }
}

impl fmt::Debug for Toolset {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_set().entries(self.tools.keys()).finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use async_trait::async_trait;
    use baton_core::{TaskId, ToolContext, ToolOutput};
    use serde_json::json;

    struct Echo(&'static str);

    #[async_trait]
    impl Tool for Echo {
        fn spec(&self) -> ToolSpec {
            ToolSpec {
                name: "echo".into(),
                description: self.0.into(),
                input_schema: json!({"type": "object"}),
            }
        }

        async fn call(&self, arguments: serde_json::Value, _ctx: &ToolContext) -> ToolOutput {
            ToolOutput::ok(arguments.to_string())
        }
    }

    #[test]
    fn builtins_are_named_and_sorted() {
        let set = Toolset::builtins(AllowList::new());
        assert_eq!(set.names(), vec!["current_time", "http_request"]);
        let specs = set.specs();
        assert_eq!(specs.len(), 2);
        assert_eq!(specs[0].name, "current_time");
        assert_eq!(specs[1].name, "http_request");
        assert_eq!(format!("{set:?}"), r#"{"current_time", "http_request"}"#);
    }

    #[tokio::test]
    async fn insert_replace_get_remove() {
        let mut set = Toolset::builtins(AllowList::new());
        assert!(set.insert(Arc::new(Echo("first"))).is_none());
        let replaced = set.insert(Arc::new(Echo("second")));
        assert_eq!(
            replaced.map(|t| t.spec().description),
            Some("first".to_owned())
        );
        assert_eq!(set.names(), vec!["current_time", "echo", "http_request"]);

        let echo = set.get("echo").expect("echo registered");
        let ctx = ToolContext::new(TaskId::generate(), 0, "c");
        assert_eq!(echo.call(json!({"a": 1}), &ctx).await.content, r#"{"a":1}"#);

        assert!(set.remove("http_request").is_some());
        assert!(set.remove("http_request").is_none());
        assert!(set.get("http_request").is_none());
        assert_eq!(set.len(), 2);
        assert!(!set.contains("http_request"));
    }
}
