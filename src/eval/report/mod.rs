//! The run's results as reports: `eval-report.md`, a self-contained
//! `eval-report.html` and `eval-report.json`, all from one [`Report`].

mod html;
mod markdown;

use super::run::RunResult;
use anyhow::Context;
use serde::Serialize;
use std::path::{Path, PathBuf};

#[derive(Debug, Serialize)]
pub(crate) struct Report {
    pub(crate) generated_at: String,
    /// The API the tasks ran on (`local` for the run's own stack).
    pub(crate) target: String,
    pub(crate) agent: Option<String>,
    pub(crate) replay: bool,
    /// The columns: one per model, in order.
    pub(crate) models: Vec<String>,
    pub(crate) cases: Vec<CaseReport>,
    pub(crate) totals: Vec<Totals>,
    pub(crate) min_pass: Option<f64>,
    /// Whether every model's pass rate reached `min_pass`.
    pub(crate) passed: bool,
}

#[derive(Debug, Serialize)]
pub(crate) struct CaseReport {
    pub(crate) id: String,
    pub(crate) input: String,
    /// One per model, in the order of [`Report::models`].
    pub(crate) runs: Vec<RunResult>,
}

/// One model's totals.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub(crate) struct Totals {
    pub(crate) model: String,
    pub(crate) cases: usize,
    pub(crate) passed: usize,
    pub(crate) pass_rate: f64,
    pub(crate) input_tokens: u64,
    pub(crate) output_tokens: u64,
    /// `None` when no task reported a cost (no prices configured).
    pub(crate) cost_usd: Option<f64>,
    pub(crate) mean_latency_ms: u64,
}

/// Each model's totals over `cases`.
pub(crate) fn totals(models: &[String], cases: &[CaseReport]) -> Vec<Totals> {
    models
        .iter()
        .enumerate()
        .map(|(i, model)| {
            let runs: Vec<&RunResult> = cases.iter().filter_map(|c| c.runs.get(i)).collect();
            let n = runs.len();
            let passed = runs.iter().filter(|r| r.passed).count();
            let costs: Vec<f64> = runs.iter().filter_map(|r| r.outcome.cost_usd).collect();
            let latency: u64 = runs.iter().map(|r| r.outcome.latency_ms).sum();
            Totals {
                model: model.clone(),
                cases: n,
                passed,
                pass_rate: if n == 0 {
                    0.0
                } else {
                    passed as f64 / n as f64
                },
                input_tokens: runs.iter().map(|r| r.outcome.input_tokens).sum(),
                output_tokens: runs.iter().map(|r| r.outcome.output_tokens).sum(),
                cost_usd: (!costs.is_empty()).then(|| costs.iter().sum()),
                mean_latency_ms: if n == 0 { 0 } else { latency / n as u64 },
            }
        })
        .collect()
}

/// Whether the run passes `min_pass`: every model's pass rate (so the
/// lowest) at or above it. No threshold: it passes.
pub(crate) fn meets(totals: &[Totals], min_pass: Option<f64>) -> bool {
    let Some(min) = min_pass else { return true };
    totals.iter().all(|t| t.pass_rate >= min)
}

/// Writes the three reports into `dir` (made if missing); their paths.
pub(crate) fn write_all(report: &Report, dir: &Path) -> anyhow::Result<Vec<PathBuf>> {
    std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    let files = [
        ("eval-report.md", markdown::render(report)),
        ("eval-report.html", html::render(report)),
        (
            "eval-report.json",
            serde_json::to_string_pretty(report)? + "\n",
        ),
    ];
    let mut paths = Vec::new();
    for (name, text) in files {
        let path = dir.join(name);
        std::fs::write(&path, text).with_context(|| format!("writing {}", path.display()))?;
        paths.push(path);
    }
    Ok(paths)
}

/// `0.75` as `75%`.
pub(crate) fn percent(rate: f64) -> String {
    format!("{:.0}%", rate * 100.0)
}

/// A cost in dollars, or `-` when unknown.
pub(crate) fn dollars(cost: Option<f64>) -> String {
    cost.map_or_else(|| "-".to_owned(), |c| format!("${c:.4}"))
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::eval::check::{CheckResult, Outcome};

    pub(crate) fn run(model: &str, passed: bool, answer: &str) -> RunResult {
        RunResult {
            model: model.into(),
            passed,
            score: if passed { 1.0 } else { 0.0 },
            checks: vec![
                CheckResult::new("contains \"<b>\"", passed, "found"),
                CheckResult::new("judge", passed, "because <script>"),
            ],
            judge_reason: Some("because <script>".into()),
            link: Some("http://x/console#/tasks/t1".into()),
            outcome: Outcome {
                task_id: "t1".into(),
                status: "succeeded".into(),
                answer: Some(answer.into()),
                steps: 2,
                input_tokens: 10,
                output_tokens: 5,
                cost_usd: None,
                latency_ms: 100,
                ..Outcome::default()
            },
        }
    }

    pub(crate) fn report() -> Report {
        let models = vec!["small".to_owned(), "big".to_owned()];
        let cases = vec![
            CaseReport {
                id: "c<1>".into(),
                input: "<img src=x onerror=alert(1)> | pipe".into(),
                runs: vec![
                    run("small", true, "<script>alert(1)</script>"),
                    run("big", true, "fine & dandy"),
                ],
            },
            CaseReport {
                id: "c2".into(),
                input: "two".into(),
                runs: vec![run("small", false, "no"), run("big", true, "yes")],
            },
        ];
        let totals = totals(&models, &cases);
        Report {
            generated_at: "2026-11-26T08:00:00Z".into(),
            target: "local".into(),
            agent: None,
            replay: false,
            models,
            passed: meets(&totals, Some(0.9)),
            cases,
            totals,
            min_pass: Some(0.9),
        }
    }

    #[test]
    fn totals_are_per_model_and_the_lowest_rate_decides() {
        let r = report();
        assert_eq!(r.totals[0].passed, 1);
        assert_eq!(r.totals[0].pass_rate, 0.5);
        assert_eq!(r.totals[1].pass_rate, 1.0);
        assert_eq!(r.totals[1].input_tokens, 20);
        assert_eq!(r.totals[1].cost_usd, None);
        assert_eq!(r.totals[1].mean_latency_ms, 100);
        assert!(!meets(&r.totals, Some(0.9)));
        assert!(meets(&r.totals, Some(0.5)));
        assert!(!meets(&r.totals, Some(0.51)));
        assert!(meets(&r.totals, None));
    }

    #[test]
    fn the_three_files_are_written() {
        let dir = tempfile::tempdir().unwrap();
        let out = dir.path().join("reports");
        let paths = write_all(&report(), &out).unwrap();
        assert_eq!(paths.len(), 3);
        let json: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(out.join("eval-report.json")).unwrap())
                .unwrap();
        assert_eq!(json["models"], serde_json::json!(["small", "big"]));
        assert_eq!(json["cases"][0]["runs"][1]["answer"], "fine & dandy");
        assert_eq!(json["totals"][0]["pass_rate"], 0.5);
    }
}
