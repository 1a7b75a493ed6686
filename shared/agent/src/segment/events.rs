//! What happens in a segment, said once: the step code emits an
//! [`Event`]; [`Events`] turns it into its span (the segment's trace, see
//! [`super::trace`]) and its metrics ([`baton_core::metric`]).
//!
//! Endings and tool results are emitted after their commit, so a retried
//! wake that finds them committed counts nothing again; model calls when
//! they return, before their checkpoint, so a call made again after a
//! crash counts again (it was paid for again).

use super::trace::{chat_content, tool_content, SegmentTrace};
use crate::model_choice::{Answer, ModelsFailed};
use baton_core::metric::{self, Measurement};
use baton_core::{
    CompletionRequest, EntryKind, Instant, Metrics, SpanExport, Task, TaskStatus, ToolCall, Usage,
};
use serde_json::{json, Map, Value};
use std::sync::Arc;
use std::time::Duration;

/// A model call: what was asked, when, for how long.
pub(super) struct Call<'a> {
    pub(super) request: &'a CompletionRequest,
    pub(super) started: Instant,
    pub(super) took: Duration,
    /// The step the call is for.
    pub(super) step: u32,
}

/// Something that happened in the segment.
pub(super) enum Event<'a> {
    /// The segment ran (it held the lease).
    SegmentRan,
    /// A step's model call answered.
    ModelAnswered {
        call: Call<'a>,
        answer: &'a Answer,
        cost: f64,
    },
    /// A step's model call failed for good (retries and fallbacks spent).
    ModelFailed {
        call: Call<'a>,
        failed: &'a ModelsFailed,
    },
    /// The closing summary at a limit answered.
    Summarised {
        started: Instant,
        took: Duration,
        model: &'a str,
        usage: Usage,
        cost: f64,
    },
    /// Older turns were summarised; `spent` unless the model call failed.
    Compacted {
        started: Instant,
        took: Duration,
        model: &'a str,
        failed: bool,
        spent: Option<(Usage, f64)>,
    },
    /// A forced call of the agent's judgment (route, plan, supervise,
    /// verdict); `spent` unless it failed.
    Judged {
        purpose: crate::judgment::calls::Purpose,
        started: Instant,
        took: Duration,
        model: &'a str,
        spent: Option<(Usage, f64)>,
    },
    /// A call's result was committed.
    ToolAnswered {
        started: Instant,
        call: &'a ToolCall,
        result: &'a EntryKind,
    },
    /// The task's end was committed as this status (a success not recorded
    /// because a message arrived meanwhile is no end: nothing is counted).
    Ended(TaskStatus),
}

/// The segment's one sink for spans and metrics.
pub(super) struct Events {
    trace: SegmentTrace,
    metrics: Arc<dyn Metrics>,
    /// The model provider's label (`anthropic`, `scripted`).
    provider: String,
}

impl Events {
    pub(super) fn new(
        segment_start: Instant,
        export: Option<&dyn SpanExport>,
        metrics: Arc<dyn Metrics>,
        provider: &str,
    ) -> Self {
        Events {
            trace: SegmentTrace::new(segment_start, export),
            metrics,
            provider: provider.to_owned(),
        }
    }

    /// The spans recorded so far, written when the segment ends.
    pub(super) fn trace(&mut self) -> &mut SegmentTrace {
        &mut self.trace
    }

