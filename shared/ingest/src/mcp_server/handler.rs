//! The MCP server's requests: `tools/list` (one tool per agent exposed
//! over MCP, and `get_task`), `tools/call`, and the tasks extension's
//! `tasks/get` and `tasks/cancel`. Everything it knows of a call is in
//! the task store, so any process answers any request.

use super::outcome;
use crate::response::parse_id;
use crate::response::ApiError;
use crate::tasks::SubmitBody;
use crate::Ingest;
use baton_core::{Task, TaskId};
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, CancelTaskParams, ContentBlock,
    CreateTaskResult, GetTaskParams, GetTaskResult, Implementation, JsonObject, ListToolsResult,
    PaginatedRequestParams, ProgressNotificationParam, ProgressToken, ServerCapabilities,
    ServerConfig, Tool,
};
use rmcp::service::{Peer, RequestContext, RoleServer};
use rmcp::{ErrorData, ServerHandler};
use serde::Deserialize;
use serde_json::json;
use std::sync::Arc;
use std::time::Duration;

/// The tool that reads a task started by an earlier call.
pub(crate) const GET_TASK: &str = "get_task";
/// How often a call waiting for its task reads it again.
const POLL: Duration = Duration::from_millis(300);

/// One request's MCP server: the ingest it creates and reads tasks with,
/// and how long a tool call may wait for its task's answer.
#[derive(Clone)]
pub(crate) struct McpServer {
    pub ingest: Ingest,
    pub wait: Duration,
}

/// A tool call's arguments for an agent.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct AgentArgs {
    input: String,
    #[serde(default)]
    thread: Option<String>,
}

/// `get_task`'s arguments.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct GetTaskArgs {
    task_id: String,
}

fn schema(v: serde_json::Value) -> Arc<JsonObject> {
    Arc::new(v.as_object().cloned().unwrap_or_default())
}

fn agent_tool(name: &str, description: Option<&str>) -> Tool {
    let description = description
        .map(str::to_owned)
        .unwrap_or_else(|| format!("Ask the Baton agent `{name}`; answers with its reply."));
    Tool::new(
        name.to_owned(),
        description,
        schema(json!({
            "type": "object",
            "properties": {
                "input": {"type": "string", "description": "What to ask the agent."},
                "thread": {"type": "string", "description":
                    "A conversation id: calls with the same thread continue one conversation."}
            },
            "required": ["input"],
            "additionalProperties": false
        })),
    )
}

fn get_task_tool() -> Tool {
    Tool::new(
        GET_TASK,
        "The status of a Baton task an agent call started (its `task_id`): its answer once it \
         ended, else what it is doing or waiting for.",
        schema(json!({
            "type": "object",
            "properties": {"task_id": {"type": "string"}},
            "required": ["task_id"],
            "additionalProperties": false
        })),
    )
}

/// A refusal of the API as a tool error the caller reads (a bad input, a
/// rate limit), or an internal error for a failing backend.
fn refused(e: ApiError) -> Result<CallToolResponse, ErrorData> {
    if e.status.is_server_error() {
        return Err(ErrorData::internal_error(e.message, None));
    }
    Ok(CallToolResult::error(vec![ContentBlock::text(e.message)]).into())
}

fn arguments<T: serde::de::DeserializeOwned>(
    request: &CallToolRequestParams,
) -> Result<T, ErrorData> {
    let args = serde_json::Value::Object(request.arguments.clone().unwrap_or_default());
    serde_json::from_value(args).map_err(|e| {
        ErrorData::invalid_params(
            format!("invalid arguments for `{}`: {e}", request.name),
            None,
        )
    })
}

impl McpServer {
    /// The names and descriptions of the agents exposed over MCP;
    /// an agent named like the built-in `get_task` is not offered.
    fn exposed(&self) -> Vec<(String, Option<String>)> {
        let agents = &self.ingest.agents;
        agents
            .names()
            .filter(|n| *n != GET_TASK)
            .filter_map(|n| agents.get(n))
            .filter(|a| a.expose.mcp())
            .map(|a| (a.name.clone(), a.description.clone()))
            .collect()
    }

    /// The task `raw` names, if it is one of an exposed agent's (the MCP
    /// surface reads no other).
    async fn exposed_task(&self, raw: &str) -> Result<Task, ErrorData> {
        let id = parse_id(raw).map_err(|e| ErrorData::invalid_params(e.message, None))?;
        let exposed = self.exposed();
        match self.read(&id).await? {
            Some(t) if exposed.iter().any(|(n, _)| *n == t.agent) => Ok(t),
            _ => Err(ErrorData::invalid_params(format!("no task {raw}"), None)),
        }
    }

    async fn read(&self, id: &TaskId) -> Result<Option<Task>, ErrorData> {
        self.ingest.store.get(id).await.map_err(|e| {
            tracing::error!(error = %e, "mcp: reading a task failed");
            ErrorData::internal_error("temporarily unavailable, retry later", None)
        })
    }

