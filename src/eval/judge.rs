//! The `judge` check: a model grades an answer against the case's rubric
//! by calling the forced tool `grade` `{"score": 0..1, "reason"}`. It is
//! called from the CLI, with the provider the environment configures (as
//! `baton dev` builds it), so a run on the scripted model stays offline:
//! the scripted model answers from the case input's `#grade=JSON`
//! directive, which is why the input comes first in the judge's message.

use super::check::CheckResult;
use baton_core::{CompletionRequest, LlmProvider, Message, ToolChoice, ToolSpec};
use serde_json::{json, Value};
use std::sync::Arc;

/// A score at or above this passes the check.
pub(crate) const PASS_SCORE: f64 = 0.5;

const SYSTEM: &str = "You grade an AI agent's answer to a request against a rubric. \
Call the tool `grade` once: `score` from 0 (fails the rubric) to 1 (fully meets it), \
and `reason`, one or two sentences saying why. Judge only what the rubric asks.";

/// Why a grade could not be had.
#[derive(Debug, thiserror::Error)]
pub(crate) enum JudgeError {
    #[error("the judge model failed: {0}")]
    Model(#[from] baton_core::LlmError),
    #[error("the judge did not call `grade` with a score from 0 to 1 and a reason (got {0})")]
    Malformed(String),
}

pub(crate) struct Judge {
    provider: Arc<dyn LlmProvider>,
    model: String,
}

/// A grade given.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct Grade {
    pub(crate) score: f64,
    pub(crate) reason: String,
}

impl Judge {
    /// The judge on the environment's model settings; `model` overrides
    /// the model (`--judge-model`).
    pub(crate) fn from_env(model: Option<&str>) -> anyhow::Result<Self> {
        use anyhow::Context;
        let settings = baton_runtime::App::builder()
            .settings_from_env()
            .context("the judge's model settings")?;
        let provider =
            baton_llm::build_provider(&settings.llm.config(), baton_llm::RetryPolicy::default())
                .context("the judge's model")?;
        Ok(Judge {
            provider,
            model: model.map(str::to_owned).unwrap_or(settings.model),
        })
    }

    /// `input`'s answer graded against `rubric` (and the rated
    /// `reference` answer, when the case has one).
    pub(crate) async fn grade(
        &self,
        input: &str,
        rubric: &str,
        answer: &str,
        reference: Option<&str>,
    ) -> Result<Grade, JudgeError> {
        let request = request(&self.model, input, rubric, answer, reference);
        let completion = self.provider.complete(&request).await?;
        let call = completion.tool_calls.iter().find(|c| c.name == "grade");
        match call.and_then(|c| read_grade(&c.arguments)) {
            Some(g) => Ok(g),
            None => Err(JudgeError::Malformed(match call {
                Some(c) => c.arguments.to_string(),
                None => format!("text: {}", crate::client::short(&completion.content)),
            })),
        }
    }
}

/// The grade check's result: passed at [`PASS_SCORE`], its score the
/// judge's; an error fails it with score 0.
pub(crate) fn check(grade: &Result<Grade, JudgeError>) -> CheckResult {
    match grade {
        Ok(g) => CheckResult {
            check: "judge".into(),
            passed: g.score >= PASS_SCORE,
            score: g.score,
            detail: g.reason.clone(),
        },
        Err(e) => CheckResult::new("judge", false, e.to_string()),
    }
}

fn read_grade(args: &Value) -> Option<Grade> {
    let score = args.get("score")?.as_f64()?;
    let reason = args.get("reason")?.as_str()?.to_owned();
    (0.0..=1.0)
        .contains(&score)
        .then_some(Grade { score, reason })
}

fn request(
    model: &str,
    input: &str,
    rubric: &str,
    answer: &str,
    reference: Option<&str>,
) -> CompletionRequest {
    let mut text = format!("{input}\n\n---\nThe rubric:\n{rubric}\n");
    if let Some(r) = reference {
        text.push_str(&format!("\nA rated answer to compare with:\n{r}\n"));
    }
    text.push_str(&format!("\nThe answer to grade:\n{answer}\n"));
    CompletionRequest {
        model: model.to_owned(),
        system: SYSTEM.to_owned(),
        messages: vec![Message::User { content: text }],
        tools: vec![ToolSpec {
            name: "grade".into(),
            description: "Grade the answer against the rubric.".into(),
            input_schema: json!({
                "type": "object",
                "properties": {
                    "score": {"type": "number", "minimum": 0, "maximum": 1},
                    "reason": {"type": "string"}
                },
                "required": ["score", "reason"]
            }),
        }],
        max_tokens: 1024,
        tool_choice: ToolChoice::tool("grade"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn scripted() -> Judge {
        Judge {
            provider: Arc::new(baton_llm::ScriptedProvider::new()),
            model: "scripted".into(),
        }
    }

    #[tokio::test]
    async fn the_scripted_judge_grades_from_the_input_directive() {
        let input = r#"Capital of France? #grade={"score": 0.2, "reason": "wrong city"}"#;
        let g = scripted()
            .grade(input, "names Paris", "Lyon", None)
            .await
            .unwrap();
        assert_eq!(g.score, 0.2);
        assert_eq!(g.reason, "wrong city");
        let c = check(&Ok(g));
        assert!(!c.passed);
        // No directive: the default grade, a pass.
        let g = scripted()
            .grade("hi", "polite", "hello", None)
            .await
            .unwrap();
        assert!(check(&Ok(g)).passed);
    }

    #[tokio::test]
    async fn a_grade_out_of_range_or_missing_fails_the_check() {
        let input = r#"q #grade={"score": 7, "reason": "x"}"#;
        let e = scripted().grade(input, "r", "a", None).await.unwrap_err();
        assert!(e.to_string().contains("score from 0 to 1"), "{e}");
        let c = check(&Err(e));
        assert!(!c.passed && c.score == 0.0);
        let e = scripted()
            .grade("q #grade=garbage", "r", "a", None)
            .await
            .unwrap_err();
        assert!(e.to_string().contains("got text"), "{e}");
    }

    #[test]
    fn the_request_forces_grade_and_carries_the_input_first() {
        let r = request("m", "the input", "rubric", "answer", Some("rated"));
        assert_eq!(r.tool_choice, ToolChoice::tool("grade"));
        let Message::User { content } = &r.messages[0] else {
            panic!("a user message")
        };
        assert!(content.starts_with("the input"));
        assert!(content.contains("rated") && content.contains("answer"));
    }
}