    pub(super) fn emit(&mut self, task: &Task, event: Event<'_>) {
        let measure =
            || Measurement::for_agent(&task.agent).property("task_id", task.id.to_string());
        match event {
            Event::SegmentRan => self.metrics.emit(&measure().count(metric::SEGMENTS)),
            Event::ModelAnswered { call, answer, cost } => {
                let usage = answer.completion.usage;
                let mut attrs = self.call_attrs(&call);
                attrs.insert("model".into(), json!(answer.model));
                attrs.insert("escalated".into(), json!(answer.escalated));
                if !answer.failures.is_empty() {
                    let from: Vec<&str> =
                        answer.failures.iter().map(|f| f.model.as_str()).collect();
                    attrs.insert("fell_back_from".into(), json!(from));
                }
                attrs.insert("cost_usd".into(), json!(cost));
                usage_attrs(&mut attrs, usage);
                attrs.insert(
                    "tool_calls".into(),
                    json!(answer.completion.tool_calls.len()),
                );
                attrs.insert("finish_reason".into(), json!(answer.completion.stop_reason));
                attrs.insert("error".into(), json!(false));
                let span = self.trace.record("llm_call", call.started, attrs);
                if self.trace.wants_content() {
                    let content = chat_content(call.request, Some(&answer.completion));
                    self.trace.content(span, content);
                }
                self.metrics.emit(&model_call(
                    measure(),
                    &answer.model,
                    call.took,
                    usage,
                    cost,
                ));
            }
            Event::ModelFailed { call, failed } => {
                // The full detail (model ids, provider bodies) is for the
                // trace and the logs, not for people.
                let tried: Vec<&str> = failed.failures.iter().map(|f| f.model.as_str()).collect();
                let mut attrs = self.call_attrs(&call);
                attrs.insert("model".into(), json!(call.request.model));
                attrs.insert("models_failed".into(), json!(tried));
                attrs.insert("error".into(), json!(true));
                attrs.insert("error_message".into(), json!(failed.to_string()));
                let span = self.trace.record("llm_call", call.started, attrs);
                if self.trace.wants_content() {
                    self.trace.content(span, chat_content(call.request, None));
                }
                self.metrics.emit(&measure().count(metric::LLM_ERRORS));
            }
            Event::Summarised {
                started,
                took,
                model,
                usage,
                cost,
            } => {
                let mut attrs = Map::new();
                attrs.insert("model".into(), json!(model));
                attrs.insert("purpose".into(), json!("closing summary"));
                usage_attrs(&mut attrs, usage);
                attrs.insert("cost_usd".into(), json!(cost));
                attrs.insert("error".into(), json!(false));
                self.trace.record("llm_call", started, attrs);
                self.metrics
                    .emit(&model_call(measure(), model, took, usage, cost));
            }
            Event::Judged {
                purpose,
                started,
                took,
                model,
                spent,
            } => {
                let mut attrs = Map::new();
                attrs.insert("provider".into(), json!(self.provider));
                attrs.insert("model".into(), json!(model));
                // Exported as `baton.call.purpose`.
                attrs.insert("call.purpose".into(), json!(purpose.as_str()));
                attrs.insert("error".into(), json!(spent.is_none()));
                if let Some((usage, cost)) = spent {
                    usage_attrs(&mut attrs, usage);
                    attrs.insert("cost_usd".into(), json!(cost));
                    self.metrics
                        .emit(&model_call(measure(), model, took, usage, cost));
                } else {
                    self.metrics.emit(&measure().count(metric::LLM_ERRORS));
                }
                self.trace.record("llm_call", started, attrs);
            }
            Event::Compacted {
                started,
                took,
                model,
                failed,
                spent,
            } => {
                let mut attrs = Map::new();
                attrs.insert("error".into(), json!(failed));
                self.trace.record("compaction", started, attrs);
                if let Some((usage, cost)) = spent {
                    self.metrics
                        .emit(&model_call(measure(), model, took, usage, cost));
                }
            }
            Event::ToolAnswered {
                started,
                call,
                result,
            } => {
                let EntryKind::ToolResult {
                    step,
                    content,
                    is_error,
                    ..
                } = result
                else {
                    return;
                };
                let mut attrs = Map::new();
                attrs.insert("tool".into(), json!(call.name));
                attrs.insert("call_id".into(), json!(call.id));
                attrs.insert("step".into(), json!(step));
                attrs.insert("error".into(), json!(is_error));
                let span = self.trace.record("tool_call", started, attrs);
                if self.trace.wants_content() {
                    self.trace
                        .content(span, tool_content(&call.arguments, content));
                }
                if *is_error {
                    let m = measure()
                        .count(metric::TOOL_ERRORS)
                        .property("tool", call.name.as_str());
                    self.metrics.emit(&m);
                }
            }
            Event::Ended(status) => {
                if task.status() != status {
                    return;
                }
                if let Some(m) = metric::ended(status) {
                    self.metrics.emit(&measure().count(m));
                }
            }
        }
    }

    /// The attributes every step's model call carries.
    fn call_attrs(&self, call: &Call<'_>) -> Map<String, Value> {
        let mut attrs = Map::new();
        attrs.insert("provider".into(), json!(self.provider));
        attrs.insert("step".into(), json!(call.step));
        attrs
    }
}

fn usage_attrs(attrs: &mut Map<String, Value>, usage: Usage) {
    attrs.insert("input_tokens".into(), json!(usage.input_tokens));
    attrs.insert("output_tokens".into(), json!(usage.output_tokens));
}

