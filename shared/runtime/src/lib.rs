//! Configuration and wiring, shared by the two Lambda functions and
//! `baton dev`, so that all three run the same handlers built the same way.
//!
//! * [`Settings`] reads and validates the environment (over the SSM
//!   secrets) once, at startup; secrets stay wrapped.
//! * [`Backend`] is the store, queue and blob adapters of one backend
//!   (embedded or AWS).
//! * [`AppBuilder`] adds tools of your own to the built-in ones and
//!   builds the ingest handler alone ([`AppBuilder::ingest_only`]).
//! * [`App`] is the ingest handler, the worker and the reaper built over a
//!   backend ([`AppBuilder::build`], [`App::builder`]).
//! * With the `lambda` feature, the two Lambda functions' event loops
//!   ([`AppBuilder::run_ingest_lambda`], [`AppBuilder::run_worker_lambda`]);
//!   with the `dev` feature, the local dev server of `baton dev`
//!   ([`AppBuilder::run_dev`]). A binary of your own with your own tools
//!   is a few lines over them (docs/tools.md, *Your own Rust tools*).
//!
//! Features, so that each binary links only what it runs:
//!
//! * `worker`: the agent loop and what it calls (`baton-agent`, the LLM
//!   providers, the tools, MCP, JSON Schema): [`App`],
//!   [`AppBuilder::build`], [`AppBuilder::run_worker_lambda`], and the
//!   settings only the loop reads ([`Settings::agent_loop`]). Implies
//!   `embedded`.
//! * `embedded`: the embedded backend (SQLite) and its scheduler
//!   ([`Backend::embedded`]).
//! * `lambda`: the Lambda event loops.
//! * `dev` (default): `baton dev`'s server; implies `worker`.
//!
//! The ingest Lambda is built with `lambda` alone: settings, the AWS
//! backend and the ingest handler, nothing of the worker side
//! (tests/e2e/layers.rs checks its resolved dependencies).

#[cfg(feature = "worker")]
mod app;
#[cfg(feature = "worker")]
mod aws_credentials;
mod aws_resources;
mod backend;
mod builder;
mod connect;
#[cfg(feature = "dev")]
pub mod dev;
#[cfg(feature = "lambda")]
mod lambda;
#[cfg(all(feature = "lambda", feature = "worker"))]
mod lambda_worker;
mod llm_settings;
#[cfg(feature = "worker")]
mod loop_settings;
mod metrics;
pub mod scheduling;
pub mod secrets;
mod settings;
mod source;
mod telemetry;

#[cfg(feature = "worker")]
pub use app::App;
pub use aws_resources::AwsResources;
pub use backend::{Backend, BackendError, DeadLetters};
pub use builder::AppBuilder;
pub use llm_settings::LlmSettings;
#[cfg(feature = "worker")]
pub use loop_settings::LoopSettings;
pub use metrics::{MetricsMode, MetricsSettings};
pub use settings::{LambdaSettings, Settings, SlackConfig, DEFAULT_SEGMENT_MARGIN};
pub use source::SettingsError;

/// What a tool of your own implements, re-exported so that a crate adding
/// one needs no other Baton crate: [`Tool`](tool::Tool), its
/// [`ToolSpec`](tool::ToolSpec), [`ToolContext`](tool::ToolContext) and
/// [`ToolOutput`](tool::ToolOutput) (and the [`TaskId`](tool::TaskId) of a
/// context), and the [`async_trait`](tool::async_trait) attribute its
/// `impl` takes.
pub mod tool {
    pub use async_trait::async_trait;
    pub use baton_core::{TaskId, Tool, ToolContext, ToolOutput, ToolSpec};
}

/// The error of start-up and of the Lambda entry points.
pub type BoxError = Box<dyn std::error::Error + Send + Sync>;

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

/// Makes *ring* the process's rustls crypto provider, unless one is set
/// already. The reqwest clients (Slack's Web API, the OTLP exporter) take
/// the process's provider; in a build where reqwest has none of its own
/// (the ingest Lambda: no aws-lc, see the workspace's Cargo.toml) they
/// could not be built without it. [`AppBuilder::ingest_only`] calls it
/// before building any, so the ingest binary need not. *ring* is what
/// Baton's AWS client uses too (`baton_aws::https`). The worker side's
/// crates give reqwest its own provider (aws-lc), so a build with them
/// works without this.
pub fn install_crypto_provider() {
    // Err means a provider is installed already: the binary chose one.
    let _ = rustls::crypto::ring::default_provider().install_default();
}

/// The app of a Lambda function with the built-in tools only:
/// [`AppBuilder::lambda_app`] of [`App::builder`].
#[cfg(feature = "worker")]
pub async fn lambda_app() -> Result<App, BoxError> {
    App::builder().lambda_app().await
}

/// The ingest handler of the ingest Lambda with the built-in tools only:
/// [`AppBuilder::lambda_ingest`] of [`AppBuilder::new`].
pub async fn lambda_ingest() -> Result<baton_ingest::Ingest, BoxError> {
    AppBuilder::new().lambda_ingest().await
}