    /// Reads the task until it ends, waits on a person, the wait is over
    /// or the client gives up; each new status text goes to the client as
    /// progress when it asked for it.
    async fn follow(
        &self,
        id: &TaskId,
        context: &RequestContext<RoleServer>,
    ) -> Result<Task, ErrorData> {
        let progress = context.meta.get_progress_token();
        let until = tokio::time::Instant::now() + self.wait;
        let mut said = String::new();
        let mut after = None;
        let mut sent = 0u32;
        loop {
            let task = self
                .read(id)
                .await?
                .ok_or_else(|| ErrorData::internal_error(format!("task {id} is gone"), None))?;
            if let Some(token) = &progress {
                let mut texts = self.event_texts(id, &mut after).await;
                texts.push(outcome::status_text(&task));
                for text in texts {
                    if text != said {
                        sent += 1;
                        notify(&context.peer, token, sent, &text).await;
                        said = text;
                    }
                }
            }
            let done = task.status().is_terminal() || outcome::awaits_someone(&task);
            if done || tokio::time::Instant::now() >= until {
                return Ok(task);
            }
            tokio::select! {
                _ = tokio::time::sleep(POLL) => {}
                _ = context.ct.cancelled() => return Ok(task),
            }
        }
    }

    /// The status texts of the task's events since `after`.
    async fn event_texts(&self, id: &TaskId, after: &mut Option<u64>) -> Vec<String> {
        match self.ingest.store.entries(id, *after, 100).await {
            Ok(entries) => {
                if let Some(last) = entries.last() {
                    *after = Some(last.seq);
                }
                entries
                    .iter()
                    .filter_map(|e| outcome::event_text(&e.kind))
                    .collect()
            }
            // Progress is a courtesy: the answer does not wait on it.
            Err(e) => {
                tracing::warn!(error = %e, "mcp: reading a task's events failed");
                Vec::new()
            }
        }
    }

    async fn call_agent(
        &self,
        agent: &str,
        request: &CallToolRequestParams,
        context: &RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        let args: AgentArgs = arguments(request)?;
        let body = SubmitBody::new(args.input, agent, args.thread);
        let accepted = match self.ingest.submit_http(body, None).await {
            Ok((accepted, _)) => accepted,
            Err(e) => return refused(e),
        };
        let id = accepted.outcome.task_id().clone();
        let task = self.follow(&id, context).await?;
        let supports_tasks = context
            .client_capabilities()
            .is_some_and(|c| c.supports_tasks());
        if !task.status().is_terminal() && supports_tasks {
            return Ok(CallToolResponse::Task(CreateTaskResult::new(
                outcome::detailed(&task).task,
            )));
        }
        Ok(outcome::tool_result(&task).into())
    }
}

async fn notify(peer: &Peer<RoleServer>, token: &ProgressToken, n: u32, text: &str) {
    let param = ProgressNotificationParam::new(token.clone(), f64::from(n)).with_message(text);
    if let Err(e) = peer.notify_progress(param).await {
        tracing::debug!(error = %e, "mcp: a progress notification was not sent");
    }
}

impl ServerHandler for McpServer {
    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(
            ServerCapabilities::builder()
                .enable_tools()
                .enable_tasks()
                .build(),
        )
        .with_server_info(Implementation::new("baton", env!("CARGO_PKG_VERSION")))
        .with_instructions(
            "Each tool is a Baton agent: call it with {\"input\"} (and a \"thread\" to continue \
             a conversation). An answer that takes longer comes back as a task id: read it with \
             get_task.",
        )
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, ErrorData> {
        let exposed = self.exposed();
        let mut tools: Vec<Tool> = exposed
            .iter()
            .map(|(n, d)| agent_tool(n, d.as_deref()))
            .collect();
        if !tools.is_empty() {
            tools.push(get_task_tool());
        }
        Ok(ListToolsResult::with_all_items(tools))
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        let exposed = self.exposed();
        if request.name == GET_TASK && !exposed.is_empty() {
            let args: GetTaskArgs = arguments(&request)?;
            let task = self.exposed_task(&args.task_id).await?;
            return Ok(outcome::tool_result(&task).into());
        }
        match exposed.iter().find(|(n, _)| *n == request.name) {
            Some((name, _)) => self.call_agent(name, &request, &context).await,
            None => Err(ErrorData::invalid_params(
                format!("no tool `{}`", request.name),
                None,
            )),
        }
    }

    async fn get_task(
        &self,
        request: GetTaskParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<GetTaskResult, ErrorData> {
        let task = self.exposed_task(&request.task_id).await?;
        Ok(GetTaskResult::new(outcome::detailed(&task)))
    }

    async fn cancel_task(
        &self,
        request: CancelTaskParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<(), ErrorData> {
        let task = self.exposed_task(&request.task_id).await?;
        // An ended task is left as it is: cancelling is only a request.
        if task.status().is_terminal() {
            return Ok(());
        }
        match self.ingest.cancel_task(task.id.as_str()).await {
            Ok(_) => Ok(()),
            Err(e) if e.status.is_server_error() => Err(ErrorData::internal_error(e.message, None)),
            Err(_) => Ok(()),
        }
    }
}
