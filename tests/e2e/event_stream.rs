//! `GET /tasks/{id}/stream` (issue #27, item 4), end to end on both
//! backends: a task's events as Server-Sent Events, each exactly once and
//! in order, ending with `event: end` when the task ends; a dropped
//! connection resumed with `Last-Event-ID` missing and repeating nothing;
//! the refusals; `baton task tail` following a task through it. The
//! streaming Lambda function (the ingest binary with
//! `BATON_INGEST_STREAMING`) is tested through the Runtime API double in
//! `streaming_function`.

use crate::common::{Backend, Options, TestApp, TOKEN};
use eventsource_stream::{Event, Eventsource};
use futures::{Stream, StreamExt};
use serde_json::Value;
use std::time::Duration;

const LONG: Duration = Duration::from_secs(60);

async fn app(backend: Backend) -> TestApp {
    TestApp::spawn(Options {
        backend,
        ..Options::default()
    })
    .await
}

/// The stream of task `id` after `last` (by `Last-Event-ID`), parsed.
async fn open(
    app: &TestApp,
    id: &str,
    last: Option<u64>,
) -> impl Stream<Item = Event> + Unpin + use<> {
    let mut req = app
        .http
        .get(format!("{}/tasks/{id}/stream", app.url))
        .bearer_auth(TOKEN);
    if let Some(n) = last {
        req = req.header("Last-Event-ID", n.to_string());
    }
    let r = req.send().await.expect("GET /tasks/{id}/stream");
    assert_eq!(r.status(), 200, "{}", app.log());
    assert_eq!(r.headers()["content-type"], "text/event-stream");
    assert_eq!(r.headers()["cache-control"], "no-cache");
    r.bytes_stream()
        .eventsource()
        .map(|e| e.expect("a well-formed event stream"))
}

/// Events until `end` (included), at most a minute.
async fn until_end(events: &mut (impl Stream<Item = Event> + Unpin)) -> Vec<Event> {
    let mut out = Vec::new();
    loop {
        let e = tokio::time::timeout(LONG, events.next())
            .await
            .expect("an event within a minute")
            .expect("the stream ends only after `end`");
        let end = e.event == "end";
        out.push(e);
        if end {
            return out;
        }
    }
}

/// The data of task events (not `end`) as JSON.
fn data(events: &[Event]) -> Vec<Value> {
    events
        .iter()
        .filter(|e| e.event != "end")
        .map(|e| serde_json::from_str(&e.data).expect("event data is JSON"))
        .collect()
}

/// Each SSE event is the same event `GET /events` gives: `id` its seq,
/// `event` its type, `data` its JSON.
fn assert_framed(events: &[Event]) {
    for e in events.iter().filter(|e| e.event != "end") {
        let v: Value = serde_json::from_str(&e.data).unwrap();
        assert_eq!(e.id, v["seq"].to_string(), "{e:?}");
        assert_eq!(e.event, v["type"].as_str().unwrap(), "{e:?}");
    }
}

async fn full_stream_of_a_multi_step_task(backend: Backend) {
    let app = app(backend).await;
    let id = app.submit_ok("#steps=3").await;
    let mut events = open(&app, &id, None).await;
    let got = until_end(&mut events).await;
    // Nothing after `end`: the server closed the stream.
    assert!(tokio::time::timeout(LONG, events.next())
        .await
        .expect("closed")
        .is_none());
    assert_framed(&got);
    let task = app.wait_done(&id, LONG).await;
    assert_eq!(task["status"], "succeeded");
    // Every event of the task, once each, in order, exactly as polled.
    assert_eq!(data(&got), app.events(&id).await);
    let end: Value = serde_json::from_str(&got.last().unwrap().data).unwrap();
    assert_eq!(end["status"], "succeeded");
    assert_eq!(end["task_id"], id);
    assert_eq!(end["result"], task["result"]);
    // Three steps: three model answers on the way (two tool calls, the answer).
    let answers = data(&got)
        .iter()
        .filter(|e| e["type"] == "assistant_message")
        .count();
    assert_eq!(answers, 3, "{:?}", data(&got));
    let statuses: Vec<Value> = data(&got)
        .iter()
        .filter(|e| e["type"] == "status")
        .map(|e| e["status"].clone())
        .collect();
    assert_eq!(statuses.last(), Some(&Value::from("succeeded")));
}

