//! `baton bench`: orchestration overhead per step and bytes written per
//! task, on the embedded backend with a zero-latency model; with
//! `--count-requests`, the AWS requests and capacity units one task costs
//! ([`requests`]); with `--load N`, N tasks at once ([`load`]); with
//! `--judgment`, the share of a task's tokens its routing, planning,
//! supervision and gate calls take ([`judgment`]). Results and how to read them: docs/performance.md and
//! docs/deploy.md.

pub(crate) mod conversation;
pub(crate) mod judgment;
pub(crate) mod load;
pub(crate) mod model;
pub(crate) mod requests;
pub(crate) mod wake;

use anyhow::Context;
use baton_agent::{SegmentBudget, Worker, WorkerSettings};
use baton_core::NoReplies;
use baton_core::{Delivery, EntryKind, Origin, Task, TaskId, TaskStatus, TaskStore, Wake};
use baton_embedded::{EmbeddedBackend, QueueConfig};
use baton_settings::{AgentConfig, Agents};
use clap::Args;
use std::sync::Arc;
use std::time::{Duration, Instant};

#[derive(Args)]
pub(crate) struct BenchArgs {
    /// Steps per task in the overhead run.
    #[arg(long, default_value_t = 200)]
    steps: u32,
    /// Tasks in the overhead run.
    #[arg(long, default_value_t = 5)]
    tasks: u32,
    /// Size of each tool result in the bytes run.
    #[arg(long, default_value_t = 2048)]
    result_bytes: usize,
    /// Instead: count the AWS requests (DynamoDB, SQS, S3) and DynamoDB
    /// capacity units of scripted tasks of 1, 5 and 20 steps, run through
    /// the real ingest handler and worker (docs/deploy.md, cost per 1,000
    /// tasks).
    #[arg(long)]
    count_requests: bool,
    /// Instead: submit this many tasks at once through ingest and run
    /// them with the worker (comma-separated for several runs, e.g.
    /// `100,1000`): throughput, submit-to-answer latency, errors, where
    /// the time goes and the hottest partition key.
    #[arg(long, value_delimiter = ',')]
    load: Vec<usize>,
    /// Model calls per task in the load run.
    #[arg(long, default_value_t = 3)]
    load_steps: u32,
    /// Concurrent work-queue consumers in the load run.
    #[arg(long, default_value_t = 8)]
    consumers: usize,
    /// Instead: conversations this many messages long (comma-separated,
    /// e.g. `5,50,500`) through the real ingest and worker: what accepting
    /// each message costs and the input tokens of its first model call.
    #[arg(long, value_delimiter = ',')]
    conversation: Vec<usize>,
    /// Instead: the time from a wake message to the first model request,
    /// for tasks whose transcripts hold this many entries (comma-separated,
    /// e.g. `20,200`), on `--backend`.
    #[arg(long, value_delimiter = ',')]
    wake_entries: Vec<usize>,
    /// Instead: the share of a 10-step task's tokens that its routing,
    /// planning, supervision and quality-gate calls take (issue #22), the
    /// default agent with a fast tier, tokens in proportion to what each
    /// call sends and writes.
    #[arg(long)]
    judgment: bool,
    /// The load run's backend: `embedded` (a temporary directory) or `aws`
    /// (the resources named by BATON_TABLE, BATON_QUEUE_URL and
    /// BATON_TRACE_BUCKET, e.g. from `baton bootstrap` against moto).
    #[arg(long, default_value = "embedded")]
    backend: String,
}

struct Rig {
    worker: Worker,
    store: TaskStore,
    _dir: tempfile_dir::TempDir,
}

mod tempfile_dir {
    /// A directory removed on drop (the bench must not leave data behind).
    pub(super) struct TempDir(pub std::path::PathBuf);
    impl Drop for TempDir {
        fn drop(&mut self) {
            let _ = std::fs::remove_dir_all(&self.0);
        }
    }
}

fn rig(steps: u32, result_bytes: usize) -> anyhow::Result<Rig> {
    let dir = std::env::temp_dir().join(format!("baton-bench-{}", uuid::Uuid::new_v4().simple()));
    let backend = EmbeddedBackend::open(&dir, QueueConfig::default())
        .context("opening the embedded backend")?;
    let store = TaskStore::new(backend.table.clone(), backend.blobs.clone());
    let mut agent = AgentConfig::new("default", "bench");
    agent.limits.max_steps = steps + 1;
    agent.max_tool_result_chars = result_bytes + 1;
    let worker = Worker::new(
        store.clone(),
        backend.queue.clone(),
        Arc::new(model::InstantModel {
            name: "bench",
            steps,
            tools: vec!["payload"],
            answer: "done",
            usage: baton_core::Usage {
                input_tokens: 10,
                output_tokens: 10,
            },
        }),
        vec![Arc::new(model::SizedTool {
            name: "payload",
            bytes: result_bytes,
            fill: 'x',
        })],
        Agents::new(agent, Vec::new()),
        Arc::new(NoReplies),
        WorkerSettings::default(),
    );
    Ok(Rig {
        worker,
        store,
        _dir: tempfile_dir::TempDir(dir),
    })
}

