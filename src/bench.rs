//! `baton bench`: orchestration overhead per step and bytes written per
//! task, on the embedded backend with a zero-latency model; with
//! `--count-requests`, the AWS requests and capacity units one task costs
//! ([`requests`]). Results and how to read them: docs/performance.md and
//! docs/deploy.md.

pub(crate) mod model;
pub(crate) mod requests;

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
    agent.max_identical_calls = u32::MAX; // the bench model repeats one call on purpose
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

/// Runs one task to the end in one segment; returns its id.
async fn run_task(rig: &Rig, steps: u32) -> anyhow::Result<TaskId> {
    let limits = baton_core::Limits {
        max_steps: steps + 1,
        ..Default::default()
    };
    let task = Task::new(
        TaskId::generate(),
        "default",
        Origin::Http,
        None,
        limits,
        baton_core::now_ms(),
    );
    rig.store
        .create(
            &task,
            vec![EntryKind::UserMessage {
                text: "benchmark".into(),
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
        done.status == TaskStatus::Succeeded,
        "bench task ended {:?}: {:?}",
        done.status,
        done.error
    );
    anyhow::ensure!(
        done.steps == steps,
        "expected {steps} steps, got {}",
        done.steps
    );
    Ok(task.id)
}

pub(crate) async fn run(args: BenchArgs) -> anyhow::Result<()> {
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
