//! The loop recovers and explains (issue "no silent ends, no raw errors, no
//! double answers"), end to end: the real `baton dev` binary on both
//! backends, the mock LLM (its `#empty`, `#repeat`, `#poll` and
//! `#reject_first` directives; a small-window model of its own for the
//! overflow) and the fake Slack.

use crate::common::{Backend, Options, TestApp};
use serde_json::{json, Value};
use std::sync::{Arc, Mutex};
use std::time::Duration;

const LONG: Duration = Duration::from_secs(60);

/// An agents file whose agents post answers whole.
const NO_STREAMING: &str = "[defaults]\nstream = false\n";

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

/// The id of the task a Slack message in channel `C1` of team `T1`
/// started (the thread it runs on names it).
async fn slack_task_id(app: &TestApp, thread_ts: &str) -> String {
    let store = app.store().await;
    let key = format!("slack:T1:C1:{thread_ts}");
    let started = std::time::Instant::now();
    loop {
        if let Some(thread) = store.thread(&key).await.expect("read the thread") {
            if let Some(id) = thread.active_task {
                return id.to_string();
            }
        }
        assert!(started.elapsed() < LONG, "no task on {key}:\n{}", app.log());
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
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

/// One request a [`SmallWindow`] model received.
#[derive(Clone)]
struct Seen {
    /// The request body's size on the wire.
    bytes: usize,
    /// Refused as too long for the window.
    refused: bool,
    /// A summarising request (compaction): it offers no tools.
    summarising: bool,
    /// The Chat Completions request body.
    body: Value,
}

impl Seen {
    /// The request's messages other than the system prompt.
    fn messages(&self) -> Vec<&Value> {
        self.body["messages"]
            .as_array()
            .into_iter()
            .flatten()
            .filter(|m| m["role"] != "system")
            .collect()
    }

    /// How many tool results the request carries.
    fn tool_results(&self) -> usize {
        self.messages()
            .iter()
            .filter(|m| m["role"] == "tool")
            .count()
    }
}

/// The text of a Chat Completions message (a string or text parts).
fn text_of(message: &Value) -> String {
    match &message["content"] {
        Value::String(s) => s.clone(),
        Value::Array(parts) => parts
            .iter()
            .filter_map(|p| p["text"].as_str())
            .collect::<Vec<_>>()
            .join("\n"),
        _ => String::new(),
    }
}

/// A model with a small context window, on the OpenAI wire: a request
/// (tools offered) more than `room` bytes larger than the first one is
/// refused with the provider's context-length error. Until it has refused
/// one, the model reads a build log per turn (`http_request` to
/// `logs`/log/N, each ~2.5 KB); after that it answers. A request without
/// tools (the compaction summariser) gets a short summary.
struct SmallWindow {
    logs: String,
    room: usize,
    seen: Arc<Mutex<Vec<Seen>>>,
}

/// The answer [`SmallWindow`] ends with.
const SMALL_WINDOW_ANSWER: &str = "All the build logs are clean.";

impl wiremock::Respond for SmallWindow {
    fn respond(&self, req: &wiremock::Request) -> wiremock::ResponseTemplate {
        let body: Value = serde_json::from_slice(&req.body).expect("JSON request");
        let summarising = body["tools"].as_array().is_none_or(Vec::is_empty);
        let mut seen = self.seen.lock().unwrap();
        let base = seen
            .iter()
            .find(|s| !s.summarising)
            .map_or(req.body.len(), |s| s.bytes);
        let refused = !summarising && req.body.len() > base + self.room;
        let refused_before = seen.iter().any(|s| s.refused);
        seen.push(Seen {
            bytes: req.body.len(),
            refused,
            summarising,
            body: body.clone(),
        });
        if refused {
            return wiremock::ResponseTemplate::new(400).set_body_json(json!({"error": {
                "message": "This model's maximum context length is 16385 tokens. However, your messages resulted in 17021 tokens.",
                "type": "invalid_request_error",
                "param": "messages",
                "code": "context_length_exceeded"
            }}));
        }
        let answered = seen.iter().filter(|s| !s.summarising && !s.refused).count();
        let message = if summarising {
            json!({"role": "assistant",
                   "content": "The user asked for the build logs to be read; the first ones were clean."})
        } else if refused_before || answered > 20 {
            json!({"role": "assistant", "content": SMALL_WINDOW_ANSWER})
        } else {
            let args = json!({"url": format!("{}/log/{answered}", self.logs)});
            json!({"role": "assistant", "content": null, "tool_calls": [{
                "id": format!("call_{answered}"), "type": "function",
                "function": {"name": "http_request", "arguments": args.to_string()}
            }]})
        };
        let finish = if message["tool_calls"].is_array() {
            "tool_calls"
        } else {
            "stop"
        };
        let prompt_tokens = req.body.len() / 4;
        wiremock::ResponseTemplate::new(200).set_body_json(json!({
            "id": "chatcmpl-small-window", "object": "chat.completion", "created": 1_700_000_000,
            "model": body["model"],
            "choices": [{"index": 0, "message": message, "finish_reason": finish}],
            "usage": {"prompt_tokens": prompt_tokens, "completion_tokens": 20,
                      "total_tokens": prompt_tokens + 20}
        }))
    }
}

async fn a_request_too_long_is_compacted_and_retried(backend: Backend) {
    // Build logs to read: ~2.5 KB each (under the size at which old tool
    // results are trimmed, so only the overflow shrinks the context).
    let logs = wiremock::MockServer::start().await;
    let line = "step ok: compiled, linked and tested without a warning\n";
    wiremock::Mock::given(wiremock::matchers::method("GET"))
        .respond_with(wiremock::ResponseTemplate::new(200).set_body_string(line.repeat(45)))
        .mount(&logs)
        .await;
    let model = wiremock::MockServer::start().await;
    let seen = Arc::new(Mutex::new(Vec::new()));
    wiremock::Mock::given(wiremock::matchers::method("POST"))
        .respond_with(SmallWindow {
            logs: format!("http://{}", logs.address()),
            // Each log read adds ~2.8 KB: five fit, the sixth does not.
            room: 15_500,
            seen: seen.clone(),
        })
        .mount(&model)
        .await;
    let allow = logs.address().to_string();
    let base_url = format!("{}/v1", model.uri());
    let app = spawn(
        backend,
        &[("BATON_HTTP_ALLOW", &allow), ("OPENAI_BASE_URL", &base_url)],
    )
    .await;
    let id = app
        .submit_ok("Read the build logs one by one and tell me if any failed.")
        .await;
    let task = app.wait_done(&id, LONG).await;
    assert_eq!(task["status"], "succeeded", "{task}\n{}", app.log());
    assert_eq!(task["result"], SMALL_WINDOW_ANSWER);

    let seen = seen.lock().unwrap().clone();
    let sizes: Vec<(usize, bool, bool)> = seen
        .iter()
        .map(|s| (s.bytes, s.refused, s.summarising))
        .collect();
    let refused: Vec<usize> = (0..seen.len()).filter(|&i| seen[i].refused).collect();
    assert_eq!(
        refused.len(),
        1,
        "one refusal, then the retry fits: {sizes:?}"
    );
    let failed = &seen[refused[0]];
    // A long conversation: many exchanges of tool calls and results.
    assert!(failed.tool_results() >= 5, "{sizes:?}");
    // Then the forced compaction summarised the older exchanges ...
    let after = &seen[refused[0] + 1..];
    assert_eq!(after.len(), 2, "the summary and one retry: {sizes:?}");
    assert!(
        after[0].summarising,
        "the summariser is asked next: {sizes:?}"
    );
    let summarised = after[0]
        .messages()
        .iter()
        .map(|m| text_of(m))
        .collect::<String>();
    assert!(
        summarised.contains("/log/1\""),
        "the summariser sees the earlier tool calls: {summarised}"
    );
    // ... and the one retry is smaller, and answered normally.
    let retry = &after[1];
    assert!(!retry.summarising && !retry.refused);
    assert!(retry.bytes < failed.bytes, "{sizes:?}");
    let cleared = retry
        .messages()
        .iter()
        .filter(|m| m["role"] == "tool" && text_of(m).contains("cleared to save context space"))
        .count();
    assert!(cleared >= 1, "old tool results are cleared too");
    let opening = retry
        .messages()
        .first()
        .map(|m| text_of(m))
        .unwrap_or_default();
    assert!(
        opening.contains("Summary of the earlier conversation"),
        "{opening}"
    );
    let events = app.events(&id).await;
    assert_eq!(
        events.iter().filter(|e| e["type"] == "summary").count(),
        1,
        "one summary in the transcript"
    );
}

async fn a_refused_request_is_told_without_provider_text(backend: Backend) {
    // The mock's refusal names the model and an account.
    let model = "acme-private-model-v7";
    let app = spawn(backend, &[("BATON_LLM_MODEL", model)]).await;
    mention_ok(&app, "EvReject", "1700000000.000300", "#reject_first=1").await;
    let posts = app.slack.wait_for_posts(1, LONG).await;
    assert_eq!(posts.len(), 1, "{}", app.log());
    let text = &posts[0].text;
    assert!(
        text.contains("the model provider refused the request"),
        "{text}"
    );
    let leaks = ["arn:", "123456789012", "not authorized", "400", model];
    for leak in leaks {
        assert!(!text.contains(leak), "{leak} in {text}");
    }
    // Nor in what the API says of the task.
    let id = slack_task_id(&app, "1700000000.000300").await;
    let task = app.wait_done(&id, LONG).await;
    assert_eq!(task["status"], "failed", "{task}");
    let error = task["error"].as_str().unwrap_or_default();
    assert!(
        error.contains("the model provider refused the request"),
        "{error}"
    );
    let result = task["result"].as_str().unwrap_or_default();
    for leak in leaks {
        assert!(
            !error.contains(leak) && !result.contains(leak),
            "{leak} in {task}"
        );
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
    // The whole-message post (answers that do not stream); a streamed
    // answer's exactly-once is tests/e2e/streaming.rs's.
    let mut app = spawn(backend, &[("BATON_AGENTS_TOML", NO_STREAMING)]).await;
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
    let id = slack_task_id(&app, "1700000000.000500").await;
    let task = app.wait_done(&id, LONG).await;
    assert_eq!(task["status"], "succeeded", "{task}");
    assert_eq!(task["result"], "exactly once");
}

async fn a_crash_while_posting_without_history_scopes_still_answers(backend: Backend) {
    // The whole-message post (answers that do not stream); a streamed
    // answer's exactly-once is tests/e2e/streaming.rs's.
    let mut app = spawn(backend, &[("BATON_AGENTS_TOML", NO_STREAMING)]).await;
    app.slack
        .hold_next("chat.postMessage", Duration::from_secs(3));
    mention_ok(&app, "EvNoScope", "1700000000.000700", "#reply=told anyway").await;
    let posts = app.slack.wait_for_posts(1, LONG).await;
    assert_eq!(posts.len(), 1, "{}", app.log());
    app.kill9();
    // The app was installed without channels:history: the retried post
    // cannot look for the first one, and posts again rather than never.
    app.slack
        .fail_always("conversations.replies", "missing_scope");
    app.restart();
    let posts = app.slack.wait_for_posts(2, LONG).await;
    assert_eq!(posts.len(), 2, "{}", app.log());
    assert!(posts.iter().all(|p| p.text == "told anyway"), "{posts:?}");
    let id = slack_task_id(&app, "1700000000.000700").await;
    let task = app.wait_done(&id, LONG).await;
    assert_eq!(task["status"], "succeeded", "{task}");
}

async fn one_message_under_two_event_ids_is_one_task(backend: Backend) {
    let app = spawn(backend, &[]).await;
    mention_ok(&app, "EvFirst", "1700000000.000600", "#reply=once").await;
    mention_ok(&app, "EvSecond", "1700000000.000600", "#reply=once").await;
    let posts = app.slack.wait_for_posts(2, Duration::from_secs(5)).await;
    assert_eq!(posts.len(), 1, "{posts:?}");
    assert_eq!(app.llm.request_count(), 1);
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
    a_crash_while_posting_without_history_scopes_still_answers,
    one_message_under_two_event_ids_is_one_task,
);
