//! Guards and model choice through the real loop on the embedded backend:
//! the cost budget and the monthly token budgets end tasks with a clear
//! message; a failing model falls back along the agent's own chain; repeated
//! tool errors escalate to the stronger model.

use crate::harness::{self as support, Harness, Options};

use async_trait::async_trait;
use baton_core::{
    Completion, CompletionRequest, LlmError, LlmProvider, Message, Task, TaskStatus, ToolCall,
    Usage,
};
use baton_settings::BudgetSettings;
use baton_settings::Escalation;
use baton_settings::ModelPrice;
use baton_settings::{AgentConfig, Agents};
use serde_json::json;
use std::sync::{Arc, Mutex};

/// A model that calls a tool that does not exist until it has seen
/// `tool_turns` results, then answers; `broken` models are overloaded.
/// Records which model answered each call.
struct Model {
    tool_turns: usize,
    broken: Vec<&'static str>,
    answered_by: Mutex<Vec<String>>,
}

#[async_trait]
impl LlmProvider for Model {
    fn name(&self) -> &str {
        "test"
    }

    async fn complete(&self, req: &CompletionRequest) -> Result<Completion, LlmError> {
        if self.broken.contains(&req.model.as_str()) {
            return Err(LlmError::Overloaded { retry_after: None });
        }
        self.answered_by.lock().unwrap().push(req.model.clone());
        let results = req
            .messages
            .iter()
            .filter(|m| matches!(m, Message::Tool { .. }))
            .count();
        let usage = Usage {
            input_tokens: 1_000,
            output_tokens: 1_000,
        };
        if results < self.tool_turns {
            return Ok(Completion {
                tool_calls: vec![ToolCall {
                    id: format!("call_{results}"),
                    name: "no_such_tool".into(),
                    arguments: json!({"n": results}),
                }],
                usage,
                ..Completion::default()
            });
        }
        Ok(Completion {
            content: format!("answered by {}", req.model),
            usage,
            ..Completion::default()
        })
    }
}

async fn rig(agent: AgentConfig, model: Model, budgets: BudgetSettings) -> (Harness, Arc<Model>) {
    let model = Arc::new(model);
    let h = Harness::start(Options {
        llm: model.clone(),
        agents: Agents::new(agent, Vec::new()),
        budgets: Some(budgets),
        ..Options::default()
    })
    .await;
    (h, model)
}

fn model(tool_turns: usize, broken: Vec<&'static str>) -> Model {
    Model {
        tool_turns,
        broken,
        answered_by: Mutex::new(Vec::new()),
    }
}

async fn run(r: &Harness, user: &str) -> Task {
    let queue = r.backend.queue.as_ref();
    let id = support::submit(&r.store, queue, support::slack_origin(user), "go").await;
    support::drain(&r.worker, queue).await;
    r.store.get(&id).await.unwrap().unwrap()
}

fn priced(mut agent: AgentConfig) -> AgentConfig {
    // $1 per million tokens each way: a step (2,000 tokens) costs $0.002.
    let price = ModelPrice {
        input_per_mtok: 1.0,
        output_per_mtok: 1.0,
    };
    agent.prices = agent
        .prices
        .with(["m".to_owned(), "strong".to_owned()].map(|m| (m, price)));
    agent
}

#[tokio::test]
async fn the_cost_budget_ends_the_task_with_what_was_spent() {
    let mut agent = priced(AgentConfig::new("default", "m"));
    agent.max_cost_usd = Some(0.005);
    agent.max_identical_calls = 100;
    let (r, _llm) = rig(agent, model(10, vec![]), BudgetSettings::default()).await;
    let t = run(&r, "U1").await;
    assert_eq!(t.status(), TaskStatus::Failed);
    let error = t.answer.error.clone().unwrap();
    assert!(error.contains("cost budget exhausted"), "{error}");
    // Three steps ($0.006) pass the $0.005 budget; the fourth never runs.
    assert_eq!(t.budget.steps, 3);
    assert!(
        (t.budget.cost_usd - 0.006).abs() < 1e-9,
        "{}",
        t.budget.cost_usd
    );
    assert_eq!(t.status_json()["cost_usd"], json!(t.budget.cost_usd));
}

#[tokio::test]
async fn the_monthly_user_budget_stops_the_next_task_of_that_user_only() {
    let agent = AgentConfig::new("default", "m");
    let budgets = BudgetSettings {
        workspace_monthly_tokens: None,
        user_monthly_tokens: Some(3_000),
        ..Default::default()
    };
    let (r, _llm) = rig(agent, model(1, vec![]), budgets).await;
    // 2 steps of 2,000 tokens: over the user's 3,000 by the end.
    let first = run(&r, "U1").await;
    assert_eq!(
        first.status(),
        TaskStatus::Succeeded,
        "{:?}",
        first.answer.error
    );
    let second = run(&r, "U1").await;
    assert_eq!(second.status(), TaskStatus::Failed);
    let error = second.answer.error.unwrap();
    assert!(error.contains("monthly"), "{error}");
    assert_eq!(second.budget.steps, 0, "no model call was made");
    let other = run(&r, "U2").await;
    assert_eq!(
        other.status(),
        TaskStatus::Succeeded,
        "another user is not affected"
    );
}

#[tokio::test]
async fn an_overloaded_model_falls_back_along_the_agents_chain() {
    let mut agent = AgentConfig::new("default", "m");
    agent.fallback_models = vec!["backup".into()];
    let (r, _llm) = rig(agent, model(0, vec!["m"]), BudgetSettings::default()).await;
    let t = run(&r, "U1").await;
    assert_eq!(t.status(), TaskStatus::Succeeded, "{:?}", t.answer.error);
    assert_eq!(t.answer.result.as_deref(), Some("answered by backup"));
}

#[tokio::test]
async fn repeated_tool_errors_escalate_to_the_stronger_model() {
    let mut agent = AgentConfig::new("default", "m");
    agent.escalation = Some(Escalation {
        model: "strong".into(),
        after_tool_errors: 2,
    });
    agent.max_identical_calls = 100;
    let (r, llm) = rig(agent, model(3, vec![]), BudgetSettings::default()).await;
    let t = run(&r, "U1").await;
    assert_eq!(t.status(), TaskStatus::Succeeded, "{:?}", t.answer.error);
    let answered = llm.answered_by.lock().unwrap().clone();
    // Two failed tool calls by `m`, then `strong` for the rest of the task.
    assert_eq!(answered, ["m", "m", "strong", "strong"]);
    assert_eq!(t.answer.result.as_deref(), Some("answered by strong"));
}
