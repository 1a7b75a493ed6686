//! The two Lambda binaries, `ingest` and `worker`, run as real processes
//! through the real Lambda Runtime API protocol (a local double of it,
//! `tests/e2e/runtime_api/`) against moto's DynamoDB, SQS and S3.
//!
//! The test plays the Lambda service: it hands the functions API Gateway
//! HTTP API (payload 2.0) and SQS events, reads their responses, and, like
//! an SQS event source mapping, deletes the records a worker batch did not
//! report as failed.
//!
//! Needs `moto_server` (see `baton_aws::testing`); builds the function
//! binaries on first use (see `runtime_api::functions`).

use crate::runtime_api::functions::{binaries, mcp_binary, FunctionProcess};
use crate::runtime_api::{Outcome, RuntimeApi};
use base64::Engine;
use baton_aws::testing::MotoServer;
use baton_aws::{DynamoTable, Environment, ResourceNames, S3Blobs, SqsQueue};
use baton_core::{Delivery, Task, TaskId, TaskStatus, TaskStore, Wake, WorkQueue};
use baton_slack::signature::SigningSecret;
use serde_json::{json, Value};
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

const API_TOKEN: &str = "lambda-test-token-0123456789abcdef";
const SLACK_SECRET: &str = "8f742231b10e8888abcd99yyyzzz85a5";
/// Generous for a debug build on a busy 2-core machine.
const INVOKE_TIMEOUT: Duration = Duration::from_secs(30);

/// moto with a bootstrapped stack, and clients to look inside it.
pub(crate) struct Stack {
    moto: MotoServer,
    env: Environment,
    dlq_arn: String,
    queue: SqsQueue,
    pub(crate) store: TaskStore,
}

impl Stack {
    pub(crate) async fn start(name: &str) -> Stack {
        let moto = tokio::task::spawn_blocking(MotoServer::start)
            .await
            .expect("moto start task")
            .expect("moto must be installed for these tests");
        let cfg = moto.sdk_config().await;
        let names = ResourceNames::for_stack(name);
        let env = baton_aws::bootstrap(&cfg, &names, 3, 30)
            .await
            .expect("bootstrap the stack in moto");
        // Same account and region as the work queue's ARN.
        let dlq_arn = match env.queue_arn.rsplit_once(':') {
            Some((prefix, _)) => format!("{prefix}:{}", names.dlq),
            None => panic!("unexpected queue ARN {}", env.queue_arn),
        };
        let sqs = baton_aws::sqs_client(&cfg);
        let queue = SqsQueue::new(sqs, env.queue_url.clone());
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
        Stack {
            moto,
            env,
            dlq_arn,
            queue,
            store,
        }
    }

    /// The function's own environment, as the SAM template would set it.
    pub(crate) fn vars(&self, extra: &[(&str, &str)]) -> Vec<(String, String)> {
        let mut v: Vec<(String, String)> = vec![
            ("AWS_ENDPOINT_URL".into(), self.moto.endpoint()),
            ("BATON_TABLE".into(), self.env.table.clone()),
            ("BATON_QUEUE_URL".into(), self.env.queue_url.clone()),
            ("BATON_QUEUE_ARN".into(), self.env.queue_arn.clone()),
            ("BATON_DLQ_URL".into(), self.env.dlq_url.clone()),
            ("BATON_TRACE_BUCKET".into(), self.env.trace_bucket.clone()),
            (
                "BATON_SCHEDULE_GROUP".into(),
                self.env.schedule_group.clone(),
            ),
            ("BATON_LLM_PROVIDER".into(), "scripted".into()),
            ("BATON_API_TOKEN".into(), API_TOKEN.into()),
            ("SLACK_SIGNING_SECRET".into(), SLACK_SECRET.into()),
            ("RUST_LOG".into(), "info".into()),
        ];
        v.extend(
            extra
                .iter()
                .map(|(k, val)| (k.to_string(), val.to_string())),
        );
        v
    }

