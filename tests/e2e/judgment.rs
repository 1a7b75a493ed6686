//! The agent's judgment end to end (issue #22): the real `baton dev` on
//! both backends, an agents file with model tiers (so tasks are routed),
//! prompt modules and supervision every 2 steps, the mock LLM answering
//! the forced `route`, `plan`, `supervise` and `verdict` calls from the
//! task's directives (`shared/llm/src/script.rs`), and the fake Slack.
//!
//! What the model was asked is read back from the mock
//! ([`baton_llm::mock::MockLlmServer::received`]): the forced calls by the
//! tool they force, the steps (and closing summaries) as the requests
//! forcing none. A crash mid-call holds the call open with
//! [`baton_llm::mock::MockLlmServer::hold_next`].

use crate::common::{Backend, Options, TestApp, TOKEN};
use baton_core::{CompletionRequest, Message};
use serde_json::{json, Value};
use std::time::{Duration, Instant};

const LONG: Duration = Duration::from_secs(120);
/// Long enough for a test to kill the process while a call is held.
const HOLD: Duration = Duration::from_secs(30);

const FAST: &str = "mock-fast";
const DEFAULT: &str = "mock-default";
const STRONG: &str = "mock-strong";

/// Tiers (so tasks are routed), two prompt modules the default agent may
/// use, and a supervision checkpoint every 2 steps (the wall-time one far
/// off, so only steps count).
const AGENTS: &str = r#"
[models]
fast = "mock-fast"
default = "mock-default"
strong = "mock-strong"

[modules.sql]
description = "Writing and checking SQL queries"
prompt = "SQL-MODULE: qualify every column with its table."

[modules.incident]
description = "Handling a production incident"
prompt = "INCIDENT-MODULE: state the impact first."

[agents.default]
modules = ["sql", "incident"]

[agents.default.supervise]
every_steps = 2
every = "1h"
"#;

async fn spawn(backend: Backend) -> TestApp {
    spawn_with(backend, AGENTS).await
}

async fn spawn_with(backend: Backend, agents: &str) -> TestApp {
    TestApp::spawn(Options {
        backend,
        extra_env: vec![("BATON_AGENTS_TOML".into(), agents.into())],
        ..Options::default()
    })
    .await
}

/// The requests the mock received that force `tool`, in order.
fn forced(app: &TestApp, tool: &str) -> Vec<CompletionRequest> {
    app.llm
        .received()
        .into_iter()
        .filter(|r| r.tool_choice.forced() == Some(tool))
        .collect()
}

/// The requests that force no tool: the steps, and closing summaries.
fn steps(app: &TestApp) -> Vec<CompletionRequest> {
    app.llm
        .received()
        .into_iter()
        .filter(|r| r.tool_choice.forced().is_none())
        .collect()
}

/// The user messages of a request (runtime notes among them), and a
/// forced call's one message.
fn user_texts(request: &CompletionRequest) -> Vec<&str> {
    request
        .messages
        .iter()
        .filter_map(|m| match m {
            Message::User { content } => Some(content.as_str()),
            _ => None,
        })
        .collect()
}

/// The task's events of `kind`.
fn of_type(events: &[Value], kind: &str) -> Vec<Value> {
    events
        .iter()
        .filter(|e| e["type"] == kind)
        .cloned()
        .collect()
}

