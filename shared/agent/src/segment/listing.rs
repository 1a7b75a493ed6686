//! The tools a segment offers: the registered tools the agent allows, and
//! the tools of its MCP servers as listed when the task started. The
//! listing is taken once, checkpointed as an [`EntryKind::ToolsListed`]
//! entry, and every later segment rebuilds the same tools from it, so the
//! model is offered the same tools from first step to last whatever
//! happens to the servers in between.

use super::Segment;
use crate::deps::Tools;
use crate::error::WorkerError;
use baton_core::{Entry, EntryKind, RemoteTools, ToolListing};
use baton_settings::AgentConfig;

/// The listing the transcript holds, if the task took one.
pub(super) fn listing_of(transcript: &[Entry]) -> Option<&ToolListing> {
    transcript.iter().rev().find_map(|e| match &e.kind {
        EntryKind::ToolsListed { listing } => Some(listing),
        _ => None,
    })
}

/// The tools `agent` may call: the registered ones it allows, and those of
/// `listing` (its servers' tools) that `remote` can still reach.
pub(crate) fn offered(
    agent: &AgentConfig,
    registered: &Tools,
    listing: Option<&ToolListing>,
    remote: Option<&dyn RemoteTools>,
) -> Tools {
    let mut tools: Tools = registered
        .iter()
        .filter(|(name, _)| agent.allows_tool(name))
        .map(|(name, t)| (name.clone(), t.clone()))
        .collect();
    if let (Some(listing), Some(remote)) = (listing, remote) {
        for listed in &listing.tools {
            // An offered registered tool keeps its name: a listed one
            // never shadows it.
            if tools.contains_key(&listed.spec.name) {
                continue;
            }
            if let Some(tool) = remote.tool(listed) {
                tools.insert(listed.spec.name.clone(), tool);
            }
        }
    }
    tools
}

impl Segment<'_> {
    /// Lists the agent's MCP servers' tools if this task has not yet, and
    /// checkpoints the listing; then sets the tools this segment offers.
    /// A server that is down is recorded as unavailable (the model is told
    /// why), never a failed task.
    pub(super) async fn take_listing(&mut self) -> Result<(), WorkerError> {
        let servers: Vec<&str> = self.agent.mcp_servers().collect();
        let remote = self.deps.remote.as_deref();
        if let (false, Some(remote)) = (servers.is_empty(), remote) {
            if listing_of(&self.transcript).is_none() {
                let person = self.task.acting_for();
                let credentials = self.deps.credentials.clone();
                let listing = remote
                    .list_for(&servers, person.as_ref(), credentials)
                    .await;
                for u in &listing.unavailable {
                    tracing::warn!(task_id = %self.task.id, server = %u.server, reason = %u.reason, "MCP server unavailable; the task runs without its tools");
                }
                self.commit(|_| {
                    Some(vec![EntryKind::ToolsListed {
                        listing: listing.clone(),
                    }])
                })
                .await?;
            }
        }
        self.tools = offered(
            self.agent,
            &self.deps.tools,
            listing_of(&self.transcript),
            remote,
        );
        Ok(())
    }
}

impl Segment<'_> {
    /// After `{server}__connect` calls that answered (their person has
    /// connected): lists those servers again, for the person, in place of
    /// their connect tools, and checkpoints the new listing; later
    /// segments offer it.
    pub(super) async fn relist_connected(
        &mut self,
        servers: Vec<String>,
    ) -> Result<(), WorkerError> {
        let (Some(remote), Some(current)) = (
            self.deps.remote.clone(),
            listing_of(&self.transcript).cloned(),
        ) else {
            return Ok(());
        };
        let names: Vec<&str> = servers.iter().map(String::as_str).collect();
        let person = self.task.acting_for();
        let credentials = self.deps.credentials.clone();
        let fresh = remote.list_for(&names, person.as_ref(), credentials).await;
        let listing = relisted(current, &servers, fresh);
        self.commit(|_| {
            Some(vec![EntryKind::ToolsListed {
                listing: listing.clone(),
            }])
        })
        .await?;
        self.tools = offered(
            self.agent,
            &self.deps.tools,
            listing_of(&self.transcript),
            Some(remote.as_ref()),
        );
        Ok(())
    }
}

