//! Phase one of a step: one LLM call, checkpointed with its tool calls
//! before any tool runs; and what happens around it — compaction of a long
//! history, counting tokens in the monthly budgets, loop detection.

use super::{Segment, Step};
use crate::compaction::{self, CompactionError};
use crate::context::{self, build_request};
use crate::progress;
use baton_core::{now_ms, CompletionRequest, EntryKind, TaskStatus, ToolSpec, Usage};
use serde_json::{json, Map};
use std::collections::HashMap;
use std::time::Duration;
use tokio::time::Instant;

/// The least time a model call is given before the segment gives up on it
/// and hands over (the first call of a segment runs whatever its budget).
const LLM_CALL_FLOOR: Duration = Duration::from_secs(30);

impl Segment<'_> {
    /// Compaction, when the context is large or `/compact` was asked for:
    /// older turns are summarised by the model into a summary entry; if
    /// summarising fails the history stays as it is. A bare `/compact`
    /// answers and ends the task.
    pub(super) async fn maybe_compact(&mut self) -> Step {
        let agent = self.agent;
        let forced = compaction::compact_requested(&self.transcript);
        if self.compaction_tried
            || !(forced || compaction::needs_compaction(agent, &self.transcript))
        {
            return Ok(None);
        }
        self.compaction_tried = true;
        self.compaction_ran = true;
        let started = now_ms();
        let clock = Instant::now();
        self.deps
            .replies
            .progress(&self.task, progress::COMPACTING)
            .await;
        let outcome = compaction::compact(agent, &self.transcript, self.deps.llm.as_ref()).await;
        self.budget.record(clock.elapsed());
        let mut attrs = Map::new();
        attrs.insert("error".into(), json!(outcome.is_err()));
        self.trace.record("compaction", started, attrs);
        let spent = match &outcome {
            Ok(done) => Some((Some(done.entry.clone()), done.usage)),
            Err(CompactionError::EmptySummary { usage }) => Some((None, *usage)),
            Err(e) => {
                tracing::warn!(error = %e, "compaction failed; history kept");
                None
            }
        };
        if let Some((entry, usage)) = spent {
            let cost = baton_settings::price::completion_cost(agent, &agent.model, usage);
            self.count_monthly(usage).await;
            self.commit(|t| {
                t.usage.add(usage);
                t.cost_usd += cost;
                Some(entry.clone().into_iter().collect())
            })
            .await?;
        }
        if forced && !compaction::answer_needed(&self.transcript) && self.task.parent.is_none() {
            let msg = match &outcome {
                Ok(d) => format!(
                    "Compacted: {} earlier messages are now a summary.",
                    d.summarised_messages
                ),
                Err(CompactionError::NothingToCompact) => "Nothing to compact yet.".to_owned(),
                Err(e) => format!("Could not compact ({e}); the history is unchanged."),
            };
            self.deps.replies.answer(&self.task, &msg).await?;
            return self
                .end(TaskStatus::Succeeded, Some(msg), None)
                .await
                .map(Some);
        }
        Ok(None)
    }

    /// Counts a model call's tokens in the monthly budgets, once it has
    /// returned (before the checkpoint: a crash in between counts a call
    /// that is made again, never one that goes uncounted). A failed count
    /// is logged, not fatal: the month is undercounted rather than the call
    /// paid for twice.
    async fn count_monthly(&self, usage: Usage) {
        if let Some(budgets) = &self.deps.budgets {
            if let Err(e) = budgets.record(&self.task, usage, now_ms()).await {
                tracing::warn!(error = %e, "could not count tokens in the monthly budgets");
            }
        }
    }

    /// The tools this agent may call this step: the registered ones it
    /// allows, `sleep`, and `delegate` when it has agents to delegate to.
    fn tool_specs(&self) -> Vec<ToolSpec> {
        let agent = self.agent;
        self.deps
            .tools
            .iter()
            .filter(|(name, _)| agent.allows_tool(name))
            .map(|(_, t)| t.spec())
            .chain(
                agent
                    .allows_tool(crate::timer::SLEEP)
                    .then(crate::timer::sleep_spec),
            )
            .chain(crate::delegation::delegate_spec(agent, &self.deps.agents))
            .collect()
    }

    /// The request for this step: the context pipeline's messages, and the
    /// remembered facts relevant to the latest message, as data in the
    /// system prompt (only for agents that may `recall`).
    async fn request(&self) -> CompletionRequest {
        let mut request = build_request(self.agent, &self.transcript, self.tool_specs());
        if let Some(query) = context::memory_query(&request, &self.transcript) {
            let memory = baton_core::memory::MemoryStore::new(self.deps.store.table().clone());
            let facts = context::recall_for_prompt(&memory, &self.task.origin, query).await;
            context::with_memory(&mut request, &facts);
        }
        request
    }

    /// Phase one: one LLM call, checkpointed with its tool calls before any
    /// tool runs.
    pub(super) async fn llm_step(&mut self) -> Step {
        let agent = self.agent;
        let request = self.request().await;
        self.deps
            .replies
            .progress(&self.task, progress::THINKING)
            .await;
        let started = now_ms();
        let clock = Instant::now();
        // The agent's model (or its escalation model), falling back along
        // the agent's own chain on repeated overload or failure. Retries and
        // fallbacks can outlast the segment (and a Lambda's 15 minutes):
        // past the time left, hand over and try again in the next segment.
        // At least LLM_CALL_FLOOR, so a tiny budget still moves.
        let window = self.budget.time_left().max(LLM_CALL_FLOOR);
        let call = crate::model_choice::complete(
            self.deps.llm.as_ref(),
            agent,
            &self.transcript,
            &request,
        );
        let Ok(result) = tokio::time::timeout(window, call).await else {
            self.budget.record(clock.elapsed());
            tracing::warn!(
                waited_s = window.as_secs(),
                "model call outlasted the segment; handing over"
            );
            return self.hand_over().await.map(Some);
        };
        self.budget.record(clock.elapsed());
        let mut attrs = Map::new();
        attrs.insert("provider".into(), json!(self.deps.llm.name()));
        attrs.insert("step".into(), json!(self.task.steps + 1));
        let answer = match result {
            Ok(a) => a,
            Err(e) => {
                let tried: Vec<&str> = e.failures.iter().map(|f| f.model.as_str()).collect();
                attrs.insert("model".into(), json!(request.model));
                attrs.insert("models_failed".into(), json!(tried));
                attrs.insert("error".into(), json!(true));
                attrs.insert("error_message".into(), json!(e.to_string()));
                self.trace.record("llm_call", started, attrs);
                let msg = format!("the model call failed: {e}");
                return self
                    .end(TaskStatus::Failed, None, Some(msg))
                    .await
                    .map(Some);
            }
        };
        attrs.insert("model".into(), json!(answer.model));
        attrs.insert("escalated".into(), json!(answer.escalated));
        if !answer.failures.is_empty() {
            let from: Vec<&str> = answer.failures.iter().map(|f| f.model.as_str()).collect();
            attrs.insert("fell_back_from".into(), json!(from));
        }
        let model = answer.model;
        let completion = answer.completion;
        let usage = completion.usage;
        let cost = baton_settings::price::completion_cost(agent, &model, usage);
        attrs.insert("cost_usd".into(), json!(cost));
        self.count_monthly(usage).await;
        attrs.insert("input_tokens".into(), json!(usage.input_tokens));
        attrs.insert("output_tokens".into(), json!(usage.output_tokens));
        attrs.insert("tool_calls".into(), json!(completion.tool_calls.len()));
        attrs.insert("error".into(), json!(false));
        self.trace.record("llm_call", started, attrs);
        let answered_by = if completion.model.is_empty() {
            model
        } else {
            completion.model.clone()
        };
        self.commit(|t| {
            t.steps += 1;
            t.usage.add(usage);
            t.cost_usd += cost;
            Some(vec![EntryKind::AssistantMessage {
                step: t.steps,
                text: completion.content.clone(),
                tool_calls: completion.tool_calls.clone(),
                usage,
                model: answered_by.clone(),
            }])
        })
        .await?;
        if let Some(tool) = repeated_call(&self.transcript, agent.max_identical_calls) {
            let msg = format!(
                "stopped: the model asked for the same `{tool}` call with the same arguments {} times, \
                 so it is not making progress",
                agent.max_identical_calls.max(2)
            );
            return self
                .end(TaskStatus::Failed, None, Some(msg))
                .await
                .map(Some);
        }
        Ok(None)
    }
}

/// Loop detection: the same tool call (name and arguments) requested
/// `max_identical` times means the model is stuck. Returns the tool's name.
fn repeated_call(transcript: &[baton_core::Entry], max_identical: u32) -> Option<String> {
    let mut seen: HashMap<(&str, String), u32> = HashMap::new();
    for e in transcript {
        if let EntryKind::AssistantMessage { tool_calls, .. } = &e.kind {
            for c in tool_calls {
                let n = seen
                    .entry((c.name.as_str(), c.arguments.to_string()))
                    .or_default();
                *n += 1;
                if *n >= max_identical.max(2) {
                    return Some(c.name.clone());
                }
            }
        }
    }
    None
}
