//! The scripted model as a provider: offline, deterministic, labelled.

use crate::script::{self, ForcedCalls};
use async_trait::async_trait;
use baton_core::{Completion, CompletionRequest, DeltaSink, LlmError, LlmProvider};
use std::sync::Arc;

/// A deterministic offline model for demos and tests. Every labelled answer
/// starts with `[scripted model] `; see [`crate::script`] for the directives
/// that drive it. It counts the forced calls of each directive
/// ([`ForcedCalls`]), shared by its clones.
#[derive(Clone, Debug, Default)]
pub struct ScriptedProvider {
    forced: Arc<ForcedCalls>,
}

impl ScriptedProvider {
    /// The scripted model.
    pub fn new() -> Self {
        ScriptedProvider::default()
    }
}

#[async_trait]
impl LlmProvider for ScriptedProvider {
    fn name(&self) -> &str {
        "scripted"
    }

    async fn complete(&self, request: &CompletionRequest) -> Result<Completion, LlmError> {
        if script::recap::fails(request) {
            return Err(LlmError::Rejected {
                status: 400,
                message: "injected failure (#recap_fail)".into(),
            });
        }
        let plan = script::respond_counting(request, &self.forced);
        if !plan.sleep.is_zero() {
            tokio::time::sleep(plan.sleep).await;
        }
        Ok(plan.completion)
    }

    /// The same answer, its text told in pieces
    /// ([`script::TEXT_PIECE_CHARS`]) a short wait apart (`#chunk_ms`,
    /// default [`script::SCRIPTED_CHUNK_DELAY`]), as a model writes.
    async fn complete_streaming(
        &self,
        request: &CompletionRequest,
        sink: &dyn DeltaSink,
    ) -> Result<Completion, LlmError> {
        let plan = script::respond_counting(request, &self.forced);
        if !plan.sleep.is_zero() {
            tokio::time::sleep(plan.sleep).await;
        }
        let delay = plan.chunk_delay.unwrap_or(script::SCRIPTED_CHUNK_DELAY);
        for (i, piece) in script::pieces(&plan.completion.content, script::TEXT_PIECE_CHARS)
            .into_iter()
            .enumerate()
        {
            if i > 0 && !delay.is_zero() {
                tokio::time::sleep(delay).await;
            }
            sink.text(piece);
        }
        Ok(plan.completion)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use baton_core::Message;

    #[tokio::test]
    async fn answers_with_the_label() {
        let req = CompletionRequest {
            model: String::new(),
            system: String::new(),
            messages: vec![Message::User {
                content: "hi".into(),
            }],
            tools: vec![],
            max_tokens: 0,
            tool_choice: baton_core::ToolChoice::Auto,
        };
        let c = ScriptedProvider::new().complete(&req).await.unwrap();
        assert_eq!(c.content, "[scripted model] You said: hi");
        assert_eq!(c.model, "scripted");
    }

    #[tokio::test]
    async fn streams_the_same_answer_in_pieces() {
        let req = CompletionRequest {
            model: String::new(),
            system: String::new(),
            messages: vec![Message::User {
                content: "#chunk_ms=1 a longer message, with ünïcödé 😀".into(),
            }],
            tools: vec![],
            max_tokens: 0,
            tool_choice: baton_core::ToolChoice::Auto,
        };
        let sink = crate::fixtures::Deltas::default();
        let p = ScriptedProvider::new();
        let c = p.complete_streaming(&req, &sink).await.unwrap();
        assert_eq!(c, p.complete(&req).await.unwrap());
        assert_eq!(sink.joined(), c.content);
        assert_eq!(sink.pieces().len(), 4, "{:?}", sink.pieces());
    }
}
