//! The local dev server of `baton dev` (the `dev` feature): every AWS part
//! played on one machine, driving the same ingest and worker handlers as
//! the Lambda functions. [`AppBuilder::run_dev`] runs it with the
//! builder's tools, so a binary with tools of its own has its own
//! `baton dev`:
//!
//! ```no_run
//! # async fn run(my_tool: impl baton_runtime::tool::Tool + 'static) -> anyhow::Result<()> {
//! use baton_runtime::{dev::DevArgs, App};
//! App::builder().tool(my_tool).run_dev(DevArgs::from_command_line()).await
//! # }
//! ```

use crate::{App, AppBuilder, Backend};
use anyhow::Context;
use baton_agent::{Disposition, SegmentBudget, Worker, WorkerSettings};
use baton_core::WorkQueue;
use baton_embedded::QueueConfig;
use clap::{Args, Parser, ValueEnum};
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::Semaphore;

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum BackendKind {
    /// Durable embedded store under --data-dir (no cloud account needed).
    Embedded,
    /// The AWS adapters (`AWS_ENDPOINT_URL` for moto/LocalStack, or real AWS).
    Aws,
}

/// The dev server's flags (each also read from its environment variable),
/// as `baton dev` takes them.
#[derive(Args, Clone, Debug)]
pub struct DevArgs {
    /// Address of the HTTP routes.
    #[arg(long, default_value = "127.0.0.1:3000", env = "BATON_LISTEN")]
    pub listen: SocketAddr,
    /// Where the embedded backend keeps its data.
    #[arg(long, default_value = ".baton", env = "BATON_DATA_DIR")]
    pub data_dir: PathBuf,
    #[arg(long, value_enum, default_value = "embedded")]
    pub backend: BackendKind,
    /// Segments run at the same time.
    #[arg(long, default_value_t = 8, env = "BATON_WORKERS")]
    pub workers: usize,
    /// Queue visibility timeout; leases last two thirds of it.
    #[arg(long, default_value_t = 30_000, env = "BATON_VISIBILITY_TIMEOUT_MS")]
    pub visibility_timeout_ms: u64,
    /// Receives before a message is dead-lettered (SQS maxReceiveCount).
    #[arg(long, default_value_t = 5, env = "BATON_MAX_RECEIVE_COUNT")]
    pub max_receive_count: u32,
}

/// A command line that is [`DevArgs`] alone.
#[derive(Parser)]
#[command(
    about = "Run Baton on this machine: HTTP routes, workers, reaper and a durable embedded store (or the AWS adapters with --backend aws)",
    disable_version_flag = true
)]
struct DevCommandLine {
    #[command(flatten)]
    args: DevArgs,
}

impl DevArgs {
    /// The flags of this process's command line (`--help` prints them; a
    /// bad flag exits with clap's message), for a binary that is a dev
    /// server and nothing else.
    pub fn from_command_line() -> Self {
        DevCommandLine::parse().args
    }
}

/// The segment budget locally, unless `BATON_SEGMENT_BUDGET_MS` says otherwise.
const LOCAL_SEGMENT_BUDGET: Duration = Duration::from_secs(600);