/// `current` with `servers` replaced by their `fresh` listing; a fresh
/// tool whose name another server's tool holds is left out.
fn relisted(mut current: ToolListing, servers: &[String], fresh: ToolListing) -> ToolListing {
    current.tools.retain(|t| !servers.contains(&t.server));
    current.unavailable.retain(|u| !servers.contains(&u.server));
    for t in fresh.tools {
        if !current.tools.iter().any(|c| c.spec.name == t.spec.name) {
            current.tools.push(t);
        }
    }
    current.unavailable.extend(fresh.unavailable);
    current
}

/// The server of `{server}__connect` call `name`, if the listing offers
/// it as one.
pub(super) fn connect_server(transcript: &[Entry], name: &str) -> Option<String> {
    listing_of(transcript)?
        .tools
        .iter()
        .find(|t| t.is_connect() && t.spec.name == name)
        .map(|t| t.server.clone())
}

#[cfg(test)]
mod tests {
    use super::*;
    use async_trait::async_trait;
    use baton_core::{ListedTool, Tool, ToolContext, ToolOutput, ToolSpec};
    use serde_json::{json, Value};
    use std::sync::Arc;

    struct Named(String);

    #[async_trait]
    impl Tool for Named {
        fn spec(&self) -> ToolSpec {
            ToolSpec {
                name: self.0.clone(),
                description: String::new(),
                input_schema: json!({"type": "object"}),
            }
        }
        async fn call(&self, _: Value, _: &ToolContext) -> ToolOutput {
            ToolOutput::ok(self.0.clone())
        }
    }

    /// Knows server `up` only.
    struct Remote;

    #[async_trait]
    impl RemoteTools for Remote {
        async fn list(&self, _: &[&str]) -> ToolListing {
            ToolListing::default()
        }
        fn tool(&self, listed: &ListedTool) -> Option<Arc<dyn Tool>> {
            (listed.server == "up").then(|| Arc::new(Named(listed.spec.name.clone())) as _)
        }
    }

    fn listed(server: &str, name: &str) -> ListedTool {
        ListedTool {
            server: server.into(),
            remote_name: name.into(),
            spec: ToolSpec {
                name: name.into(),
                description: String::new(),
                input_schema: json!({"type": "object"}),
            },
            repeatable: true,
            needs_approval: false,
        }
    }

    #[test]
    fn offers_allowed_registered_tools_and_reachable_listed_ones() {
        let mut agent = AgentConfig::new("a", "m");
        agent.tools = Some(vec!["current_time".into(), "mcp:up".into()]);
        let registered: Tools = ["current_time", "http_request", "up__search"]
            .iter()
            .map(|n| {
                (
                    n.to_string(),
                    Arc::new(Named(n.to_string())) as Arc<dyn Tool>,
                )
            })
            .collect();
        let listing = ToolListing {
            tools: vec![
                listed("up", "up__create"),
                listed("up", "up__search"),
                listed("gone", "gone__x"),
            ],
            unavailable: Vec::new(),
        };
        let tools = offered(&agent, &registered, Some(&listing), Some(&Remote));
        let names: Vec<&str> = tools.keys().map(String::as_str).collect();
        // http_request is not allowed; the registered up__search is not
        // either, so the listed one is offered; gone__x's server is no
        // longer configured.
        assert_eq!(names, ["current_time", "up__create", "up__search"]);
        let Some(t) = tools.get("up__search") else {
            panic!("up__search offered")
        };
        assert_eq!(t.spec().name, "up__search");
        // An allowed registered tool is never shadowed by a listed one.
        agent.tools = Some(vec!["up__search".into(), "mcp:up".into()]);
        let listing = ToolListing {
            tools: vec![listed("up", "up__search")],
            unavailable: Vec::new(),
        };
        let tools = offered(&agent, &registered, Some(&listing), Some(&Remote));
        assert!(Arc::ptr_eq(&tools["up__search"], &registered["up__search"]));
        assert_eq!(offered(&agent, &registered, None, Some(&Remote)).len(), 1);
    }
}
