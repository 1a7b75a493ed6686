//! `baton eval run`: an evaluation set (a JSONL file of cases) run as
//! tasks, on the run's own local stack or a deployment, each answer
//! checked (and graded by a judge model where a case asks), the results
//! printed as they come and written as reports. docs/evals.md.

mod case;
mod check;
mod export;
mod judge;
mod progress;
mod report;
mod run;
mod stack;

use crate::client::Api;
use clap::{Args, Subcommand};
use futures::StreamExt;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

#[derive(Subcommand)]
pub(crate) enum EvalCommand {
    /// Run an evaluation set: each case as a task, checked and scored;
    /// prints a table, writes eval-report.{md,html,json}. Exit code 1
    /// when a model's pass rate is under --min-pass, 2 when the run could
    /// not be made (bad cases file or flags, no stack).
    Run(RunArgs),
    /// Turn rated answers (the Slack feedback buttons) and chosen tasks
    /// into cases, one JSON line each on stdout. Exit code 1 on an API
    /// error (nothing printed then).
    Export(export::ExportArgs),
}

#[derive(Args)]
pub(crate) struct RunArgs {
    /// The cases: JSONL, one `{"input", "expect": {…}}` per line.
    cases: PathBuf,
    /// The agent every case runs on (default: the deployment's default).
    #[arg(long)]
    agent: Option<String>,
    /// The model every step of every case asks (default: the agent's).
    #[arg(long)]
    model: Option<String>,
    /// Run every case on this model too, side by side with --model.
    #[arg(long)]
    compare: Option<String>,
    /// A running deployment's API (or a `baton dev`) to run on, instead
    /// of a local stack started for the run. Needed by --replay.
    #[arg(long, env = "BATON_URL")]
    url: Option<String>,
    /// The deployment's bearer token (with --url); as for `baton task`.
    #[arg(long, env = "BATON_API_TOKEN", hide_env_values = true)]
    token: Option<String>,
    /// Cases run at the same time.
    #[arg(long, default_value_t = 4, value_parser = clap::value_parser!(u16).range(1..=64))]
    concurrency: u16,
    /// The lowest pass rate (0 to 1) every model must reach, or exit 1.
    #[arg(long, value_parser = rate)]
    min_pass: Option<f64>,
    /// Run each case as a fork of its `task_id` from step 0 with recorded
    /// tools (no side effects), instead of a new task.
    #[arg(long)]
    replay: bool,
    /// Where the reports are written.
    #[arg(long, default_value = ".")]
    out: PathBuf,
    /// The model of the `judge` check (default: the environment's model).
    #[arg(long)]
    judge_model: Option<String>,
    /// Seconds a case's task may run before it is cancelled and failed.
    #[arg(long, default_value_t = 600)]
    timeout: u64,
}

/// A rate from 0 to 1.
fn rate(s: &str) -> Result<f64, String> {
    match s.parse::<f64>() {
        Ok(r) if (0.0..=1.0).contains(&r) => Ok(r),
        _ => Err(format!("`{s}` is not a number from 0 to 1")),
    }
}

/// Why a run ends without a verdict: the usage (exit 2).
#[derive(Debug, thiserror::Error)]
enum UsageError {
    #[error(transparent)]
    Cases(#[from] case::CaseError),
    #[error("--replay: case {0} has no task_id")]
    NoTaskId(String),
    #[error(
        "--replay forks the tasks the cases came from, which are in the deployment (or the \
         `baton dev`) that ran them, not in a stack started for the run: give its --url \
         (BATON_URL), e.g. --url http://127.0.0.1:3000 for a local `baton dev`"
    )]
    ReplayWithoutUrl,
    #[error("--compare names the model already run (`{0}`)")]
    SameModel(String),
}