impl AppBuilder {
    /// Runs the dev server with the builder's tools until Ctrl-C: settings
    /// from the environment, the embedded backend under `--data-dir` (or
    /// the AWS adapters), the HTTP routes on `--listen`, a pool of workers,
    /// the reaper, the dead-letter handler and the scheduler. Prints
    /// `baton dev listening on http://ADDR (…)` once it listens, and where
    /// the API token is kept when `BATON_API_TOKEN` is not set.
    pub async fn run_dev(self, args: DevArgs) -> anyhow::Result<()> {
        crate::init_tracing(false);
        let mut settings = self.settings_from_env().context("invalid configuration")?;
        // Before anything is opened or written: a start that cannot answer
        // leaves nothing behind.
        settings
            .require_llm_key()
            .context("invalid configuration")?;
        let visibility = Duration::from_millis(args.visibility_timeout_ms.max(300));
        let backend = match args.backend {
            BackendKind::Embedded => {
                let queue = QueueConfig {
                    visibility_timeout: visibility,
                    max_receive_count: args.max_receive_count,
                };
                Backend::embedded(&args.data_dir, queue).context("opening the embedded backend")?
            }
            BackendKind::Aws => Backend::aws(&settings.aws).await?,
        }
        .with_active_shards(settings.active_index_shards)
        .with_retention(settings.retention);
        if settings.api_token.is_none() {
            settings.api_token = Some(dev_token(&args.data_dir)?);
        }
        let timing = WorkerSettings {
            lease_ttl: visibility * 2 / 3,
            heartbeat_every: visibility / 4,
            visibility,
            retry_delay: Duration::from_secs(1).min(visibility),
            ..WorkerSettings::default()
        };
        let budget = settings.segment_budget.unwrap_or(LOCAL_SEGMENT_BUDGET);
        let model = settings.model_summary();
        // Bound first: callback URLs name the address (unless
        // `BATON_PUBLIC_URL` says otherwise).
        let listener = tokio::net::TcpListener::bind(args.listen)
            .await
            .with_context(|| format!("cannot listen on {}", args.listen))?;
        let addr = listener.local_addr()?;
        let timing = WorkerSettings {
            public_url: format!("http://{addr}"),
            ..timing
        };
        let app = self
            .build(settings, backend, timing)
            .context("invalid configuration")?;

        tracing::info!(%addr, backend = ?args.backend, data_dir = %args.data_dir.display(), "baton dev is up");
        // Before the "listening" line, which ends what the start prints.
        println!("model:   {model}");
        println!("data:    {}", args.data_dir.display());
        println!("console: http://{addr}/console");
        println!(
            "baton dev listening on http://{addr} ({:?} backend)",
            args.backend
        );

        tokio::spawn(worker_pool(
            app.worker.clone(),
            app.backend.queue.clone(),
            args.workers.max(1),
            budget,
        ));
        tokio::spawn(background_loops(app.clone(), visibility));
        if let Some(scheduler) = app.backend.embedded_scheduler.clone() {
            // EventBridge Scheduler's job: send each due firing to the queue.
            tokio::spawn(async move { scheduler.run().await });
        }
        let router = axum::Router::new().fallback(move |req: axum::extract::Request| {
            let ingest = app.ingest.clone();
            async move { serve_one(ingest, req).await }
        });
        axum::serve(listener, router)
            .with_graceful_shutdown(async {
                let _ = tokio::signal::ctrl_c().await;
            })
            .await?;
        Ok(())
    }
}

/// Hands one HTTP request to the ingest handler, the way API Gateway hands
/// it to the Lambda: the body in full, then the handler; a streamed answer
/// goes out as it is made.
async fn serve_one(
    ingest: baton_ingest::Ingest,
    req: axum::extract::Request,
) -> axum::response::Response {
    let (parts, body) = req.into_parts();
    // The largest any route takes; the ingest checks each route's own.
    let bytes = match axum::body::to_bytes(body, baton_ingest::MAX_TASK_BODY_BYTES + 1).await {
        Ok(b) => b,
        Err(_) => {
            let r = baton_ingest::ApiError::new(
                http::StatusCode::PAYLOAD_TOO_LARGE,
                format!(
                    "request body is larger than {} bytes",
                    baton_ingest::MAX_TASK_BODY_BYTES
                ),
            );
            return r.into_response().map(axum::body::Body::from);
        }
    };
    let request = http::Request::from_parts(parts, bytes);
    let response = ingest
        .serve(request, baton_ingest::Delivery::streaming(DEV_STREAM_LIMIT))
        .await;
    response.map(|body| match body {
        baton_ingest::Body::Full(b) => axum::body::Body::from(b),
        baton_ingest::Body::Stream(s) => {
            use futures::StreamExt;
            axum::body::Body::from_stream(s.map(Ok::<_, std::convert::Infallible>))
        }
    })
}

/// How long one streamed answer stays open on the dev server: no
/// function timeout to stay under, but a client that never hangs up
/// should not hold its stream for ever (it reconnects, and resumes).
const DEV_STREAM_LIMIT: Duration = Duration::from_secs(60 * 60);

