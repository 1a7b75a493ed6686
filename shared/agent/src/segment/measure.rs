//! The segment's metrics ([`baton_core::metric`]): each emitted where the
//! event it counts happened, once. Endings and tool errors are counted
//! after their commit, so a retried wake that finds them committed counts
//! nothing again; model calls are counted when they return, before their
//! checkpoint, so a call made again after a crash counts again (it was
//! paid for again).

use super::Segment;
use baton_core::metric::{self, Measurement};
use baton_core::{EntryKind, TaskStatus, Usage};
use std::time::Duration;

impl Segment<'_> {
    /// A measurement about this task, for its agent.
    fn measurement(&self) -> Measurement {
        Measurement::for_agent(&self.task.agent).property("task_id", self.task.id.to_string())
    }

    /// One segment ran (it held the lease).
    pub(super) fn measure_segment(&self) {
        self.deps
            .measure(self.measurement().count(metric::SEGMENTS));
    }

    /// A model call answered after `took`.
    pub(super) fn measure_llm_call(&self, model: &str, took: Duration, usage: Usage, cost: f64) {
        self.deps.measure(
            self.measurement()
                .value(metric::LLM_LATENCY, took.as_millis() as f64)
                .value(metric::INPUT_TOKENS, usage.input_tokens as f64)
                .value(metric::OUTPUT_TOKENS, usage.output_tokens as f64)
                .value(metric::COST_USD, cost)
                .property("model", model),
        );
    }

    /// A model call failed for good (retries and fallbacks spent).
    pub(super) fn measure_llm_error(&self) {
        self.deps
            .measure(self.measurement().count(metric::LLM_ERRORS));
    }

    /// A committed tool result: counted when it is an error.
    pub(super) fn measure_tool_result(&self, entry: &EntryKind) {
        if let EntryKind::ToolResult {
            name,
            is_error: true,
            ..
        } = entry
        {
            self.deps.measure(
                self.measurement()
                    .count(metric::TOOL_ERRORS)
                    .property("tool", name.as_str()),
            );
        }
    }

    /// The task's end, once committed as `status` (a success not recorded
    /// because a message arrived meanwhile is not an end).
    pub(super) fn measure_ended(&self, status: TaskStatus) {
        if self.task.status != status {
            return;
        }
        if let Some(m) = metric::ended(status) {
            self.deps.measure(self.measurement().count(m));
        }
    }
}