/// Runs an eval command: exit code 0 when it passes, 1 when a model's
/// pass rate is under `--min-pass`, 2 when it cannot run.
pub(crate) async fn main(command: EvalCommand) -> ExitCode {
    let verdict = match command {
        EvalCommand::Run(args) => run(args).await,
        EvalCommand::Export(args) => {
            return match export::run(args).await {
                Ok(()) => ExitCode::SUCCESS,
                Err(e) => {
                    eprintln!("error: {}", crate::describe(&e));
                    ExitCode::from(1)
                }
            };
        }
    };
    match verdict {
        Ok(true) => ExitCode::SUCCESS,
        Ok(false) => ExitCode::from(1),
        Err(e) => {
            eprintln!("error: {}", crate::describe(&e));
            ExitCode::from(2)
        }
    }
}

/// One column of the reports: the model asked (`None`: the agent's) and
/// its label.
struct Column {
    model: Option<String>,
    label: String,
}

fn columns(args: &RunArgs) -> Result<Vec<Column>, UsageError> {
    let first = Column {
        model: args.model.clone(),
        label: args.model.clone().unwrap_or_else(|| "agent's model".into()),
    };
    let mut cols = vec![first];
    if let Some(m) = &args.compare {
        if args.model.as_ref() == Some(m) {
            return Err(UsageError::SameModel(m.clone()));
        }
        cols.push(Column {
            model: Some(m.clone()),
            label: m.clone(),
        });
    }
    Ok(cols)
}