    /// Everything now in the work queue, deleted as it is read.
    async fn drain(&self) -> Vec<Delivery> {
        let mut all = Vec::new();
        loop {
            let got = self
                .queue
                .receive(10, Duration::ZERO)
                .await
                .expect("receive from moto");
            if got.is_empty() {
                return all;
            }
            for d in &got {
                self.queue
                    .delete(&d.receipt)
                    .await
                    .expect("delete from moto");
            }
            all.extend(got);
        }
    }

    async fn task(&self, id: &TaskId) -> Task {
        self.store
            .get(id)
            .await
            .expect("read the task from moto")
            .expect("the task exists")
    }
}

fn sample(name: &str) -> Value {
    let path = format!("{}/events/{name}", env!("CARGO_MANIFEST_DIR"));
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path}: {e}"));
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("{path}: {e}"))
}

fn now_secs() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .expect("clock after 1970")
        .as_secs() as i64
}

/// An API Gateway HTTP API (payload 2.0) event, shaped like
/// `events/apigw_http_post_tasks.json`. `base64` sends the body the way API
/// Gateway sends non-text content types.
pub(crate) fn apigw(
    method: &str,
    path: &str,
    headers: &[(&str, String)],
    body: Option<&[u8]>,
    base64: bool,
) -> Value {
    let mut e = sample("apigw_http_post_tasks.json");
    let route = format!("{method} {path}");
    e["routeKey"] = json!(route);
    e["rawPath"] = json!(path);
    e["requestContext"]["routeKey"] = json!(route);
    e["requestContext"]["http"]["method"] = json!(method);
    e["requestContext"]["http"]["path"] = json!(path);
    let h = e["headers"].as_object_mut().expect("sample headers");
    for k in [
        "authorization",
        "content-type",
        "content-length",
        "idempotency-key",
    ] {
        h.remove(k);
    }
    for (k, v) in headers {
        h.insert(k.to_ascii_lowercase(), json!(v));
    }
    match body {
        Some(b) => {
            h.insert("content-length".into(), json!(b.len().to_string()));
            e["body"] = if base64 {
                json!(base64::engine::general_purpose::STANDARD.encode(b))
            } else {
                json!(std::str::from_utf8(b).expect("text body"))
            };
            e["isBase64Encoded"] = json!(base64);
        }
        None => {
            e.as_object_mut().expect("event").remove("body");
            e["isBase64Encoded"] = json!(false);
        }
    }
    e
}

/// The status and JSON body of an API Gateway (payload 2.0) response.
pub(crate) fn http(outcome: &Outcome) -> (u16, Value) {
    let r = outcome.json_response().expect("the function answered");
    let status = r["statusCode"]
        .as_u64()
        .unwrap_or_else(|| panic!("no statusCode in {r}")) as u16;
    let text = match (r["body"].as_str(), r["isBase64Encoded"].as_bool()) {
        (None, _) => String::new(),
        (Some(b), Some(true)) => String::from_utf8(
            base64::engine::general_purpose::STANDARD
                .decode(b)
                .expect("base64 response body"),
        )
        .expect("UTF-8 response body"),
        (Some(b), _) => b.to_owned(),
    };
    let body = if text.is_empty() {
        Value::Null
    } else {
        serde_json::from_str(&text).unwrap_or(json!(text))
    };
    (status, body)
}

pub(crate) fn bearer() -> (&'static str, String) {
    ("authorization", format!("Bearer {API_TOKEN}"))
}

fn slack_headers(body: &[u8], content_type: &str, secret: &str) -> Vec<(&'static str, String)> {
    let mut h: Vec<(&'static str, String)> = vec![("content-type", content_type.to_owned())];
    for (k, v) in
        baton_slack::testing::signed_headers(&SigningSecret::new(secret), body, now_secs())
    {
        let k: &'static str = if k.eq_ignore_ascii_case("x-slack-signature") {
            "x-slack-signature"
        } else {
            "x-slack-request-timestamp"
        };
        h.push((k, v));
    }
    h
}

