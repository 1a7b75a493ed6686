//! [`EmfMetrics`]: the [`Metrics`] port as CloudWatch's embedded metric
//! format (EMF), one JSON object a line on stdout. In Lambda stdout is the
//! function's log group, where CloudWatch Logs extracts the metrics at no
//! API cost and without a network call from the function.
//!
//! Each line carries its values, the dimensions `Service` (`worker` or
//! `ingest`) and, for an agent's work, `Agent`, under two dimension sets,
//! `[Service, Agent]` and `[Service]`, so that alarms read the totals and
//! dashboards the split per agent. Properties (a task id, a tool name) are
//! plain members of the line, searchable in Logs Insights, never
//! dimensions.
//!
//! The logs (`tracing`) go to stderr; a line is written whole, under
//! stdout's lock, so the two never mix within a line.

use baton_core::metric::{Measurement, Metrics};
use serde_json::{json, Map, Value};
use std::io::Write;

/// The namespace when none is configured (`BATON_METRICS_NAMESPACE`).
pub const DEFAULT_NAMESPACE: &str = "Baton";

/// The dimension naming the function that emitted a value.
pub const SERVICE: &str = "Service";
/// The dimension naming the agent a value is about.
pub const AGENT: &str = "Agent";

/// Measurements as EMF lines on stdout.
#[derive(Clone, Debug)]
pub struct EmfMetrics {
    namespace: String,
    service: String,
}

impl EmfMetrics {
    /// Lines for `namespace`, from `service` (`worker`, `ingest`).
    pub fn new(namespace: impl Into<String>, service: impl Into<String>) -> Self {
        EmfMetrics {
            namespace: namespace.into(),
            service: service.into(),
        }
    }

    /// The EMF document of `m` at `timestamp_ms`, or `None` when it holds
    /// no value CloudWatch would take (none, or none finite).
    pub fn document(&self, m: &Measurement, timestamp_ms: i64) -> Option<Value> {
        let values: Vec<_> = m.values().iter().filter(|(_, v)| v.is_finite()).collect();
        if values.is_empty() {
            return None;
        }
        let mut root = Map::new();
        let dimensions = match m.agent() {
            Some(agent) => {
                root.insert(AGENT.into(), json!(agent));
                json!([[SERVICE, AGENT], [SERVICE]])
            }
            None => json!([[SERVICE]]),
        };
        root.insert(SERVICE.into(), json!(self.service));
        let mut declared: Vec<Value> = Vec::new();
        for (metric, value) in values {
            match root.get_mut(metric.name) {
                // The same metric twice in one measurement: CloudWatch
                // takes an array of values.
                Some(Value::Array(a)) => a.push(json!(value)),
                Some(first) => *first = json!([first.clone(), value]),
                None => {
                    root.insert(metric.name.into(), json!(value));
                    declared.push(json!({"Name": metric.name, "Unit": metric.unit.as_str()}));
                }
            }
        }
        for (key, value) in m.properties() {
            // A property never shadows a dimension or a value.
            root.entry(*key).or_insert_with(|| json!(value));
        }
        root.insert(
            "_aws".into(),
            json!({
                "Timestamp": timestamp_ms,
                "CloudWatchMetrics": [{
                    "Namespace": self.namespace,
                    "Dimensions": dimensions,
                    "Metrics": declared,
                }],
            }),
        );
        Some(Value::Object(root))
    }

    /// [`document`](Self::document) as one line, newline included.
    pub fn line(&self, m: &Measurement, timestamp_ms: i64) -> Option<String> {
        let mut line = self.document(m, timestamp_ms)?.to_string();
        line.push('\n');
        Some(line)
    }
}

