//! Configuration and wiring, shared by the two Lambda functions and
//! `baton dev`, so that all three run the same handlers built the same way.
//!
//! * [`Settings`] reads and validates the environment (over the SSM
//!   secrets) once, at startup; secrets stay wrapped.
//! * [`Backend`] is the store, queue and blob adapters of one backend
//!   (embedded or AWS).
//! * [`App`] is the ingest handler, the worker and the reaper built over a
//!   backend.

mod app;
mod aws_credentials;
mod backend;
pub mod scheduling;
pub mod secrets;
mod settings;

pub use app::App;
pub use backend::{Backend, BackendError, DeadLetters};
pub use settings::{
    AwsResources, LambdaSettings, Settings, SettingsError, SlackConfig, DEFAULT_SEGMENT_MARGIN,
};

/// Installs the tracing subscriber: JSON lines in Lambda (CloudWatch), human
/// lines locally; level from `RUST_LOG` (default `info`).
pub fn init_tracing(json: bool) {
    use tracing_subscriber::EnvFilter;
    let filter = EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new("info"));
    // stderr: stdout is for what a command prints (`baton dev`'s address,
    // the CLI's JSON); Lambda sends both to CloudWatch.
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_target(false);
    let _ = if json {
        builder.json().without_time().try_init()
    } else {
        builder.try_init()
    };
}

/// The app of a Lambda function: settings from the environment (over the
/// `BATON_SECRETS_PATH` secrets), the AWS backend, and worker timings fit
/// for SQS with a visibility timeout longer than the function's. Called
/// once per process, at startup.
pub async fn lambda_app() -> Result<App, Box<dyn std::error::Error + Send + Sync>> {
    let settings = Settings::load_for_lambda().await?;
    let backend = Backend::aws(&settings.aws)
        .await?
        .with_active_shards(settings.active_index_shards);
    let timing = baton_agent::WorkerSettings {
        lease_ttl: std::time::Duration::from_secs(60),
        heartbeat_every: std::time::Duration::from_secs(20),
        visibility: std::time::Duration::from_secs(90),
        retry_delay: std::time::Duration::from_secs(10),
        ..baton_agent::WorkerSettings::default()
    };
    Ok(App::new(settings, backend, timing)?)
}

/// The ingest handler of the ingest Lambda: the same settings and AWS
/// backend as [`lambda_app`], without the worker side ([`App::ingest_only`]).
/// Called once per process, at startup.
pub async fn lambda_ingest(
) -> Result<baton_ingest::Ingest, Box<dyn std::error::Error + Send + Sync>> {
    let settings = Settings::load_for_lambda().await?;
    let backend = Backend::aws(&settings.aws)
        .await?
        .with_active_shards(settings.active_index_shards);
    Ok(App::ingest_only(&settings, &backend))
}