/// An SQS event for the worker, shaped like `events/sqs_wake.json`, with
/// one record per delivery (really received from moto) from `source_arn`.
fn sqs_event(deliveries: &[Delivery], source_arn: &str) -> Value {
    let template = sample("sqs_wake.json")["Records"][0].clone();
    let records: Vec<Value> = deliveries
        .iter()
        .map(|d| {
            let mut r = template.clone();
            r["messageId"] = json!(d.message_id);
            r["receiptHandle"] = json!(d.receipt);
            r["body"] = json!(d.body);
            r["attributes"]["ApproximateReceiveCount"] = json!(d.receive_count.to_string());
            r.as_object_mut().expect("record").remove("md5OfBody");
            r["eventSourceARN"] = json!(source_arn);
            r
        })
        .collect();
    json!({ "Records": records })
}

/// `batchItemFailures` item identifiers of a worker response.
fn failures(outcome: &Outcome) -> Vec<String> {
    let r = outcome.json_response().expect("the worker answered");
    let list = r["batchItemFailures"]
        .as_array()
        .unwrap_or_else(|| panic!("no batchItemFailures in {r}"));
    list.iter()
        .map(|f| {
            f["itemIdentifier"]
                .as_str()
                .expect("itemIdentifier")
                .to_owned()
        })
        .collect()
}

async fn invoke(api: &RuntimeApi, f: &FunctionProcess, event: &Value) -> Outcome {
    match api.invoke(event, INVOKE_TIMEOUT).await {
        Ok(o) => o,
        Err(e) => panic!("{e}; {}", f.describe()),
    }
}

pub(crate) fn spawn(
    exe: &std::path::Path,
    api: &RuntimeApi,
    vars: &[(String, String)],
) -> FunctionProcess {
    FunctionProcess::spawn(exe, &api.address(), vars).expect("spawn the function binary")
}