impl Metrics for EmfMetrics {
    fn emit(&self, m: &Measurement) {
        let Some(line) = self.line(m, baton_core::now_ms()) else {
            return;
        };
        // One write of the whole line under the lock: lines of concurrent
        // segments never interleave. A closed stdout loses the metric,
        // nothing else.
        let mut out = std::io::stdout().lock();
        if out
            .write_all(line.as_bytes())
            .and_then(|_| out.flush())
            .is_err()
        {
            tracing::debug!("could not write a metrics line");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use baton_core::metric::{self, Measurement};

    /// Checks `doc` against the EMF specification's rules that CloudWatch
    /// enforces: every declared metric has a numeric (or numeric array)
    /// member, every dimension a string member, a namespace and a
    /// timestamp; returns the declared names.
    fn check(doc: &Value) -> Vec<String> {
        let aws = &doc["_aws"];
        assert!(aws["Timestamp"].as_i64().is_some_and(|t| t > 0), "{doc}");
        let directives = aws["CloudWatchMetrics"].as_array().expect("directives");
        assert_eq!(directives.len(), 1);
        let d = &directives[0];
        assert!(d["Namespace"].as_str().is_some_and(|n| !n.is_empty()));
        let sets = d["Dimensions"].as_array().expect("dimension sets");
        assert!(!sets.is_empty());
        for set in sets {
            let set = set.as_array().expect("a dimension set");
            assert!(set.len() <= 30);
            for key in set {
                let key = key.as_str().expect("a dimension name");
                assert!(doc[key].is_string(), "dimension {key} missing: {doc}");
            }
        }
        let metrics = d["Metrics"].as_array().expect("metrics");
        assert!(!metrics.is_empty() && metrics.len() <= 100);
        metrics
            .iter()
            .map(|m| {
                let name = m["Name"].as_str().expect("a name").to_owned();
                let unit = m["Unit"].as_str().expect("a unit");
                assert!(metric::ALL
                    .iter()
                    .any(|k| k.name == name && k.unit.as_str() == unit));
                let v = &doc[name.as_str()];
                let numeric = v.is_number()
                    || v.as_array()
                        .is_some_and(|a| !a.is_empty() && a.iter().all(Value::is_number));
                assert!(numeric, "{name} has no numeric value: {doc}");
                name
            })
            .collect()
    }

    #[test]
    fn a_line_is_one_emf_document_with_its_dimensions_and_values() {
        let emf = EmfMetrics::new("Baton", "worker");
        let m = Measurement::for_agent("research")
            .value(metric::LLM_LATENCY, 1234.0)
            .value(metric::INPUT_TOKENS, 100.0)
            .value(metric::OUTPUT_TOKENS, 20.0)
            .value(metric::COST_USD, 0.0015)
            .property("task_id", "01J0000000000000000000000");
        let line = emf.line(&m, 1_700_000_000_000).expect("a line");
        assert!(line.ends_with('\n') && line.matches('\n').count() == 1);
        let doc: Value = serde_json::from_str(&line).expect("JSON");
        let names = check(&doc);
        assert_eq!(
            names,
            ["LlmLatency", "InputTokens", "OutputTokens", "CostUsd"]
        );
        assert_eq!(doc["_aws"]["Timestamp"], 1_700_000_000_000i64);
        let d = &doc["_aws"]["CloudWatchMetrics"][0];
        assert_eq!(d["Namespace"], "Baton");
        assert_eq!(d["Dimensions"], json!([["Service", "Agent"], ["Service"]]));
        assert_eq!(
            d["Metrics"][0],
            json!({"Name": "LlmLatency", "Unit": "Milliseconds"})
        );
        assert_eq!(d["Metrics"][3], json!({"Name": "CostUsd", "Unit": "None"}));
        assert_eq!(doc["Service"], "worker");
        assert_eq!(doc["Agent"], "research");
        assert_eq!(doc["LlmLatency"], 1234.0);
        assert_eq!(doc["CostUsd"], 0.0015);
        // A property, not a dimension.
        assert_eq!(doc["task_id"], "01J0000000000000000000000");
        assert!(!d["Dimensions"].to_string().contains("task_id"));
    }

    #[test]
    fn values_without_an_agent_aggregate_per_service_only() {
        let emf = EmfMetrics::new("Baton/prod", "worker");
        let doc = emf
            .document(&Measurement::overall().count(metric::DEAD_LETTERS), 1)
            .expect("a document");
        assert_eq!(check(&doc), ["DeadLetters"]);
        let d = &doc["_aws"]["CloudWatchMetrics"][0];
        assert_eq!(d["Dimensions"], json!([["Service"]]));
        assert_eq!(d["Namespace"], "Baton/prod");
        assert!(doc.get("Agent").is_none());
        assert_eq!(doc["DeadLetters"], 1.0);
    }

    #[test]
    fn repeated_values_become_an_array_and_bad_ones_are_dropped() {
        let emf = EmfMetrics::new("Baton", "worker");
        let m = Measurement::for_agent("a")
            .count(metric::TOOL_ERRORS)
            .count(metric::TOOL_ERRORS)
            .value(metric::COST_USD, f64::NAN)
            // A property may not replace a value or a dimension.
            .property("ToolErrors", "shadow")
            .property("Agent", "other");
        let doc = emf.document(&m, 1).expect("a document");
        assert_eq!(check(&doc), ["ToolErrors"]);
        assert_eq!(doc["ToolErrors"], json!([1.0, 1.0]));
        assert_eq!(doc["Agent"], "a");
        assert!(doc.get("CostUsd").is_none());
        let only_nan = Measurement::overall().value(metric::COST_USD, f64::INFINITY);
        assert_eq!(emf.document(&only_nan, 1), None);
        assert_eq!(emf.line(&Measurement::overall(), 1), None);
    }

    #[test]
    fn every_metric_makes_a_valid_line() {
        let emf = EmfMetrics::new(DEFAULT_NAMESPACE, "ingest");
        for m in metric::ALL {
            let line = emf
                .line(&Measurement::for_agent("default").count(*m), 5)
                .expect("a line");
            let doc: Value = serde_json::from_str(&line).expect("JSON");
            assert_eq!(check(&doc), [m.name]);
        }
    }
}