/// A new HTTP task of agent `default` allowed `max_steps` steps.
pub(crate) fn bench_task(max_steps: u32) -> Task {
    let limits = baton_core::Limits {
        max_steps,
        ..Default::default()
    };
    Task::new(
        TaskId::generate(),
        "default",
        Origin::Http,
        None,
        limits,
        baton_core::now_ms(),
    )
}

/// Runs one task to the end in one segment; returns its id.
async fn run_task(rig: &Rig, steps: u32) -> anyhow::Result<TaskId> {
    let task = bench_task(steps + 1);
    rig.store
        .create(
            &task,
            vec![EntryKind::UserMessage {
                text: "benchmark".into(),
                from: None,
            }],
            None,
        )
        .await?;
    let delivery = Delivery {
        message_id: "bench".into(),
        receipt: "bench".into(),
        body: Wake::new(task.id.clone(), "bench").to_body(),
        receive_count: 1,
    };
    rig.worker
        .handle(&delivery, SegmentBudget::new(Duration::from_secs(3600)))
        .await;
    let done = rig.store.get(&task.id).await?.context("task vanished")?;
    anyhow::ensure!(
        done.status() == TaskStatus::Succeeded,
        "bench task ended {:?}: {:?}",
        done.status(),
        done.answer.error
    );
    anyhow::ensure!(
        done.budget.steps == steps,
        "expected {steps} steps, got {}",
        done.budget.steps
    );
    Ok(task.id)
}

/// `POST /tasks` through `ingest` as a client that may retry sends it (a
/// thread and an idempotency key); the id of the task it accepted.
pub(crate) async fn post_task(
    ingest: &baton_ingest::Ingest,
    token: &str,
    input: &str,
    thread: &str,
) -> anyhow::Result<TaskId> {
    let body = serde_json::json!({ "input": input, "thread": thread }).to_string();
    let request = http::Request::builder()
        .method("POST")
        .uri("/tasks")
        .header("authorization", format!("Bearer {token}"))
        .header("content-type", "application/json")
        .header("idempotency-key", uuid::Uuid::new_v4().to_string())
        .body(bytes::Bytes::from(body))?;
    let response = ingest.handle(request).await;
    anyhow::ensure!(
        response.status() == http::StatusCode::ACCEPTED,
        "POST /tasks answered {}: {}",
        response.status(),
        String::from_utf8_lossy(response.body())
    );
    let accepted: serde_json::Value = serde_json::from_slice(response.body())?;
    accepted["task_id"]
        .as_str()
        .and_then(|s| TaskId::parse(s).ok())
        .ok_or_else(|| anyhow::anyhow!("no task_id in {accepted}"))
}

/// The ports of one load run on `backend`.
async fn load_stack(backend: &str) -> anyhow::Result<load::Stack> {
    match backend {
        "embedded" => {
            let dir =
                std::env::temp_dir().join(format!("baton-load-{}", uuid::Uuid::new_v4().simple()));
            let b = EmbeddedBackend::open(&dir, QueueConfig::default())
                .context("opening the embedded backend")?;
            Ok(load::Stack {
                table: b.table.clone(),
                blobs: b.blobs.clone(),
                queue: b.queue.clone(),
                _keep: Box::new((tempfile_dir::TempDir(dir), b)),
            })
        }
        "aws" => {
            let settings = baton_runtime::Settings::from_env().context("invalid configuration")?;
            let b = baton_runtime::Backend::aws(&settings.aws).await?;
            Ok(load::Stack {
                table: b.store.table().clone(),
                blobs: b.store.blobs().clone(),
                queue: b.queue.clone(),
                _keep: Box::new(()),
            })
        }
        other => anyhow::bail!("unknown backend `{other}`: expected embedded or aws"),
    }
}