/// A model call that answered, measured.
fn model_call(m: Measurement, model: &str, took: Duration, usage: Usage, cost: f64) -> Measurement {
    m.value(metric::LLM_LATENCY, took.as_millis() as f64)
        .value(metric::INPUT_TOKENS, usage.input_tokens as f64)
        .value(metric::OUTPUT_TOKENS, usage.output_tokens as f64)
        .value(metric::COST_USD, cost)
        .property("model", model)
}

#[cfg(test)]
mod tests {
    use super::*;
    use baton_core::{Completion, Origin, TaskId};
    use std::sync::Mutex;

    /// Every measurement emitted, in order.
    #[derive(Default)]
    struct Recorded(Mutex<Vec<Measurement>>);

    impl Metrics for Recorded {
        fn emit(&self, m: &Measurement) {
            if let Ok(mut all) = self.0.lock() {
                all.push(m.clone());
            }
        }
    }

    fn task() -> Task {
        Task::new(
            TaskId::generate(),
            "default",
            Origin::Http,
            None,
            baton_core::Limits::default(),
            0,
        )
    }

    fn names(spans: &mut SegmentTrace) -> Vec<String> {
        spans.span_names()
    }

    /// The metric names of every measurement, in order.
    fn counted(metrics: &Recorded) -> Vec<&'static str> {
        let all = metrics.0.lock().map(|m| m.clone()).unwrap_or_default();
        all.iter()
            .flat_map(|m| m.values().iter().map(|(metric, _)| metric.name))
            .collect()
    }

    #[test]
    fn a_model_call_is_one_span_and_one_measurement() {
        let metrics = Arc::new(Recorded::default());
        let mut events = Events::new(Instant(0), None, metrics.clone(), "scripted");
        let t = task();
        let request = CompletionRequest {
            model: "m".into(),
            system: String::new(),
            messages: Vec::new(),
            tools: Vec::new(),
            max_tokens: 100,
            tool_choice: baton_core::ToolChoice::Auto,
        };
        let answer = Answer {
            model: "m".into(),
            escalated: false,
            failures: Vec::new(),
            completion: Completion {
                content: "hi".into(),
                usage: Usage {
                    input_tokens: 10,
                    output_tokens: 2,
                },
                ..Completion::default()
            },
        };
        let call = Call {
            request: &request,
            started: Instant(0),
            took: Duration::from_millis(5),
            step: 1,
        };
        events.emit(
            &t,
            Event::ModelAnswered {
                call,
                answer: &answer,
                cost: 0.01,
            },
        );
        assert_eq!(names(events.trace()), ["llm_call"]);
        let all = metrics.0.lock().map(|m| m.clone()).unwrap_or_default();
        assert_eq!(all.len(), 1);
        let input = all[0]
            .values()
            .iter()
            .find(|(m, _)| *m == metric::INPUT_TOKENS);
        assert_eq!(input.map(|(_, v)| *v), Some(10.0));
    }

    #[test]
    fn an_end_not_committed_counts_nothing_and_tool_errors_count_once() {
        let metrics = Arc::new(Recorded::default());
        let mut events = Events::new(Instant(0), None, metrics.clone(), "scripted");
        let mut t = task();
        baton_core::testing::set_status(&mut t, TaskStatus::Running);
        events.emit(&t, Event::Ended(TaskStatus::Succeeded));
        assert!(counted(&metrics).is_empty());
        t.finish(TaskStatus::Succeeded);
        events.emit(&t, Event::Ended(TaskStatus::Succeeded));
        let call = ToolCall {
            id: "c1".into(),
            name: "read".into(),
            arguments: json!({}),
        };
        for is_error in [false, true] {
            let result = EntryKind::ToolResult {
                step: 1,
                call_id: "c1".into(),
                name: "read".into(),
                content: "x".into(),
                is_error,
                truncated_chars: 0,
            };
            events.emit(
                &t,
                Event::ToolAnswered {
                    started: Instant(0),
                    call: &call,
                    result: &result,
                },
            );
        }
        assert_eq!(names(events.trace()), ["tool_call", "tool_call"]);
        let succeeded = metric::ended(TaskStatus::Succeeded).map(|m| m.name);
        assert_eq!(
            counted(&metrics),
            [succeeded.unwrap_or("?"), metric::TOOL_ERRORS.name]
        );
    }
}
