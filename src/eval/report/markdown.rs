//! `eval-report.md`: totals per model, then each case with one column per
//! model. Cells are HTML-escaped (Markdown renderers pass HTML through)
//! and kept on one line.

use super::html::escape;
use super::{dollars, percent, Report};
use std::fmt::Write;

/// `s` fit for a table cell: escaped, pipes quoted, lines joined by
/// `<br>`.
fn cell(s: &str) -> String {
    escape(s)
        .replace('|', "\\|")
        .replace("\r\n", "\n")
        .replace('\n', "<br>")
}

fn verdict(passed: bool) -> &'static str {
    if passed {
        "pass"
    } else {
        "**FAIL**"
    }
}

pub(crate) fn render(r: &Report) -> String {
    let mut m = String::new();
    let _ = writeln!(m, "# Baton eval report\n");
    let _ = writeln!(
        m,
        "{} · on {}{}{}\n",
        cell(&r.generated_at),
        cell(&r.target),
        r.agent
            .as_deref()
            .map(|a| format!(" · agent {}", cell(a)))
            .unwrap_or_default(),
        if r.replay { " · replay" } else { "" }
    );
    m.push_str(
        "## Totals\n\n| model | passed | pass rate | tokens in / out | cost | mean latency |\n",
    );
    m.push_str("| --- | --- | --- | --- | --- | --- |\n");
    for t in &r.totals {
        let _ = writeln!(
            m,
            "| {} | {}/{} | {} | {} / {} | {} | {} ms |",
            cell(&t.model),
            t.passed,
            t.cases,
            percent(t.pass_rate),
            t.input_tokens,
            t.output_tokens,
            dollars(t.cost_usd),
            t.mean_latency_ms
        );
    }
    if let Some(min) = r.min_pass {
        let _ = writeln!(
            m,
            "\nMinimum pass rate {}: {}",
            percent(min),
            verdict(r.passed)
        );
    }
    for case in &r.cases {
        let _ = writeln!(m, "\n## {}\n", cell(&case.id));
        let _ = writeln!(m, "Input: {}\n", cell(&case.input));
        m.push_str("| |");
        for run in &case.runs {
            let _ = write!(m, " {} |", cell(&run.model));
        }
        m.push_str("\n| --- |");
        m.push_str(&" --- |".repeat(case.runs.len()));
        m.push('\n');
        let mut row = |name: &str, cells: Vec<String>| {
            let _ = writeln!(m, "| {} | {} |", cell(name), cells.join(" | "));
        };
        let each = |f: &dyn Fn(&super::RunResult) -> String| case.runs.iter().map(f).collect();
        row("result", each(&|r| verdict(r.passed).to_owned()));
        row(
            "answer",
            each(&|r| cell(r.outcome.answer.as_deref().unwrap_or(""))),
        );
        let names: Vec<String> = case
            .runs
            .first()
            .map(|r| r.checks.iter().map(|c| c.check.clone()).collect())
            .unwrap_or_default();
        for (i, name) in names.iter().enumerate() {
            row(
                name,
                each(&|r| match r.checks.get(i) {
                    Some(c) => format!("{} {}", verdict(c.passed), cell(&c.detail)),
                    None => String::new(),
                }),
            );
        }
        row("score", each(&|r| format!("{:.2}", r.score)));
        row("steps", each(&|r| r.outcome.steps.to_string()));
        row(
            "tokens in / out",
            each(&|r| format!("{} / {}", r.outcome.input_tokens, r.outcome.output_tokens)),
        );
        row("cost", each(&|r| dollars(r.outcome.cost_usd)));
        row("latency", each(&|r| format!("{} ms", r.outcome.latency_ms)));
        row(
            "task",
            each(&|r| match &r.link {
                Some(l) => format!("[{}](<{}>)", cell(&r.outcome.task_id), cell(l)),
                None => String::new(),
            }),
        );
    }
    m
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::eval::report::tests::report;

    #[test]
    fn cells_stay_in_their_cell_and_inert() {
        assert_eq!(cell("a|b\nc<d>"), "a\\|b<br>c&lt;d&gt;");
        let md = render(&report());
        assert!(!md.contains("<script>") && !md.contains("<img"), "{md}");
        assert!(md.contains("Input: &lt;img src=x onerror=alert(1)&gt; \\| pipe"));
    }

    #[test]
    fn one_column_per_model_and_totals_per_model() {
        let md = render(&report());
        assert!(md.contains("| | small | big |"), "{md}");
        assert!(md.contains("| small | 1/2 | 50% |"), "{md}");
        assert!(md.contains("| big | 2/2 | 100% |"), "{md}");
        assert!(md.contains("| result | **FAIL** | pass |"), "{md}");
    }
}
