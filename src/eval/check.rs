//! The checks of a case that need no model: each gives a pass or a fail
//! and what it saw. Text checks are case-insensitive (a model's
//! capitalisation varies from run to run); `regex` is as written, so
//! `(?i)` or its absence says what is meant.

use super::case::LoadedCase;
use serde::Serialize;

/// What a task ended as, read from its status and events.
#[derive(Clone, Debug, Default, Serialize)]
pub(crate) struct Outcome {
    pub(crate) task_id: String,
    /// `succeeded`, `failed`, `cancelled` (or `timed out`, the run's own).
    pub(crate) status: String,
    pub(crate) answer: Option<String>,
    pub(crate) error: Option<String>,
    pub(crate) steps: u64,
    /// The tools the model called, in order, repeats kept.
    pub(crate) tools_called: Vec<String>,
    pub(crate) input_tokens: u64,
    pub(crate) output_tokens: u64,
    pub(crate) cost_usd: Option<f64>,
    pub(crate) latency_ms: u64,
}

/// One check's result. `score` is 1 or 0 but for the judge's.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub(crate) struct CheckResult {
    pub(crate) check: String,
    pub(crate) passed: bool,
    pub(crate) score: f64,
    pub(crate) detail: String,
}

impl CheckResult {
    pub(crate) fn new(check: impl Into<String>, passed: bool, detail: impl Into<String>) -> Self {
        CheckResult {
            check: check.into(),
            passed,
            score: if passed { 1.0 } else { 0.0 },
            detail: detail.into(),
        }
    }
}

/// The checks of `case` that need no model, on `outcome`. The first is
/// always `succeeded`: a failed or cancelled task fails the case with its
/// error, whatever its text happens to contain.
pub(crate) fn run_checks(case: &LoadedCase, outcome: &Outcome) -> Vec<CheckResult> {
    let expect = &case.case.expect;
    let answer = outcome.answer.as_deref().unwrap_or("");
    let folded = answer.to_lowercase();
    let mut out = vec![succeeded(outcome)];
    for needle in &expect.contains {
        let found = folded.contains(&needle.to_lowercase());
        let detail = if found { "found" } else { "not in the answer" };
        out.push(CheckResult::new(
            format!("contains {needle:?}"),
            found,
            detail,
        ));
    }
    for needle in &expect.not_contains {
        let found = folded.contains(&needle.to_lowercase());
        let detail = if found { "in the answer" } else { "absent" };
        out.push(CheckResult::new(
            format!("not_contains {needle:?}"),
            !found,
            detail,
        ));
    }
    if let (Some(source), Some(re)) = (&expect.regex, &case.regex) {
        let hit = re.find(answer).map(|m| m.as_str().to_owned());
        let detail = match &hit {
            Some(m) => format!("matched {m:?}"),
            None => "no match".to_owned(),
        };
        out.push(CheckResult::new(
            format!("regex /{source}/"),
            hit.is_some(),
            detail,
        ));
    }
    if let Some(tool) = &expect.tool_called {
        let called = outcome.tools_called.iter().any(|t| t == tool);
        let detail = if outcome.tools_called.is_empty() {
            "no tool called".to_owned()
        } else {
            format!("called: {}", outcome.tools_called.join(", "))
        };
        out.push(CheckResult::new(
            format!("tool_called {tool:?}"),
            called,
            detail,
        ));
    }
    if let Some(max) = expect.max_steps {
        out.push(CheckResult::new(
            format!("max_steps {max}"),
            outcome.steps <= max,
            format!("{} step(s)", outcome.steps),
        ));
    }
    out
}

fn succeeded(outcome: &Outcome) -> CheckResult {
    let ok = outcome.status == "succeeded";
    let detail = match (&outcome.error, ok) {
        (_, true) => "succeeded".to_owned(),
        (Some(e), false) => format!("{}: {e}", outcome.status),
        (None, false) => outcome.status.clone(),
    };
    CheckResult::new("succeeded", ok, detail)
}

/// A run passes when every check does; its score is the checks' mean
/// (the judge counting its own score).
pub(crate) fn summarize(checks: &[CheckResult]) -> (bool, f64) {
    let passed = checks.iter().all(|c| c.passed);
    let score = if checks.is_empty() {
        0.0
    } else {
        checks.iter().map(|c| c.score).sum::<f64>() / checks.len() as f64
    };
    (passed, score)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::eval::case::parse;

    fn case(expect: &str) -> LoadedCase {
        let line = format!(r#"{{"id": "c", "input": "q", "expect": {expect}}}"#);
        parse(&line, "c").unwrap().remove(0)
    }

    fn done(answer: &str) -> Outcome {
        Outcome {
            status: "succeeded".into(),
            answer: Some(answer.into()),
            steps: 2,
            tools_called: vec!["current_time".into()],
            ..Outcome::default()
        }
    }

    fn verdicts(expect: &str, outcome: &Outcome) -> Vec<(String, bool)> {
        run_checks(&case(expect), outcome)
            .into_iter()
            .map(|c| (c.check, c.passed))
            .collect()
    }

    #[test]
    fn contains_and_not_contains_ignore_case() {
        let v = verdicts(
            r#"{"contains": ["PARIS", "france"], "not_contains": ["london", "Berlin"]}"#,
            &done("Paris is in France, not berlin."),
        );
        assert_eq!(
            v,
            [
                ("succeeded".into(), true),
                ("contains \"PARIS\"".into(), true),
                ("contains \"france\"".into(), true),
                ("not_contains \"london\"".into(), true),
                ("not_contains \"Berlin\"".into(), false),
            ]
        );
        assert!(!verdicts(r#"{"contains": ["rome"]}"#, &done("Paris"))[1].1);
    }

    #[test]
    fn regex_is_case_sensitive_unless_it_says_so() {
        let v = verdicts(r#"{"regex": "^\\d+ apples$"}"#, &done("12 apples"));
        assert!(v[1].1);
        assert!(!verdicts(r#"{"regex": "Apples"}"#, &done("12 apples"))[1].1);
        assert!(verdicts(r#"{"regex": "(?i)Apples"}"#, &done("12 apples"))[1].1);
    }

    #[test]
    fn tool_called_and_max_steps_read_the_task() {
        let o = done("x");
        assert!(verdicts(r#"{"tool_called": "current_time"}"#, &o)[1].1);
        let miss = run_checks(&case(r#"{"tool_called": "http_request"}"#), &o);
        assert!(!miss[1].passed);
        assert_eq!(miss[1].detail, "called: current_time");
        assert!(verdicts(r#"{"max_steps": 2}"#, &o)[1].1);
        assert!(!verdicts(r#"{"max_steps": 1}"#, &o)[1].1);
    }

    #[test]
    fn a_failed_task_fails_the_case_with_its_error() {
        let failed = Outcome {
            status: "failed".into(),
            error: Some("model refused".into()),
            answer: Some("Paris".into()),
            ..Outcome::default()
        };
        let checks = run_checks(&case(r#"{"contains": ["paris"]}"#), &failed);
        assert!(!checks[0].passed);
        assert_eq!(checks[0].detail, "failed: model refused");
        let (passed, score) = summarize(&checks);
        assert!(!passed);
        assert_eq!(score, 0.5);
    }

    #[test]
    fn the_score_is_the_mean_of_the_checks() {
        let mut checks = run_checks(&case(r#"{}"#), &done("x"));
        checks.push(CheckResult {
            check: "judge".into(),
            passed: true,
            score: 0.5,
            detail: String::new(),
        });
        assert_eq!(summarize(&checks), (true, 0.75));
    }
}