async fn a_dropped_stream_resumes_with_last_event_id(backend: Backend) {
    let app = app(backend).await;
    let id = app.submit_ok("#steps=3 #sleep=400").await;
    let mut first = Vec::new();
    {
        let mut events = open(&app, &id, None).await;
        while first.len() < 2 {
            let e = tokio::time::timeout(LONG, events.next())
                .await
                .expect("an event")
                .expect("the stream goes on");
            assert_ne!(e.event, "end", "the task ended before the drop");
            first.push(e);
        }
        // Dropped here, mid-task.
    }
    let last: u64 = first.last().unwrap().id.parse().unwrap();
    let mut events = open(&app, &id, Some(last)).await;
    let rest = until_end(&mut events).await;
    assert_framed(&rest);
    let rest_data = data(&rest);
    // Nothing earlier again: the resumed stream starts right after.
    assert_eq!(rest_data[0]["seq"], last + 1, "{rest_data:?}");
    let mut all = data(&first);
    all.extend(rest_data);
    app.wait_done(&id, LONG).await;
    assert_eq!(all, app.events(&id).await);

    // The query works as the header does, for clients without headers.
    let r = app
        .http
        .get(format!("{}/tasks/{id}/stream?after={last}", app.url))
        .bearer_auth(TOKEN)
        .send()
        .await
        .unwrap();
    let mut by_query = r.bytes_stream().eventsource().map(|e| e.unwrap());
    let again = until_end(&mut by_query).await;
    assert_eq!(data(&again), all[first.len()..].to_vec());
}

async fn refusals(backend: Backend) {
    let app = app(backend).await;
    let unknown = baton_core::TaskId::generate();
    let (status, body) = app.get(&format!("/tasks/{unknown}/stream")).await;
    assert_eq!(status, 404, "{body}");
    let id = app.submit_ok("#steps=1").await;
    let r = app
        .http
        .get(format!("{}/tasks/{id}/stream", app.url))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 401);
    let r = app
        .http
        .get(format!("{}/tasks/{id}/stream", app.url))
        .bearer_auth("wrong-token-0123456789abcdef")
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 401);
    for bad in ["-1", "x", "1.5"] {
        let r = app
            .http
            .get(format!("{}/tasks/{id}/stream", app.url))
            .bearer_auth(TOKEN)
            .header("Last-Event-ID", bad)
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), 400, "Last-Event-ID {bad}");
    }
    let (status, _) = app.get("/tasks/not-a-task-id/stream").await;
    assert_eq!(status, 400);
}

async fn task_tail_follows_the_stream(backend: Backend) {
    let app = app(backend).await;
    let id = app.submit_ok("#steps=2").await;
    let (ok, out, err) = app.cli(&["task", "tail", &id]).await;
    assert!(ok, "stdout:\n{out}\nstderr:\n{err}");
    // Through the stream, not by polling the events.
    let log = app.log();
    assert!(log.contains(&format!("/tasks/{id}/stream")), "{log}");
    assert!(!log.contains(&format!("/tasks/{id}/events")), "{log}");
    let task = app.wait_done(&id, LONG).await;
    // Each event's line once (its seq first), then the answer.
    let events = app.events(&id).await;
    let seqs: Vec<u64> = out
        .lines()
        .filter_map(|l| l.split_whitespace().next()?.parse().ok())
        .collect();
    let want: Vec<u64> = events.iter().filter_map(|e| e["seq"].as_u64()).collect();
    assert_eq!(seqs, want, "{out}");
    assert!(out.contains("[succeeded]"), "{out}");
    let answer = task["result"].as_str().unwrap();
    assert!(out.trim_end().ends_with(answer.trim_end()), "{out}");
}

on_both_backends!(
    full_stream_of_a_multi_step_task,
    a_dropped_stream_resumes_with_last_event_id,
    refusals,
    task_tail_follows_the_stream,
);

/// The streaming function: the ingest binary with `BATON_INGEST_STREAMING`
/// under the Runtime API double, as a function URL in `RESPONSE_STREAM`
/// mode runs it, against moto; and the same route buffered, as API
/// Gateway's function answers it.
mod streaming_function {
    use crate::lambda_functions::{apigw, bearer, http, spawn, Stack};
    use crate::runtime_api::functions::binaries;
    use crate::runtime_api::{Outcome, RuntimeApi, Streamed};
    use baton_core::{now_ms, EntryKind, Limits, Origin, Task, TaskId, TaskStatus};
    use serde_json::{json, Value};
    use std::time::Duration;

    const WAIT: Duration = Duration::from_secs(30);

