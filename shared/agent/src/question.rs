//! The `ask_user` tool: what the model is told of it, and its arguments.
//! The loop runs it (`segment::ask`): the question is posted, the task
//! waits at zero compute, and the requester's reply is the call's result.

use baton_core::ToolSpec;

pub use baton_core::question::ASK_USER;

/// The longest question asked.
const MAX_QUESTION_CHARS: usize = 2_000;

pub fn ask_user_spec() -> ToolSpec {
    ToolSpec {
        name: ASK_USER.to_owned(),
        description: "Ask the person you are working for a question and wait for their reply \
(it becomes this tool's result). Use it when you cannot go on without their answer; \
the task waits, using no compute, until they reply or the question expires."
            .to_owned(),
        input_schema: serde_json::json!({
            "type": "object",
            "properties": {
                "question": {"type": "string", "description": "the question, as the person will read it"}
            },
            "required": ["question"],
            "additionalProperties": false
        }),
    }
}

/// The call's question, or why its arguments are wrong.
pub(crate) fn question_of(arguments: &serde_json::Value) -> Result<String, String> {
    let q = arguments
        .get("question")
        .and_then(serde_json::Value::as_str)
        .map(str::trim)
        .unwrap_or_default();
    if q.is_empty() {
        return Err("invalid arguments: `question` must be a non-empty string".into());
    }
    if q.chars().count() > MAX_QUESTION_CHARS {
        return Err(format!(
            "invalid arguments: `question` is longer than {MAX_QUESTION_CHARS} characters"
        ));
    }
    Ok(q.to_owned())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn questions_are_checked() {
        assert_eq!(
            question_of(&json!({"question": " Which env? "})).unwrap(),
            "Which env?"
        );
        assert!(question_of(&json!({})).is_err());
        assert!(question_of(&json!({"question": "  "})).is_err());
        assert!(question_of(&json!({"question": "x".repeat(2001)})).is_err());
    }
}
