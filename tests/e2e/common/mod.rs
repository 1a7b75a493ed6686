//! The test harness: the real `baton` binary, started as a user would
//! (`baton dev`), against a mock LLM server speaking the real wire formats
//! and a fake Slack Web API, both real HTTP servers on loopback.
#![allow(dead_code)]

pub(crate) mod mcp;
pub(crate) mod oauth;

use baton_llm::mock::MockLlmServer;
use baton_slack::signature::SigningSecret;
use baton_slack::testing::FakeSlack;
use serde_json::{json, Value};
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

pub(crate) const TOKEN: &str = "test-token-0123456789abcdef";

/// Runs the `baton` binary with `args` (in `dir`, when given) and only
/// `env` set: (exit code, stdout, stderr).
pub(crate) async fn run_cli(
    args: &[&str],
    dir: Option<&Path>,
    env: &[(&str, &str)],
) -> (i32, String, String) {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_baton"));
    cmd.args(args).env_clear().envs(env.iter().copied());
    if let Some(dir) = dir {
        cmd.current_dir(dir);
    }
    let out = tokio::task::spawn_blocking(move || cmd.output())
        .await
        .expect("join")
        .expect("run baton");
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}
pub(crate) const SIGNING_SECRET: &str = "8f742231b10e8888abcd99yyyzzz85a5";

/// Which adapters `baton dev` runs on.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Backend {
    Embedded,
    /// The AWS adapters against a moto server started for the test.
    Aws,
}

#[derive(Clone, Copy, Debug)]
pub(crate) enum Wire {
    OpenAi,
    Anthropic,
    /// Bedrock Converse, SigV4-signed with the mock server's AWS keys.
    Bedrock,
}

pub(crate) struct Options {
    pub backend: Backend,
    pub wire: Wire,
    pub segment_budget_ms: Option<u64>,
    pub visibility_ms: u64,
    pub extra_env: Vec<(String, String)>,
    /// Sign in with Slack on the fake Slack (`SLACK_CLIENT_ID`,
    /// `SLACK_CLIENT_SECRET`, `SLACK_OPENID_AUTHORIZE_URL`).
    pub sign_in_with_slack: bool,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            backend: Backend::Embedded,
            wire: Wire::OpenAi,
            segment_budget_ms: None,
            visibility_ms: 3000,
            extra_env: Vec::new(),
            sign_in_with_slack: false,
        }
    }
}

/// A running `baton dev` and the servers it talks to.
pub(crate) struct TestApp {
    pub url: String,
    pub llm: MockLlmServer,
    pub slack: FakeSlack,
    pub http: reqwest::Client,
    child: Option<Child>,
    data_dir: tempfile::TempDir,
    /// The moto server and the resources bootstrapped on it (AWS backend).
    pub aws: Option<(baton_aws::testing::MotoServer, baton_aws::Environment)>,
    options: Options,
    log_path: PathBuf,
    /// What the binary printed on stdout after its "listening" line (its
    /// metrics, with `BATON_METRICS=emf`), across restarts.
    stdout: std::sync::Arc<std::sync::Mutex<Vec<String>>>,
}

impl TestApp {
    pub(crate) async fn spawn(options: Options) -> TestApp {
        let llm = MockLlmServer::start().await;
        let slack = FakeSlack::start().await;
        let data_dir = tempfile::tempdir().expect("tempdir");
        let log_path = data_dir.path().join("baton.log");
        let aws = match options.backend {
            Backend::Embedded => None,
            Backend::Aws => {
                let moto = baton_aws::testing::MotoServer::start()
                    .expect("moto server (run ./scripts/test.sh to install it)");
                let cfg = moto.sdk_config().await;
                let names = baton_aws::ResourceNames::for_stack("baton-e2e");
                let visibility = (options.visibility_ms / 1000).max(1) as u32;
                let max_receive = options
                    .extra_env
                    .iter()
                    .find(|(k, _)| k == "BATON_MAX_RECEIVE_COUNT")
                    .and_then(|(_, v)| v.parse().ok())
                    .unwrap_or(5);
                let env = baton_aws::bootstrap(&cfg, &names, max_receive, visibility)
                    .await
                    .expect("bootstrap");
                Some((moto, env))
            }
        };
        let mut app = TestApp {
            url: String::new(),
            llm,
            slack,
            http: reqwest::Client::new(),
            child: None,
            data_dir,
            aws,
            options,
            log_path,
            stdout: Default::default(),
        };
        app.start();
        app
    }

