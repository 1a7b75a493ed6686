//! Output hygiene: what the model wrote, cleaned before a user sees it.
//!
//! Models leak reasoning tags, emit tool calls as plain text, echo system
//! text and stutter. Each cleaning step below removes one such artefact.

use regex::Regex;
use std::sync::LazyLock;

/// The answer that means "post nothing".
pub const NO_REPLY: &str = "NO_REPLY";

static THINKING: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(
        r"(?is)<(think|thinking|thought|antthinking)>.*?</(think|thinking|thought|antthinking)>",
    )
    .unwrap_or_else(|e| unreachable!("static regex: {e}"))
});
static TOOL_MARKUP: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(
        r"(?is)<(tool_call|function_call|tool_use|minimax:tool_call|function_calls)>.*?</(tool_call|function_call|tool_use|minimax:tool_call|function_calls)>|</?(tool_call|function_call|tool_use|invoke|parameter)[^>]*>",
    )
    .unwrap_or_else(|e| unreachable!("static regex: {e}"))
});
static FINAL_TAGS: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"(?i)</?final>").unwrap_or_else(|e| unreachable!("static regex: {e}"))
});

/// Cleans a final answer for display.
pub fn sanitize(text: &str) -> String {
    let s = THINKING.replace_all(text, "");
    let s = TOOL_MARKUP.replace_all(&s, "");
    let s = FINAL_TAGS.replace_all(&s, "");
    let s = strip_text_tool_calls(&s);
    let s = strip_echoed_system(&s);
    let s = collapse_duplicate_paragraphs(&s);
    s.trim_start_matches(['\n', '\r', ' ', '\t'])
        .trim_end()
        .to_owned()
}

/// Whether a (sanitised) answer asks to post nothing.
pub fn is_no_reply(text: &str) -> bool {
    let t = text.trim();
    t.is_empty() || t == NO_REPLY || t == "HEARTBEAT_OK"
}

/// Drops lines like `[Tool Call: x]` / `[Tool Result ...]` that some models
/// write instead of real tool calls.
fn strip_text_tool_calls(s: &str) -> String {
    s.lines()
        .filter(|l| {
            let t = l.trim_start();
            !(t.starts_with("[Tool Call:")
                || t.starts_with("[Tool Result")
                || t.starts_with("[Historical context:"))
        })
        .collect::<Vec<_>>()
        .join("\n")
}

/// Drops `[System Message]` blocks up to the next blank line.
fn strip_echoed_system(s: &str) -> String {
    let mut out = Vec::new();
    let mut skipping = false;
    for line in s.lines() {
        if line.trim_start().starts_with("[System Message]") {
            skipping = true;
            continue;
        }
        if skipping {
            if line.trim().is_empty() {
                skipping = false;
            }
            continue;
        }
        out.push(line);
    }
    out.join("\n")
}

fn collapse_duplicate_paragraphs(s: &str) -> String {
    let mut out: Vec<&str> = Vec::new();
    for block in s.split("\n\n") {
        if out
            .last()
            .is_some_and(|prev| prev.trim() == block.trim() && !block.trim().is_empty())
        {
            continue;
        }
        out.push(block);
    }
    out.join("\n\n")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cleans_the_usual_artefacts() {
        let raw = "\n\n<think>secret plan</think>Hello!\n\nHello!\n\n<tool_call>{\"x\":1}</tool_call>[Tool Call: foo]\n<final>Done.</final>";
        assert_eq!(sanitize(raw), "Hello!\n\nDone.");
    }

    #[test]
    fn drops_echoed_system_blocks() {
        assert_eq!(
            sanitize("[System Message] you are\nstill system\n\nAnswer"),
            "Answer"
        );
    }

    #[test]
    fn recognises_no_reply() {
        assert!(is_no_reply(" NO_REPLY \n"));
        assert!(is_no_reply(&sanitize("<think>x</think>NO_REPLY")));
        assert!(!is_no_reply("NO_REPLY, but actually yes"));
    }
}
