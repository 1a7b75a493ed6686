//! `baton dev`: every AWS part played on one machine, driving the same
//! ingest and worker handlers as the Lambda functions. The server is
//! `baton_runtime`'s ([`baton_runtime::AppBuilder::run_dev`]), so a binary
//! with tools of its own runs the same one (docs/tools.md).

pub(crate) use baton_runtime::dev::DevArgs;

pub(crate) async fn run(args: DevArgs) -> anyhow::Result<()> {
    baton_runtime::App::builder().run_dev(args).await
}
