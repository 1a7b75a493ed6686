//! Cold start, warm latency and peak memory of the `ingest` Lambda binary.
//!
//! Runs the release `ingest` binary N times as a fresh process under the
//! local Lambda Runtime API double (`tests/runtime_api/`), against moto's
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
//! `cargo bench --bench ingest_cold_start` (env `BATON_BENCH_COLD`, default
//! 20 processes, and `BATON_BENCH_WARM`, default 50 invocations each).
//! Results and the machine: docs/performance-lambda.md.

#[path = "../tests/runtime_api/mod.rs"]
mod runtime_api;

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

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
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

    let bins = tokio::task::spawn_blocking(binaries)
        .await
        .expect("build task")
        .expect("function binaries");
    let ingest_size = std::fs::metadata(&bins.ingest)
        .map(|m| m.len())
        .unwrap_or(0);
    let moto = tokio::task::spawn_blocking(MotoServer::start)
        .await
        .expect("moto task")
        .expect("moto_server");
    let cfg = moto.sdk_config().await;
    let env = baton_aws::bootstrap(&cfg, &ResourceNames::for_stack("bench"), 3, 30)
        .await
        .expect("bootstrap");
    let queue = SqsQueue::new(baton_aws::sqs_client(&cfg), env.queue_url.clone());
    let store = TaskStore::new(
        Arc::new(DynamoTable::new(
            baton_aws::dynamodb_client(&cfg),
            env.table.clone(),
        )),
        Arc::new(S3Blobs::new(
            baton_aws::s3_client(&cfg),
            env.trace_bucket.clone(),
            None,
        )),
    );
    let vars: Vec<(String, String)> = vec![
        ("AWS_ENDPOINT_URL".into(), moto.endpoint()),
        ("BATON_TABLE".into(), env.table.clone()),
        ("BATON_QUEUE_URL".into(), env.queue_url.clone()),
        ("BATON_DLQ_URL".into(), env.dlq_url.clone()),
        ("BATON_TRACE_BUCKET".into(), env.trace_bucket.clone()),
        ("BATON_LLM_PROVIDER".into(), "scripted".into()),
        (
            "BATON_API_TOKEN".into(),
            "bench-token-0123456789abcdef".into(),
        ),
        ("SLACK_SIGNING_SECRET".into(), SLACK_SECRET.into()),
        ("RUST_LOG".into(), "info".into()),
    ];

    // What one round trip to moto costs, for reading the numbers below.
    let mut moto_rtt = Vec::new();
    let probe = TaskId::generate();
    for _ in 0..50 {
        let t = Instant::now();
        store.get(&probe).await.expect("GetItem on moto");
        moto_rtt.push(t.elapsed());
    }
    let mut sqs_rtt = Vec::new();
    for _ in 0..20 {
        let t = Instant::now();
        queue
            .send(r#"{"kind":"reap"}"#, Duration::ZERO)
            .await
            .expect("SendMessage on moto");
        sqs_rtt.push(t.elapsed());
    }

    let (mut cold, mut init, mut warm, mut rss) = (Vec::new(), Vec::new(), Vec::new(), Vec::new());
    let mut n = 0;
    for run in 0..cold_runs {
        let api = RuntimeApi::start().await;
        // The invocation that causes the cold start is waiting, as in Lambda.
        n += 1;
        let first = api.enqueue(&mention(n), Duration::from_secs(10));
        let f = FunctionProcess::spawn(&bins.ingest, &api.address(), &vars).expect("spawn ingest");
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
            n += 1;
            let event = mention(n);
            let t = Instant::now();
            let outcome = api
                .invoke(&event, TIMEOUT)
                .await
                .unwrap_or_else(|e| panic!("{e}; {}", f.describe()));
            warm.push(outcome.at().duration_since(t));
            assert_eq!(status_of(&outcome), 200, "{outcome:?}");
        }
        match f.peak_rss_kib() {
            Some(kib) => rss.push(kib),
            None => eprintln!("run {run}: no VmHWM (not Linux?)"),
        }
        drop(f);
        // Keep the queue small; the wakes are not what is measured.
        let _ = queue.receive(10, Duration::ZERO).await;
    }

    rss.sort_unstable();
    println!();
    println!(
        "ingest binary: {} ({:.1} MiB)",
        bins.ingest.display(),
        ingest_size as f64 / 1048576.0
    );
    println!("{cold_runs} cold starts, {warm_runs} warm invocations each, against moto");
    println!();
    println!("| measure (ms) | n | min | median | p95 | max |");
    println!("| --- | --- | --- | --- | --- | --- |");
    row("cold: spawn -> first response", cold);
    row("init: spawn -> first /next", init);
    row("warm: Slack event -> response", warm);
    row("moto DynamoDB GetItem round trip", moto_rtt);
    row("moto SQS SendMessage round trip", sqs_rtt);
    if !rss.is_empty() {
        println!();
        println!(
            "peak RSS (VmHWM): min {:.1} MiB, median {:.1} MiB, max {:.1} MiB",
            rss[0] as f64 / 1024.0,
            rss[rss.len() / 2] as f64 / 1024.0,
            rss[rss.len() - 1] as f64 / 1024.0
        );
    }
}
