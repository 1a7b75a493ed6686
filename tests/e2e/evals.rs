//! `baton eval run` through the real binary: six cases on the mock LLM
//! server with a known pass count (4 of 6: contains, not_contains, regex,
//! tool_called, max_steps and a judge graded from `#grade`), the three
//! reports written, the exit code following `--min-pass`; against a
//! deployment (`--url`) on both backends, and on the run's own local
//! stack with `--compare` giving two model columns; `--replay` running
//! exported cases as recorded forks of their source tasks.

use crate::common::{Backend, Options, TestApp, TOKEN};
use baton_llm::mock::MockLlmServer;
use serde_json::Value;
use std::path::Path;

/// The six cases; the first, third, fourth and sixth pass.
const CASES: &str = r##"{"id": "contains", "input": "#reply=The answer is 42.", "expect": {"contains": ["ANSWER is 42"]}}
{"id": "not-contains", "input": "#reply=I cannot help with that.", "expect": {"not_contains": ["cannot"]}}
{"id": "regex", "input": "#reply=Order A-1234 shipped.", "expect": {"regex": "A-\\d{4} shipped"}}
{"id": "tool", "input": "What time is it?", "expect": {"tool_called": "current_time", "max_steps": 3}}

{"id": "too-many-steps", "input": "#steps=4 count", "expect": {"max_steps": 2}}
{"id": "judged", "input": "#reply=Paris. #grade={\"score\": 0.9, \"reason\": \"names the capital\"}", "expect": {"judge": "The answer names Paris."}}
"##;

/// `baton eval run ARGS…` in `dir` with only `env` (and `PATH`) set:
/// (exit code, stdout, stderr).
async fn eval(dir: &Path, args: &[&str], env: &[(&str, &str)]) -> (i32, String, String) {
    let all: Vec<&str> = ["eval", "run"].iter().chain(args).copied().collect();
    let path = std::env::var("PATH").unwrap_or_default();
    let mut vars = vec![("PATH", path.as_str())];
    vars.extend_from_slice(env);
    crate::common::run_cli(&all, Some(dir), &vars).await
}

fn report(dir: &Path) -> Value {
    let text = std::fs::read_to_string(dir.join("eval-report.json")).expect("eval-report.json");
    serde_json::from_str(&text).expect("JSON")
}

/// The runs of each case that passed, by case id.
fn passed(report: &Value, model: usize) -> Vec<String> {
    report["cases"]
        .as_array()
        .expect("cases")
        .iter()
        .filter(|c| c["runs"][model]["passed"] == true)
        .map(|c| c["id"].as_str().unwrap_or_default().to_owned())
        .collect()
}

async fn an_eval_of_six_cases_scores_and_gates(backend: Backend) {
    let app = TestApp::spawn(Options {
        backend,
        ..Options::default()
    })
    .await;
    let dir = tempfile::tempdir().expect("tempdir");
    std::fs::write(dir.path().join("cases.jsonl"), CASES).expect("cases");
    let llm = app.llm.openai_base_url();
    // The judge's model: the same mock server, as the deployment's.
    let env = [
        ("BATON_LLM_PROVIDER", "openai"),
        ("OPENAI_BASE_URL", llm.as_str()),
        ("OPENAI_API_KEY", "sk-test-openai"),
        ("BATON_API_TOKEN", TOKEN),
    ];
    let url = app.url.clone();
    let base = ["cases.jsonl", "--url", &url, "--out", "reports"];

    let args = [&base[..], &["--min-pass", "0.9"]].concat();
    let (code, out, err) = eval(dir.path(), &args, &env).await;
    assert_eq!(code, 1, "under --min-pass: {out}\n{err}\n{}", app.log());
    let reports = dir.path().join("reports");
    for name in ["eval-report.md", "eval-report.html", "eval-report.json"] {
        assert!(reports.join(name).is_file(), "{name} written: {out}");
    }
    let r = report(&reports);
    assert_eq!(
        passed(&r, 0),
        ["contains", "regex", "tool", "judged"],
        "{r:#}"
    );
    assert_eq!(r["totals"][0]["passed"], 4);
    assert_eq!(r["totals"][0]["cases"], 6);
    let judged = &r["cases"][5]["runs"][0];
    assert_eq!(judged["judge_reason"], "names the capital", "{judged}");
    let steps = &r["cases"][4]["runs"][0];
    assert_eq!(steps["steps"], 4);
    assert!(steps["link"].as_str().unwrap_or_default().starts_with(&url));
    // The table: a line per case as it ends, then the totals.
    assert_eq!(
        out.lines().filter(|l| l.contains(" FAIL ")).count(),
        2,
        "{out}"
    );
    assert!(out.contains("4/6 passed (67%)"), "{out}");
    // Each case's task is a task of the deployment.
    let id = judged["task_id"].as_str().expect("task id");
    assert_eq!(app.task(id).await["result"], "Paris.");

    let args = [&base[..], &["--min-pass", "0.5"]].concat();
    let (code, out, err) = eval(dir.path(), &args, &env).await;
    assert_eq!(code, 0, "at --min-pass: {out}\n{err}");
    assert_eq!(report(&reports)["passed"], true);
}

