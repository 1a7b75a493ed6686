//! The tool port: what the agent loop needs of a tool.

use crate::conversation::ToolSpec;
use crate::ids::TaskId;
use async_trait::async_trait;

/// What a tool knows about the call it serves.
#[derive(Clone, Debug)]
pub struct ToolContext {
    pub task_id: TaskId,
    /// `task_id:step:tool_call_id`: stable across retries of the same call,
    /// so tools pass it downstream (the `Idempotency-Key` header of
    /// `http_request`) and a side effect repeated after a crash can be
    /// recognised by the receiver.
    pub idempotency_key: String,
}

impl ToolContext {
    pub fn new(task_id: TaskId, step: u32, call_id: &str) -> Self {
        let idempotency_key = format!("{task_id}:{step}:{call_id}");
        ToolContext {
            task_id,
            idempotency_key,
        }
    }
}

/// A tool's answer. Failures are answers too: the model reads them and may
/// try something else, so a tool reports them here rather than erroring.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ToolOutput {
    pub content: String,
    pub is_error: bool,
}

impl ToolOutput {
    pub fn ok(content: impl Into<String>) -> Self {
        ToolOutput {
            content: content.into(),
            is_error: false,
        }
    }

    pub fn error(content: impl Into<String>) -> Self {
        ToolOutput {
            content: content.into(),
            is_error: true,
        }
    }
}

#[async_trait]
pub trait Tool: Send + Sync {
    fn spec(&self) -> ToolSpec;

    /// Whether running this call twice is harmless. A tool that is not is
    /// never re-run after a crash interrupted it: it gets an "interrupted —
    /// may or may not have happened" result instead.
    /// Decided per call: `http_request` is idempotent for GET, not POST.
    fn idempotent(&self, arguments: &serde_json::Value) -> bool {
        let _ = arguments;
        true
    }

    /// Whether this call should wait for a human's approval before it runs
    /// (a side effect someone should see first). The agent's approval rules,
    /// when it sets them, decide instead. Decided per call: `http_request`
    /// asks for anything but GET and HEAD.
    fn needs_approval(&self, arguments: &serde_json::Value) -> bool {
        let _ = arguments;
        false
    }

    async fn call(&self, arguments: serde_json::Value, ctx: &ToolContext) -> ToolOutput;
}

/// Cuts a tool result to `max_chars`, keeping its head and tail (the end
/// of an output often holds the error or the summary), with a marker the
/// model can read saying how much was cut. Returns the text and how many
/// characters were cut.
pub fn truncate(text: &str, max_chars: usize, tool: &str) -> (String, u64) {
    let total = text.chars().count();
    if total <= max_chars {
        return (text.to_owned(), 0);
    }
    let tail_len = max_chars / 5;
    let head_len = max_chars - tail_len;
    let cut = total - head_len - tail_len;
    let head: String = text.chars().take(head_len).collect();
    let tail: String = text.chars().skip(total - tail_len).collect();
    let marker = format!(
        "\n[OUTPUT TRUNCATED: {cut} of {total} characters from {tool} were cut here; ask for a narrower result if you need them]\n"
    );
    (format!("{head}{marker}{tail}"), cut as u64)
}

#[cfg(test)]
mod tests {
    use super::truncate;

    #[test]
    fn idempotency_key_names_task_step_and_call() {
        let id = crate::TaskId::generate();
        let ctx = super::ToolContext::new(id.clone(), 3, "call_9");
        assert_eq!(ctx.idempotency_key, format!("{id}:3:call_9"));
    }

    #[test]
    fn truncation_keeps_head_and_tail_and_says_how_much() {
        let text: String = (0..1000)
            .map(|i| char::from(b'a' + (i % 26) as u8))
            .collect();
        let (out, cut) = truncate(&text, 100, "http_request");
        assert_eq!(cut, 900);
        assert!(out.starts_with(&text[..80]));
        assert!(out.ends_with(&text[980..]));
        assert!(out.contains("900 of 1000 characters from http_request"));
        assert_eq!(truncate("short", 100, "t"), ("short".to_owned(), 0));
    }
}
