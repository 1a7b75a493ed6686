//! `baton eval …`: evaluation sets (docs/evals.md).

pub(crate) mod export;

use clap::Subcommand;

#[derive(Subcommand)]
pub(crate) enum EvalCommand {
    /// Turn rated answers (the Slack feedback buttons) and chosen tasks
    /// into eval cases, one JSON line each on stdout.
    Export(export::ExportArgs),
}

pub(crate) async fn run(command: EvalCommand) -> anyhow::Result<()> {
    match command {
        EvalCommand::Export(args) => export::run(args).await,
    }
}