/// Without `--url`, on a local stack started for the run; `--compare`
/// runs every case on both models, each task asking its own.
#[tokio::test(flavor = "multi_thread")]
async fn the_local_stack_runs_a_comparison() {
    let llm = MockLlmServer::start().await;
    let dir = tempfile::tempdir().expect("tempdir");
    std::fs::write(dir.path().join("cases.jsonl"), CASES).expect("cases");
    let base_url = llm.openai_base_url();
    let env = [
        ("BATON_LLM_PROVIDER", "openai"),
        ("OPENAI_BASE_URL", base_url.as_str()),
        ("OPENAI_API_KEY", "sk-test-openai"),
    ];
    let args = [
        "cases.jsonl",
        "--model",
        "model-a",
        "--compare",
        "model-b",
        "--concurrency",
        "3",
        "--min-pass",
        "0.5",
    ];
    let (code, out, err) = eval(dir.path(), &args, &env).await;
    assert_eq!(code, 0, "{out}\n{err}");
    let r = report(dir.path());
    assert_eq!(r["models"], serde_json::json!(["model-a", "model-b"]));
    assert_eq!(passed(&r, 0), ["contains", "regex", "tool", "judged"]);
    assert_eq!(passed(&r, 1), passed(&r, 0));
    assert_eq!(r["totals"][1]["model"], "model-b");
    let md = std::fs::read_to_string(dir.path().join("eval-report.md")).expect("md");
    assert!(md.contains("| | model-a | model-b |"), "{md}");
    let html = std::fs::read_to_string(dir.path().join("eval-report.html")).expect("html");
    assert!(html.contains("<th>model-a</th><th>model-b</th>"));
    // Every agent step asked one of the two; the judge asked its own.
    let asked: Vec<String> = llm.received().into_iter().map(|r| r.model).collect();
    for m in ["model-a", "model-b"] {
        assert!(asked.iter().any(|a| a == m), "{m} asked: {asked:?}");
    }
    // Twelve tasks' worth of lines, each model's totals.
    assert_eq!(
        out.lines().filter(|l| l.contains("model-b ")).count(),
        6,
        "{out}"
    );
    assert!(out.contains("model-a: 4/6 passed"), "{out}");
}

/// `--replay`: each case runs as a fork of its `task_id` from step 0 with
/// recorded tools, so the tool's answer is the source's; a case without
/// one stops the run before anything runs (exit 2).
async fn a_replay_forks_each_case_with_recorded_tools(backend: Backend) {
    let app = TestApp::spawn(Options {
        backend,
        ..Options::default()
    })
    .await;
    let source = app.submit_ok("What time is it?").await;
    let done = app
        .wait_done(&source, std::time::Duration::from_secs(60))
        .await;
    assert_eq!(done["status"], "succeeded", "{done}");
    let dir = tempfile::tempdir().expect("tempdir");
    let case = serde_json::json!({"id": "replayed", "input": "What time is it?",
        "task_id": source, "expect": {"tool_called": "current_time"}});
    std::fs::write(dir.path().join("cases.jsonl"), format!("{case}\n")).expect("cases");
    let env = [("BATON_API_TOKEN", TOKEN)];
    let url = app.url.clone();
    let args = ["cases.jsonl", "--url", &url, "--replay", "--min-pass", "1"];
    let (code, out, err) = eval(dir.path(), &args, &env).await;
    assert_eq!(code, 0, "{out}\n{err}\n{}", app.log());
    let r = report(dir.path());
    let fork_id = r["cases"][0]["runs"][0]["task_id"]
        .as_str()
        .expect("the fork's id")
        .to_owned();
    assert_ne!(fork_id, source);
    let fork = app.task(&fork_id).await;
    assert_eq!(fork["forked_from"]["task_id"], source.as_str(), "{fork}");
    assert_eq!(fork["forked_from"]["step"], 0);
    assert_eq!(fork["tools"], "recorded");
    // The time the tool told the source, replayed.
    assert_eq!(fork["result"], done["result"]);

    let no_source = "{\"id\": \"fresh\", \"input\": \"hi\"}\n";
    std::fs::write(dir.path().join("fresh.jsonl"), no_source).expect("cases");
    let args = ["fresh.jsonl", "--url", &url, "--replay", "--out", "fresh"];
    let (code, _, err) = eval(dir.path(), &args, &env).await;
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("case fresh has no task_id"), "{err}");
    assert!(!dir.path().join("fresh").exists());
}

on_both_backends!(
    an_eval_of_six_cases_scores_and_gates,
    a_replay_forks_each_case_with_recorded_tools
);
