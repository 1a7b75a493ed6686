//! What a run prints as it goes: a table on stdout, one line per case and
//! model as each ends, and on a terminal a progress bar on stderr, redrawn
//! in place (a pipe or a CI log gets no bar: the table says it all).

use super::run::RunResult;
use std::io::{IsTerminal, Write};

pub(crate) struct Progress {
    total: usize,
    done: usize,
    bar: bool,
}

const BAR_WIDTH: usize = 30;

impl Progress {
    pub(crate) fn new(total: usize) -> Self {
        Progress {
            total,
            done: 0,
            bar: std::io::stderr().is_terminal(),
        }
    }

    pub(crate) fn header(&self) {
        println!("{}", header());
        self.draw();
    }

    /// One run ended: its line, then the bar.
    pub(crate) fn finished(&mut self, case_id: &str, run: &RunResult) {
        self.done += 1;
        if self.bar {
            // Clear the bar's line before the table's next line.
            eprint!("\r\x1b[2K");
        }
        println!("{}", line(case_id, run));
        let _ = std::io::stdout().flush();
        self.draw();
    }

    pub(crate) fn clear(&self) {
        if self.bar {
            eprint!("\r\x1b[2K");
        }
    }

    fn draw(&self) {
        if self.bar {
            eprint!("\r{}", bar(self.done, self.total));
            let _ = std::io::stderr().flush();
        }
    }
}

fn header() -> String {
    format!(
        "{:<24} {:<20} {:<6} {:>5} {:>5} {:>14} {:>9}",
        "case", "model", "result", "score", "steps", "tokens in/out", "latency"
    )
}

/// One table line; ids and model names cut to their column, control
/// characters dropped (they come from the case file).
pub(crate) fn line(case_id: &str, r: &RunResult) -> String {
    format!(
        "{:<24} {:<20} {:<6} {:>5.2} {:>5} {:>14} {:>7}ms",
        fit(case_id, 24),
        fit(&r.model, 20),
        if r.passed { "pass" } else { "FAIL" },
        r.score,
        r.outcome.steps,
        format!("{}/{}", r.outcome.input_tokens, r.outcome.output_tokens),
        r.outcome.latency_ms
    )
}

fn fit(s: &str, width: usize) -> String {
    let clean: String = s.chars().filter(|c| !c.is_control()).collect();
    if clean.chars().count() > width {
        let cut: String = clean.chars().take(width - 1).collect();
        format!("{cut}…")
    } else {
        clean
    }
}

pub(crate) fn bar(done: usize, total: usize) -> String {
    let filled = (done * BAR_WIDTH).checked_div(total).unwrap_or(BAR_WIDTH);
    format!(
        "[{}{}] {done}/{total}",
        "#".repeat(filled),
        "-".repeat(BAR_WIDTH - filled)
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::eval::report::tests::run;

    #[test]
    fn a_line_per_run_fits_its_columns() {
        let l = line(
            "a-very-long-case-id-that-goes-on\x1b[31m",
            &run("m", true, "x"),
        );
        assert!(l.starts_with("a-very-long-case-id-tha… m "), "{l}");
        assert!(!l.contains('\x1b'));
        assert!(l.contains(" pass "), "{l}");
        assert!(l.contains("10/5") && l.ends_with("100ms"), "{l}");
    }

    #[test]
    fn the_bar_fills_with_the_runs() {
        assert_eq!(bar(0, 4), format!("[{}] 0/4", "-".repeat(30)));
        assert_eq!(
            bar(2, 4),
            format!("[{}{}] 2/4", "#".repeat(15), "-".repeat(15))
        );
        assert_eq!(bar(0, 0), format!("[{}] 0/0", "#".repeat(30)));
    }
}
