//! The example's dev server, started as a user would (`custom-tool-dev`),
//! with an agents file that lists `word_count`: a task whose (scripted)
//! model calls the tool succeeds with the tool's answer. Fails if the tool
//! is not known to the agents file (the server refuses to start) or not
//! among the worker's tools (the model is told the tool is unknown).

use serde_json::{json, Value};
use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

const TOKEN: &str = "test-token-0123456789abcdef";

/// An agent that may call `word_count` and nothing else: the agents file
/// accepts the name only because the binary adds the tool.
const AGENTS: &str = r#"
[agents.default]
tools = ["word_count"]
"#;

/// The running dev server; killed when dropped.
struct DevServer {
    child: Child,
    url: String,
    log: std::path::PathBuf,
    _data_dir: tempfile::TempDir,
}

impl Drop for DevServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl DevServer {
    fn log(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }
}

/// Starts `custom-tool-dev` on a free port with the scripted model and
/// `agents`, and waits for its "listening" line; `Err` with its log when
/// it exits first.
fn start(agents: &str) -> Result<DevServer, String> {
    let data_dir = tempfile::tempdir().expect("tempdir");
    let log = data_dir.path().join("dev.log");
    let stderr = std::fs::File::create(&log).expect("log file");
    let mut child = Command::new(env!("CARGO_BIN_EXE_custom-tool-dev"))
        .arg("--listen")
        .arg("127.0.0.1:0")
        .arg("--data-dir")
        .arg(data_dir.path())
        .env_clear()
        .env("PATH", std::env::var("PATH").unwrap_or_default())
        .env("RUST_LOG", "info")
        .env("BATON_API_TOKEN", TOKEN)
        .env("BATON_LLM_PROVIDER", "scripted")
        .env("BATON_AGENTS_TOML", agents)
        .stdout(Stdio::piped())
        .stderr(stderr)
        .spawn()
        .expect("spawn custom-tool-dev");
    let mut reader = BufReader::new(child.stdout.take().expect("stdout"));
    let started = Instant::now();
    let mut line = String::new();
    let url = loop {
        line.clear();
        if reader.read_line(&mut line).expect("read stdout") == 0 {
            let _ = child.wait();
            return Err(std::fs::read_to_string(&log).unwrap_or_default());
        }
        if let Some(rest) = line.strip_prefix("baton dev listening on ") {
            break rest
                .split_whitespace()
                .next()
                .unwrap_or_default()
                .to_owned();
        }
        assert!(
            started.elapsed() < Duration::from_secs(60),
            "the dev server did not start"
        );
    };
    // Keep draining stdout so the child never blocks on a full pipe.
    std::thread::spawn(move || for _ in reader.lines() {});
    Ok(DevServer {
        child,
        url,
        log,
        _data_dir: data_dir,
    })
}

#[tokio::test]
async fn a_task_calls_the_custom_tool_through_the_dev_server() {
    let server = start(AGENTS).unwrap_or_else(|log| panic!("dev server exited; log:\n{log}"));
    let http = reqwest::Client::new();
    // The scripted model calls `word_count` with these arguments, then
    // answers with what the tool said (`\u0020`: a directive's JSON has no
    // spaces).
    let input = r#"#tool=word_count #args={"text":"to\u0020be\u0020or\u0020not\u0020to\u0020be"}"#;
    let r = http
        .post(format!("{}/tasks", server.url))
        .bearer_auth(TOKEN)
        .json(&json!({ "input": input }))
        .send()
        .await
        .expect("POST /tasks");
    assert_eq!(r.status(), 202, "log:\n{}", server.log());
    let id = r.json::<Value>().await.expect("JSON")["task_id"]
        .as_str()
        .expect("task_id")
        .to_owned();

    let started = Instant::now();
    let task = loop {
        let t: Value = http
            .get(format!("{}/tasks/{id}", server.url))
            .bearer_auth(TOKEN)
            .send()
            .await
            .expect("GET /tasks/{id}")
            .json()
            .await
            .expect("JSON");
        if matches!(
            t["status"].as_str(),
            Some("succeeded" | "failed" | "cancelled")
        ) {
            break t;
        }
        assert!(
            started.elapsed() < Duration::from_secs(60),
            "task did not finish: {t}\nlog:\n{}",
            server.log()
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    assert_eq!(
        task["status"],
        "succeeded",
        "{task}\nlog:\n{}",
        server.log()
    );
    assert_eq!(
        task["result"], "[scripted model] tool word_count said: 6 words, 1 lines, 18 characters",
        "{task}"
    );
}

#[test]
fn without_the_tool_the_agents_file_is_refused() {
    // The same agents file naming a tool no binary adds: the server does
    // not start, and says which tool.
    let agents = AGENTS.replace("word_count", "char_count");
    let log = match start(&agents) {
        Ok(server) => panic!("the dev server started; log:\n{}", server.log()),
        Err(log) => log,
    };
    assert!(log.contains("unknown tool `char_count`"), "{log}");
    assert!(
        log.contains("word_count"),
        "the known tools are listed: {log}"
    );
}
