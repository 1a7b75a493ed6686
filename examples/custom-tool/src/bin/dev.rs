//! `baton dev` with `word_count`: the same flags and environment as
//! `baton dev` (`--help` lists them).

use baton_runtime::dev::DevArgs;

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    baton_example_custom_tool::app()
        .run_dev(DevArgs::from_command_line())
        .await
}
