//! Which model answers a step: the agent's escalation model after repeated
//! tool errors, else its own model; and, when that model fails transiently,
//! its fallback models in order.
//!
//! Everything is decided from the transcript (durable state), never from
//! counters in memory, so a step retried in another segment or process
//! makes the same choice.
//!
//! **Escalation** starts once `escalation.after_tool_errors` tool results in
//! a row are errors (results are counted in transcript order; any successful
//! result resets the count; other entries do not). It then **stays on for
//! the rest of the task**: the run of errors remains in the transcript, so
//! every later step sees it. Switching back after the stronger model's first
//! success would hand the task back to the model that was failing, and let
//! the choice flap from step to step.
//!
//! **Fallback**: the models tried, in order, are the chosen model, then —
//! when escalated — the agent's own model, then `fallback_models` (each
//! once). A retryable error ([`LlmError::is_retryable`]: rate limit,
//! overload, server error, transport), reported after the provider's own
//! retries, moves on to the next model; a non-retryable error (a rejected
//! request, a bad answer, a configuration error) stops at once, since
//! another model would most likely fail the same way.

use baton_core::{
    Completion, CompletionRequest, DeltaSink, Entry, EntryKind, LlmError, LlmProvider,
};
use baton_settings::AgentConfig;
use std::fmt;

/// Consecutive failed tool results at the end of the transcript, and the
/// longest such run anywhere in it.
pub fn tool_error_runs(transcript: &[Entry]) -> (u32, u32) {
    let (mut current, mut longest) = (0u32, 0u32);
    for e in transcript {
        if let EntryKind::ToolResult { is_error, .. } = &e.kind {
            current = if *is_error { current + 1 } else { 0 };
            longest = longest.max(current);
        }
    }
    (current, longest)
}

/// Whether the task runs on the agent's escalation model: some
/// `after_tool_errors` tool results in a row were errors, or the loop
/// escalated (an empty answer after a nudge, a refused request: an
/// `escalated` note). See the module docs: escalation stays on once
/// triggered.
pub fn escalated(agent: &AgentConfig, transcript: &[Entry]) -> bool {
    agent.escalation.as_ref().is_some_and(|e| {
        let (_, longest) = tool_error_runs(transcript);
        longest >= e.after_tool_errors.max(1)
            || transcript.iter().any(|x| {
                matches!(
                    x.kind,
                    EntryKind::Note {
                        reason: baton_core::NoteReason::Escalated,
                        ..
                    }
                )
            })
    })
}

/// The models to try for the next step, in order, each once: the
/// escalation model when the loop escalated, the tier's model
/// ([`crate::judgment::tier`]: routed, or moved up by the supervisor or
/// the quality gate), the agent's default model, its fallbacks.
pub fn candidates(agent: &AgentConfig, transcript: &[Entry]) -> Vec<String> {
    let escalation = agent
        .escalation
        .as_ref()
        .filter(|_| escalated(agent, transcript))
        .map(|e| e.model.as_str());
    let tier = agent.tier_model(crate::judgment::tier(transcript));
    let all = escalation
        .into_iter()
        .chain(std::iter::once(tier))
        .chain(std::iter::once(agent.model.as_str()))
        .chain(agent.fallback_models.iter().map(String::as_str));
    let mut out: Vec<String> = Vec::new();
    for m in all {
        if !m.is_empty() && !out.iter().any(|o| o == m) {
            out.push(m.to_owned());
        }
    }
    out
}

/// One model that failed.
#[derive(Clone, Debug, PartialEq)]
pub struct ModelFailure {
    pub model: String,
    pub error: LlmError,
}

/// A step's answer and who gave it.
#[derive(Clone, Debug, PartialEq)]
pub struct Answer {
    /// The completion; its `model` is what the provider reported, or the
    /// model asked for when it reported none.
    pub completion: Completion,
    /// The model id that was asked and answered (an id of the agent's
    /// configuration: what prices and traces are keyed by).
    pub model: String,
    /// Whether the step ran on the escalation model's chain.
    pub escalated: bool,
    /// The models that failed before this one answered, in order.
    pub failures: Vec<ModelFailure>,
}

