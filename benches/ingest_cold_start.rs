//! Cold start, warm latency and peak memory of the `ingest` Lambda binary.
//!
//! Runs the release `ingest` binary N times as a fresh process under the
//! local Lambda Runtime API double (`tests/e2e/runtime_api/`), against moto's
//! DynamoDB and SQS, the way Lambda runs it: the first event (a
//! Slack-signed `app_mention`) is already waiting when the process starts.
//!
//! * cold: process spawn -> first response posted to the Runtime API
//!   (init + the first verify-dedupe-enqueue);
//! * init: process spawn -> first `GET /invocation/next`;
//! * warm: queue -> response of each later Slack-signed event (new event
//!   id each time, so each one is verified, deduped and enqueued);
//! * peak RSS: `VmHWM` of the process after its last invocation.
//!
//! Each measurement runs against two AWS peers, reported separately:
//!
//! * `stub`: `support/aws_stub.rs`, a tiny in-process HTTP server answering
//!   the DynamoDB and SQS calls in microseconds, so the numbers are Baton's
//!   own start-up and request work (plus loopback HTTP);
//! * `moto`: moto's DynamoDB and SQS (a Python server, milliseconds per
//!   call, tens for a transaction), the same peer the tests use.
//!
//! `cargo bench --bench ingest_cold_start` (env `BATON_BENCH_COLD`, default
//! 20 processes, `BATON_BENCH_WARM`, default 50 invocations each, and
//! `BATON_BENCH_PEERS`, default `stub,moto`). Results and the machine:
//! docs/performance-lambda.md.

#[path = "../tests/e2e/runtime_api/mod.rs"]
mod runtime_api;

#[path = "support/aws_stub.rs"]
mod aws_stub;

use aws_stub::AwsStub;
use baton_aws::testing::MotoServer;
use baton_aws::{DynamoTable, ResourceNames, S3Blobs, SqsQueue};
use baton_core::{TaskId, TaskStore, WorkQueue};
use baton_slack::signature::SigningSecret;
use runtime_api::functions::{binaries, FunctionProcess};
use runtime_api::RuntimeApi;
use serde_json::{json, Value};
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

const SLACK_SECRET: &str = "8f742231b10e8888abcd99yyyzzz85a5";
const TIMEOUT: Duration = Duration::from_secs(30);

fn env_num(name: &str, default: usize) -> usize {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

fn sample(name: &str) -> Value {
    let path = format!("{}/events/{name}", env!("CARGO_MANIFEST_DIR"));
    serde_json::from_str(&std::fs::read_to_string(&path).expect("sample event"))
        .expect("sample JSON")
}

fn now_secs() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .expect("clock")
        .as_secs() as i64
}

/// A Slack-signed `app_mention` as API Gateway delivers it; `n` makes the
/// event id and message ts unique, so it is a new task every time.
fn mention(n: usize) -> Value {
    let mut m = sample("slack_app_mention.json");
    let tag = format!("{}{n:06}", now_secs());
    m["event_id"] = json!(format!("EvBench{tag}"));
    m["event"]["ts"] = json!(format!("1700000000.{n:06}"));
    m["event"]["event_ts"] = m["event"]["ts"].clone();
    let raw = m.to_string();
    let mut e = sample("apigw_http_post_tasks.json");
    e["routeKey"] = json!("POST /slack/events");
    e["rawPath"] = json!("/slack/events");
    e["requestContext"]["routeKey"] = json!("POST /slack/events");
    e["requestContext"]["http"]["path"] = json!("/slack/events");
    let h = e["headers"].as_object_mut().expect("headers");
    h.remove("authorization");
    h.remove("idempotency-key");
    h.insert("content-type".into(), json!("application/json"));
    h.insert("content-length".into(), json!(raw.len().to_string()));
    let signed = baton_slack::testing::signed_headers(
        &SigningSecret::new(SLACK_SECRET),
        raw.as_bytes(),
        now_secs(),
    );
    for (k, v) in signed {
        h.insert(k.to_ascii_lowercase(), json!(v));
    }
    e["body"] = json!(raw);
    e
}

fn status_of(outcome: &runtime_api::Outcome) -> u64 {
    outcome
        .json_response()
        .ok()
        .and_then(|r| r["statusCode"].as_u64())
        .unwrap_or(0)
}

fn pct(sorted: &[Duration], p: f64) -> Duration {
    if sorted.is_empty() {
        return Duration::ZERO;
    }
    let i = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[i.min(sorted.len() - 1)]
}

fn ms(d: Duration) -> String {
    format!("{:.1}", d.as_secs_f64() * 1000.0)
}

fn row(name: &str, mut v: Vec<Duration>) {
    v.sort();
    println!(
        "| {name} | {} | {} | {} | {} | {} |",
        v.len(),
        ms(pct(&v, 0.0)),
        ms(pct(&v, 0.5)),
        ms(pct(&v, 0.95)),
        ms(pct(&v, 1.0))
    );
}

