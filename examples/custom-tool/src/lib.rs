//! A Rust tool of your own in Baton: `word_count`, added to the ingest
//! and worker Lambdas and to a local dev server by [`app`]
//! (docs/tools.md, *Your own Rust tools*).

use baton_runtime::tool::{async_trait, Tool, ToolContext, ToolOutput, ToolSpec};
use baton_runtime::{App, AppBuilder};
use serde::Deserialize;
use serde_json::{json, Value};

/// The tool's name: what the model calls and an agents file lists in an
/// agent's `tools`.
pub const WORD_COUNT: &str = "word_count";

/// The app every binary of this crate runs: Baton's built-in tools and
/// `word_count`. One function, so the ingest (which checks the agents file
/// against the known tool names) and the worker (which runs the tools)
/// always agree.
pub fn app() -> AppBuilder {
    App::builder().tool(WordCount)
}

/// Counts the words, lines and characters of a text: something models are
/// bad at and a few lines of code are not.
#[derive(Clone, Copy, Debug, Default)]
pub struct WordCount;

/// The arguments, as the model sends them (checked here: Baton hands a
/// tool the model's JSON as it came).
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Args {
    text: String,
}

/// What [`count`] found.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Counts {
    pub words: usize,
    pub lines: usize,
    pub characters: usize,
}

/// Words are runs of non-whitespace; lines, like `wc -l` but counting a
/// last line without a newline; characters are Unicode scalar values.
pub fn count(text: &str) -> Counts {
    Counts {
        words: text.split_whitespace().count(),
        lines: text.lines().count(),
        characters: text.chars().count(),
    }
}

#[async_trait]
impl Tool for WordCount {
    /// What the model sees: the name, when to use the tool, and the JSON
    /// Schema of its arguments.
    fn spec(&self) -> ToolSpec {
        ToolSpec {
            name: WORD_COUNT.to_owned(),
            description: "Count the words, lines and characters of a text exactly. \
                          Use it instead of counting yourself."
                .to_owned(),
            input_schema: json!({
                "type": "object",
                "properties": {
                    "text": { "type": "string", "description": "The text to count." }
                },
                "required": ["text"],
                "additionalProperties": false
            }),
        }
    }

    /// Same text, same answer, and nothing changes anywhere: a call the
    /// worker was running when it crashed is simply run again. (This is
    /// the default; a tool with side effects answers false, and is then
    /// never run twice.)
    fn idempotent(&self, _arguments: &Value) -> bool {
        true
    }

    /// Nothing for a human to check first. (The default too; an agent's
    /// `approval.require` rules may still name `word_count`.)
    fn needs_approval(&self, _arguments: &Value) -> bool {
        false
    }

    /// Failures are answers the model reads, never a failed task.
    async fn call(&self, arguments: Value, _ctx: &ToolContext) -> ToolOutput {
        let args: Args = match serde_json::from_value(arguments) {
            Ok(a) => a,
            Err(e) => {
                return ToolOutput::error(format!(
                    "invalid arguments for {WORD_COUNT}: {e}; expected {{\"text\": \"...\"}}"
                ))
            }
        };
        let c = count(&args.text);
        ToolOutput::ok(format!(
            "{} words, {} lines, {} characters",
            c.words, c.lines, c.characters
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ctx() -> ToolContext {
        ToolContext::new(baton_runtime::tool::TaskId::generate(), 1, "call_1")
    }

    #[tokio::test]
    async fn counts_words_lines_and_characters() {
        let out = WordCount
            .call(json!({"text": "to be or\nnot to bé"}), &ctx())
            .await;
        assert_eq!(out, ToolOutput::ok("6 words, 2 lines, 18 characters"));
    }

    #[tokio::test]
    async fn bad_arguments_are_an_answer_the_model_reads() {
        let out = WordCount.call(json!({"txt": "a"}), &ctx()).await;
        assert!(out.is_error, "{out:?}");
        assert!(
            out.content.contains("unknown field `txt`"),
            "{}",
            out.content
        );
    }
}
