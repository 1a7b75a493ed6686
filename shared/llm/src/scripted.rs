//! The scripted model as a provider: offline, deterministic, labelled.

use crate::script;
use async_trait::async_trait;
use baton_core::{Completion, CompletionRequest, LlmError, LlmProvider};

/// A deterministic offline model for demos and tests. Every labelled answer
/// starts with `[scripted model] `; see [`crate::script`] for the directives
/// that drive it.
#[derive(Clone, Copy, Debug, Default)]
pub struct ScriptedProvider;

impl ScriptedProvider {
    /// The scripted model.
    pub fn new() -> Self {
        ScriptedProvider
    }
}

#[async_trait]
impl LlmProvider for ScriptedProvider {
    fn name(&self) -> &str {
        "scripted"
    }

    async fn complete(&self, request: &CompletionRequest) -> Result<Completion, LlmError> {
        let plan = script::respond(request);
        if !plan.sleep.is_zero() {
            tokio::time::sleep(plan.sleep).await;
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
        };
        let c = ScriptedProvider::new().complete(&req).await.unwrap();
        assert_eq!(c.content, "[scripted model] You said: hi");
        assert_eq!(c.model, "scripted");
    }
}