/// Polls until `check` holds.
async fn eventually(app: &TestApp, what: &str, check: impl Fn() -> bool) {
    let started = Instant::now();
    while !check() {
        assert!(started.elapsed() < LONG, "{what}; log:\n{}", app.log());
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// `POST /tasks` on a conversation thread: the answer's JSON.
async fn post_on_thread(app: &TestApp, input: &str, thread: &str) -> Value {
    let r = app
        .http
        .post(format!("{}/tasks", app.url))
        .bearer_auth(TOKEN)
        .json(&json!({"input": input, "thread": thread}))
        .send()
        .await
        .expect("POST /tasks");
    assert_eq!(r.status(), 202);
    r.json().await.expect("JSON")
}

fn mention(event_id: &str, ts: &str, text: &str) -> Vec<u8> {
    serde_json::to_vec(&json!({
        "type": "event_callback", "team_id": "T1", "api_app_id": "A1",
        "event_id": event_id, "event_time": 1_700_000_000,
        "event": {"type": "app_mention", "user": "U1", "text": format!("<@UBOT> {text}"),
                  "ts": ts, "channel": "C1", "event_ts": ts}
    }))
    .expect("JSON")
}

/// Sends a mention in channel `C1`; the id of the task it started.
async fn mention_task(app: &TestApp, event_id: &str, ts: &str, text: &str) -> String {
    let r = app
        .slack_post(
            "/slack/events",
            &mention(event_id, ts, text),
            "application/json",
            &[],
        )
        .await;
    assert_eq!(r.status(), 200);
    let store = app.store().await;
    let key = format!("slack:T1:C1:{ts}");
    let started = Instant::now();
    loop {
        if let Some(id) = store
            .thread(&key)
            .await
            .expect("read the thread")
            .and_then(|t| t.active_task)
        {
            return id.to_string();
        }
        assert!(started.elapsed() < LONG, "no task on {key}:\n{}", app.log());
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// The task's trace once every `llm_call` of it is written (the last
/// segment writes its spans just after the task ends).
async fn llm_spans(app: &TestApp, id: &str, calls: usize) -> Vec<Value> {
    let started = Instant::now();
    loop {
        let (status, trace) = app.get(&format!("/tasks/{id}/trace")).await;
        assert_eq!(status, 200, "{trace}");
        let spans: Vec<Value> = trace["spans"]
            .as_array()
            .into_iter()
            .flatten()
            .filter(|s| s["name"] == "llm_call")
            .cloned()
            .collect();
        if spans.len() >= calls {
            return spans;
        }
        assert!(
            started.elapsed() < LONG,
            "{} of {calls} model calls in the trace: {trace}",
            spans.len()
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// The router picks the strong tier and the `sql` module: recorded as a
/// `route` event, the step runs on the strong model with the module's
/// text (and not the other's) in its system prompt, and the routing and
/// gate calls count in the task's tokens, each a model-call span with its
/// purpose.
async fn the_router_picks_the_tier_and_modules(backend: Backend) {
    let app = spawn(backend).await;
    let id = app
        .submit_ok(
            r#"Which orders shipped late? #route={"tier": "strong", "modules": ["sql"], "needs_plan": false} #reply=Three orders shipped late."#,
        )
        .await;
    let task = app.wait_done(&id, LONG).await;
    assert_eq!(task["status"], "succeeded", "{task}\n{}", app.log());
    assert_eq!(task["result"], "Three orders shipped late.");

    let events = app.events(&id).await;
    let routes = of_type(&events, "route");
    assert_eq!(routes.len(), 1, "routed once: {routes:?}");
    assert_eq!(routes[0]["tier"], "strong");
    assert_eq!(routes[0]["modules"], json!(["sql"]));
    assert_eq!(routes[0]["needs_plan"], false);
    assert!(routes[0].get("fallback").is_none(), "{}", routes[0]);
    // Before the step it decided.
    let first_step = events
        .iter()
        .position(|e| e["type"] == "assistant_message")
        .expect("a step");
    let routed_at = events.iter().position(|e| e["type"] == "route").unwrap();
    assert!(routed_at < first_step);

    // The router ran on the fast tier and was shown the modules to pick from.
    let route = forced(&app, "route");
    assert_eq!(route.len(), 1);
    assert_eq!(route[0].model, FAST);
    let shown = user_texts(&route[0]).join("\n");
    assert!(shown.contains("Which orders shipped late?"), "{shown}");
    assert!(
        shown.contains("`sql`: Writing and checking SQL queries")
            && shown.contains("`incident`: Handling a production incident"),
        "{shown}"
    );
    // The step: the strong tier, the chosen module's text in its prompt.
    let steps = steps(&app);
    assert_eq!(steps.len(), 1);
    assert_eq!(steps[0].model, STRONG);
    assert!(
        steps[0].system.contains("SQL-MODULE: qualify every column"),
        "{}",
        steps[0].system
    );
    assert!(!steps[0].system.contains("INCIDENT-MODULE"));
    assert_eq!(forced(&app, "verdict").len(), 1, "the answer was judged");
    assert_eq!(of_type(&events, "verdict")[0]["pass"], true);

    // Cost is visible: three model calls, each a span (the router's and
    // the gate's marked with their purpose), all in the task's tokens.
    let spans = llm_spans(&app, &id, 3).await;
    let purposes: Vec<&str> = spans
        .iter()
        .map(|s| s["attributes"]["call.purpose"].as_str().unwrap_or("step"))
        .collect();
    assert_eq!(purposes, ["route", "step", "verdict"], "{spans:?}");
    let tokens = |kind: &str| -> u64 {
        spans
            .iter()
            .map(|s| s["attributes"][kind].as_u64().expect("tokens"))
            .sum()
    };
    assert_eq!(task["usage"]["input_tokens"], tokens("input_tokens"));
    assert_eq!(task["usage"]["output_tokens"], tokens("output_tokens"));
    let step_tokens = of_type(&events, "assistant_message")[0]["usage"]["input_tokens"]
        .as_u64()
        .unwrap();
    assert!(task["usage"]["input_tokens"].as_u64().unwrap() > step_tokens);
}

/// A router that answers with text instead of its call: the default
/// tier, no modules, the reason recorded and logged; the task succeeds.
async fn garbage_from_the_router_falls_back_to_default(backend: Backend) {
    let app = spawn(backend).await;
    let id = app
        .submit_ok("Hello there #route=garbage #reply=Hi, how can I help?")
        .await;
    let task = app.wait_done(&id, LONG).await;
    assert_eq!(task["status"], "succeeded", "{task}\n{}", app.log());
    assert_eq!(task["result"], "Hi, how can I help?");
    let routes = of_type(&app.events(&id).await, "route");
    assert_eq!(routes.len(), 1, "{routes:?}");
    assert_eq!(routes[0]["tier"], "default");
    assert!(routes[0].get("modules").is_none(), "{}", routes[0]);
    let why = routes[0]["fallback"]
        .as_str()
        .expect("the fallback's reason");
    assert!(why.contains("did not call `route`"), "{why}");
    assert!(app.log().contains("routing failed"), "a warning is logged");
    // Asked once, not again; the step on the default tier, no module.
    assert_eq!(forced(&app, "route").len(), 1);
    let steps = steps(&app);
    assert_eq!(steps.len(), 1);
    assert_eq!(steps[0].model, DEFAULT);
    assert!(!steps[0].system.contains("-MODULE:"), "{}", steps[0].system);
}

/// The directives of a task the router says needs a plan; the plan's two
/// steps; the supervisor marking the first done after step 2.
const PLANNED: &str = r#"Check the clocks and report. #route={"tier": "default", "modules": [], "needs_plan": true} #plan={"steps": [{"title": "Read the clocks", "done_when": "two times read"}, {"title": "Report", "done_when": "the times are sent"}]} #supervise={"action": "continue", "done": [0]} #steps=3"#;

/// A plan over HTTP: the `plan` event before the first step, written by
/// the default tier, given to the model as its execution plan; the
/// supervisor's `done` marks follow as `supervision` events.
async fn a_plan_is_recorded_and_shown_over_http(backend: Backend) {
    let app = spawn(backend).await;
    let id = app.submit_ok(PLANNED).await;
    let task = app.wait_done(&id, LONG).await;
    assert_eq!(task["status"], "succeeded", "{task}\n{}", app.log());
    assert_eq!(task["result"], "[scripted model] done after 3 steps");

    let events = app.events(&id).await;
    let kinds: Vec<&str> = events
        .iter()
        .filter_map(|e| e["type"].as_str())
        .filter(|k| {
            matches!(
                *k,
                "route" | "plan" | "supervision" | "verdict" | "assistant_message"
            )
        })
        .collect();
    assert_eq!(
        kinds,
        [
            "route",
            "plan",
            "assistant_message",
            "assistant_message",
            "supervision",
            "assistant_message",
            "verdict"
        ]
    );
    let plan = &of_type(&events, "plan")[0];
    assert_eq!(
        plan["steps"],
        json!([
            {"title": "Read the clocks", "done_when": "two times read"},
            {"title": "Report", "done_when": "the times are sent"}
        ])
    );
    let supervision = &of_type(&events, "supervision")[0];
    assert_eq!(supervision["step"], 2);
    assert_eq!(supervision["action"], "continue");
    assert_eq!(supervision["done"], json!([0]));

    // Planned once, on the default tier, knowing the agent's tools.
    let planning = forced(&app, "plan");
    assert_eq!(planning.len(), 1);
    assert_eq!(planning[0].model, DEFAULT);
    assert!(user_texts(&planning[0])[0].contains("current_time"));
    // Every step sees the plan as its execution plan.
    for step in steps(&app) {
        let texts = user_texts(&step);
        let plans: Vec<&&str> = texts
            .iter()
            .filter(|t| t.contains("Your execution plan"))
            .collect();
        assert_eq!(plans.len(), 1, "{texts:?}");
        assert!(
            plans[0].contains("1. Read the clocks (done when: two times read)")
                && plans[0].contains("2. Report (done when: the times are sent)"),
            "{}",
            plans[0]
        );
    }
    // The supervisor saw the plan too.
    let supervising = forced(&app, "supervise");
    assert_eq!(supervising.len(), 1);
    assert_eq!(supervising[0].model, FAST);
    assert!(user_texts(&supervising[0])[0].contains("0. [open] Read the clocks"));
}

/// A plan in Slack (the router asked for it), in a channel's thread: no
/// assistant status (Slack refuses it outside assistant threads; the
/// progress message comes after `slack.progress_after`, longer than this
/// task), and the answer's stream opens with the plan as a plan block, the
/// step the supervisor marked done complete. (In a DM the status shows the
/// checklist first: `streaming::plan_in_the_stream`.)
async fn a_plan_is_shown_in_slack(backend: Backend) {
    let app = spawn(backend).await;
    let ts = "1700000500.000100";
    let id = mention_task(&app, "EvPlan", ts, PLANNED).await;
    let task = app.wait_done(&id, LONG).await;
    assert_eq!(task["status"], "succeeded", "{task}\n{}", app.log());
    assert_eq!(of_type(&app.events(&id).await, "plan").len(), 1);
    let statuses: Vec<String> = app
        .slack
        .calls("assistant.threads.setStatus")
        .iter()
        .filter(|c| c["thread_ts"] == ts)
        .filter_map(|c| c["status"].as_str().map(str::to_owned))
        .collect();
    assert!(statuses.is_empty(), "no status in a channel: {statuses:?}");
    let posted: Vec<_> = app
        .slack
        .posted()
        .into_iter()
        .filter(|p| p.thread_ts.as_deref() == Some(ts))
        .collect();
    assert_eq!(posted.len(), 1, "the answer only: {posted:?}");
    let plan = app
        .slack
        .stream_plan("C1", &posted[0].ts)
        .expect("a plan in the answer's message");
    let steps: Vec<(&str, &str)> = plan
        .tasks
        .iter()
        .map(|t| (t.title.as_str(), t.status.as_str()))
        .collect();
    assert_eq!(
        steps,
        [("Read the clocks", "complete"), ("Report", "in_progress")]
    );
    let shown = app.slack.message("C1", &posted[0].ts).expect("the message");
    assert_eq!(shown.text, "[scripted model] done after 3 steps");
}

/// A task going in circles, stopped by the supervisor at its second
/// checkpoint: failed with the reason, a closing summary of what was done,
/// the requester told in the thread; no step after the stop.
async fn a_supervisor_stop_ends_a_looping_task_with_a_summary(backend: Backend) {
    let app = spawn(backend).await;
    let ts = "1700000600.000100";
    let id = mention_task(
        &app,
        "EvLoop",
        ts,
        r#"Watch the clocks. #steps=30 #supervise=[{"action": "continue"}, {"action": "stop", "note": "it reads clocks in circles"}]"#,
    )
    .await;
    let task = app.wait_done(&id, LONG).await;
    assert_eq!(task["status"], "failed", "{task}\n{}", app.log());
    assert_eq!(
        task["error"],
        "stopped by the supervisor: it reads clocks in circles"
    );
    assert_eq!(task["steps"], 4, "{task}");
    let summary = "[scripted model] summary after 4 turns";
    assert_eq!(task["result"], summary);
    let posts = app.slack.wait_for_posts(1, LONG).await;
    let told: Vec<&str> = posts
        .iter()
        .filter(|p| p.thread_ts.as_deref() == Some(ts))
        .map(|p| p.text.as_str())
        .collect();
    assert_eq!(told.len(), 1, "{posts:?}");
    assert!(
        told[0].contains("stopped by the supervisor: it reads clocks in circles")
            && told[0].contains(summary),
        "{}",
        told[0]
    );

    let events = app.events(&id).await;
    let checkpoints: Vec<(u64, &str)> = of_type(&events, "supervision")
        .iter()
        .map(|s| {
            (
                s["step"].as_u64().unwrap(),
                match s["action"].as_str().unwrap() {
                    "continue" => "continue",
                    "stop" => "stop",
                    other => panic!("{other}"),
                },
            )
        })
        .collect();
    assert_eq!(checkpoints, [(2, "continue"), (4, "stop")]);
    // Four steps, then the summary (no tools offered); nothing judged.
    let steps = steps(&app);
    assert_eq!(steps.len(), 5);
    assert!(steps[4].tools.is_empty());
    assert!(steps[..4].iter().all(|s| !s.tools.is_empty()));
    assert_eq!(forced(&app, "supervise").len(), 2);
    assert!(forced(&app, "verdict").is_empty());
}

/// The supervisor asks the requester: the task waits for the reply at
/// zero compute, the reply on the thread resumes the same task as the
/// answer of the question.
async fn a_supervisor_question_waits_for_the_reply(backend: Backend) {
    let app = spawn(backend).await;
    let accepted = post_on_thread(
        &app,
        r#"Deploy the fix. #steps=4 #supervise=[{"action": "ask_user", "question": "Which-region?"}, {"action": "continue"}]"#,
        "t-region",
    )
    .await;
    let id = accepted["task_id"].as_str().expect("task_id").to_owned();
    let task = app.wait_waiting(&id).await;
    assert_eq!(task["waiting_for"]["kind"], "reply", "{task}");
    assert_eq!(task["waiting_for"]["question"], "Which-region?");
    let supervision = of_type(&app.events(&id).await, "supervision");
    assert_eq!(supervision.len(), 1);
    assert_eq!(supervision[0]["action"], "ask_user");
    assert_eq!(supervision[0]["question"], "Which-region?");
    // Waiting: nothing is asked of the model until the reply.
    let asked = app.llm.received().len();
    tokio::time::sleep(Duration::from_secs(1)).await;
    assert_eq!(app.task(&id).await["status"], "waiting");
    assert_eq!(app.llm.received().len(), asked);

    let reply = post_on_thread(&app, "eu-west-1", "t-region").await;
    assert_eq!(reply["task_id"], id.as_str(), "the same task: {reply}");
    assert_eq!(reply["answered_question"], true, "{reply}");
    let task = app.wait_done(&id, LONG).await;
    assert_eq!(task["status"], "succeeded", "{task}\n{}", app.log());
    let events = app.events(&id).await;
    let answered: Vec<Value> = of_type(&events, "tool_result")
        .into_iter()
        .filter(|r| r["name"] == "ask_user")
        .collect();
    assert_eq!(answered.len(), 1, "{answered:?}");
    assert!(
        answered[0]["content"]
            .as_str()
            .unwrap()
            .contains("eu-west-1"),
        "{}",
        answered[0]
    );
    // The model went on with the reply in its context.
    let last = steps(&app).pop().expect("a step after the reply");
    assert!(
        last.messages.iter().any(|m| matches!(m,
            Message::Tool { name, content, .. } if name == "ask_user" && content.contains("eu-west-1"))),
        "{:?}",
        last.messages
    );
    assert_eq!(forced(&app, "supervise").len(), 1);
}

/// The gate fails the first answer: it goes back to the model once, on
/// the strong tier, with the problems in its context; the second answer
/// is delivered though it fails too; both verdicts recorded.
async fn a_failing_verdict_retries_once_on_the_strong_model(backend: Backend) {
    let app = spawn(backend).await;
    // Without an answer directive the scripted model echoes the latest
    // user message: the first answer echoes the request, the second the
    // note that sent the first back.
    let id = app
        .submit_ok(
            r#"Name the capital of France. #verdict=[{"pass": false, "problems": ["It-does-not-name-the-capital"]}, {"pass": false, "problems": ["Still-vague"]}]"#,
        )
        .await;
    let task = app.wait_done(&id, LONG).await;
    assert_eq!(task["status"], "succeeded", "{task}\n{}", app.log());
    let delivered = task["result"].as_str().unwrap();
    assert!(
        delivered.contains("It-does-not-name-the-capital"),
        "the second answer, written with the problems: {delivered}"
    );

    let events = app.events(&id).await;
    let verdicts = of_type(&events, "verdict");
    assert_eq!(verdicts.len(), 2, "{verdicts:?}");
    assert_eq!(
        (
            &verdicts[0]["step"],
            &verdicts[0]["pass"],
            &verdicts[0]["sent_back"]
        ),
        (&json!(1), &json!(false), &json!(true))
    );
    assert_eq!(
        verdicts[0]["problems"],
        json!(["It-does-not-name-the-capital"])
    );
    assert_eq!(
        (&verdicts[1]["step"], &verdicts[1]["pass"]),
        (&json!(2), &json!(false))
    );
    assert!(verdicts[1].get("sent_back").is_none(), "{}", verdicts[1]);
    assert_eq!(verdicts[1]["problems"], json!(["Still-vague"]));
    let answers = of_type(&events, "assistant_message");
    assert_eq!(answers.len(), 2, "exactly one retry");
    assert_eq!(answers[1]["text"], delivered);

    let steps = steps(&app);
    assert_eq!(steps.len(), 2);
    assert_eq!(steps[0].model, DEFAULT);
    assert_eq!(steps[1].model, STRONG, "the retry runs on the strong tier");
    assert!(
        user_texts(&steps[1])
            .iter()
            .any(|t| t.contains("not delivered") && t.contains("It-does-not-name-the-capital")),
        "{:?}",
        steps[1].messages
    );
    let judged = forced(&app, "verdict");
    assert_eq!(judged.len(), 2);
    assert!(judged.iter().all(|r| r.model == FAST));
    let first_answer = answers[0]["text"].as_str().unwrap();
    assert!(user_texts(&judged[0])[0].contains(first_answer));
    assert!(user_texts(&judged[1])[0].contains(delivered));
}

/// kill -9 while the supervisor's call is in flight, then again after its
/// decision is recorded but before the next step's answer: the checkpoint
/// is asked again only the first time (nothing was recorded), its
/// decision is recorded once and acted on once, and the next checkpoint
/// comes when due.
async fn kill_nine_at_a_supervision_checkpoint(backend: Backend) {
    let mut app = spawn(backend).await;
    app.llm.hold_next(Some("supervise"), HOLD);
    let id = app
        .submit_ok(
            r#"Read six clocks. #steps=6 #supervise={"action": "note", "note": "Mind-the-clock"}"#,
        )
        .await;
    eventually(&app, "the first checkpoint's call", || {
        forced(&app, "supervise").len() == 1
    })
    .await;
    let events = app.events(&id).await;
    assert!(
        of_type(&events, "supervision").is_empty(),
        "still in flight"
    );
    assert_eq!(of_type(&events, "assistant_message").len(), 2);
    app.kill9();

    // Asked again after the crash; then the crash comes after its decision
    // is recorded, while step 3's call is in flight.
    app.llm.hold_next(None, HOLD);
    app.restart();
    eventually(&app, "step 3's call", || steps(&app).len() == 3).await;
    let events = app.events(&id).await;
    let checkpoints = of_type(&events, "supervision");
    assert_eq!(checkpoints.len(), 1, "{checkpoints:?}");
    assert_eq!(checkpoints[0]["step"], 2);
    assert_eq!(forced(&app, "supervise").len(), 2);
    app.kill9();
    app.restart();

    let task = app.wait_done(&id, LONG).await;
    assert_eq!(task["status"], "succeeded", "{task}\n{}", app.log());
    assert_eq!(task["result"], "[scripted model] done after 6 steps");
    let events = app.events(&id).await;
    crate::common::assert_clean_transcript(&events, 6);
    let checkpoints: Vec<(u64, &str)> = of_type(&events, "supervision")
        .iter()
        .map(|s| {
            (
                s["step"].as_u64().unwrap(),
                if s["note"] == "Mind-the-clock" {
                    "note"
                } else {
                    "?"
                },
            )
        })
        .collect();
    assert_eq!(
        checkpoints,
        [(2, "note"), (4, "note")],
        "neither skipped nor repeated"
    );
    // The checkpoint at step 2 was not asked again after the second crash.
    assert_eq!(forced(&app, "supervise").len(), 3);
    // Each decision reached the model once: two notes in the last step.
    let last = steps(&app).pop().expect("steps");
    let notes = user_texts(&last)
        .iter()
        .filter(|t| t.contains("From the supervisor: Mind-the-clock"))
        .count();
    assert_eq!(notes, 2);
    // Step 3 was asked twice (the crash cut the first call), every other once.
    assert_eq!(steps(&app).len(), 7);
}

/// An answer that only says what the model will do is sent back once by
/// rule (no gate call), and the real answer that follows is judged and
/// delivered. Narrating again is not sent back a second time: one retry
/// per turn, the gate judges it, and it is delivered.
async fn narration_is_sent_back_once(backend: Backend) {
    let app = spawn(backend).await;
    let id = app
        .submit_ok("What is the capital of France? #narrate=1 #reply=Paris.")
        .await;
    let task = app.wait_done(&id, LONG).await;
    assert_eq!(task["status"], "succeeded", "{task}\n{}", app.log());
    assert_eq!(task["result"], "Paris.");
    let events = app.events(&id).await;
    let verdicts = of_type(&events, "verdict");
    assert_eq!(verdicts.len(), 2, "{verdicts:?}");
    assert_eq!(
        (
            &verdicts[0]["step"],
            &verdicts[0]["pass"],
            &verdicts[0]["rule"],
            &verdicts[0]["sent_back"]
        ),
        (&json!(1), &json!(false), &json!(true), &json!(true))
    );
    assert_eq!(
        (&verdicts[1]["step"], &verdicts[1]["pass"]),
        (&json!(2), &json!(true))
    );
    assert!(verdicts[1].get("rule").is_none(), "{}", verdicts[1]);
    let answers = of_type(&events, "assistant_message");
    assert_eq!(answers[0]["text"], baton_llm::script::NARRATION);
    assert_eq!(answers.len(), 2);
    // The rule cost no call; the gate judged the second answer only.
    let judged = forced(&app, "verdict");
    assert_eq!(judged.len(), 1);
    assert!(user_texts(&judged[0])[0].contains("Paris."));
    let steps = steps(&app);
    assert_eq!(steps.len(), 2);
    assert!(
        user_texts(&steps[1])
            .iter()
            .any(|t| t.contains("only says what you are about to do")),
        "{:?}",
        steps[1].messages
    );

    // Narrating twice: sent back once, then judged and delivered.
    let id = app
        .submit_ok("And the capital of Spain? #narrate=2 #reply=Madrid.")
        .await;
    let task = app.wait_done(&id, LONG).await;
    assert_eq!(task["status"], "succeeded", "{task}\n{}", app.log());
    assert_eq!(task["result"], baton_llm::script::NARRATION);
    let verdicts = of_type(&app.events(&id).await, "verdict");
    let rules: Vec<&Value> = verdicts.iter().map(|v| &v["rule"]).collect();
    assert_eq!(rules, [&json!(true), &Value::Null], "{verdicts:?}");
}

/// In Slack the answers stream as they are written, the one sent back
/// too: the thread ends with one message showing exactly the delivered
/// answer.
async fn a_sent_back_answer_is_not_what_slack_shows(backend: Backend) {
    let app = spawn(backend).await;
    let ts = "1700000700.000100";
    let id = mention_task(
        &app,
        "EvNarrate",
        ts,
        "Capital of France? #narrate=1 #reply=Paris.",
    )
    .await;
    let task = app.wait_done(&id, LONG).await;
    assert_eq!(task["status"], "succeeded", "{task}\n{}", app.log());
    assert_eq!(task["result"], "Paris.");
    assert_eq!(of_type(&app.events(&id).await, "verdict").len(), 2);
    let posted: Vec<_> = app
        .slack
        .posted()
        .into_iter()
        .filter(|p| p.thread_ts.as_deref() == Some(ts))
        .collect();
    assert_eq!(posted.len(), 1, "{posted:?}");
    assert_eq!(
        app.slack.calls("chat.startStream").len(),
        1,
        "both answers streamed into one message"
    );
    let shown = app.slack.message("C1", &posted[0].ts).expect("the message");
    assert_eq!(shown.text, "Paris.", "{shown:?}");
    assert!(!shown.streaming);
}

/// The router sends the task to the fast tier with a plan; the first
/// checkpoint replans (the planner sees the plan it replaces and why), the
/// second escalates: the steps after it run on the strong tier.
async fn a_replan_and_an_escalation_act(backend: Backend) {
    let app = spawn(backend).await;
    let id = app
        .submit_ok(
            r#"Audit the clocks. #route={"tier": "fast", "modules": [], "needs_plan": true} #plan=[{"steps": [{"title": "Plan-A", "done_when": "a"}]}, {"steps": [{"title": "Plan-B", "done_when": "b"}]}] #supervise=[{"action": "replan", "note": "split-the-work"}, {"action": "escalate"}] #steps=5"#,
        )
        .await;
    let task = app.wait_done(&id, LONG).await;
    assert_eq!(task["status"], "succeeded", "{task}\n{}", app.log());
    let events = app.events(&id).await;
    let actions: Vec<&str> = of_type(&events, "supervision")
        .iter()
        .map(|s| match s["action"].as_str().unwrap() {
            "replan" => "replan",
            "escalate" => "escalate",
            other => panic!("{other}"),
        })
        .collect();
    assert_eq!(actions, ["replan", "escalate"]);
    let plans: Vec<Value> = of_type(&events, "plan")
        .iter()
        .map(|p| p["steps"][0]["title"].clone())
        .collect();
    assert_eq!(plans, [json!("Plan-A"), json!("Plan-B")]);
    let replanning = &forced(&app, "plan")[1];
    let asked = user_texts(replanning)[0];
    assert!(
        asked.contains("The current plan, which no longer fits:\n1. Plan-A")
            && asked.contains("The supervisor says: split-the-work"),
        "{asked}"
    );
    let models: Vec<String> = steps(&app).into_iter().map(|r| r.model).collect();
    assert_eq!(models, [FAST, FAST, FAST, FAST, STRONG]);
}

/// Supervision by wall time: with a checkpoint due every second (and
/// only every 100 steps), model calls that each take at least 0.6 s bring
/// one after the first step.
async fn wall_time_brings_a_checkpoint(backend: Backend) {
    let agents = r#"
[models]
fast = "mock-fast"
default = "mock-default"

[agents.default.supervise]
every_steps = 100
every = "1s"
"#;
    let app = spawn_with(backend, agents).await;
    let id = app
        .submit_ok("Read three clocks. #steps=3 #sleep=600")
        .await;
    let task = app.wait_done(&id, LONG).await;
    assert_eq!(task["status"], "succeeded", "{task}\n{}", app.log());
    let checkpoints = of_type(&app.events(&id).await, "supervision");
    // The route call and step 1 took 1.2 s at least: due before step 2.
    assert!(!checkpoints.is_empty(), "no checkpoint");
    assert_eq!(checkpoints[0]["step"], 1, "{checkpoints:?}");
    assert!(checkpoints.iter().all(|c| c["action"] == "continue"));
}

/// `router = "off"`, `supervise = false`, `quality_gate = false`: no
/// forced call at all, even with tiers declared; the default tier answers.
async fn judgment_can_be_turned_off(backend: Backend) {
    let agents = r#"
[models]
fast = "mock-fast"
default = "mock-default"
strong = "mock-strong"

[agents.default]
router = "off"
supervise = false
quality_gate = false
"#;
    let app = spawn_with(backend, agents).await;
    let id = app.submit_ok("Read six clocks. #steps=6").await;
    let task = app.wait_done(&id, LONG).await;
    assert_eq!(task["status"], "succeeded", "{task}\n{}", app.log());
    let received = app.llm.received();
    assert_eq!(received.len(), 6, "the steps only");
    assert!(received.iter().all(|r| r.tool_choice.forced().is_none()));
    assert!(received.iter().all(|r| r.model == DEFAULT));
    let events = app.events(&id).await;
    for kind in ["route", "plan", "supervision", "verdict"] {
        assert!(of_type(&events, kind).is_empty(), "{kind}");
    }
}

on_both_backends!(
    the_router_picks_the_tier_and_modules,
    garbage_from_the_router_falls_back_to_default,
    a_plan_is_recorded_and_shown_over_http,
    a_plan_is_shown_in_slack,
    a_supervisor_stop_ends_a_looping_task_with_a_summary,
    a_supervisor_question_waits_for_the_reply,
    a_failing_verdict_retries_once_on_the_strong_model,
    kill_nine_at_a_supervision_checkpoint,
    narration_is_sent_back_once,
    a_sent_back_answer_is_not_what_slack_shows,
    wall_time_brings_a_checkpoint,
    a_replan_and_an_escalation_act,
    judgment_can_be_turned_off,
);
