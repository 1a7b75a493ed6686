//! The loop recovers and explains (issue "no silent ends, no raw errors, no
//! double answers"), end to end: the real `baton dev` binary on both
//! backends, the mock LLM (its `#empty`, `#repeat`, `#poll`,
//! `#overflow_first`, `#reject_first` directives) and the fake Slack.

use crate::common::{Backend, Options, TestApp};
use serde_json::{json, Value};
use std::time::Duration;

const LONG: Duration = Duration::from_secs(60);

fn mention(event_id: &str, ts: &str, text: &str) -> Vec<u8> {
    serde_json::to_vec(&json!({
        "token": "ignored",
        "team_id": "T1",
        "api_app_id": "A1",
        "type": "event_callback",
        "event_id": event_id,
        "event_time": 1_700_000_000,
        "event": {
            "type": "app_mention",
            "user": "U1",
            "text": format!("<@UBOT> {text}"),
            "ts": ts,
            "channel": "C1",
            "event_ts": ts
        }
    }))
    .unwrap()
}

async fn spawn(backend: Backend, env: &[(&str, &str)]) -> TestApp {
    TestApp::spawn(Options {
        backend,
        extra_env: env
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect(),
        ..Options::default()
    })
    .await
}

async fn mention_ok(app: &TestApp, event_id: &str, ts: &str, text: &str) {
    let r = app
        .slack_post(
            "/slack/events",
            &mention(event_id, ts, text),
            "application/json",
            &[],
        )
        .await;
    assert_eq!(r.status(), 200);
}

/// The runtime notes of a task's transcript, by reason.
fn notes(events: &[Value], reason: &str) -> usize {
    events
        .iter()
        .filter(|e| e["type"] == "note" && e["reason"] == reason)
        .count()
}

async fn an_empty_answer_is_nudged_and_the_next_one_delivered(backend: Backend) {
    let app = spawn(backend, &[]).await;
    let id = app.submit_ok("#empty=1 #reply=here it is").await;
    let task = app.wait_done(&id, LONG).await;
    assert_eq!(task["status"], "succeeded", "{task}");
    assert_eq!(task["result"], "here it is");
    assert_eq!(notes(&app.events(&id).await, "empty_answer"), 1);
    assert_eq!(app.llm.request_count(), 2);
}

async fn empty_answers_end_with_a_message_posted(backend: Backend) {
    let app = spawn(backend, &[]).await;
    mention_ok(&app, "EvEmpty", "1700000000.000200", "#empty=5").await;
    let posts = app.slack.wait_for_posts(1, LONG).await;
    assert_eq!(posts.len(), 1, "{}", app.log());
    assert!(
        posts[0].text.contains("could not produce an answer"),
        "{}",
        posts[0].text
    );
    assert_eq!(
        app.llm.request_count(),
        2,
        "one nudge, then the user is told"
    );
}

async fn a_request_too_long_is_compacted_and_retried(backend: Backend) {
    let app = spawn(backend, &[]).await;
    let id = app.submit_ok("#overflow_first=1 #steps=3").await;
    let task = app.wait_done(&id, LONG).await;
    assert_eq!(task["status"], "succeeded", "{task}");
    assert_eq!(task["result"], "[scripted model] done after 3 steps");
    // The refused call, then one per step (compaction had nothing to do).
    assert!(app.llm.request_count() >= 4, "{}", app.llm.request_count());
}

async fn a_refused_request_is_told_without_provider_text(backend: Backend) {
    let app = spawn(backend, &[]).await;
    mention_ok(&app, "EvReject", "1700000000.000300", "#reject_first=1").await;
    let posts = app.slack.wait_for_posts(1, LONG).await;
    assert_eq!(posts.len(), 1, "{}", app.log());
    let text = &posts[0].text;
    assert!(
        text.contains("the model provider refused the request"),
        "{text}"
    );
    for leak in ["arn:", "123456789012", "not authorized", "400"] {
        assert!(!text.contains(leak), "{leak} in {text}");
    }
}

async fn polling_with_sleep_is_not_a_loop(backend: Backend) {
    let server = wiremock::MockServer::start().await;
    wiremock::Mock::given(wiremock::matchers::method("GET"))
        .respond_with(wiremock::ResponseTemplate::new(200).set_body_string("still building"))
        .mount(&server)
        .await;
    let addr = server.address().to_string();
    let app = spawn(backend, &[("BATON_HTTP_ALLOW", &addr)]).await;
    let id = app
        .submit_ok(&format!(
            "#tool=http_request #args={{\"url\":\"http://{addr}/status\"}} #poll=10"
        ))
        .await;
    let task = app.wait_done(&id, Duration::from_secs(120)).await;
    assert_eq!(task["status"], "succeeded", "{task}");
    assert_eq!(
        task["result"],
        "[scripted model] polled http_request 10 times"
    );
    assert_eq!(server.received_requests().await.unwrap().len(), 10);
    assert_eq!(notes(&app.events(&id).await, "repeating"), 0);
}

