//! The benches' stand-ins for a model and a tool: both answer at once, so
//! what is measured is Baton's own work (context, checkpoints, transcript,
//! lease, traces, requests to the store).

use async_trait::async_trait;
use baton_core::{
    Completion, CompletionRequest, LlmError, LlmProvider, Message, Tool, ToolCall, ToolContext,
    ToolOutput, ToolSpec, Usage,
};

/// A model that calls one tool per turn, cycling through `tools`, until
/// turn `steps`, which answers `answer`; asked for a summary, it writes
/// one; a request forcing one of the agent's judgment tools (`route`,
/// `plan`, `supervise`, `verdict`) gets a call of it ([`forced_call`]:
/// the default tier without a plan, continue, a pass). Every call reports
/// `usage`.
pub(crate) struct InstantModel {
    pub name: &'static str,
    pub steps: u32,
    pub tools: Vec<&'static str>,
    pub answer: &'static str,
    pub usage: Usage,
}

#[async_trait]
impl LlmProvider for InstantModel {
    fn name(&self) -> &str {
        self.name
    }

    async fn complete(&self, request: &CompletionRequest) -> Result<Completion, LlmError> {
        if let Some(tool) = request.tool_choice.forced() {
            return Ok(Completion {
                usage: self.usage,
                model: self.name.into(),
                ..forced_call(tool, false)
            });
        }
        // Asked to summarise a long history, as a real model is: it does,
        // so the history is compacted as in a real task.
        if request.system == baton_agent::compaction::SUMMARISER_PROMPT {
            return Ok(Completion {
                content: "The tools were called once a turn and returned their results.".into(),
                usage: self.usage,
                model: self.name.into(),
                ..Completion::default()
            });
        }
        // Asked to remember a long conversation, as a real model is: a
        // summary of the size one writes (about 2,400 characters).
        if request.system == baton_core::recap::SUMMARISER_PROMPT {
            return Ok(Completion {
                content: "The person asked about the deploys of several services and their error \
rates after rollbacks; each was checked and found back under 0.1%. "
                    .repeat(16),
                usage: self.usage,
                model: self.name.into(),
                ..Completion::default()
            });
        }
        // The turn after the last one in the request (read from its call
        // id, so this costs the same at any length of history).
        let turn = request
            .messages
            .iter()
            .rev()
            .find_map(|m| match m {
                Message::Assistant { tool_calls, .. } => Some(
                    tool_calls
                        .first()
                        .and_then(|c| c.id.strip_prefix("call_")?.parse::<u32>().ok())
                        .unwrap_or(0),
                ),
                _ => None,
            })
            .unwrap_or(0)
            + 1;
        let tool = self
            .tools
            .get((turn as usize - 1) % self.tools.len().max(1));
        let tool_calls = match tool {
            Some(name) if turn < self.steps => vec![ToolCall {
                id: format!("call_{turn}"),
                name: (*name).into(),
                // A new call each turn, as an agent at work makes, so the
                // loop detector lets it through (`current_time` takes no
                // such argument; every other turn, it is not a loop).
                arguments: if *name == baton_tools::CURRENT_TIME {
                    serde_json::json!({})
                } else {
                    serde_json::json!({ "page": turn })
                },
            }],
            _ => Vec::new(),
        };
        Ok(Completion {
            content: if tool_calls.is_empty() {
                self.answer.into()
            } else {
                String::new()
            },
            tool_calls,
            usage: self.usage,
            stop_reason: None,
            model: self.name.into(),
        })
    }
}

/// The answer to a request forcing `tool`, as a model that follows the
/// instructions gives it: a call of the tool with plausible arguments.
/// `route` sends the task to the default tier, with a plan when
/// `needs_plan`; `plan` writes three steps; `supervise` continues; the
/// gate passes. No usage: the caller sets it.
pub(crate) fn forced_call(tool: &str, needs_plan: bool) -> Completion {
    let arguments = match tool {
        "route" => serde_json::json!({"tier": "default", "modules": [], "needs_plan": needs_plan}),
        "plan" => serde_json::json!({"steps": [
            {"title": "Find the pages that cover the question", "done_when": "the relevant pages are listed"},
            {"title": "Read each page and note the findings", "done_when": "every page is read"},
            {"title": "Write the summary with sources", "done_when": "the answer is given"}
        ]}),
        "supervise" => serde_json::json!({"action": "continue"}),
        "verdict" => serde_json::json!({"pass": true, "problems": []}),
        _ => serde_json::json!({}),
    };
    Completion {
        content: String::new(),
        tool_calls: vec![ToolCall {
            id: format!("forced_{tool}"),
            name: tool.into(),
            arguments,
        }],
        usage: Usage::default(),
        stop_reason: Some("tool_use".into()),
        model: String::new(),
    }
}

/// A tool returning `bytes` bytes of `fill`: a page fetched, a payload.
pub(crate) struct SizedTool {
    pub name: &'static str,
    pub bytes: usize,
    pub fill: char,
}

#[async_trait]
impl Tool for SizedTool {
    fn spec(&self) -> ToolSpec {
        ToolSpec {
            name: self.name.into(),
            description: "returns a result of fixed size".into(),
            input_schema: serde_json::json!({"type": "object"}),
        }
    }

    async fn call(&self, _: serde_json::Value, _: &ToolContext) -> ToolOutput {
        ToolOutput::ok(self.fill.to_string().repeat(self.bytes))
    }
}
