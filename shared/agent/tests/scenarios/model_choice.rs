//! Model choice against a fake provider that fails per model: fallback on
//! retryable errors, a stop on others, escalation after tool errors.

use async_trait::async_trait;
use baton_agent::model_choice::{self, ModelFailure};
use baton_core::{Completion, CompletionRequest, Entry, EntryKind, LlmError, LlmProvider, Usage};
use baton_settings::AgentConfig;
use baton_settings::Escalation;
use std::collections::HashMap;
use std::sync::Mutex;

/// Fails every call for a model with that model's error; any other model
/// answers. Records the models asked, in order.
#[derive(Default)]
struct PerModel {
    failing: HashMap<String, LlmError>,
    /// Reported in the completion (empty: none reported).
    echo_model: String,
    asked: Mutex<Vec<String>>,
}

impl PerModel {
    fn failing(pairs: &[(&str, LlmError)]) -> Self {
        PerModel {
            failing: pairs
                .iter()
                .map(|(m, e)| ((*m).to_owned(), e.clone()))
                .collect(),
            ..PerModel::default()
        }
    }

    fn asked(&self) -> Vec<String> {
        self.asked.lock().unwrap().clone()
    }
}

#[async_trait]
impl LlmProvider for PerModel {
    fn name(&self) -> &str {
        "per-model"
    }

    async fn complete(&self, request: &CompletionRequest) -> Result<Completion, LlmError> {
        self.asked.lock().unwrap().push(request.model.clone());
        if let Some(e) = self.failing.get(&request.model) {
            return Err(e.clone());
        }
        Ok(Completion {
            content: format!("answer from {}", request.model),
            usage: Usage {
                input_tokens: 10,
                output_tokens: 2,
            },
            model: self.echo_model.clone(),
            ..Completion::default()
        })
    }
}

fn overloaded() -> LlmError {
    LlmError::Overloaded { retry_after: None }
}

fn agent() -> AgentConfig {
    let mut a = AgentConfig::new("default", "primary");
    a.fallback_models = vec!["second".into(), "third".into()];
    a.escalation = Some(Escalation {
        model: "strong".into(),
        after_tool_errors: 2,
    });
    a
}

fn request() -> CompletionRequest {
    CompletionRequest {
        model: "primary".into(),
        system: "s".into(),
        messages: Vec::new(),
        tools: Vec::new(),
        max_tokens: 100,
        tool_choice: baton_core::ToolChoice::Auto,
    }
}

fn tool_result(seq: u64, is_error: bool) -> Entry {
    Entry {
        seq,
        at: baton_core::Instant(0),
        kind: EntryKind::ToolResult {
            step: 1,
            call_id: format!("c{seq}"),
            name: "http_request".into(),
            content: if is_error { "boom" } else { "ok" }.into(),
            is_error,
            truncated_chars: 0,
        },
    }
}

#[tokio::test]
async fn the_agents_model_answers_when_it_can() {
    let llm = PerModel::default();
    let a = model_choice::complete(&llm, &agent(), &[], &request())
        .await
        .unwrap();
    assert_eq!(a.model, "primary");
    assert_eq!(a.completion.model, "primary", "filled in when not reported");
    assert!(!a.escalated);
    assert!(a.failures.is_empty());
    assert_eq!(llm.asked(), ["primary"]);
}

#[tokio::test]
async fn retryable_failures_fall_back_in_order() {
    let llm = PerModel::failing(&[
        ("primary", overloaded()),
        (
            "second",
            LlmError::Server {
                status: 503,
                message: "unavailable".into(),
                retry_after: None,
            },
        ),
    ]);
    let a = model_choice::complete(&llm, &agent(), &[], &request())
        .await
        .unwrap();
    assert_eq!(a.model, "third");
    assert_eq!(a.completion.content, "answer from third");
    assert_eq!(llm.asked(), ["primary", "second", "third"]);
    assert_eq!(
        a.failures,
        vec![
            ModelFailure {
                model: "primary".into(),
                error: overloaded()
            },
            ModelFailure {
                model: "second".into(),
                error: LlmError::Server {
                    status: 503,
                    message: "unavailable".into(),
                    retry_after: None
                }
            },
        ]
    );
}

#[tokio::test]
async fn a_non_retryable_error_stops_at_once() {
    let rejected = LlmError::Rejected {
        status: 400,
        message: "prompt too long".into(),
    };
    let llm = PerModel::failing(&[("primary", rejected.clone())]);
    let e = model_choice::complete(&llm, &agent(), &[], &request())
        .await
        .unwrap_err();
    assert_eq!(llm.asked(), ["primary"]);
    assert_eq!(e.last_error(), Some(&rejected));
    assert_eq!(
        e.to_string(),
        "primary: provider rejected the request (HTTP 400): prompt too long"
    );

    // Also after a fallback: the rejection ends the chain there.
    let llm = PerModel::failing(&[
        ("primary", LlmError::RateLimited { retry_after: None }),
        ("second", rejected.clone()),
    ]);
    let e = model_choice::complete(&llm, &agent(), &[], &request())
        .await
        .unwrap_err();
    assert_eq!(llm.asked(), ["primary", "second"]);
    assert_eq!(e.failures.len(), 2);
}

#[tokio::test]
async fn every_model_failing_reports_each() {
    let llm = PerModel::failing(&[
        ("primary", overloaded()),
        ("second", overloaded()),
        ("third", LlmError::Transport("connection reset".into())),
    ]);
    let e = model_choice::complete(&llm, &agent(), &[], &request())
        .await
        .unwrap_err();
    assert_eq!(llm.asked(), ["primary", "second", "third"]);
    assert_eq!(
        e.to_string(),
        "primary: the provider is overloaded; second: the provider is overloaded; \
         third: could not reach the provider: connection reset"
    );
}

#[tokio::test]
async fn repeated_tool_errors_escalate_and_it_stays() {
    let llm = PerModel::default();
    let one_error = vec![tool_result(0, false), tool_result(1, true)];
    let a = model_choice::complete(&llm, &agent(), &one_error, &request())
        .await
        .unwrap();
    assert_eq!(a.model, "primary");

    let mut two_errors = one_error.clone();
    two_errors.push(tool_result(2, true));
    let a = model_choice::complete(&llm, &agent(), &two_errors, &request())
        .await
        .unwrap();
    assert_eq!(a.model, "strong");
    assert!(a.escalated);

    // The stronger model's tool call then succeeds: still escalated.
    let mut recovered = two_errors.clone();
    recovered.push(tool_result(3, false));
    let a = model_choice::complete(&llm, &agent(), &recovered, &request())
        .await
        .unwrap();
    assert_eq!(a.model, "strong");
}

#[tokio::test]
async fn an_overloaded_escalation_model_falls_back_to_the_agents_own() {
    let llm = PerModel::failing(&[("strong", overloaded())]);
    let errors = vec![tool_result(0, true), tool_result(1, true)];
    let a = model_choice::complete(&llm, &agent(), &errors, &request())
        .await
        .unwrap();
    assert_eq!(llm.asked(), ["strong", "primary"]);
    assert_eq!(a.model, "primary");
    assert!(a.escalated);
}

#[tokio::test]
async fn the_model_the_provider_reports_is_kept_beside_the_one_asked() {
    let llm = PerModel {
        echo_model: "primary-20260101".into(),
        ..PerModel::default()
    };
    let a = model_choice::complete(&llm, &agent(), &[], &request())
        .await
        .unwrap();
    assert_eq!(a.model, "primary");
    assert_eq!(a.completion.model, "primary-20260101");
}
