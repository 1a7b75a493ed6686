//! `baton bootstrap`: the AWS resources `infra/` defines, created
//! idempotently against the configured endpoint, for `baton dev --backend aws`.

use anyhow::Context;
use clap::Args;

#[derive(Args)]
pub(crate) struct BootstrapArgs {
    /// Prefix of every resource name.
    #[arg(long, default_value = "baton-dev")]
    prefix: String,
    /// Receives before a wake message goes to the dead-letter queue.
    #[arg(long, default_value_t = 5)]
    max_receive_count: u32,
    /// Visibility timeout of the work queue, in seconds.
    #[arg(long, default_value_t = 30)]
    visibility_timeout: u32,
}

pub(crate) async fn run(args: BootstrapArgs) -> anyhow::Result<()> {
    let cfg = baton_aws::load_sdk_config().await;
    let names = baton_aws::ResourceNames::for_stack(&args.prefix);
    let env = baton_aws::bootstrap(
        &cfg,
        &names,
        args.max_receive_count,
        args.visibility_timeout,
    )
    .await
    .context("bootstrap failed")?;
    eprintln!("# resources ready; use them with:");
    println!("{}", env.exports());
    Ok(())
}