/// Environment of the function for one AWS peer.
fn function_vars(
    endpoint: &str,
    table: &str,
    queue: &str,
    dlq: &str,
    bucket: &str,
) -> Vec<(String, String)> {
    vec![
        ("AWS_ENDPOINT_URL".into(), endpoint.into()),
        ("BATON_TABLE".into(), table.into()),
        ("BATON_QUEUE_URL".into(), queue.into()),
        ("BATON_DLQ_URL".into(), dlq.into()),
        ("BATON_TRACE_BUCKET".into(), bucket.into()),
        ("BATON_LLM_PROVIDER".into(), "scripted".into()),
        (
            "BATON_API_TOKEN".into(),
            "bench-token-0123456789abcdef".into(),
        ),
        ("SLACK_SIGNING_SECRET".into(), SLACK_SECRET.into()),
        ("RUST_LOG".into(), "info".into()),
    ]
}

/// One AWS peer: what the function is pointed at, and clients of the bench
/// itself to time single round trips to it.
struct Peer {
    name: &'static str,
    vars: Vec<(String, String)>,
    store: TaskStore,
    queue: SqsQueue,
    /// Empty the queue after each process (moto keeps what it is sent).
    drain: bool,
}

fn peer_store(table: DynamoTable, blobs: S3Blobs) -> TaskStore {
    TaskStore::new(Arc::new(table), Arc::new(blobs))
}

/// Peak RSS (KiB) and thread count of a running process, from /proc.
fn proc_status(pid: u32) -> (Option<u64>, Option<u64>) {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    let field = |name: &str| {
        status
            .lines()
            .find_map(|l| l.strip_prefix(name))
            .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
    };
    (field("VmHWM:"), field("Threads:"))
}

