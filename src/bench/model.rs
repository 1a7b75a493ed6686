//! The benches' stand-ins for a model and a tool: both answer at once, so
//! what is measured is Baton's own work (context, checkpoints, transcript,
//! lease, traces, requests to the store).

use async_trait::async_trait;
use baton_core::{
    Completion, CompletionRequest, LlmError, LlmProvider, Message, Tool, ToolCall, ToolContext,
    ToolOutput, ToolSpec, Usage,
};

/// A model that calls one tool per turn, cycling through `tools`, until
/// turn `steps`, which answers `answer`. Every turn reports `usage`.
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
        let turn = request
            .messages
            .iter()
            .filter(|m| matches!(m, Message::Assistant { .. }))
            .count() as u32
            + 1;
        let tool = self
            .tools
            .get((turn as usize - 1) % self.tools.len().max(1));
        let tool_calls = match tool {
            Some(name) if turn < self.steps => vec![ToolCall {
                id: format!("call_{turn}"),
                name: (*name).into(),
                arguments: serde_json::json!({}),
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
