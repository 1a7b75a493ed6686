//! Configuration and wiring, shared by the two Lambda functions and
//! `baton dev`, so that all three run the same handlers built the same way.
//!
//! * [`Config`] reads and validates the environment once, at startup;
//!   secrets stay wrapped.
//! * [`Backend`] is the store, queue and blob adapters of one backend
//!   (embedded or AWS).
//! * [`App`] is the ingest handler, the worker and the reaper built over a
//!   backend.

mod app;
mod aws_credentials;
mod backend;
mod config;
pub mod scheduling;
pub mod secrets;

pub use app::App;
pub use backend::{Backend, BackendError, DeadLetters};
pub use config::{Config, ConfigError, SlackConfig};

/// Installs the tracing subscriber: JSON lines in Lambda (CloudWatch), human
/// lines locally; level from `RUST_LOG` (default `info`).
pub fn init_tracing(json: bool) {
    use tracing_subscriber::EnvFilter;
    let filter = EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new("info"));
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_target(false);
    let _ = if json {
        builder.json().without_time().try_init()
    } else {
        builder.try_init()
    };
}

/// The app of a Lambda function: configuration from the environment, the
/// AWS backend, and worker timings fit for SQS with a visibility timeout
/// longer than the function's. Called once per process, at startup.
pub async fn lambda_app() -> Result<App, Box<dyn std::error::Error + Send + Sync>> {
    let (config, backend) = lambda_config_and_backend().await?;
    let settings = baton_agent::WorkerSettings {
        lease_ttl: std::time::Duration::from_secs(60),
        heartbeat_every: std::time::Duration::from_secs(20),
        visibility: std::time::Duration::from_secs(90),
        retry_delay: std::time::Duration::from_secs(10),
        ..baton_agent::WorkerSettings::default()
    };
    Ok(App::new(config, backend, settings)?)
}

/// The ingest handler of the ingest Lambda: the same configuration and AWS
/// backend as [`lambda_app`], without the worker side ([`App::ingest_only`]).
/// Called once per process, at startup.
pub async fn lambda_ingest(
) -> Result<baton_ingest::Ingest, Box<dyn std::error::Error + Send + Sync>> {
    let (config, backend) = lambda_config_and_backend().await?;
    Ok(App::ingest_only(&config, &backend))
}

/// Configuration (environment plus the optional `BATON_SECRETS_PATH`
/// secrets) and the AWS backend, shared by both Lambda functions.
async fn lambda_config_and_backend(
) -> Result<(Config, Backend), Box<dyn std::error::Error + Send + Sync>> {
    let secrets = match std::env::var("BATON_SECRETS_PATH")
        .ok()
        .filter(|p| !p.trim().is_empty())
    {
        Some(path) => secrets::load(&baton_aws::load_sdk_config().await, &path).await?,
        None => Default::default(),
    };
    let config = Config::from_env_and_secrets(&secrets)?;
    let backend = Backend::aws_from_env().await?;
    Ok((config, backend))
}