async fn measure(
    peer: &Peer,
    bins: &runtime_api::functions::Binaries,
    cold_runs: usize,
    warm_runs: usize,
    n: &mut usize,
) {
    // What one round trip to the peer costs, for reading the numbers below.
    let mut get_rtt = Vec::new();
    let probe = TaskId::generate();
    for _ in 0..50 {
        let t = Instant::now();
        peer.store.get(&probe).await.expect("GetItem");
        get_rtt.push(t.elapsed());
    }
    let mut sqs_rtt = Vec::new();
    for _ in 0..20 {
        let t = Instant::now();
        peer.queue
            .send(r#"{"kind":"reap"}"#, Duration::ZERO)
            .await
            .expect("SendMessage");
        sqs_rtt.push(t.elapsed());
    }
    if peer.drain {
        let _ = peer.queue.receive(10, Duration::ZERO).await;
        let _ = peer.queue.receive(10, Duration::ZERO).await;
    }

    let (mut cold, mut init, mut warm, mut rss, mut threads) =
        (Vec::new(), Vec::new(), Vec::new(), Vec::new(), Vec::new());
    for run in 0..cold_runs {
        let api = RuntimeApi::start().await;
        // The invocation that causes the cold start is waiting, as in Lambda.
        *n += 1;
        let first = api.enqueue(&mention(*n), Duration::from_secs(10));
        let f =
            FunctionProcess::spawn(&bins.ingest, &api.address(), &peer.vars).expect("spawn ingest");
        let outcome = first
            .wait(TIMEOUT)
            .await
            .unwrap_or_else(|e| panic!("{e}; {}", f.describe()));
        assert_eq!(status_of(&outcome), 200, "{outcome:?}; {}", f.describe());
        cold.push(outcome.at().duration_since(f.spawned));
        if let Some(polled) = api.wait_for_poll(1, Duration::ZERO).await {
            init.push(polled.duration_since(f.spawned));
        }
        for _ in 0..warm_runs {
            *n += 1;
            let event = mention(*n);
            let t = Instant::now();
            let outcome = api
                .invoke(&event, TIMEOUT)
                .await
                .unwrap_or_else(|e| panic!("{e}; {}", f.describe()));
            warm.push(outcome.at().duration_since(t));
            assert_eq!(status_of(&outcome), 200, "{outcome:?}");
        }
        match proc_status(f.pid()) {
            (Some(kib), t) => {
                rss.push(kib);
                threads.extend(t);
            }
            (None, _) => eprintln!("run {run}: no VmHWM (not Linux?)"),
        }
        drop(f);
        if peer.drain {
            // Keep the queue small; the wakes are not what is measured.
            let _ = peer.queue.receive(10, Duration::ZERO).await;
        }
    }

    rss.sort_unstable();
    threads.sort_unstable();
    println!();
    println!("## peer: {}", peer.name);
    println!();
    println!("{cold_runs} cold starts, {warm_runs} warm invocations each");
    println!();
    println!("| measure (ms) | n | min | median | p95 | max |");
    println!("| --- | --- | --- | --- | --- | --- |");
    row("cold: spawn -> first response", cold);
    row("init: spawn -> first /next", init);
    row("warm: Slack event -> response", warm);
    row(
        &format!("{} DynamoDB GetItem round trip (bench -> peer)", peer.name),
        get_rtt,
    );
    row(
        &format!("{} SQS SendMessage round trip (bench -> peer)", peer.name),
        sqs_rtt,
    );
    if !rss.is_empty() {
        println!();
        println!(
            "peak RSS (VmHWM): min {:.1} MiB, median {:.1} MiB, max {:.1} MiB; threads at the end: {:?}",
            rss[0] as f64 / 1024.0,
            rss[rss.len() / 2] as f64 / 1024.0,
            rss[rss.len() - 1] as f64 / 1024.0,
            threads.first().zip(threads.last()),
        );
    }
}

fn main() {
    // The stub's address goes into this process's environment, for the
    // bench's own SDK clients (`load_sdk_config`), before any thread runs.
    let stub_listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind the AWS stub");
    let stub_addr = stub_listener.local_addr().expect("stub address");
    for (k, v) in [
        ("AWS_ENDPOINT_URL", format!("http://{stub_addr}")),
        ("AWS_REGION", "us-east-1".into()),
        ("AWS_ACCESS_KEY_ID", "testing".into()),
        ("AWS_SECRET_ACCESS_KEY", "testing".into()),
    ] {
        std::env::set_var(k, v);
    }
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("tokio runtime")
        .block_on(run(stub_listener));
}

async fn run(stub_listener: std::net::TcpListener) {
    let mut stub_listener = Some(stub_listener);
    // `cargo test --benches` runs benches once in test mode: keep it short.
    let quick = std::env::args().any(|a| a == "--test");
    let cold_runs = if quick {
        1
    } else {
        env_num("BATON_BENCH_COLD", 20)
    };
    let warm_runs = if quick {
        2
    } else {
        env_num("BATON_BENCH_WARM", 50)
    };
    let peers = std::env::var("BATON_BENCH_PEERS").unwrap_or_else(|_| "stub,moto".into());

    let bins = tokio::task::spawn_blocking(binaries)
        .await
        .expect("build task")
        .expect("function binaries");
    let ingest_size = std::fs::metadata(&bins.ingest)
        .map(|m| m.len())
        .unwrap_or(0);
    println!(
        "ingest binary: {} ({:.1} MiB)",
        bins.ingest.display(),
        ingest_size as f64 / 1048576.0
    );

    let mut n = 0;
    for name in peers.split(',').map(str::trim) {
        match name {
            "stub" => {
                let Some(listener) = stub_listener.take() else {
                    panic!("BATON_BENCH_PEERS: stub named twice");
                };
                let stub = AwsStub::start(listener).expect("AWS stub");
                let cfg = baton_aws::load_sdk_config().await;
                let peer = Peer {
                    name: "stub",
                    vars: function_vars(
                        &stub.endpoint(),
                        "bench",
                        &stub.queue_url(),
                        &stub.queue_url(),
                        "bench",
                    ),
                    store: peer_store(
                        DynamoTable::new(baton_aws::dynamodb_client(&cfg), "bench"),
                        S3Blobs::new(baton_aws::s3_client(&cfg), "bench", None),
                    ),
                    queue: SqsQueue::new(baton_aws::sqs_client(&cfg), stub.queue_url()),
                    drain: false,
                };
                measure(&peer, &bins, cold_runs, warm_runs, &mut n).await;
                let calls = stub.calls.lock().map(|c| c.clone()).unwrap_or_default();
                println!("stub requests answered: {calls:?}");
            }
            "moto" => {
                let moto = tokio::task::spawn_blocking(MotoServer::start)
                    .await
                    .expect("moto task")
                    .expect("moto_server");
                let cfg = moto.sdk_config().await;
                let env = baton_aws::bootstrap(&cfg, &ResourceNames::for_stack("bench"), 3, 30)
                    .await
                    .expect("bootstrap");
                let peer = Peer {
                    name: "moto",
                    vars: function_vars(
                        &moto.endpoint(),
                        &env.table,
                        &env.queue_url,
                        &env.dlq_url,
                        &env.trace_bucket,
                    ),
                    store: peer_store(
                        DynamoTable::new(baton_aws::dynamodb_client(&cfg), env.table.clone()),
                        S3Blobs::new(baton_aws::s3_client(&cfg), env.trace_bucket.clone(), None),
                    ),
                    queue: SqsQueue::new(baton_aws::sqs_client(&cfg), env.queue_url.clone()),
                    drain: true,
                };
                measure(&peer, &bins, cold_runs, warm_runs, &mut n).await;
            }
            other => panic!("BATON_BENCH_PEERS: unknown peer `{other}` (stub, moto)"),
        }
    }
}
