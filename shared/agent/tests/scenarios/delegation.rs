//! Sub-agents end to end on the embedded backend: `delegate` starts child
//! tasks that run in parallel, the parent waits at zero compute and gets
//! their results as tool results; failures reach the parent; cancelling the
//! parent cancels its children.

use crate::harness::{Harness, Options};
use baton_core::wait;

use async_trait::async_trait;
use baton_core::{
    Completion, CompletionRequest, EntryKind, LlmError, LlmProvider, Message, Origin, Task, TaskId,
    TaskStatus, ToolCall, Usage, WaitingFor,
};
use baton_llm::ScriptedProvider;
use baton_settings::{AgentConfig, Agents};
use serde_json::json;
use std::sync::Arc;

/// The lead model (`lead-model`) delegates two pieces of work at once, then
/// answers with what came back; children use the scripted model.
struct Lead {
    children: Vec<(&'static str, &'static str)>,
    scripted: ScriptedProvider,
}

#[async_trait]
impl LlmProvider for Lead {
    fn name(&self) -> &str {
        "lead"
    }

    async fn complete(&self, req: &CompletionRequest) -> Result<Completion, LlmError> {
        if req.model != "lead-model" {
            return self.scripted.complete(req).await;
        }
        let results: Vec<String> = req
            .messages
            .iter()
            .filter_map(|m| match m {
                Message::Tool {
                    content, is_error, ..
                } => Some(format!(
                    "{}{content}",
                    if *is_error { "ERROR " } else { "" }
                )),
                _ => None,
            })
            .collect();
        let usage = Usage {
            input_tokens: 10,
            output_tokens: 5,
        };
        if results.is_empty() {
            assert!(
                req.tools.iter().any(|t| t.name == "delegate"),
                "the lead is offered `delegate`"
            );
            let calls = self
                .children
                .iter()
                .enumerate()
                .map(|(i, (agent, input))| ToolCall {
                    id: format!("call_{i}"),
                    name: "delegate".into(),
                    arguments: json!({"agent": agent, "input": input}),
                })
                .collect();
            return Ok(Completion {
                tool_calls: calls,
                usage,
                ..Completion::default()
            });
        }
        Ok(Completion {
            content: format!("combined: {}", results.join(" | ")),
            usage,
            ..Completion::default()
        })
    }
}

async fn rig(children: Vec<(&'static str, &'static str)>) -> Harness {
    let mut lead = AgentConfig::new("default", "lead-model");
    lead.delegates = vec!["researcher".into(), "writer".into()];
    let mut researcher = AgentConfig::new("researcher", "scripted");
    researcher.description = Some("looks things up".into());
    researcher.limits.max_steps = 2;
    let writer = AgentConfig::new("writer", "scripted");
    Harness::start(Options {
        llm: Arc::new(Lead {
            children,
            scripted: ScriptedProvider::new(),
        }),
        agents: Agents::new(lead, vec![researcher, writer]),
        ..Options::default()
    })
    .await
}

async fn submit(r: &Harness) -> TaskId {
    r.submit(Origin::Http, "go").await
}

async fn wake(r: &Harness, id: &TaskId) {
    r.wake(id).await;
}

async fn drain(r: &Harness) {
    r.drain().await;
}

async fn task(r: &Harness, id: &TaskId) -> Task {
    r.store.get(id).await.unwrap().unwrap()
}

