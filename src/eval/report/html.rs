//! `eval-report.html`: one file, its style inline, no script and nothing
//! fetched. Every text in it is escaped: case inputs and answers are
//! whatever users and models wrote.

use super::{dollars, percent, Report};
pub(crate) use baton_core::html::escape;
use std::fmt::Write;

const STYLE: &str = "body{font:14px/1.45 system-ui,sans-serif;margin:2em;color:#222}\
table{border-collapse:collapse;margin:.5em 0 1.5em}td,th{border:1px solid #ccc;padding:.3em .6em;vertical-align:top;text-align:left}\
th{background:#f3f3f3}.pass{color:#176e2a;font-weight:600}.fail{color:#b3261e;font-weight:600}\
pre{white-space:pre-wrap;margin:0;max-width:60em}.muted{color:#666}h2{margin-top:2em}";

fn verdict(passed: bool) -> &'static str {
    if passed {
        "<span class=\"pass\">pass</span>"
    } else {
        "<span class=\"fail\">FAIL</span>"
    }
}

pub(crate) fn render(r: &Report) -> String {
    let mut h = String::new();
    let _ = write!(
        h,
        "<!doctype html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\
         <title>Baton eval report</title><style>{STYLE}</style></head><body>\n\
         <h1>Baton eval report</h1>\n<p class=\"muted\">{} · on {}{}{}</p>\n",
        escape(&r.generated_at),
        escape(&r.target),
        r.agent
            .as_deref()
            .map(|a| format!(" · agent {}", escape(a)))
            .unwrap_or_default(),
        if r.replay { " · replay" } else { "" },
    );
    h.push_str(
        "<h2>Totals</h2>\n<table><tr><th>model</th><th>passed</th><th>pass rate</th>\
                <th>tokens in / out</th><th>cost</th><th>mean latency</th></tr>\n",
    );
    for t in &r.totals {
        let _ = writeln!(
            h,
            "<tr><td>{}</td><td>{}/{}</td><td>{}</td><td>{} / {}</td><td>{}</td><td>{} ms</td></tr>",
            escape(&t.model),
            t.passed,
            t.cases,
            percent(t.pass_rate),
            t.input_tokens,
            t.output_tokens,
            dollars(t.cost_usd),
            t.mean_latency_ms
        );
    }
    h.push_str("</table>\n");
    if let Some(min) = r.min_pass {
        let _ = writeln!(
            h,
            "<p>Minimum pass rate {}: {}</p>",
            percent(min),
            verdict(r.passed)
        );
    }
    for case in &r.cases {
        let _ = write!(
            h,
            "<h2>{}</h2>\n<pre>{}</pre>\n<table><tr><th></th>",
            escape(&case.id),
            escape(&case.input)
        );
        for run in &case.runs {
            let _ = write!(h, "<th>{}</th>", escape(&run.model));
        }
        h.push_str("</tr>\n");
        let row = |h: &mut String, name: &str, cells: Vec<String>| {
            let _ = write!(h, "<tr><th>{}</th>", escape(name));
            for c in cells {
                let _ = write!(h, "<td>{c}</td>");
            }
            h.push_str("</tr>\n");
        };
        let each = |f: &dyn Fn(&super::RunResult) -> String| case.runs.iter().map(f).collect();
        row(&mut h, "result", each(&|r| verdict(r.passed).to_owned()));
        row(
            &mut h,
            "answer",
            each(&|r| {
                let text = r.outcome.answer.as_deref().unwrap_or("");
                format!("<pre>{}</pre>", escape(text))
            }),
        );
        // The checks are the same for every model of a case.
        let names: Vec<&str> = case
            .runs
            .first()
            .map(|r| r.checks.iter().map(|c| c.check.as_str()).collect())
            .unwrap_or_default();
        for (i, name) in names.iter().enumerate() {
            row(
                &mut h,
                name,
                each(&|r| match r.checks.get(i) {
                    Some(c) => format!("{} {}", verdict(c.passed), escape(&c.detail)),
                    None => String::new(),
                }),
            );
        }
        row(&mut h, "score", each(&|r| format!("{:.2}", r.score)));
        row(&mut h, "steps", each(&|r| r.outcome.steps.to_string()));
        row(
            &mut h,
            "tokens in / out",
            each(&|r| format!("{} / {}", r.outcome.input_tokens, r.outcome.output_tokens)),
        );
        row(&mut h, "cost", each(&|r| dollars(r.outcome.cost_usd)));
        row(
            &mut h,
            "latency",
            each(&|r| format!("{} ms", r.outcome.latency_ms)),
        );
        row(
            &mut h,
            "task",
            each(&|r| match &r.link {
                Some(l) => format!(
                    "<a href=\"{}\">{}</a>",
                    escape(l),
                    escape(&r.outcome.task_id)
                ),
                None => String::new(),
            }),
        );
        h.push_str("</table>\n");
    }
    h.push_str("</body></html>\n");
    h
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::eval::report::tests::report;

    #[test]
    fn every_text_is_escaped() {
        assert_eq!(
            escape(r#"<a href="x">'&'</a>"#),
            "&lt;a href=&quot;x&quot;&gt;&#39;&amp;&#39;&lt;/a&gt;"
        );
        let html = render(&report());
        assert!(!html.contains("<script>"), "{html}");
        assert!(!html.contains("<img"), "{html}");
        assert!(html.contains("&lt;script&gt;alert(1)&lt;/script&gt;"));
        assert!(html.contains("&lt;img src=x onerror=alert(1)&gt;"));
        assert!(html.contains("<h2>c&lt;1&gt;</h2>"));
        assert!(html.contains("because &lt;script&gt;"));
        assert!(html.contains("fine &amp; dandy"));
        // Self-contained: nothing fetched.
        assert!(!html.contains("src=\"http") && !html.contains("<link"));
    }

    #[test]
    fn the_answers_are_side_by_side_with_totals_per_model() {
        let html = render(&report());
        assert!(html.contains("<th>small</th><th>big</th>"));
        assert!(html.contains("<tr><td>small</td><td>1/2</td><td>50%</td>"));
        assert!(html.contains("Minimum pass rate 90%: <span class=\"fail\">FAIL</span>"));
    }
}
