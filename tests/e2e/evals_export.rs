//! `baton eval export` against the real `baton dev`, on both backends:
//! answers rated through Slack's feedback buttons (one up, one down, one
//! tied, one unrated) become exactly the cases `--feedback` asks for, with
//! the rated answer as `reference` and the rubric of its rating; `--task`
//! exports a chosen task; a garbage `--since` is refused; the exported
//! cases replay with `baton eval run --replay`.

use crate::common::{Backend, Options, TestApp};
use crate::slack_surfaces::{click, feedback_click, mention, send, task_on, CHANNEL};
use serde_json::Value;
use std::time::{Duration, Instant};

const LONG: Duration = Duration::from_secs(60);

/// The cases of an export's stdout, by id.
fn cases(out: &str) -> Vec<Value> {
    let mut cases: Vec<Value> = out
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{e}: {l}")))
        .collect();
    cases.sort_by_key(|c| c["id"].as_str().unwrap_or_default().to_owned());
    cases
}

/// A Slack task asked in its own thread (`ts`) answering `reply`, run to
/// its end; its id and its answer's message (with the feedback buttons).
async fn answered(
    app: &TestApp,
    n: u32,
    reply: &str,
) -> (String, baton_slack::testing::PostedMessage) {
    let ts = format!("1700001{n:03}.000100");
    send(
        app,
        &mention(&format!("EvX{n}"), "U1", &ts, &format!("#reply={reply}")),
    )
    .await;
    let id = task_on(app, &format!("slack:T1:{CHANNEL}:{ts}")).await;
    let task = app.wait_done(&id, LONG).await;
    assert_eq!(task["status"], "succeeded", "{task}\nlog:\n{}", app.log());
    let started = Instant::now();
    loop {
        let shown = app
            .slack
            .posted()
            .iter()
            .filter(|p| p.thread_ts.as_deref() == Some(ts.as_str()))
            .find_map(|p| app.slack.message(&p.channel, &p.ts))
            .filter(|m| m.text == reply && m.blocks.is_some());
        if let Some(m) = shown {
            return (id, m);
        }
        assert!(started.elapsed() < LONG, "no answer with buttons for {id}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

async fn vote(
    app: &TestApp,
    user: &str,
    answer: &baton_slack::testing::PostedMessage,
    rating: &str,
    ts: &str,
) {
    let body = feedback_click(user, answer, rating, ts);
    assert_eq!(click(app, &body).await, serde_json::json!({"ok": true}));
}

async fn rated_answers_become_cases(backend: Backend) {
    let app = TestApp::spawn(Options {
        backend,
        ..Options::default()
    })
    .await;
    let (up, up_answer) = answered(&app, 1, "Deployed.").await;
    let (down, down_answer) = answered(&app, 2, "No idea.").await;
    let (tie, tie_answer) = answered(&app, 3, "Maybe.").await;
    let (unrated, _) = answered(&app, 4, "Unrated.").await;
    vote(&app, "U2", &up_answer, "positive", "1700002000.000100").await;
    vote(&app, "U3", &up_answer, "positive", "1700002000.000200").await;
    vote(&app, "U4", &up_answer, "negative", "1700002000.000300").await;
    vote(&app, "U2", &down_answer, "negative", "1700002001.000100").await;
    vote(&app, "U2", &tie_answer, "positive", "1700002002.000100").await;
    vote(&app, "U3", &tie_answer, "negative", "1700002002.000200").await;

    let (ok, out, err) = app.cli(&["eval", "export", "--feedback", "up"]).await;
    assert!(ok, "{err}");
    let got = cases(&out);
    assert_eq!(got.len(), 1, "{out}");
    let case = &got[0];
    assert_eq!(case["id"], up.as_str());
    assert_eq!(case["task_id"], up.as_str());
    assert_eq!(case["reference"], "Deployed.");
    assert_eq!(case["input"], "#reply=Deployed.", "{case}");
    let rubric = case["expect"]["judge"].as_str().unwrap_or_default();
    assert!(
        rubric.contains("thumbs-up") && rubric.contains("at least as good"),
        "{rubric}"
    );
    assert_eq!(
        case.as_object().map(|o| o.len()),
        Some(5),
        "id, input, expect, reference, task_id: {case}"
    );
    assert!(err.contains("exported 1 case"), "{err}");

    // Down: the rejected answer and the tie, each to do better than.
    let (ok, out, err) = app
        .cli(&["eval", "export", "--feedback", "down", "--since", "1h"])
        .await;
    assert!(ok, "{err}");
    let got = cases(&out);
    let mut ids: Vec<&str> = got.iter().filter_map(|c| c["task_id"].as_str()).collect();
    ids.sort();
    let mut want = vec![down.as_str(), tie.as_str()];
    want.sort();
    assert_eq!(ids, want, "{out}");
    for c in &got {
        let rubric = c["expect"]["judge"].as_str().unwrap_or_default();
        assert!(
            rubric.contains("thumbs-down") && rubric.contains("avoid its faults"),
            "{c}"
        );
    }
    let the_down = got
        .iter()
        .find(|c| c["task_id"] == down.as_str())
        .expect("the down case");
    assert_eq!(the_down["reference"], "No idea.");
    assert_eq!(the_down["input"], "#reply=No idea.");

    // Any (the default without --task): the three rated, never the unrated.
    for args in [
        &["eval", "export", "--feedback", "any"][..],
        &["eval", "export"][..],
    ] {
        let (ok, out, err) = app.cli(args).await;
        assert!(ok, "{err}");
        let ids: Vec<String> = cases(&out)
            .iter()
            .filter_map(|c| c["task_id"].as_str().map(str::to_owned))
            .collect();
        assert_eq!(ids.len(), 3, "{out}");
        for id in [&up, &down, &tie] {
            assert!(ids.contains(id), "{id} in {out}");
        }
        assert!(!ids.contains(&unrated), "{out}");
    }

    // The exported cases replay: each a recorded fork of its task from
    // step 0, graded by the (scripted) judge against its reference.
    let (ok, out, err) = app.cli(&["eval", "export"]).await;
    assert!(ok, "{err}");
    let dir = tempfile::tempdir().expect("tempdir");
    let file = dir.path().join("cases.jsonl");
    std::fs::write(&file, &out).expect("write the cases");
    let file = file.to_string_lossy().into_owned();
    let reports = dir.path().to_string_lossy().into_owned();
    let posts_before = app.slack.posted().len();
    let (ok, ran, err) = app
        .cli(&[
            "eval",
            "run",
            &file,
            "--replay",
            "--min-pass",
            "1",
            "--out",
            &reports,
        ])
        .await;
    assert!(ok, "{ran}\n{err}\nlog:\n{}", app.log());
    let report: Value = serde_json::from_slice(
        &std::fs::read(dir.path().join("eval-report.json")).expect("eval-report.json"),
    )
    .expect("the report's JSON");
    assert_eq!(report["totals"][0]["pass_rate"], 1.0, "{report}");
    assert_eq!(
        app.slack.posted().len(),
        posts_before,
        "a replay posts nothing in Slack"
    );
    let text = report.to_string();
    for id in [&up, &down, &tie] {
        assert!(text.contains(id.as_str()), "{id} in {report}");
    }

    // A chosen task: succeeded, unrated, exported as a good answer; with
    // --feedback, next to the rated ones, once each.
    let http = app.submit_ok("#reply=Chosen answer.").await;
    assert_eq!(app.wait_done(&http, LONG).await["status"], "succeeded");
    let (ok, out, err) = app
        .cli(&["eval", "export", "--task", &unrated, "--task", &http])
        .await;
    assert!(ok, "{err}");
    let got = cases(&out);
    assert_eq!(got.len(), 2, "{out}");
    let chosen = got
        .iter()
        .find(|c| c["task_id"] == http.as_str())
        .expect("the chosen case");
    assert_eq!(chosen["input"], "#reply=Chosen answer.");
    assert_eq!(chosen["reference"], "Chosen answer.");
    assert!(chosen["expect"]["judge"]
        .as_str()
        .unwrap_or_default()
        .contains("thumbs-up"));
    let (ok, out, err) = app
        .cli(&["eval", "export", "--feedback", "up", "--task", &up, &http])
        .await;
    assert!(ok, "{err}");
    assert_eq!(cases(&out).len(), 2, "{out}");

    // Refused: a garbage --since (before any request), an unknown task.
    for bad in ["30", "yesterday", "-1d", "0d"] {
        let since = format!("--since={bad}");
        let (ok, out, err) = app.cli(&["eval", "export", &since]).await;
        assert!(!ok && out.is_empty(), "{bad}: {out}");
        assert!(err.contains("--since"), "{bad}: {err}");
    }
    let (ok, out, err) = app.cli(&["eval", "export", "--feedback", "sideways"]).await;
    assert!(!ok && out.is_empty() && err.contains("--feedback"), "{err}");
    let missing = "0193aaaa-aaaa-7aaa-8aaa-aaaaaaaaaaaa";
    let (ok, out, err) = app
        .cli(&["eval", "export", "--task", &up, "--task", missing])
        .await;
    assert!(!ok, "{out}");
    assert!(out.is_empty(), "nothing printed on an error: {out}");
    assert!(
        err.contains("HTTP 404") || err.contains("HTTP 400"),
        "{err}"
    );
}

on_both_backends!(rated_answers_become_cases);