async fn submit(api: &RuntimeApi, ingest: &FunctionProcess, input: &str) -> TaskId {
    let body = json!({ "input": input }).to_string();
    let event = apigw(
        "POST",
        "/tasks",
        &[bearer(), ("content-type", "application/json".into())],
        Some(body.as_bytes()),
        false,
    );
    let (status, answer) = http(&invoke(api, ingest, &event).await);
    assert_eq!(status, 202, "{answer}; {}", ingest.describe());
    assert_eq!(answer["status"], "queued", "{answer}");
    TaskId::parse(answer["task_id"].as_str().expect("task_id")).expect("a task id")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ingest_serves_api_gateway_events_through_the_runtime_api() {
    let bins = tokio::task::spawn_blocking(binaries)
        .await
        .expect("build task")
        .expect("function binaries");
    let stack = Stack::start("lambda-ingest").await;
    let api = RuntimeApi::start().await;
    // The sample button click below is by U061F7AUR, on a task made over
    // HTTP (no Slack requester): only an admin may cancel it from Slack.
    let ingest = spawn(
        &bins.ingest,
        &api,
        &stack.vars(&[("BATON_ADMINS", "U061F7AUR")]),
    );

    // The runtime is up and polling before any event exists.
    assert!(
        api.wait_for_poll(1, INVOKE_TIMEOUT).await.is_some(),
        "never polled; {}",
        ingest.describe()
    );

    let (status, body) =
        http(&invoke(&api, &ingest, &apigw("GET", "/healthz", &[], None, false)).await);
    assert_eq!((status, body), (200, json!({"ok": true})));

    // Slack's URL verification: signed JSON, answered with the challenge.
    let verify = sample("slack_url_verification.json");
    let challenge = verify["challenge"]
        .as_str()
        .expect("sample challenge")
        .to_owned();
    let raw = verify.to_string().into_bytes();
    let event = apigw(
        "POST",
        "/slack/events",
        &slack_headers(&raw, "application/json", SLACK_SECRET),
        Some(&raw),
        false,
    );
    let (status, body) = http(&invoke(&api, &ingest, &event).await);
    assert_eq!((status, body), (200, json!({ "challenge": challenge })));

    // A bad signature is refused and queues nothing.
    let mut mention = sample("slack_app_mention.json");
    mention["event_id"] = json!(format!("EvLambda{}", now_secs()));
    let raw = mention.to_string().into_bytes();
    let forged = apigw(
        "POST",
        "/slack/events",
        &slack_headers(&raw, "application/json", "not-the-secret"),
        Some(&raw),
        false,
    );
    let (status, body) = http(&invoke(&api, &ingest, &forged).await);
    assert_eq!(status, 401, "{body}");
    assert!(
        body["error"]
            .as_str()
            .is_some_and(|e| e.contains("signature")),
        "{body}"
    );
    assert!(
        stack.drain().await.is_empty(),
        "a refused request queued work"
    );

    // A signed mention is verified, deduped and queued; Slack's retry of the
    // same event queues nothing more.
    let signed = apigw(
        "POST",
        "/slack/events",
        &slack_headers(&raw, "application/json", SLACK_SECRET),
        Some(&raw),
        false,
    );
    for attempt in 0..2 {
        let (status, body) = http(&invoke(&api, &ingest, &signed).await);
        assert_eq!(
            (status, &body),
            (200, &json!({"ok": true})),
            "attempt {attempt}"
        );
    }
    let wakes = stack.drain().await;
    assert_eq!(wakes.len(), 1, "one wake for one Slack event: {wakes:?}");
    let slack_task = Wake::parse(&wakes[0].body).expect("a wake").task_id;
    assert_eq!(stack.task(&slack_task).await.status(), TaskStatus::Queued);

    // POST /tasks with the bearer token: 202, a task id, and its wake is
    // really in SQS.
    let unauthorised = apigw(
        "POST",
        "/tasks",
        &[("content-type", "application/json".into())],
        Some(b"{\"input\":\"x\"}"),
        false,
    );
    assert_eq!(http(&invoke(&api, &ingest, &unauthorised).await).0, 401);
    let task_id = submit(&api, &ingest, "#steps=2 hello from Lambda").await;
    let wakes = stack.drain().await;
    assert_eq!(wakes.len(), 1, "{wakes:?}");
    assert_eq!(
        Wake::parse(&wakes[0].body).expect("a wake").task_id,
        task_id
    );
    let get = apigw(
        "GET",
        &format!("/tasks/{task_id}"),
        &[bearer()],
        None,
        false,
    );
    let (status, body) = http(&invoke(&api, &ingest, &get).await);
    assert_eq!((status, &body["status"]), (200, &json!("queued")), "{body}");

    // Interactivity arrives form-encoded, so API Gateway base64-encodes it;
    // the signature is over the decoded bytes. A cancel button on the Slack
    // task, clicked by its requester in its workspace (a click naming a
    // task of another workspace, or of the HTTP API, changes nothing).
    let mut action = sample("slack_block_actions.json");
    action["actions"][0]["action_id"] = json!("cancel_task");
    action["actions"][0]["value"] = json!(task_id.as_str());
    let foreign = baton_slack::testing::interactivity_body(&action);
    let (status, body) = http(
        &invoke(
            &api,
            &ingest,
            &apigw(
                "POST",
                "/slack/interactivity",
                &slack_headers(&foreign, "application/x-www-form-urlencoded", SLACK_SECRET),
                Some(&foreign),
                true,
            ),
        )
        .await,
    );
    assert_eq!(
        (status, &body["ignored"]),
        (200, &json!("the task belongs to another workspace"))
    );
    assert!(!stack.task(&task_id).await.cancel_requested);
    let task_id = slack_task;
    action["actions"][0]["value"] = json!(task_id.as_str());
    let form = baton_slack::testing::interactivity_body(&action);
    let form_type = "application/x-www-form-urlencoded";
    let tampered_form = {
        let mut f = form.clone();
        f.extend_from_slice(b"%20");
        f
    };
    let mut headers = slack_headers(&form, form_type, SLACK_SECRET);
    let bad = apigw(
        "POST",
        "/slack/interactivity",
        &headers,
        Some(&tampered_form),
        true,
    );
    assert_eq!(
        http(&invoke(&api, &ingest, &bad).await).0,
        401,
        "a body that is not the signed one"
    );
    assert!(!stack.task(&task_id).await.cancel_requested);
    let (status, body) = http(
        &invoke(
            &api,
            &ingest,
            &apigw("POST", "/slack/interactivity", &headers, Some(&form), true),
        )
        .await,
    );
    assert_eq!((status, &body), (200, &json!({"ok": true})));
    assert!(
        stack.task(&task_id).await.cancel_requested,
        "the cancel button reached the task"
    );
    assert_eq!(stack.drain().await.len(), 1, "the cancel wake");
    // A stale timestamp is refused too.
    headers.retain(|(k, _)| *k != "x-slack-request-timestamp");
    headers.push(("x-slack-request-timestamp", (now_secs() - 3600).to_string()));
    let stale = apigw("POST", "/slack/interactivity", &headers, Some(&form), true);
    assert_eq!(http(&invoke(&api, &ingest, &stale).await).0, 401);

    // Unknown routes and malformed input get a JSON 4xx.
    let (status, body) =
        http(&invoke(&api, &ingest, &apigw("GET", "/nope", &[], None, false)).await);
    assert_eq!(status, 404, "{body}");
    assert!(body["error"].is_string(), "{body}");

    // An event that is no API Gateway event is an invocation error, and the
    // function keeps serving.
    match api.invoke(&json!({"hello": "world"}), INVOKE_TIMEOUT).await {
        Ok(Outcome::Error { .. }) => {}
        other => panic!(
            "expected an invocation error, got {other:?}; {}",
            ingest.describe()
        ),
    }
    let (status, _) =
        http(&invoke(&api, &ingest, &apigw("GET", "/healthz", &[], None, false)).await);
    assert_eq!(status, 200);

    assert!(api.init_errors().is_empty(), "{:?}", api.init_errors());
    assert!(api.violations().is_empty(), "{:?}", api.violations());
    // Secrets never reach the logs.
    let log = ingest.log();
    assert!(
        !log.contains(API_TOKEN) && !log.contains(SLACK_SECRET),
        "a secret was logged"
    );
}

/// Feeds every queued message to the worker, as an event source mapping
/// with batch size 10 would, until the task ends. Returns the batches run.
async fn run_until_done(
    stack: &Stack,
    api: &RuntimeApi,
    worker: &FunctionProcess,
    task: &TaskId,
) -> usize {
    let deadline = Instant::now() + Duration::from_secs(60);
    let mut batches = 0;
    loop {
        let t = stack.task(task).await;
        if t.status().is_terminal() {
            return batches;
        }
        assert!(
            Instant::now() < deadline,
            "task still {:?} after 60 s; {}",
            t.status(),
            worker.describe()
        );
        let got = stack
            .queue
            .receive(10, Duration::from_secs(1))
            .await
            .expect("receive from moto");
        if got.is_empty() {
            continue;
        }
        let outcome = invoke(api, worker, &sqs_event(&got, &stack.env.queue_arn)).await;
        let failed = failures(&outcome);
        assert!(
            failed.is_empty(),
            "batch {batches} failed {failed:?}; {}",
            worker.describe()
        );
        // The event source mapping deletes what the batch did not fail.
        for d in &got {
            stack
                .queue
                .delete(&d.receipt)
                .await
                .expect("delete from moto");
        }
        batches += 1;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn worker_runs_a_task_to_success_across_segments() {
    let bins = tokio::task::spawn_blocking(binaries)
        .await
        .expect("build task")
        .expect("function binaries");
    let stack = Stack::start("lambda-worker").await;
    let api = RuntimeApi::start().await;
    let ingest_api = RuntimeApi::start().await;
    let ingest = spawn(&bins.ingest, &ingest_api, &stack.vars(&[]));
    // A 1 ms segment budget: every segment does one unit of work and hands
    // over through SQS, so the task needs several invocations.
    let worker = spawn(
        &bins.worker,
        &api,
        &stack.vars(&[("BATON_SEGMENT_BUDGET_MS", "1")]),
    );

    let task_id = submit(&ingest_api, &ingest, "#steps=2 what time is it?").await;
    let batches = run_until_done(&stack, &api, &worker, &task_id).await;

    let task = stack.task(&task_id).await;
    assert_eq!(
        task.status(),
        TaskStatus::Succeeded,
        "{:?}; {}",
        task.answer.error,
        worker.describe()
    );
    assert_eq!(task.budget.steps, 2);
    assert!(
        task.budget.segments >= 2,
        "handed over between segments: {} segments",
        task.budget.segments
    );
    assert!(batches >= 2, "{batches} batches");
    assert!(
        task.answer
            .result
            .as_deref()
            .is_some_and(|r| r.contains("done after 2 steps")),
        "{:?}",
        task.answer.result
    );
    assert!(stack.drain().await.is_empty(), "no wake left behind");
    // The trace reached S3.
    let traces = stack
        .store
        .blobs()
        .list(&format!("traces/{task_id}/"))
        .await
        .expect("list traces");
    assert!(!traces.is_empty(), "no trace written");
    // Metrics are on by default in Lambda: the task's creation, each of its
    // segments and its end, in the default namespace, for its agent.
    let worker_metrics = metric_documents(&worker);
    let of_task = |docs: &[Value], name: &str| {
        docs.iter()
            .filter(|d| d["task_id"] == task_id.as_str() && d["Agent"] == "default")
            .filter_map(|d| d[name].as_f64())
            .sum::<f64>()
    };
    assert_eq!(
        of_task(&worker_metrics, "TasksSucceeded"),
        1.0,
        "{}",
        worker.describe()
    );
    assert_eq!(
        of_task(&worker_metrics, "Segments"),
        f64::from(task.budget.segments)
    );
    assert_eq!(of_task(&metric_documents(&ingest), "TasksCreated"), 1.0);
    for d in &worker_metrics {
        assert_eq!(d["_aws"]["CloudWatchMetrics"][0]["Namespace"], "Baton");
        assert_eq!(d["Service"], "worker");
    }
    assert!(api.violations().is_empty(), "{:?}", api.violations());
}

/// The embedded-metric documents a function printed. Every line of its
/// output is one JSON object: its logs (stderr) and its metrics (stdout)
/// never share a line.
fn metric_documents(f: &FunctionProcess) -> Vec<Value> {
    f.log()
        .lines()
        .filter(|l| !l.trim().is_empty())
        .map(|l| {
            serde_json::from_str::<Value>(l)
                .unwrap_or_else(|e| panic!("not one JSON object ({e}): {l}"))
        })
        .filter(|v| v.get("_aws").is_some())
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn worker_reports_poison_records_and_fails_dead_lettered_tasks() {
    let bins = tokio::task::spawn_blocking(binaries)
        .await
        .expect("build task")
        .expect("function binaries");
    let stack = Stack::start("lambda-dlq").await;
    let api = RuntimeApi::start().await;
    let ingest_api = RuntimeApi::start().await;
    let ingest = spawn(&bins.ingest, &ingest_api, &stack.vars(&[]));
    let worker = spawn(
        &bins.worker,
        &api,
        &stack.vars(&[("BATON_DLQ_ARN", &stack.dlq_arn)]),
    );

    let task_id = submit(&ingest_api, &ingest, "#steps=1 never run").await;
    let wake = stack.drain().await.pop().expect("the task's wake");

    // A poison record beside a good one: only the poison one is reported,
    // so SQS retries just it (and finally moves it to the DLQ).
    stack
        .queue
        .send("not json", Duration::ZERO)
        .await
        .expect("send to moto");
    let poison = stack
        .queue
        .receive(1, Duration::from_secs(2))
        .await
        .expect("receive")
        .pop()
        .expect("the poison message");
    let reap = {
        stack
            .queue
            .send(r#"{"kind":"reap"}"#, Duration::ZERO)
            .await
            .expect("send to moto");
        stack
            .queue
            .receive(1, Duration::from_secs(2))
            .await
            .expect("receive")
            .pop()
            .expect("the reap message")
    };
    let outcome = invoke(
        &api,
        &worker,
        &sqs_event(&[poison.clone(), reap], &stack.env.queue_arn),
    )
    .await;
    assert_eq!(
        failures(&outcome),
        vec![poison.message_id.clone()],
        "{}",
        worker.describe()
    );

    // The task's wake, delivered from the dead-letter queue after three
    // failed attempts: the task ends failed with a reason.
    let mut dead = wake.clone();
    dead.receive_count = 3;
    let outcome = invoke(&api, &worker, &sqs_event(&[dead], &stack.dlq_arn)).await;
    assert!(failures(&outcome).is_empty(), "{}", worker.describe());
    let task = stack.task(&task_id).await;
    assert_eq!(task.status(), TaskStatus::Failed);
    let reason = task.answer.error.unwrap_or_default();
    assert!(reason.contains("3 delivery attempts"), "{reason}");
    assert_eq!(task.budget.steps, 0, "a dead-lettered task is not run");

    // Without BATON_DLQ_ARN the same record would have run the task: the
    // ARN is what tells them apart.
    assert!(api.violations().is_empty(), "{:?}", api.violations());
}

/// `/mcp` on AWS: the `mcp` function (the ingest handler with rmcp's
/// server side) lists the exposed agents as tools and runs one as a task;
/// the ingest function, built without it, answers 404 naming the
/// function that serves it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_mcp_function_serves_mcp_and_the_ingest_does_not() {
    let mcp = mcp_binary().expect("build the mcp function");
    let bins = binaries().expect("build the function binaries");
    let stack = Stack::start("lambda-mcp").await;
    let vars = stack.vars(&[(
        "BATON_AGENTS_TOML",
        "[agents.helper]\ndescription = \"Answers questions.\"\nexpose = [\"mcp\"]\n",
    )]);
    // The stateless protocol: each request says its version and the
    // client's capabilities in `_meta`, and its method in a header.
    let rpc = |method: &str, mut params: Value| {
        params["_meta"] = json!({
            "io.modelcontextprotocol/protocolVersion": "2026-07-28",
            "io.modelcontextprotocol/clientCapabilities": {},
        });
        let body = json!({"jsonrpc": "2.0", "id": 1, "method": method, "params": params});
        apigw(
            "POST",
            "/mcp",
            &[
                bearer(),
                ("content-type", "application/json".into()),
                ("accept", "application/json, text/event-stream".into()),
                ("mcp-protocol-version", "2026-07-28".into()),
                ("mcp-method", method.into()),
            ],
            Some(body.to_string().as_bytes()),
            false,
        )
    };

    let api = RuntimeApi::start().await;
    let f = spawn(&mcp, &api, &vars);
    let outcome = invoke(&api, &f, &rpc("tools/list", json!({}))).await;
    let r = outcome.json_response().expect("the function answered");
    assert_eq!(r["statusCode"], 200, "{r}; {}", f.describe());
    let text = r["body"].as_str().unwrap_or_default();
    assert!(text.contains("\"helper\""), "the agent is a tool: {text}");

    let api = RuntimeApi::start().await;
    let ingest = spawn(&bins.ingest, &api, &vars);
    let (status, answer) = http(&invoke(&api, &ingest, &rpc("tools/list", json!({}))).await);
    assert_eq!(status, 404, "{answer}; {}", ingest.describe());
    assert!(answer.to_string().contains("mcp` function"), "{answer}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_function_that_cannot_start_exits_and_says_why() {
    let bins = tokio::task::spawn_blocking(binaries)
        .await
        .expect("build task")
        .expect("function binaries");
    let api = RuntimeApi::start().await;
    // No BATON_TABLE: the AWS backend cannot be built.
    let vars = vec![("BATON_LLM_PROVIDER".to_owned(), "scripted".to_owned())];
    for exe in [&bins.ingest, &bins.worker] {
        let mut f = spawn(exe, &api, &vars);
        let status = tokio::task::block_in_place(|| f.wait_exit(Duration::from_secs(20)));
        let status = status
            .unwrap_or_else(|| panic!("still running without its configuration; {}", f.describe()));
        assert!(!status.success(), "exited successfully; {}", f.describe());
        assert!(
            f.log().contains("BATON_TABLE"),
            "the error names the variable; {}",
            f.describe()
        );
    }
    assert!(
        api.wait_for_poll(1, Duration::from_millis(10))
            .await
            .is_none(),
        "polled for events without an app"
    );
}