async fn the_same_call_in_a_row_is_warned_then_stopped_with_a_summary(backend: Backend) {
    let app = spawn(backend, &[]).await;
    let id = app
        .submit_ok("#tool=current_time #args={\"timezone\":\"UTC\"} #repeat=10")
        .await;
    let task = app.wait_done(&id, LONG).await;
    assert_eq!(task["status"], "failed", "{task}");
    let error = task["error"].as_str().unwrap();
    assert!(error.contains("same `current_time` call"), "{error}");
    assert!(
        task["result"].as_str().unwrap().contains("summary after"),
        "{task}"
    );
    let events = app.events(&id).await;
    assert_eq!(notes(&events, "repeating"), 1, "warned once");
    assert_eq!(notes(&events, "summary"), 1);
    let ran = events
        .iter()
        .filter(|e| e["type"] == "tool_result" && e["is_error"] == false)
        .count();
    assert_eq!(ran, 2, "the third call in a row was not run");
}

async fn the_tool_cap_refuses_only_the_calls_past_it(backend: Backend) {
    let agents = "[defaults.limits]\nmax_tool_calls = { current_time = 2 }\n";
    let app = spawn(backend, &[("BATON_AGENTS_TOML", agents)]).await;
    let id = app.submit_ok("#steps=2 #parallel=3").await;
    let task = app.wait_done(&id, LONG).await;
    assert_eq!(task["status"], "succeeded", "{task}");
    let results: Vec<Value> = app
        .events(&id)
        .await
        .into_iter()
        .filter(|e| e["type"] == "tool_result")
        .collect();
    assert_eq!(results.len(), 3);
    let refused: Vec<&Value> = results.iter().filter(|r| r["is_error"] == true).collect();
    assert_eq!(refused.len(), 1, "{results:?}");
    assert!(refused[0]["content"]
        .as_str()
        .unwrap()
        .contains("at most 2 times"));
}

async fn the_step_limit_ends_with_a_summary_posted(backend: Backend) {
    let app = spawn(backend, &[("BATON_MAX_STEPS", "3")]).await;
    mention_ok(&app, "EvSteps", "1700000000.000400", "#steps=10").await;
    let posts = app.slack.wait_for_posts(1, LONG).await;
    assert_eq!(posts.len(), 1, "{}", app.log());
    let text = &posts[0].text;
    assert!(text.contains("step limit reached (3 steps)"), "{text}");
    assert!(text.contains("summary after"), "{text}");
}

async fn a_crash_while_posting_leaves_one_answer(backend: Backend) {
    let mut app = spawn(backend, &[]).await;
    app.slack
        .hold_next("chat.postMessage", Duration::from_secs(3));
    mention_ok(&app, "EvCrash", "1700000000.000500", "#reply=exactly once").await;
    // The fake has the message and holds the answer back: die now.
    let posts = app.slack.wait_for_posts(1, LONG).await;
    assert_eq!(posts.len(), 1, "{}", app.log());
    app.kill9();
    app.restart();
    let started = std::time::Instant::now();
    while app.slack.calls("conversations.replies").is_empty() {
        assert!(started.elapsed() < LONG, "no recovery:\n{}", app.log());
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    // Give a second post every chance to show up.
    let more = app.slack.wait_for_posts(2, Duration::from_secs(3)).await;
    assert_eq!(more.len(), 1, "exactly one answer in the thread");
    assert_eq!(more[0].text, "exactly once");
}

async fn one_message_under_two_event_ids_is_one_task(backend: Backend) {
    let app = spawn(backend, &[]).await;
    mention_ok(&app, "EvFirst", "1700000000.000600", "#reply=once").await;
    mention_ok(&app, "EvSecond", "1700000000.000600", "#reply=once").await;
    let posts = app.slack.wait_for_posts(2, Duration::from_secs(5)).await;
    assert_eq!(posts.len(), 1, "{posts:?}");
    assert_eq!(app.llm.request_count(), 1);
}

/// Each scenario on both backends.
macro_rules! on_both_backends {
    ($($name:ident),* $(,)?) => {
        mod embedded {
            $(
                #[tokio::test(flavor = "multi_thread")]
                async fn $name() {
                    super::$name(super::Backend::Embedded).await;
                }
            )*
        }
        mod aws {
            $(
                #[tokio::test(flavor = "multi_thread")]
                async fn $name() {
                    super::$name(super::Backend::Aws).await;
                }
            )*
        }
    };
}

on_both_backends!(
    an_empty_answer_is_nudged_and_the_next_one_delivered,
    empty_answers_end_with_a_message_posted,
    a_request_too_long_is_compacted_and_retried,
    a_refused_request_is_told_without_provider_text,
    polling_with_sleep_is_not_a_loop,
    the_same_call_in_a_row_is_warned_then_stopped_with_a_summary,
    the_tool_cap_refuses_only_the_calls_past_it,
    the_step_limit_ends_with_a_summary_posted,
    a_crash_while_posting_leaves_one_answer,
    one_message_under_two_event_ids_is_one_task,
);