async fn run(args: RunArgs) -> anyhow::Result<bool> {
    let cases = case::load(&args.cases).map_err(UsageError::from)?;
    if args.replay && args.url.is_none() {
        return Err(UsageError::ReplayWithoutUrl.into());
    }
    if args.replay {
        if let Some(c) = cases.iter().find(|c| c.case.task_id.is_none()) {
            return Err(UsageError::NoTaskId(c.id.clone()).into());
        }
    }
    let cols = columns(&args)?;
    let judge = if cases.iter().any(|c| c.case.expect.judge.is_some()) {
        Some(judge::Judge::from_env(args.judge_model.as_deref())?)
    } else {
        None
    };
    let (api, base, stack) = match &args.url {
        Some(url) => {
            let token = crate::client::token(args.token.as_deref())?;
            let base = url.trim_end_matches('/').to_owned();
            (Api::at(&base, token)?, base, None)
        }
        None => {
            let stack = stack::LocalStack::start().await?;
            let api = Api::at(&stack.url, stack.token.clone())?;
            (api, stack.url.clone(), Some(stack))
        }
    };
    let runner = run::Runner {
        api,
        base: base.clone(),
        agent: args.agent.clone(),
        replay: args.replay,
        judge,
        timeout: Duration::from_secs(args.timeout),
    };
    let jobs: Vec<(usize, usize)> = (0..cases.len())
        .flat_map(|c| (0..cols.len()).map(move |m| (c, m)))
        .collect();
    let mut progress = progress::Progress::new(jobs.len());
    progress.header();
    let mut results: Vec<Vec<Option<run::RunResult>>> = vec![vec![None; cols.len()]; cases.len()];
    let mut stream = futures::stream::iter(jobs)
        .map(|(c, m)| {
            let (runner, case, col) = (&runner, &cases[c], &cols[m]);
            async move {
                let r = runner.run(case, col.model.as_deref(), &col.label).await;
                (c, m, r)
            }
        })
        .buffer_unordered(usize::from(args.concurrency));
    // Ctrl-C stops the run, and the local stack with its data, at once.
    let mut interrupted = false;
    let ctrl_c = tokio::signal::ctrl_c();
    tokio::pin!(ctrl_c);
    loop {
        tokio::select! {
            next = stream.next() => match next {
                Some((c, m, r)) => {
                    progress.finished(&cases[c].id, &r);
                    results[c][m] = Some(r);
                }
                None => break,
            },
            _ = &mut ctrl_c => {
                interrupted = true;
                break;
            }
        }
    }
    drop(stream);
    progress.clear();
    if let Some(s) = stack {
        s.stop().await;
    }
    if interrupted {
        anyhow::bail!("interrupted: no report written");
    }
    let models: Vec<String> = cols.iter().map(|c| c.label.clone()).collect();
    let case_reports: Vec<report::CaseReport> = cases
        .iter()
        .zip(results)
        .map(|(c, runs)| report::CaseReport {
            id: c.id.clone(),
            input: c.case.input.clone(),
            runs: runs.into_iter().flatten().collect(),
        })
        .collect();
    let totals = report::totals(&models, &case_reports);
    let passed = report::meets(&totals, args.min_pass);
    let report = report::Report {
        generated_at: chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Secs, true),
        target: if args.url.is_some() {
            base
        } else {
            "local stack".into()
        },
        agent: args.agent.clone(),
        replay: args.replay,
        models,
        cases: case_reports,
        totals,
        min_pass: args.min_pass,
        passed,
    };
    println!();
    for t in &report.totals {
        println!(
            "{}: {}/{} passed ({}), tokens {}/{}, cost {}, mean latency {} ms",
            t.model,
            t.passed,
            t.cases,
            report::percent(t.pass_rate),
            t.input_tokens,
            t.output_tokens,
            report::dollars(t.cost_usd),
            t.mean_latency_ms
        );
    }
    for path in report::write_all(&report, &args.out)? {
        println!("wrote {}", path.display());
    }
    if let (Some(min), false) = (args.min_pass, passed) {
        println!("pass rate under --min-pass {}", report::percent(min));
    }
    Ok(passed)
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    #[derive(Parser)]
    struct Cli {
        #[command(subcommand)]
        command: EvalCommand,
    }

    fn parse(args: &[&str]) -> Result<RunArgs, clap::Error> {
        let argv = std::iter::once("eval").chain(args.iter().copied());
        Cli::try_parse_from(argv).map(|c| match c.command {
            EvalCommand::Run(a) => a,
            EvalCommand::Export(_) => panic!("parsed as export"),
        })
    }

    #[test]
    fn flags_are_checked_before_anything_runs() {
        let a = parse(&[
            "run",
            "c.jsonl",
            "--model",
            "m",
            "--compare",
            "m2",
            "--min-pass",
            "0.8",
        ])
        .unwrap();
        assert_eq!(a.min_pass, Some(0.8));
        assert_eq!(a.concurrency, 4);
        let labels: Vec<String> = columns(&a).unwrap().into_iter().map(|c| c.label).collect();
        assert_eq!(labels, ["m", "m2"]);
        assert!(parse(&["run", "c.jsonl", "--min-pass", "1.5"]).is_err());
        assert!(parse(&["run", "c.jsonl", "--min-pass", "x"]).is_err());
        assert!(parse(&["run", "c.jsonl", "--concurrency", "0"]).is_err());
        let same = parse(&["run", "c", "--model", "m", "--compare", "m"]).unwrap();
        assert!(columns(&same).is_err());
        let alone = parse(&["run", "c"]).unwrap();
        assert_eq!(columns(&alone).unwrap()[0].label, "agent's model");
    }

    #[tokio::test]
    async fn a_replay_case_without_its_task_is_a_usage_error() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("c.jsonl");
        std::fs::write(&path, "{\"id\": \"a\", \"input\": \"x\", \"task_id\": \"t\"}\n{\"id\": \"b\", \"input\": \"y\"}\n").unwrap();
        let p = path.to_string_lossy().into_owned();
        // Nothing listens there: the case is refused before any request.
        let args = ["run", &p, "--replay", "--url", "http://127.0.0.1:9"];
        let e = run(parse(&args).unwrap()).await.unwrap_err();
        assert_eq!(e.to_string(), "--replay: case b has no task_id");
        let code = main(EvalCommand::Run(parse(&args).unwrap())).await;
        assert_eq!(code, ExitCode::from(2));
    }

    #[tokio::test]
    async fn a_replay_needs_the_deployment_holding_the_tasks() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("c.jsonl");
        std::fs::write(&path, "{\"input\": \"x\", \"task_id\": \"t\"}\n").unwrap();
        let mut args = parse(&["run", &path.to_string_lossy(), "--replay"]).unwrap();
        args.url = None;
        let e = run(args).await.unwrap_err();
        assert!(e.to_string().contains("--url"), "{e}");
    }
}
