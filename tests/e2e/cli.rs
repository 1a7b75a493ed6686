//! The CLI against the real `baton dev`, on both backends: `task submit
//! --wait` prints the task's id and then its answer, each once, on stdout
//! (its progress on stderr); the token comes from `--token`, from
//! `BATON_API_TOKEN` or from `baton dev`'s data directory, and the help
//! says so without showing it; the API takes the bearer scheme in any case.

use crate::common::{Backend, Options, TestApp, TOKEN};

/// `baton ARGS…` with only `env` set: (success, stdout, stderr).
async fn baton(args: &[&str], env: &[(&str, &str)]) -> (bool, String, String) {
    let (code, out, err) = crate::common::run_cli(args, None, env).await;
    (code == 0, out, err)
}

async fn the_cli_prints_each_thing_once(backend: Backend) {
    let app = TestApp::spawn(Options {
        backend,
        ..Options::default()
    })
    .await;
    let answer = "The deploy finished: 3 services healthy.";
    let input = format!("#chunk_ms=20 #reply={answer}");
    let no_token = tempfile::tempdir().expect("tempdir");
    let no_token_dir = no_token.path().to_string_lossy().into_owned();

    // --token, no variable: the id, then the answer, once each.
    let (ok, out, err) = baton(
        &[
            "task", "submit", "--wait", &input, "--url", &app.url, "--token", TOKEN,
        ],
        &[("BATON_DATA_DIR", &no_token_dir)],
    )
    .await;
    assert!(ok, "{err}");
    let lines: Vec<&str> = out.lines().collect();
    assert_eq!(lines.len(), 2, "the id and the answer only: {out:?}");
    let id = lines[0];
    assert_eq!(lines[1], answer);
    assert_eq!(app.task(id).await["status"], "succeeded");
    assert!(!err.contains(id), "the id is printed once: {err}");
    let progress_with_answer: Vec<&str> = err
        .lines()
        .filter(|l| l.contains(answer) && !l.contains("user: "))
        .collect();
    assert!(
        progress_with_answer.is_empty(),
        "the answer is printed once: {progress_with_answer:?}"
    );
    assert!(
        err.contains("assistant answered"),
        "progress on stderr: {err}"
    );

    // The variable, and the URL from its variable too.
    let (ok, out, err) = baton(
        &["task", "submit", "#reply=hi"],
        &[("BATON_API_TOKEN", TOKEN), ("BATON_URL", &app.url)],
    )
    .await;
    assert!(ok, "{err}");
    assert_eq!(out.lines().count(), 1, "{out}");

    // No token anywhere: the error says where one comes from.
    let (ok, _, err) = baton(
        &["task", "list", "--url", &app.url],
        &[("BATON_DATA_DIR", &no_token_dir)],
    )
    .await;
    assert!(!ok);
    assert!(
        err.contains("BATON_API_TOKEN") && err.contains("--token"),
        "{err}"
    );

    // The help says where the token comes from, and never shows it.
    let (ok, help, _) = baton(&["task", "submit", "--help"], &[("BATON_API_TOKEN", TOKEN)]).await;
    assert!(ok);
    for needle in [
        "--token",
        "BATON_API_TOKEN",
        "api-token",
        "--url",
        "BATON_URL",
    ] {
        assert!(help.contains(needle), "{needle} in {help}");
    }
    assert!(!help.contains(TOKEN), "{help}");

    // The scheme of the Authorization header in any case (RFC 9110).
    for scheme in ["bearer", "BEARER", "Bearer"] {
        let r = app
            .http
            .get(format!("{}/tasks/{id}", app.url))
            .header("authorization", format!("{scheme} {TOKEN}"))
            .send()
            .await
            .expect("GET");
        assert_eq!(r.status(), 200, "{scheme}");
    }
}

mod embedded {
    use super::*;

    #[tokio::test(flavor = "multi_thread")]
    async fn the_cli_prints_each_thing_once() {
        super::the_cli_prints_each_thing_once(Backend::Embedded).await;
    }
}

mod aws {
    use super::*;

    #[tokio::test(flavor = "multi_thread")]
    async fn the_cli_prints_each_thing_once() {
        super::the_cli_prints_each_thing_once(Backend::Aws).await;
    }
}