/// The event source mapping, played locally: receive wakes, run a segment
/// for each (at most `slots` at once), and act on the disposition.
async fn worker_pool(
    worker: Arc<Worker>,
    queue: Arc<dyn WorkQueue>,
    slots: usize,
    budget: Duration,
) {
    let permits = Arc::new(Semaphore::new(slots));
    loop {
        let free = permits.available_permits().max(1);
        let deliveries = match queue.receive(free.min(10), Duration::from_secs(1)).await {
            Ok(d) => d,
            Err(e) => {
                tracing::warn!(error = %e, "receive failed");
                tokio::time::sleep(Duration::from_secs(1)).await;
                continue;
            }
        };
        for delivery in deliveries {
            let Ok(permit) = permits.clone().acquire_owned().await else {
                return;
            };
            let worker = worker.clone();
            let queue = queue.clone();
            tokio::spawn(async move {
                let disposition = worker.handle(&delivery, SegmentBudget::new(budget)).await;
                let result = match &disposition {
                    Disposition::Ack => queue.delete(&delivery.receipt).await,
                    Disposition::Retry { after, .. } => {
                        queue.extend(&delivery.receipt, *after).await
                    }
                    // Left to be redelivered until the queue dead-letters it.
                    Disposition::Poison { .. } => {
                        queue.extend(&delivery.receipt, Duration::ZERO).await
                    }
                };
                if let Err(e) = result {
                    tracing::warn!(error = %e, ?disposition, "could not settle the message");
                }
                drop(permit);
            });
        }
    }
}

/// How often the embedded backend is pruned of what retention lets go.
const PRUNE_EVERY: Duration = Duration::from_secs(3600);

/// The dead-letter handler, the reaper's `reap` message on the work queue
/// (EventBridge Scheduler's job on AWS), and the embedded backend's
/// retention prune (DynamoDB TTL's and S3 lifecycle's), on timers.
async fn background_loops(app: App, visibility: Duration) {
    let mut tick = tokio::time::interval(Duration::from_secs(1));
    let reaper_every = (visibility * 2).max(Duration::from_secs(2));
    let mut last_reap = tokio::time::Instant::now();
    let mut last_prune: Option<tokio::time::Instant> = None;
    loop {
        tick.tick().await;
        if let Some(embedded) = &app.backend.embedded {
            if last_prune.is_none_or(|at| at.elapsed() >= PRUNE_EVERY) {
                last_prune = Some(tokio::time::Instant::now());
                match embedded.prune(app.backend.store.retention()).await {
                    Ok(p) if p == baton_embedded::Pruned::default() => {}
                    Ok(p) => {
                        tracing::info!(items = p.items, blobs = p.blobs, "pruned expired tasks")
                    }
                    Err(e) => tracing::warn!(error = %e, "pruning expired tasks failed"),
                }
            }
        }
        if let Some(dl) = &app.backend.dead_letters {
            match dl.drain(&app.worker).await {
                Ok(0) => {}
                Ok(n) => tracing::warn!(count = n, "dead-lettered tasks marked failed"),
                Err(e) => tracing::warn!(error = %e, "dead-letter check failed"),
            }
        }
        if last_reap.elapsed() >= reaper_every {
            last_reap = tokio::time::Instant::now();
            // The same message the reaper schedule sends on AWS, handled by
            // a worker like any other.
            let reap = baton_core::WorkMessage::Reap.to_body();
            if let Err(e) = app.backend.queue.send(&reap, Duration::ZERO).await {
                tracing::warn!(error = %e, "could not queue the reaper's sweep");
            }
        }
    }
}

/// The API token of the dev server when `BATON_API_TOKEN` is not set: made
/// once, kept in the data dir (readable by the owner only) so the CLI and
/// curl can use it.
fn dev_token(data_dir: &Path) -> anyhow::Result<baton_ingest::ApiToken> {
    let path = data_dir.join("api-token");
    let token = match std::fs::read_to_string(&path) {
        Ok(t) if !t.trim().is_empty() => t.trim().to_owned(),
        _ => {
            std::fs::create_dir_all(data_dir)?;
            let t = format!("dev-{}", uuid_like());
            write_private(&path, &t)?;
            t
        }
    };
    println!(
        "API token in {} (export BATON_API_TOKEN to choose your own)",
        path.display()
    );
    baton_ingest::ApiToken::parse(&token).map_err(anyhow::Error::msg)
}

/// 128 random bits from the OS (a v4 UUID), as hex.
fn uuid_like() -> String {
    uuid::Uuid::new_v4().simple().to_string()
}

fn write_private(path: &Path, contents: &str) -> std::io::Result<()> {
    use std::io::Write;
    let mut opts = std::fs::OpenOptions::new();
    opts.write(true).create(true).truncate(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt;
        opts.mode(0o600);
    }
    opts.open(path)?.write_all(contents.as_bytes())
}