async fn run_wake(args: &BenchArgs) -> anyhow::Result<()> {
    println!(
        "# baton bench --wake-entries (worker, {} backend): wake → first model request\n",
        args.backend
    );
    println!("| backend | entries | runs | median ms | p90 ms | max ms |");
    println!("| --- | ---: | ---: | ---: | ---: | ---: |");
    let stack = load_stack(&args.backend).await?;
    for &entries in &args.wake_entries {
        let runs = 20;
        let t = wake::run(&stack, entries, runs).await?;
        let ms = |d: Duration| d.as_secs_f64() * 1000.0;
        println!(
            "| {} | {entries} | {runs} | {:.2} | {:.2} | {:.2} |",
            args.backend,
            ms(t[t.len() / 2]),
            ms(t[t.len() * 9 / 10]),
            ms(t[t.len() - 1])
        );
    }
    Ok(())
}

async fn run_load(args: &BenchArgs) -> anyhow::Result<()> {
    // Warnings and errors (a refused request, a retried segment) to stderr.
    baton_runtime::init_tracing(false);
    println!(
        "# baton bench --load (ingest + worker, instant model, {} backend)\n",
        args.backend
    );
    let mut reports = Vec::new();
    for &tasks in &args.load {
        let shape = load::Load {
            tasks,
            steps: args.load_steps,
            consumers: args.consumers,
            batch: 10,
            active_shards: baton_core::store::DEFAULT_ACTIVE_SHARDS,
        };
        reports.push(load::run(load_stack(&args.backend).await?, shape).await?);
    }
    println!("| backend | tasks | steps | tasks/s | steps/s | p50 ms | p99 ms | errors | retries | writes | hottest key, share |");
    println!("| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | --- |");
    for r in &reports {
        load::print(&args.backend, r);
    }
    println!("\nWhere the time goes (busy ms per task, summed over concurrent calls):\n");
    println!("| backend | tasks | wall s | segments/task | ingest | worker | of which table | of which queue |");
    println!("| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |");
    for r in &reports {
        load::print_time(&args.backend, r);
    }
    let failed: usize = reports.iter().map(|r| r.errors).sum();
    anyhow::ensure!(failed == 0, "{failed} tasks failed under load");
    Ok(())
}

pub(crate) async fn run(args: BenchArgs) -> anyhow::Result<()> {
    if !args.conversation.is_empty() {
        return conversation::run(&args.conversation).await;
    }
    if !args.load.is_empty() {
        return run_load(&args).await;
    }
    if !args.wake_entries.is_empty() {
        return run_wake(&args).await;
    }
    if args.judgment {
        return judgment::run().await;
    }
    if args.count_requests {
        println!(
            "# baton bench --count-requests (ingest + worker over counted ports, instant model)\n"
        );
        // Warm-up: first-use costs (SQLite, allocations) out of the timings.
        requests::run_task(5, args.result_bytes).await?;
        let mut runs = Vec::new();
        for steps in [1u32, 5, 20] {
            // The counts are the same every time; the times vary, so the
            // run with the median worker time is shown.
            let mut tries = Vec::new();
            for _ in 0..5 {
                tries.push(requests::run_task(steps, args.result_bytes).await?);
            }
            tries.sort_by_key(|r| r.worker_time);
            runs.push(tries.swap_remove(2));
        }
        requests::print(&runs);
        return Ok(());
    }
    println!("# baton bench (embedded backend, zero-latency model)\n");
    // Overhead per step.
    let rig_o = rig(args.steps, 64)?;
    let warm = rig(5, 64)?;
    run_task(&warm, 5).await?; // warm-up: first-use costs out of the measurement
    let started = Instant::now();
    for _ in 0..args.tasks {
        run_task(&rig_o, args.steps).await?;
    }
    let elapsed = started.elapsed();
    let per_step = elapsed / (args.tasks * args.steps);
    println!(
        "orchestration overhead: {:.3} ms per step ({} tasks x {} steps in {:.2} s)",
        per_step.as_secs_f64() * 1000.0,
        args.tasks,
        args.steps,
        elapsed.as_secs_f64()
    );

    // Bytes written vs. final transcript size.
    println!(
        "\n| steps | transcript bytes | bytes written | ratio |\n| ---: | ---: | ---: | ---: |"
    );
    for steps in [10u32, 50, 200] {
        let rig_b = rig(steps, args.result_bytes)?;
        let before = rig_b.store.bytes_written();
        let id = run_task(&rig_b, steps).await?;
        let written = rig_b.store.bytes_written() - before;
        let transcript: usize = rig_b
            .store
            .transcript(&id)
            .await?
            .iter()
            .map(|e| serde_json::to_string(e).map(|s| s.len()).unwrap_or(0))
            .sum();
        println!(
            "| {steps} | {transcript} | {written} | {:.2} |",
            written as f64 / transcript as f64
        );
    }
    Ok(())
}