    pub(crate) fn data_dir(&self) -> &Path {
        self.data_dir.path()
    }

    /// Starts the binary and waits for its "listening" line.
    fn start(&mut self) {
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_baton"));
        cmd.arg("dev")
            .arg("--listen")
            .arg("127.0.0.1:0")
            .arg("--data-dir")
            .arg(self.data_dir.path())
            .env_clear()
            .env("PATH", std::env::var("PATH").unwrap_or_default())
            .env("RUST_LOG", "info")
            .env("BATON_API_TOKEN", TOKEN)
            .env(
                "BATON_VISIBILITY_TIMEOUT_MS",
                self.options.visibility_ms.to_string(),
            )
            .env("SLACK_SIGNING_SECRET", SIGNING_SECRET)
            .env("SLACK_BOT_TOKEN", self.slack.bot_token().expose())
            .env("SLACK_API_URL", self.slack.base_url());
        if self.options.sign_in_with_slack {
            cmd.env("SLACK_CLIENT_ID", FakeSlack::OPENID_CLIENT_ID)
                .env("SLACK_CLIENT_SECRET", FakeSlack::OPENID_CLIENT_SECRET)
                .env(
                    "SLACK_OPENID_AUTHORIZE_URL",
                    self.slack.openid_authorize_url(),
                );
        }
        match self.options.wire {
            Wire::OpenAi => cmd
                .env("BATON_LLM_PROVIDER", "openai")
                .env("OPENAI_BASE_URL", self.llm.openai_base_url())
                .env("OPENAI_API_KEY", "sk-test-openai"),
            Wire::Anthropic => cmd
                .env("BATON_LLM_PROVIDER", "anthropic")
                .env("ANTHROPIC_BASE_URL", self.llm.anthropic_base_url())
                .env("ANTHROPIC_API_KEY", "sk-ant-test"),
            Wire::Bedrock => cmd
                .env("BATON_LLM_PROVIDER", "bedrock")
                .env("BEDROCK_ENDPOINT_URL", self.llm.bedrock_endpoint_url()),
        };
        if let Some((moto, env)) = &self.aws {
            cmd.arg("--backend")
                .arg("aws")
                .env("AWS_ENDPOINT_URL", moto.endpoint());
            cmd.env("AWS_ACCESS_KEY_ID", "testing")
                .env("AWS_SECRET_ACCESS_KEY", "testing")
                .env("AWS_REGION", "us-east-1");
            for (k, v) in env.vars() {
                cmd.env(k, v);
            }
        }
        if let Wire::Bedrock = self.options.wire {
            // After the AWS backend's keys: moto takes any, the mock LLM
            // verifies signatures made with its own.
            cmd.env("AWS_ACCESS_KEY_ID", baton_llm::mock::MOCK_AWS_ACCESS_KEY_ID)
                .env(
                    "AWS_SECRET_ACCESS_KEY",
                    baton_llm::mock::MOCK_AWS_SECRET_ACCESS_KEY,
                )
                .env("AWS_REGION", "us-east-1");
        }
        if let Some(b) = self.options.segment_budget_ms {
            cmd.env("BATON_SEGMENT_BUDGET_MS", b.to_string());
        }
        for (k, v) in &self.options.extra_env {
            cmd.env(k, v);
        }
        let log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&self.log_path)
            .expect("log file");
        cmd.stdout(Stdio::piped()).stderr(log);
        let mut child = cmd.spawn().expect("spawn baton dev");
        let stdout = child.stdout.take().expect("stdout");
        let mut reader = BufReader::new(stdout);
        let mut line = String::new();
        let started = Instant::now();
        loop {
            line.clear();
            let n = reader.read_line(&mut line).expect("read stdout");
            assert!(
                n > 0,
                "baton dev exited before listening; log:\n{}",
                self.log()
            );
            if let Some(rest) = line.strip_prefix("baton dev listening on ") {
                self.url = rest
                    .split_whitespace()
                    .next()
                    .unwrap_or_default()
                    .to_owned();
                break;
            }
            assert!(
                started.elapsed() < Duration::from_secs(30),
                "baton dev did not start"
            );
        }
        // Keep draining stdout so the child never blocks on a full pipe.
        let lines = self.stdout.clone();
        std::thread::spawn(move || {
            for line in reader.lines().map_while(Result::ok) {
                if let Ok(mut l) = lines.lock() {
                    l.push(line);
                }
            }
        });
        self.child = Some(child);
    }

    /// SIGKILL, no goodbye: what a crash looks like.
    pub(crate) fn kill9(&mut self) {
        if let Some(mut c) = self.child.take() {
            c.kill().expect("kill -9");
            let _ = c.wait();
        }
    }

    pub(crate) fn restart(&mut self) {
        self.kill9();
        self.start();
    }

    /// The lines printed on stdout so far.
    pub(crate) fn stdout(&self) -> Vec<String> {
        self.stdout.lock().map(|l| l.clone()).unwrap_or_default()
    }

    pub(crate) fn log(&self) -> String {
        std::fs::read_to_string(&self.log_path).unwrap_or_default()
    }

    pub(crate) async fn submit(&self, input: &str, key: Option<&str>) -> reqwest::Response {
        let mut req = self
            .http
            .post(format!("{}/tasks", self.url))
            .bearer_auth(TOKEN)
            .json(&json!({"input": input}));
        if let Some(k) = key {
            req = req.header("Idempotency-Key", k);
        }
        req.send().await.expect("POST /tasks")
    }

    pub(crate) async fn submit_ok(&self, input: &str) -> String {
        let r = self.submit(input, None).await;
        let status = r.status();
        let v: Value = r.json().await.unwrap_or(Value::Null);
        assert_eq!(
            status,
            202,
            "POST /tasks answered {v}; log:\n{}",
            self.log()
        );
        v["task_id"].as_str().expect("task_id").to_owned()
    }

    pub(crate) async fn get(&self, path: &str) -> (u16, Value) {
        let r = self
            .http
            .get(format!("{}{path}", self.url))
            .bearer_auth(TOKEN)
            .send()
            .await
            .expect("GET");
        let status = r.status().as_u16();
        (status, r.json().await.unwrap_or(Value::Null))
    }

    /// POSTs `body` as JSON to `path` with the token.
    pub(crate) async fn post_json(&self, path: &str, body: &Value) -> (u16, Value) {
        let r = self
            .http
            .post(format!("{}{path}", self.url))
            .bearer_auth(TOKEN)
            .json(body)
            .send()
            .await
            .expect("POST");
        let status = r.status().as_u16();
        (status, r.json().await.unwrap_or(Value::Null))
    }

    /// `baton ARGS… --url URL --token TOKEN` against the app, with no
    /// other environment: (success, stdout, stderr).
    pub(crate) async fn cli(&self, args: &[&str]) -> (bool, String, String) {
        let mut all = args.to_vec();
        all.extend(["--url", &self.url, "--token", TOKEN]);
        let (code, out, err) = run_cli(&all, None, &[]).await;
        (code == 0, out, err)
    }

    pub(crate) async fn task(&self, id: &str) -> Value {
        let (status, v) = self.get(&format!("/tasks/{id}")).await;
        assert_eq!(status, 200, "GET /tasks/{id}: {v}");
        v
    }

    /// Polls until the task waits (a minute at most, and failing at once
    /// if it ends instead); its status JSON.
    pub(crate) async fn wait_waiting(&self, id: &str) -> Value {
        let started = std::time::Instant::now();
        loop {
            let t = self.task(id).await;
            if t["status"] == "waiting" {
                return t;
            }
            assert!(
                started.elapsed() < std::time::Duration::from_secs(60)
                    && !matches!(
                        t["status"].as_str(),
                        Some("succeeded" | "failed" | "cancelled")
                    ),
                "task {id} did not wait: {t}\nlog:\n{}",
                self.log()
            );
            tokio::time::sleep(std::time::Duration::from_millis(50)).await;
        }
    }

    pub(crate) async fn events(&self, id: &str) -> Vec<Value> {
        let mut all = Vec::new();
        let mut after: Option<u64> = None;
        loop {
            let q = after.map(|n| format!("?after={n}")).unwrap_or_default();
            let (_, v) = self.get(&format!("/tasks/{id}/events{q}")).await;
            let page = v["events"].as_array().cloned().unwrap_or_default();
            if page.is_empty() {
                return all;
            }
            after = page.last().and_then(|e| e["seq"].as_u64());
            all.extend(page);
        }
    }

    /// Polls until the task reaches a terminal status.
    pub(crate) async fn wait_done(&self, id: &str, within: Duration) -> Value {
        let started = Instant::now();
        loop {
            let t = self.task(id).await;
            if matches!(
                t["status"].as_str(),
                Some("succeeded" | "failed" | "cancelled")
            ) {
                return t;
            }
            assert!(
                started.elapsed() < within,
                "task {id} did not finish: {t}\nlog:\n{}",
                self.log()
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    /// A Slack-signed request with a current timestamp.
    pub(crate) async fn slack_post(
        &self,
        path: &str,
        body: &[u8],
        content_type: &str,
        extra: &[(&str, &str)],
    ) -> reqwest::Response {
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .expect("clock")
            .as_secs() as i64;
        let secret = SigningSecret::new(SIGNING_SECRET);
        let mut req = self
            .http
            .post(format!("{}{path}", self.url))
            .header("content-type", content_type)
            .body(body.to_vec());
        for (k, v) in baton_slack::testing::signed_headers(&secret, body, now) {
            req = req.header(k, v);
        }
        for (k, v) in extra {
            req = req.header(*k, *v);
        }
        req.send().await.expect("POST slack")
    }
}

impl TestApp {
    /// Every task id the listing holds (the newest 100).
    pub(crate) async fn task_ids(&self) -> std::collections::BTreeSet<String> {
        let (status, v) = self.get("/tasks?limit=100").await;
        assert_eq!(status, 200, "{v}");
        v["tasks"]
            .as_array()
            .cloned()
            .unwrap_or_default()
            .iter()
            .filter_map(|t| t["task_id"].as_str().map(str::to_owned))
            .collect()
    }

    /// The app's connection store, opened beside it with the sealer it
    /// uses (its key file; moto's KMS key from `baton bootstrap`), as the
    /// OAuth callback stores connections.
    pub(crate) async fn connection_store(&self) -> baton_core::store::connections::ConnectionStore {
        let table = self.store().await.table().clone();
        let sealer: std::sync::Arc<dyn baton_core::connection::Sealer> = match &self.aws {
            Some((moto, env)) => std::sync::Arc::new(baton_aws::KmsSealer::new(
                baton_aws::kms_client(&moto.sdk_config().await),
                env.connections_key.clone(),
            )),
            None => std::sync::Arc::new(
                baton_embedded::KeyFileSealer::open_or_create(self.data_dir())
                    .expect("the key file"),
            ),
        };
        baton_core::store::connections::ConnectionStore::new(table, sealer)
    }

    /// The task store the running app writes to, opened beside it.
    pub(crate) async fn store(&self) -> baton_core::TaskStore {
        match &self.aws {
            Some((moto, env)) => {
                let cfg = moto.sdk_config().await;
                baton_core::TaskStore::new(
                    std::sync::Arc::new(baton_aws::DynamoTable::new(
                        baton_aws::dynamodb_client(&cfg),
                        env.table.clone(),
                    )),
                    std::sync::Arc::new(baton_aws::S3Blobs::new(
                        baton_aws::s3_client(&cfg),
                        env.trace_bucket.clone(),
                        None,
                    )),
                )
            }
            None => {
                let b = baton_embedded::EmbeddedBackend::open(self.data_dir(), Default::default())
                    .expect("open store");
                baton_core::TaskStore::new(b.table.clone(), b.blobs.clone())
            }
        }
    }
}

impl Drop for TestApp {
    fn drop(&mut self) {
        self.kill9();
    }
}

/// Checks a finished task's transcript: steps numbered 1..=n once each,
/// every tool call answered exactly once.
pub(crate) fn assert_clean_transcript(events: &[Value], steps: u64) {
    let assistant_steps: Vec<u64> = events
        .iter()
        .filter(|e| e["type"] == "assistant_message")
        .filter_map(|e| e["step"].as_u64())
        .collect();
    assert_eq!(
        assistant_steps,
        (1..=steps).collect::<Vec<_>>(),
        "each step applied exactly once"
    );
    let calls: Vec<String> = events
        .iter()
        .filter(|e| e["type"] == "assistant_message")
        .flat_map(|e| e["tool_calls"].as_array().cloned().unwrap_or_default())
        .filter_map(|c| c["id"].as_str().map(str::to_owned))
        .collect();
    let mut results: Vec<String> = events
        .iter()
        .filter(|e| e["type"] == "tool_result")
        .filter_map(|e| e["call_id"].as_str().map(str::to_owned))
        .collect();
    results.sort();
    let mut expected = calls.clone();
    expected.sort();
    assert_eq!(results, expected, "every tool call has exactly one result");
    let seqs: Vec<u64> = events.iter().filter_map(|e| e["seq"].as_u64()).collect();
    let summary: Vec<String> = events
        .iter()
        .map(|e| {
            format!(
                "{} {} {}",
                e["seq"],
                e["type"],
                e["detail"].as_str().or(e["call_id"].as_str()).unwrap_or("")
            )
        })
        .collect();
    assert_eq!(
        seqs,
        (0..seqs.len() as u64).collect::<Vec<_>>(),
        "transcript is gap-free and append-only:\n{}",
        summary.join("\n")
    );
}

/// Starts `baton dev` with only this agents file and these variables, and
/// expects it to refuse to start: its stderr. Fails (instead of hanging)
/// if it is still running after 30 s.
pub(crate) fn refused_start(agents: &str, env: &[(&str, &str)]) -> String {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_baton"));
    cmd.args(["dev", "--listen", "127.0.0.1:0", "--data-dir"])
        .arg(dir.path())
        .env_clear()
        .env("BATON_AGENTS_TOML", agents)
        .stdout(Stdio::null())
        .stderr(Stdio::piped());
    for (k, v) in env {
        cmd.env(k, v);
    }
    let mut child = cmd.spawn().expect("start baton dev");
    let started = Instant::now();
    let status = loop {
        if let Some(status) = child.try_wait().expect("wait") {
            break status;
        }
        if started.elapsed() > Duration::from_secs(30) {
            let _ = child.kill();
            panic!("baton dev started with:\n{agents}");
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    let mut stderr = String::new();
    if let Some(mut pipe) = child.stderr.take() {
        use std::io::Read;
        let _ = pipe.read_to_string(&mut stderr);
    }
    assert!(!status.success(), "started with:\n{agents}");
    stderr
}
