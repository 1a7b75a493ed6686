//! `baton`: the local stack (`baton dev`), AWS bootstrap, and a client of
//! the HTTP API.

mod bench;
mod bootstrap;
mod client;
mod dev;
mod eval;

use clap::{Parser, Subcommand};
use std::path::PathBuf;

#[derive(Parser)]
#[command(
    name = "baton",
    version,
    about = "Run AI agents on AWS Lambda — and locally"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Run the whole system on this machine: HTTP routes, workers, reaper
    /// and a durable embedded store (or the AWS adapters with --backend aws).
    Dev(dev::DevArgs),
    /// Create (idempotently) the table, queues, bucket, schedule group and
    /// connections KMS key against the configured AWS endpoint, and print
    /// the environment.
    Bootstrap(bootstrap::BootstrapArgs),
    /// Submit, list, inspect, follow and cancel tasks through the HTTP API.
    Task {
        #[command(flatten)]
        api: client::ApiArgs,
        #[command(subcommand)]
        command: client::TaskCommand,
    },
    /// Show a task's trace as a timeline.
    Trace {
        #[command(flatten)]
        api: client::ApiArgs,
        /// The task id.
        id: String,
    },
    /// Approve a tool call a task waits on.
    Approve {
        #[command(flatten)]
        api: client::ApiArgs,
        /// The task id.
        task_id: String,
        /// The approval id (`waiting_for.approval_id` of the task).
        approval_id: String,
    },
    /// Deny a tool call a task waits on.
    Deny {
        #[command(flatten)]
        api: client::ApiArgs,
        /// The task id.
        task_id: String,
        /// The approval id (`waiting_for.approval_id` of the task).
        approval_id: String,
    },
    /// List, create and delete schedules (crons, heartbeats, one-time runs).
    Schedule {
        #[command(flatten)]
        api: client::ApiArgs,
        #[command(subcommand)]
        command: client::ScheduleCommand,
    },
    /// List and revoke per-person OAuth connections (docs/connections.md).
    Connections {
        #[command(flatten)]
        api: client::ApiArgs,
        #[command(subcommand)]
        command: client::ConnectionCommand,
    },
    /// Measure orchestration overhead and bytes written per step
    /// (see docs/performance.md).
    Bench(bench::BenchArgs),
    /// Evaluation sets: run cases as tasks and score the answers, export
    /// cases from rated answers (docs/evals.md).
    Eval {
        #[command(subcommand)]
        command: eval::EvalCommand,
    },
}

#[tokio::main]
async fn main() -> std::process::ExitCode {
    let cli = Cli::parse();
    let result = match cli.command {
        Command::Dev(args) => dev::run(args).await,
        Command::Bootstrap(args) => bootstrap::run(args).await,
        Command::Task { api, command } => client::run_task(api, command).await,
        Command::Trace { api, id } => client::run_trace(api, &id).await,
        Command::Approve {
            api,
            task_id,
            approval_id,
        } => client::run_decision(api, &task_id, &approval_id, true).await,
        Command::Deny {
            api,
            task_id,
            approval_id,
        } => client::run_decision(api, &task_id, &approval_id, false).await,
        Command::Schedule { api, command } => client::run_schedule(api, command).await,
        Command::Connections { api, command } => client::run_connections(api, command).await,
        Command::Bench(args) => bench::run(args).await,
        // Its own exit codes: 1 is a verdict (under --min-pass), 2 an error.
        Command::Eval { command } => return eval::main(command).await,
    };
    match result {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {}", describe(&e));
            std::process::ExitCode::FAILURE
        }
    }
}

/// The error and its causes on one line, as `{:#}` prints them, except
/// that a cause whose text is already shown is not repeated: an error that
/// quotes its cause in its own message and also reports it as its source
/// would otherwise say everything twice.
fn describe(e: &anyhow::Error) -> String {
    let mut out = String::new();
    for cause in e.chain() {
        let text = cause.to_string();
        if out.contains(&text) {
            continue;
        }
        if !out.is_empty() {
            out.push_str(": ");
        }
        out.push_str(&text);
    }
    out
}

/// The default data directory of `baton dev`, also where the CLI finds the
/// dev API token.
pub(crate) fn default_data_dir() -> PathBuf {
    PathBuf::from(".baton")
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Quotes its cause and reports it as its source too.
    #[derive(Debug)]
    struct Quoting(std::io::Error);

    impl std::fmt::Display for Quoting {
        fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            write!(f, "file: {}", self.0)
        }
    }

    impl std::error::Error for Quoting {
        fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
            Some(&self.0)
        }
    }

    #[test]
    fn a_cause_already_quoted_is_said_once() {
        let inner = std::io::Error::other("line 3: bad value");
        let e = anyhow::Error::new(Quoting(inner)).context("invalid configuration");
        assert_eq!(
            describe(&e),
            "invalid configuration: file: line 3: bad value"
        );
        let plain = anyhow::anyhow!("refused").context("starting");
        assert_eq!(describe(&plain), "starting: refused");
    }
}