/// Every model tried failed, or one failed in a way no other would fix.
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
pub struct ModelsFailed {
    /// In the order tried; never empty.
    pub failures: Vec<ModelFailure>,
}

impl ModelsFailed {
    /// The error that ended the attempt.
    pub fn last_error(&self) -> Option<&LlmError> {
        self.failures.last().map(|f| &f.error)
    }
}

impl fmt::Display for ModelsFailed {
    /// `model: error`, or for several `a: error; b: error`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.failures.is_empty() {
            return f.write_str("no model to ask");
        }
        for (i, m) in self.failures.iter().enumerate() {
            if i > 0 {
                f.write_str("; ")?;
            }
            write!(f, "{}: {}", m.model, m.error)?;
        }
        Ok(())
    }
}

/// Asks the step's model for `request` (built for `agent`; its `model` is
/// replaced by each model tried), falling back as the module docs say.
/// Call it instead of `llm.complete(&request)`.
pub async fn complete(
    llm: &dyn LlmProvider,
    agent: &AgentConfig,
    transcript: &[Entry],
    request: &CompletionRequest,
) -> Result<Answer, ModelsFailed> {
    Choice::of(agent, transcript).ask(llm, request, None).await
}

/// The models a step may ask, decided from the transcript up front, so the
/// call borrows nothing of it while it runs (a streamed call runs beside
/// the segment's own writes).
#[derive(Clone, Debug, PartialEq)]
pub struct Choice {
    models: Vec<String>,
    escalated: bool,
}

impl Choice {
    /// The models for a task's step: `pinned` alone when the task names a
    /// model ([`baton_core::Task::model`]: an evaluation or a fork asking
    /// for exactly that model, so no tier, escalation or fallback stands
    /// in for it), else as the module docs say.
    pub fn for_task(agent: &AgentConfig, pinned: Option<&str>, transcript: &[Entry]) -> Self {
        match pinned {
            Some(model) => Choice {
                models: vec![model.to_owned()],
                escalated: false,
            },
            None => Choice::of(agent, transcript),
        }
    }

    pub fn of(agent: &AgentConfig, transcript: &[Entry]) -> Self {
        Choice {
            models: candidates(agent, transcript),
            escalated: escalated(agent, transcript),
        }
    }

    /// The agent's other models, for when the ones in `failed` could not
    /// answer: its tiers and fallbacks that are not among them. `None`
    /// when there is none.
    pub fn instead_of(agent: &AgentConfig, failed: &[String]) -> Option<Self> {
        let all = [
            agent.tier_model(baton_settings::Tier::Fast),
            agent.model.as_str(),
            agent.tier_model(baton_settings::Tier::Strong),
        ]
        .into_iter()
        .chain(agent.fallback_models.iter().map(String::as_str));
        let mut models: Vec<String> = Vec::new();
        for m in all {
            if !m.is_empty() && !failed.iter().any(|f| f == m) && !models.iter().any(|o| o == m) {
                models.push(m.to_owned());
            }
        }
        (!models.is_empty()).then_some(Choice {
            models,
            escalated: false,
        })
    }