#[tokio::test]
async fn children_run_in_parallel_and_their_answers_come_back_as_tool_results() {
    let r = rig(vec![
        ("researcher", "#reply=the answer is 42"),
        ("writer", "#reply=a fine paragraph"),
    ])
    .await;
    let id = submit(&r).await;
    drain(&r).await;

    let parent = task(&r, &id).await;
    assert_eq!(
        parent.status(),
        TaskStatus::Succeeded,
        "{:?}",
        parent.answer.error
    );
    let answer = parent.answer.result.clone().unwrap();
    assert!(answer.contains("the answer is 42"), "{answer}");
    assert!(answer.contains("a fine paragraph"), "{answer}");
    assert_eq!(parent.waits.children.len(), 2);
    for c in &parent.waits.children {
        let child = task(&r, &c.task_id).await;
        assert_eq!(child.status(), TaskStatus::Succeeded);
        assert_eq!(child.source.parent.as_ref().unwrap().task_id, id);
        assert_eq!(child.agent, c.agent, "each child runs its own agent");
    }
    // The parent waited for both, with no worker running.
    let transcript = r.store.transcript(&id).await.unwrap();
    assert!(transcript.iter().any(|e| matches!(&e.kind,
        EntryKind::Status { status: TaskStatus::Waiting, detail } if detail.contains("2 child"))));
    // Children's model use counts on the parent: 2 lead turns (15 each)
    // plus whatever the children used.
    assert!(
        parent.budget.usage.total() > 30,
        "{:?}",
        parent.budget.usage
    );
    let json = parent.status_json();
    assert_eq!(json["children"].as_array().unwrap().len(), 2);
}

#[tokio::test]
async fn a_failed_child_is_an_error_result_not_a_stuck_parent() {
    // The researcher may take 2 steps; this asks for 5.
    let r = rig(vec![("researcher", "#steps=5")]).await;
    let id = submit(&r).await;
    drain(&r).await;
    let parent = task(&r, &id).await;
    assert_eq!(parent.status(), TaskStatus::Succeeded);
    let answer = parent.answer.result.unwrap();
    assert!(answer.contains("ERROR"), "{answer}");
    assert!(answer.contains("step limit"), "{answer}");
}

#[tokio::test]
async fn cancelling_the_parent_cancels_its_children() {
    // The child sleeps for an hour: the parent waits on it.
    let r = rig(vec![("writer", r#"#tool=sleep #args={"seconds":3600}"#)]).await;
    let id = submit(&r).await;
    drain(&r).await;
    let parent = task(&r, &id).await;
    assert_eq!(parent.status(), TaskStatus::Waiting);
    assert_eq!(
        parent.waiting_for(),
        Some(&WaitingFor::Children(wait::Children { pending: 1 }))
    );
    let child_id = parent.waits.children[0].task_id.clone();
    assert_eq!(task(&r, &child_id).await.status(), TaskStatus::Waiting);

    r.store
        .update(&id, None, |t| {
            t.cancel_requested = true;
            Ok(Some(Vec::new()))
        })
        .await
        .unwrap();
    wake(&r, &id).await;
    drain(&r).await;
    assert_eq!(task(&r, &id).await.status(), TaskStatus::Cancelled);
    assert_eq!(task(&r, &child_id).await.status(), TaskStatus::Cancelled);
}

#[tokio::test]
async fn a_parent_past_its_deadline_stops_waiting_and_cancels_its_children() {
    let r = rig(vec![("writer", r#"#tool=sleep #args={"seconds":3600}"#)]).await;
    let parent = Task::new(
        TaskId::generate(),
        "default",
        Origin::Http,
        None,
        baton_core::Limits {
            deadline_at: Some(baton_core::Instant::now() + std::time::Duration::from_millis(1_500)),
            ..baton_core::Limits::default()
        },
        baton_core::now_ms(),
    );
    r.store
        .create(
            &parent,
            vec![EntryKind::UserMessage {
                text: "go".into(),
                from: None,
            }],
            None,
        )
        .await
        .unwrap();
    wake(&r, &parent.id).await;
    drain(&r).await;
    assert_eq!(task(&r, &parent.id).await.status(), TaskStatus::Waiting);
    // The wake armed for the deadline arrives; keep draining until then.
    for _ in 0..30 {
        if task(&r, &parent.id).await.status().is_terminal() {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
        drain(&r).await;
    }
    let t = task(&r, &parent.id).await;
    assert_eq!(t.status(), TaskStatus::Failed);
    assert!(t.answer.error.unwrap().contains("deadline"));
    let child = task(&r, &t.waits.children[0].task_id).await;
    assert_eq!(child.status(), TaskStatus::Cancelled);
}
