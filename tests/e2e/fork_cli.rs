//! `baton task fork` against the real `baton dev`, on both backends: it
//! prints the fork's id (and with --wait its answer), the fork is linked
//! both ways and recorded when asked, and a bad step is refused with the
//! API's message and exit code 1.

use crate::common::{Backend, Options, TestApp};
use std::time::Duration;

const LONG: Duration = Duration::from_secs(60);

async fn the_cli_forks_a_task_from_a_step(backend: Backend) {
    let app = TestApp::spawn(Options {
        backend,
        ..Options::default()
    })
    .await;
    let source = app.submit_ok("#steps=3").await;
    let done = app.wait_done(&source, LONG).await;
    assert_eq!(done["status"], "succeeded", "{done}\nlog:\n{}", app.log());

    // Recorded, waited for: the id, then the answer, on stdout.
    let (ok, out, err) = app
        .cli(&[
            "task",
            "fork",
            &source,
            "--from-step",
            "1",
            "--recorded",
            "--wait",
        ])
        .await;
    assert!(ok, "{err}\nlog:\n{}", app.log());
    let lines: Vec<&str> = out.lines().collect();
    assert_eq!(lines.len(), 2, "the id and the answer: {out:?}");
    let fork = lines[0];
    assert_eq!(
        lines[1],
        done["result"].as_str().unwrap_or_default(),
        "{out}"
    );
    let status = app.task(fork).await;
    assert_eq!(status["status"], "succeeded", "{status}");
    assert_eq!(
        status["forked_from"]["task_id"],
        source.as_str(),
        "{status}"
    );
    assert_eq!(status["forked_from"]["step"], 1, "{status}");
    assert_eq!(status["tools"], "recorded", "{status}");
    let forks = app.task(&source).await["forks"].clone();
    assert_eq!(forks, serde_json::json!([fork]));

    // Live with another input, not waited for: the id alone.
    let (ok, out, err) = app
        .cli(&[
            "task",
            "fork",
            &source,
            "--from-step",
            "0",
            "--input",
            "#reply=Other.",
        ])
        .await;
    assert!(ok, "{err}");
    let live = out.trim();
    assert_eq!(out.lines().count(), 1, "{out:?}");
    let status = app.wait_done(live, LONG).await;
    assert_eq!(status["result"], "Other.", "{status}");
    assert_eq!(status["forked_from"]["step"], 0, "{status}");
    assert!(status.get("tools").is_none_or(|t| t == "live"), "{status}");

    // A step beyond the task's: refused, named, nothing printed.
    let (ok, out, err) = app
        .cli(&["task", "fork", &source, "--from-step", "99"])
        .await;
    assert!(!ok && out.is_empty(), "{out}");
    assert!(err.contains("HTTP 400") && err.contains("99"), "{err}");
    assert_eq!(
        app.task(&source).await["forks"].as_array().map(Vec::len),
        Some(2)
    );
}

on_both_backends!(the_cli_forks_a_task_from_a_step);
