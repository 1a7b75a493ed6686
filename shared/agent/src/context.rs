//! Building what the model sees for one step, from the transcript.

use crate::agent::AgentConfig;
use baton_core::{CompletionRequest, Entry, Message, ToolSpec};
use std::collections::HashMap;

/// The request for the next LLM call.
pub fn build_request(agent: &AgentConfig, transcript: &[Entry], tools: Vec<ToolSpec>) -> CompletionRequest {
    let messages = repair_pairing(transcript.iter().filter_map(|e| e.kind.to_message()).collect());
    CompletionRequest {
        model: agent.model.clone(),
        system: agent.system_prompt.clone(),
        messages,
        tools,
        max_tokens: agent.max_tokens,
    }
}

/// Providers reject a tool call without a result and a result without its
/// call. A crash or a pruned history can leave either; this restores the
/// pairing: orphan results are dropped, missing results are synthesised
/// with a placeholder, and results follow their assistant message in the
/// order the calls were requested (they are recorded as they complete).
pub fn repair_pairing(messages: Vec<Message>) -> Vec<Message> {
    let mut out: Vec<Message> = Vec::with_capacity(messages.len());
    // The last assistant message's calls, and the results seen for them.
    let mut open: Vec<(String, String)> = Vec::new();
    let mut results: HashMap<String, Message> = HashMap::new();
    fn flush(out: &mut Vec<Message>, open: &mut Vec<(String, String)>, results: &mut HashMap<String, Message>) {
        for (id, name) in open.drain(..) {
            out.push(results.remove(&id).unwrap_or(Message::Tool {
                call_id: id,
                name,
                content: MISSING_RESULT.to_owned(),
                is_error: true,
            }));
        }
        results.clear();
    }
    for m in messages {
        match m {
            Message::Assistant { ref tool_calls, .. } => {
                flush(&mut out, &mut open, &mut results);
                open = tool_calls.iter().map(|c| (c.id.clone(), c.name.clone())).collect();
                out.push(m);
            }
            Message::Tool { ref call_id, .. } => {
                if open.iter().any(|(id, _)| id == call_id) && !results.contains_key(call_id) {
                    results.insert(call_id.clone(), m);
                }
            }
            Message::User { .. } => {
                flush(&mut out, &mut open, &mut results);
                out.push(m);
            }
        }
    }
    flush(&mut out, &mut open, &mut results);
    out
}

/// The placeholder for a tool result that was never recorded.
pub const MISSING_RESULT: &str = "[no result was recorded for this tool call]";

#[cfg(test)]
mod tests {
    use super::*;
    use baton_core::ToolCall;

    fn call(id: &str) -> ToolCall {
        ToolCall { id: id.into(), name: "t".into(), arguments: serde_json::json!({}) }
    }

    fn result(id: &str) -> Message {
        Message::Tool { call_id: id.into(), name: "t".into(), content: "ok".into(), is_error: false }
    }

    #[test]
    fn synthesises_missing_and_drops_orphan_results() {
        let msgs = vec![
            Message::User { content: "hi".into() },
            result("orphan"),
            Message::Assistant { content: String::new(), tool_calls: vec![call("a"), call("b")] },
            result("b"),
            result("b"),
            Message::User { content: "more".into() },
        ];
        let fixed = repair_pairing(msgs);
        assert_eq!(fixed.len(), 5);
        assert!(matches!(&fixed[2], Message::Tool { call_id, .. } if call_id == "b"));
        assert!(matches!(&fixed[3], Message::Tool { call_id, is_error: true, .. } if call_id == "a"));
        assert!(matches!(&fixed[4], Message::User { .. }));
    }
}

#[cfg(test)]
mod order_tests {
    use super::*;
    use baton_core::ToolCall;

    #[test]
    fn results_follow_request_order() {
        let calls = ["x", "y", "z"].map(|id| ToolCall { id: id.into(), name: "t".into(), arguments: serde_json::json!({}) });
        let res = |id: &str| Message::Tool { call_id: id.into(), name: "t".into(), content: id.into(), is_error: false };
        let fixed = repair_pairing(vec![
            Message::Assistant { content: String::new(), tool_calls: calls.to_vec() },
            res("z"),
            res("x"),
            res("y"),
        ]);
        let ids: Vec<_> = fixed[1..].iter().map(|m| match m { Message::Tool { call_id, .. } => call_id.as_str(), _ => "?" }).collect();
        assert_eq!(ids, ["x", "y", "z"]);
    }
}
