//! A tool call's result as the transcript records it: cut and screened
//! as data when a tool answered, as it was recorded when a fork replays it.

use baton_core::input_guard::{screen_tool_output, InputGuardMode};
use baton_core::{EntryKind, ToolCall, ToolOutput};

/// The transcript entry of a call's result: cut to `max_chars`, and
/// screened as data (see [`screen_tool_output`]).
pub(super) fn result_entry(
    step: u32,
    call: &ToolCall,
    output: ToolOutput,
    max_chars: usize,
    guard: InputGuardMode,
) -> EntryKind {
    let (content, truncated_chars) =
        baton_core::tool::truncate(&output.content, max_chars, &call.name);
    let content = screen_tool_output(guard, &call.name, &content);
    EntryKind::ToolResult {
        step,
        call_id: call.id.clone(),
        name: call.name.clone(),
        content,
        is_error: output.is_error,
        truncated_chars,
    }
}

/// The result entry of a recorded fork's call: the source's result as it
/// was recorded, already cut and screened when the source got it.
pub(super) fn replayed_entry(step: u32, call: &ToolCall, output: ToolOutput) -> EntryKind {
    EntryKind::ToolResult {
        step,
        call_id: call.id.clone(),
        name: call.name.clone(),
        content: output.content,
        is_error: output.is_error,
        truncated_chars: 0,
    }
}