    /// Asks each model in turn, as [`complete`] does; with `sink`, the
    /// answer's text goes to it as it is written, and a fallback to the
    /// next model after a partly streamed failure restarts it.
    pub async fn ask(
        &self,
        llm: &dyn LlmProvider,
        request: &CompletionRequest,
        sink: Option<&dyn DeltaSink>,
    ) -> Result<Answer, ModelsFailed> {
        let mut failures = Vec::new();
        for model in &self.models {
            let mut req = request.clone();
            req.model = model.clone();
            let result = match sink {
                Some(sink) => {
                    if !failures.is_empty() {
                        sink.restart();
                    }
                    llm.complete_streaming(&req, sink).await
                }
                None => llm.complete(&req).await,
            };
            match result {
                Ok(mut completion) => {
                    if completion.model.is_empty() {
                        completion.model = model.clone();
                    }
                    return Ok(Answer {
                        completion,
                        model: model.clone(),
                        escalated: self.escalated,
                        failures,
                    });
                }
                Err(error) => {
                    let retryable = error.is_retryable();
                    tracing::warn!(
                        provider = llm.name(),
                        %model,
                        %error,
                        falling_back = retryable,
                        "LLM call failed"
                    );
                    failures.push(ModelFailure {
                        model: model.clone(),
                        error,
                    });
                    if !retryable {
                        break;
                    }
                }
            }
        }
        Err(ModelsFailed { failures })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use baton_core::{ToolCall, Usage};
    use baton_settings::Escalation;

    fn entry(seq: u64, kind: EntryKind) -> Entry {
        Entry {
            seq,
            at: baton_core::Instant(0),
            kind,
        }
    }

    fn result(seq: u64, is_error: bool) -> Entry {
        entry(
            seq,
            EntryKind::ToolResult {
                step: 1,
                call_id: format!("c{seq}"),
                name: "t".into(),
                content: String::new(),
                is_error,
                truncated_chars: 0,
            },
        )
    }

    fn assistant(seq: u64) -> Entry {
        entry(
            seq,
            EntryKind::AssistantMessage {
                step: 1,
                text: String::new(),
                tool_calls: vec![ToolCall {
                    id: "x".into(),
                    name: "t".into(),
                    arguments: serde_json::json!({}),
                }],
                usage: Usage::default(),
                model: "m".into(),
            },
        )
    }

    fn agent(after: u32) -> AgentConfig {
        let mut a = AgentConfig::new("default", "small");
        a.fallback_models = vec!["fb1".into(), "fb2".into()];
        a.escalation = Some(Escalation {
            model: "big".into(),
            after_tool_errors: after,
        });
        a
    }

    #[test]
    fn runs_count_consecutive_error_results_only() {
        let t = vec![
            result(0, true),
            assistant(1),
            result(2, true),
            entry(
                3,
                EntryKind::UserMessage {
                    text: "hm".into(),
                    from: None,
                },
            ),
            result(4, true),
            result(5, false),
            result(6, true),
        ];
        assert_eq!(tool_error_runs(&t), (1, 3));
        assert_eq!(tool_error_runs(&[]), (0, 0));
    }

    #[test]
    fn a_pinned_model_is_asked_alone_even_escalated() {
        let a = agent(1);
        let t = vec![result(0, true)];
        assert!(escalated(&a, &t));
        let pinned = Choice::for_task(&a, Some("other"), &t);
        assert_eq!(pinned.models, ["other"]);
        assert!(!pinned.escalated);
        assert_eq!(Choice::for_task(&a, None, &t), Choice::of(&a, &t));
    }

    #[test]
    fn escalation_after_a_run_and_for_the_rest_of_the_task() {
        let a = agent(3);
        let mut t = vec![result(0, true), result(1, true)];
        assert!(!escalated(&a, &t));
        assert_eq!(candidates(&a, &t), ["small", "fb1", "fb2"]);
        t.push(result(2, true));
        assert!(escalated(&a, &t));
        assert_eq!(candidates(&a, &t), ["big", "small", "fb1", "fb2"]);
        // The stronger model's success does not switch back.
        t.push(result(3, false));
        assert!(escalated(&a, &t));
        // Without an escalation model, errors change nothing.
        let mut plain = a.clone();
        plain.escalation = None;
        assert_eq!(candidates(&plain, &t), ["small", "fb1", "fb2"]);
    }

    #[test]
    fn candidates_are_unique() {
        let mut a = agent(1);
        a.fallback_models = vec!["big".into(), "fb".into(), "fb".into()];
        let t = vec![result(0, true)];
        assert_eq!(candidates(&a, &t), ["big", "small", "fb"]);
    }

    #[test]
    fn failures_read_as_one_line() {
        let e = ModelsFailed {
            failures: vec![
                ModelFailure {
                    model: "a".into(),
                    error: LlmError::Overloaded { retry_after: None },
                },
                ModelFailure {
                    model: "b".into(),
                    error: LlmError::Transport("reset".into()),
                },
            ],
        };
        assert_eq!(
            e.to_string(),
            "a: the provider is overloaded; b: could not reach the provider: reset"
        );
        assert_eq!(e.last_error(), Some(&LlmError::Transport("reset".into())));
    }
}
