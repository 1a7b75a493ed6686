//! What follows a model call that failed (after its retries and
//! fallbacks), a pure decision: a request too long for the model is
//! shrunk and tried once more; a request the provider refused goes to the
//! escalation model when there is one and it has not taken over yet;
//! anything else ends the task, told in plain words ([`plain_failure`]).
//! [`super::step`] carries it out.

use crate::model_choice::ModelsFailed;
use baton_core::LlmError;
use std::time::Duration;

/// The next rung after a failed model call.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum AfterFailure {
    /// Too long for the model: compact the history, clear old tool
    /// results, and ask once more.
    Shrink,
    /// Refused: a note hands the task to the escalation model, and the
    /// loop goes on.
    Escalate,
    /// Nothing left to try: the task ends, with the reason told.
    Fail,
}

/// What [`after_failure`] looks at.
pub(super) struct FailedCall<'a> {
    /// The last model's error (the one tried last, after fallbacks).
    pub(super) error: Option<&'a LlmError>,
    /// The request was shrunk already in this step.
    pub(super) shrunk: bool,
    /// The agent has an escalation model that has not taken over yet.
    pub(super) can_escalate: bool,
}

/// The rung after a failed call: shrink (once per step, for an overflow),
/// then escalate (a refusal, an overflow after shrinking), then fail.
pub(super) fn after_failure(f: &FailedCall<'_>) -> AfterFailure {
    if !f.shrunk && f.error.is_some_and(LlmError::is_context_overflow) {
        return AfterFailure::Shrink;
    }
    let refused = matches!(
        f.error,
        Some(LlmError::Rejected { .. } | LlmError::ContextOverflow { .. })
    );
    if refused && f.can_escalate {
        AfterFailure::Escalate
    } else {
        AfterFailure::Fail
    }
}

/// Why the model call failed, in words for the person who asked: no model
/// ids, provider bodies or account names (those go to the logs and the
/// trace, keyed by the task id).
pub(super) fn plain_failure(e: &ModelsFailed, took: Duration) -> String {
    let tried = e.failures.len();
    match e.last_error() {
        Some(err) if err.is_retryable() => format!(
            "the model provider is unavailable (tried {tried} model{}, with retries, over {})",
            if tried == 1 { "" } else { "s" },
            human(took)
        ),
        Some(err) if err.is_context_overflow() => {
            "the conversation is too long for the model, even after summarising it".to_owned()
        }
        Some(LlmError::Rejected { .. }) => "the model provider refused the request".to_owned(),
        Some(LlmError::Decode(_)) => {
            "the model provider sent an answer that could not be read".to_owned()
        }
        Some(LlmError::Config(_)) => {
            "the model provider is not set up correctly (the logs say how)".to_owned()
        }
        _ => "the model could not be reached".to_owned(),
    }
}

/// "40 seconds", "3 minutes".
fn human(d: Duration) -> String {
    let s = d.as_secs();
    if s < 90 {
        format!("{} second{}", s.max(1), if s == 1 { "" } else { "s" })
    } else {
        format!("{} minutes", (s + 30) / 60)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model_choice::ModelFailure;

    fn failed(error: LlmError) -> ModelsFailed {
        ModelsFailed {
            failures: vec![ModelFailure {
                model: "us.anthropic.claude-secret-model-v1:0".into(),
                error,
            }],
        }
    }

    /// (the last error, shrunk already, an escalation model left, rung).
    #[test]
    fn an_overflow_is_shrunk_then_a_refusal_escalated_then_the_task_ends() {
        use AfterFailure::{Escalate, Fail, Shrink};
        let overflow = LlmError::ContextOverflow {
            status: 400,
            message: "too long".into(),
        };
        let rejected = LlmError::Rejected {
            status: 403,
            message: "no".into(),
        };
        let down = LlmError::Server {
            status: 503,
            message: "down".into(),
            retry_after: None,
        };
        let overloaded = LlmError::Overloaded { retry_after: None };
        let unreadable = LlmError::Decode("?".into());
        let cases = [
            (Some(&overflow), false, false, Shrink),
            (Some(&overflow), false, true, Shrink),
            (Some(&overflow), true, true, Escalate),
            (Some(&overflow), true, false, Fail),
            (Some(&rejected), false, true, Escalate),
            (Some(&rejected), true, true, Escalate),
            (Some(&rejected), false, false, Fail),
            // Only a refusal escalates: the fallbacks were for the rest.
            (Some(&down), false, true, Fail),
            (Some(&overloaded), false, true, Fail),
            (Some(&unreadable), false, true, Fail),
            (None, false, true, Fail),
        ];
        for (error, shrunk, can_escalate, rung) in cases {
            let f = FailedCall {
                error,
                shrunk,
                can_escalate,
            };
            assert_eq!(
                after_failure(&f),
                rung,
                "{error:?}, shrunk: {shrunk}, can escalate: {can_escalate}"
            );
        }
    }

    #[test]
    fn failures_are_told_without_provider_detail() {
        let body = r#"{"message":"User: arn:aws:iam::123456789012:role/x is not authorized"}"#;
        let refused = plain_failure(
            &failed(LlmError::Rejected {
                status: 403,
                message: body.into(),
            }),
            Duration::from_secs(1),
        );
        assert_eq!(refused, "the model provider refused the request");
        let down = plain_failure(
            &failed(LlmError::Server {
                status: 503,
                message: "upstream connect error".into(),
                retry_after: None,
            }),
            Duration::from_secs(125),
        );
        assert_eq!(
            down,
            "the model provider is unavailable (tried 1 model, with retries, over 2 minutes)"
        );
        for text in [refused, down] {
            assert!(!text.contains("arn:") && !text.contains("claude") && !text.contains("503"));
        }
    }
}
