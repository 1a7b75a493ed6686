//! Operational metrics: what Baton counts and measures, and the port
//! ([`Metrics`]) they leave through. On AWS that is CloudWatch's embedded
//! metric format on stdout (`baton_aws::emf`); `baton dev` drops them
//! unless `BATON_METRICS=emf`.
//!
//! A [`Measurement`] carries one low-cardinality dimension, the agent, set
//! by its constructor: there is no way to make a task, user or thread id a
//! dimension (each distinct value would be a metric of its own, billed
//! monthly). Such ids go as plain properties, searchable in the logs.
//!
//! Emitting never fails and never waits on the network: a metric is never
//! worth a task.

use crate::task::TaskStatus;

/// A metric's unit, as CloudWatch names it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Unit {
    Count,
    Milliseconds,
    /// A plain number (dollars, for one).
    None,
}

impl Unit {
    pub fn as_str(self) -> &'static str {
        match self {
            Unit::Count => "Count",
            Unit::Milliseconds => "Milliseconds",
            Unit::None => "None",
        }
    }
}

/// A metric: its CloudWatch name and unit.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Metric {
    pub name: &'static str,
    pub unit: Unit,
}

/// Declares each metric as a constant and lists them all in [`ALL`]:
/// adding a metric is one line here (and one in docs/operations.md).
macro_rules! metrics {
    ($($(#[$doc:meta])* $id:ident = $name:literal, $unit:ident;)*) => {
        $($(#[$doc])* pub const $id: Metric = Metric { name: $name, unit: Unit::$unit };)*
        /// Every metric Baton emits.
        pub const ALL: &[Metric] = &[$($id),*];
    };
}

metrics! {
    /// A task created: by ingest (HTTP, Slack), or by the worker (a
    /// schedule firing, a sub-agent's child task). Retries of one request
    /// create, and count, one task.
    TASKS_CREATED = "TasksCreated", Count;
    /// A task ended with its answer.
    TASKS_SUCCEEDED = "TasksSucceeded", Count;
    /// A task failed (including those given up on from the dead-letter
    /// queue).
    TASKS_FAILED = "TasksFailed", Count;
    /// A task cancelled on request.
    TASKS_CANCELLED = "TasksCancelled", Count;
    /// How long a model call took that answered, retries and fallbacks
    /// included.
    LLM_LATENCY = "LlmLatency", Milliseconds;
    /// A model call that failed for good (after retries and fallbacks).
    LLM_ERRORS = "LlmErrors", Count;
    /// Input tokens of a model call.
    INPUT_TOKENS = "InputTokens", Count;
    /// Output tokens of a model call.
    OUTPUT_TOKENS = "OutputTokens", Count;
    /// What a model call cost, in US dollars, at the agent's prices.
    COST_USD = "CostUsd", None;
    /// A tool call that ran and returned an error (or timed out).
    TOOL_ERRORS = "ToolErrors", Count;
    /// A segment run: one worker invocation's share of a task.
    SEGMENTS = "Segments", Count;
    /// A task given up on after the dead-letter queue received its wake.
    DEAD_LETTERS = "DeadLetters", Count;
    /// A thumbs up recorded on an answer (Slack's feedback buttons; a
    /// changed vote counts again). One metric per rating rather than a
    /// `Value` dimension: a [`Measurement`] has the agent as its only
    /// dimension.
    FEEDBACK_POSITIVE = "FeedbackPositive", Count;
    /// A thumbs down recorded on an answer.
    FEEDBACK_NEGATIVE = "FeedbackNegative", Count;
}

/// The metric that counts tasks ending in `status`, if it is terminal.
pub fn ended(status: TaskStatus) -> Option<Metric> {
    match status {
        TaskStatus::Succeeded => Some(TASKS_SUCCEEDED),
        TaskStatus::Failed => Some(TASKS_FAILED),
        TaskStatus::Cancelled => Some(TASKS_CANCELLED),
        _ => None,
    }
}

/// Values taken together (one line on AWS), for one agent or none.
#[derive(Clone, Debug, PartialEq)]
pub struct Measurement {
    agent: Option<String>,
    values: Vec<(Metric, f64)>,
    properties: Vec<(&'static str, String)>,
}

impl Measurement {
    /// Values about one agent's work: aggregated per agent and overall.
    pub fn for_agent(agent: &str) -> Self {
        Measurement {
            agent: Some(agent.to_owned()),
            values: Vec::new(),
            properties: Vec::new(),
        }
    }

    /// Values that belong to no agent: aggregated overall only.
    pub fn overall() -> Self {
        Measurement {
            agent: None,
            values: Vec::new(),
            properties: Vec::new(),
        }
    }

    /// Adds `value` of `metric`.
    pub fn value(mut self, metric: Metric, value: f64) -> Self {
        self.values.push((metric, value));
        self
    }

    /// Adds one of `metric`.
    pub fn count(self, metric: Metric) -> Self {
        self.value(metric, 1.0)
    }

    /// Adds a property that is not a dimension (a task id, a tool name):
    /// kept with the values in the logs, never aggregated on. Never a
    /// secret or a user's words.
    pub fn property(mut self, key: &'static str, value: impl Into<String>) -> Self {
        self.properties.push((key, value.into()));
        self
    }

    pub fn agent(&self) -> Option<&str> {
        self.agent.as_deref()
    }

    pub fn values(&self) -> &[(Metric, f64)] {
        &self.values
    }

    pub fn properties(&self) -> &[(&'static str, String)] {
        &self.properties
    }
}

/// Where measurements go. Implementations must not block for long and
/// cannot fail: whatever goes wrong is theirs to swallow.
pub trait Metrics: Send + Sync {
    fn emit(&self, measurement: &Measurement);
}

/// Measurements dropped (`BATON_METRICS=off`, and tests).
#[derive(Clone, Copy, Debug, Default)]
pub struct NoMetrics;

impl Metrics for NoMetrics {
    fn emit(&self, _: &Measurement) {}
}

/// Measurements kept in memory, for tests.
#[cfg(any(test, feature = "testing"))]
#[derive(Debug, Default)]
pub struct RecordedMetrics(std::sync::Mutex<Vec<Measurement>>);

#[cfg(any(test, feature = "testing"))]
impl RecordedMetrics {
    /// Everything emitted so far.
    pub fn all(&self) -> Vec<Measurement> {
        self.0.lock().map(|m| m.clone()).unwrap_or_default()
    }

    /// The sum of `metric` over every measurement (for `agent`, if given).
    pub fn sum(&self, metric: Metric, agent: Option<&str>) -> f64 {
        self.all()
            .iter()
            .filter(|m| agent.is_none() || m.agent() == agent)
            .flat_map(|m| m.values().to_vec())
            .filter(|(m, _)| *m == metric)
            .map(|(_, v)| v)
            .sum()
    }
}

#[cfg(any(test, feature = "testing"))]
impl Metrics for RecordedMetrics {
    fn emit(&self, measurement: &Measurement) {
        if let Ok(mut m) = self.0.lock() {
            m.push(measurement.clone());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_unique_cloudwatch_names() {
        let mut names: Vec<&str> = ALL.iter().map(|m| m.name).collect();
        assert!(names.len() >= 12);
        for n in &names {
            // CloudWatch metric names: 1 to 255 characters; ours are
            // CamelCase so that they never collide with a property.
            assert!(n.chars().all(|c| c.is_ascii_alphanumeric()), "{n}");
            assert!(n.starts_with(|c: char| c.is_ascii_uppercase()), "{n}");
        }
        names.sort_unstable();
        names.dedup();
        assert_eq!(names.len(), ALL.len(), "a name used twice");
    }

    #[test]
    fn only_terminal_statuses_count_as_endings() {
        assert_eq!(ended(TaskStatus::Succeeded), Some(TASKS_SUCCEEDED));
        assert_eq!(ended(TaskStatus::Failed), Some(TASKS_FAILED));
        assert_eq!(ended(TaskStatus::Cancelled), Some(TASKS_CANCELLED));
        for s in [TaskStatus::Queued, TaskStatus::Running, TaskStatus::Waiting] {
            assert_eq!(ended(s), None);
        }
    }

    #[test]
    fn a_recorder_sums_per_agent() {
        let r = RecordedMetrics::default();
        r.emit(&Measurement::for_agent("a").count(TOOL_ERRORS));
        r.emit(&Measurement::for_agent("b").value(TOOL_ERRORS, 2.0));
        r.emit(&Measurement::overall().count(DEAD_LETTERS));
        assert_eq!(r.sum(TOOL_ERRORS, Some("a")), 1.0);
        assert_eq!(r.sum(TOOL_ERRORS, None), 3.0);
        assert_eq!(r.sum(DEAD_LETTERS, Some("a")), 0.0);
        NoMetrics.emit(&Measurement::overall().count(SEGMENTS));
    }
}