    /// A function URL event (payload 2.0, route `$default`).
    fn function_url(path: &str, headers: &[(&str, String)]) -> Value {
        let mut e = apigw("GET", path, headers, None, false);
        e["routeKey"] = json!("$default");
        e["requestContext"]["routeKey"] = json!("$default");
        e["requestContext"]["domainName"] = json!("abcdefghij.lambda-url.us-east-1.on.aws");
        e["headers"]["host"] = json!("abcdefghij.lambda-url.us-east-1.on.aws");
        e
    }

    async fn streamed(
        api: &RuntimeApi,
        event: &Value,
        f: &crate::runtime_api::functions::FunctionProcess,
    ) -> Streamed {
        match api.enqueue(event, Duration::from_secs(60)).wait(WAIT).await {
            Ok(Outcome::Streamed(s)) => s,
            other => panic!("not a streamed response: {other:?}; {}", f.describe()),
        }
    }

    /// Reads the body until `want` is in it; all read so far.
    async fn read_until(s: &Streamed, text: &mut String, want: &str) {
        while !text.contains(want) {
            let chunk = s
                .next_chunk(WAIT)
                .await
                .unwrap_or_else(|| panic!("the body ended or stalled before {want:?}: {text}"));
            text.push_str(&String::from_utf8_lossy(&chunk));
        }
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn streams_a_task_through_the_runtime_api() {
        let bins = tokio::task::spawn_blocking(binaries)
            .await
            .expect("join")
            .expect("build the function binaries");
        let stack = Stack::start("baton-stream").await;
        let api = RuntimeApi::start().await;
        let f = spawn(
            &bins.ingest,
            &api,
            &stack.vars(&[("BATON_INGEST_STREAMING", "1")]),
        );
        let t = Task::new(
            TaskId::generate(),
            "default",
            Origin::Http,
            None,
            Limits::default(),
            now_ms(),
        );
        let text = "hello".to_owned();
        stack
            .store
            .create(&t, vec![EntryKind::UserMessage { text, from: None }], None)
            .await
            .expect("create the task in moto");
        let path = format!("/tasks/{}/stream", t.id);

        let s = streamed(&api, &function_url(&path, &[bearer()]), &f).await;
        assert_eq!(s.prelude["statusCode"], 200, "{}", s.prelude);
        assert_eq!(s.prelude["headers"]["content-type"], "text/event-stream");
        let mut body = String::new();
        // The first event arrives while the task still runs.
        read_until(&s, &mut body, "id: 0\n").await;
        assert!(body.starts_with("retry: "), "{body}");
        assert!(!body.contains("event: end"), "{body}");

        let mut task = stack.store.get(&t.id).await.unwrap().unwrap();
        task.finish(TaskStatus::Succeeded);
        task.answer.result = Some("done".into());
        let text = "bye".to_owned();
        stack
            .store
            .commit(&mut task, vec![EntryKind::UserMessage { text, from: None }])
            .await
            .expect("end the task");
        read_until(&s, &mut body, "event: end\n").await;
        assert!(s.next_chunk(WAIT).await.is_none(), "more after end: {body}");
        let ids: Vec<&str> = body
            .lines()
            .filter_map(|l| l.strip_prefix("id: "))
            .collect();
        assert_eq!(ids, ["0", "1"], "{body}");
        assert!(body.contains(r#""status":"succeeded""#), "{body}");

        // Refused as behind the HTTP API, and nothing but the stream here.
        let s = streamed(&api, &function_url(&path, &[]), &f).await;
        assert_eq!(s.prelude["statusCode"], 401, "{}", s.prelude);
        let s = streamed(
            &api,
            &function_url(&format!("/tasks/{}", t.id), &[bearer()]),
            &f,
        )
        .await;
        assert_eq!(s.prelude["statusCode"], 404, "{}", s.prelude);
        assert!(api.violations().is_empty(), "{:?}", api.violations());

        // The API Gateway function answers the route buffered.
        let api2 = RuntimeApi::start().await;
        let g = spawn(&bins.ingest, &api2, &stack.vars(&[]));
        let outcome = api2
            .invoke(&apigw("GET", &path, &[bearer()], None, false), WAIT)
            .await
            .unwrap_or_else(|e| panic!("{e}; {}", g.describe()));
        let (status, body) = http(&outcome);
        assert_eq!(status, 200, "{body}; {}", g.describe());
        let body = body.as_str().expect("the event stream as text").to_owned();
        let ids: Vec<&str> = body
            .lines()
            .filter_map(|l| l.strip_prefix("id: "))
            .collect();
        assert_eq!(ids, ["0", "1"], "{body}");
        assert!(body.contains("event: end\n"), "{body}");
    }
}
