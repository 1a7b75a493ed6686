//! The web console (`/console`) in a real headless Chromium, driven through
//! chromedriver against the real `baton dev`: sign in, a task appearing and
//! finishing in the list, its conversation and waterfall, an approval
//! clicked, a step forked (the new task's page opens, linked both ways), a
//! hostile input shown as text, the schedules page, sign-out.
//! Screenshots of each stage are kept (path printed; see `screenshot_dir`).

use crate::common::{Options, TestApp, TOKEN};
use crate::runtime_api::functions::{binaries, FunctionProcess};
use crate::runtime_api::RuntimeApi;
use crate::webdriver::Browser;
use serde_json::{json, Value};
use std::path::PathBuf;
use std::time::Duration;

const WAIT: Duration = Duration::from_secs(60);
const CSP: &str = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; \
                   connect-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'";
const XSS: &str = r#"<img src=x onerror="window.__xss=1"><script>window.__xss=1</script>"#;

/// `$CARGO_TARGET_DIR/console-screenshots` (`BATON_SCREENSHOT_DIR` to
/// choose): build output, never committed.
fn screenshot_dir() -> PathBuf {
    let dir = std::env::var_os("BATON_SCREENSHOT_DIR")
        .filter(|d| !d.is_empty())
        .map(PathBuf::from)
        .unwrap_or_else(|| {
            let tmp = PathBuf::from(env!("CARGO_TARGET_TMPDIR"));
            tmp.parent().unwrap_or(&tmp).join("console-screenshots")
        });
    std::fs::create_dir_all(&dir).expect("screenshot dir");
    dir
}

/// The static files carry the security headers and no data.
async fn check_headers(app: &TestApp) {
    let r = app
        .http
        .get(format!("{}/console", app.url))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    let h = r.headers().clone();
    assert_eq!(h["content-security-policy"], CSP);
    assert_eq!(h["x-content-type-options"], "nosniff");
    assert_eq!(h["referrer-policy"], "no-referrer");
    assert!(h["content-type"].to_str().unwrap().starts_with("text/html"));
    let html = r.text().await.unwrap();
    assert!(html.contains(r#"<script src="console/app.js" defer></script>"#));
    for (file, ty) in [("app.js", "text/javascript"), ("app.css", "text/css")] {
        let r = app
            .http
            .get(format!("{}/console/{file}", app.url))
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), 200, "{file}");
        assert!(r.headers()["content-type"]
            .to_str()
            .unwrap()
            .starts_with(ty));
        assert_eq!(r.headers()["content-security-policy"], CSP);
    }
}

/// The row of task `id` in the list, once its status is `status`.
async fn wait_row(b: &Browser, id: &str, status: &str) -> Value {
    b.wait_until(
        &format!("task {id} listed as {status}"),
        "const r = document.querySelector(`tr[data-task-id=\"${arguments[0]}\"]`);
         return r && r.dataset.status === arguments[1]
           ? Array.from(r.cells, c => c.textContent) : null;",
        json!([id, status]),
        WAIT,
    )
    .await
}

/// An HTTP task with `input` on `thread`; its id.
async fn post_task(app: &TestApp, input: &str, thread: &str) -> String {
    let r = app
        .http
        .post(format!("{}/tasks", app.url))
        .bearer_auth(TOKEN)
        .json(&json!({"input": input, "thread": thread}))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 202);
    let v: Value = r.json().await.unwrap();
    v["task_id"].as_str().unwrap().to_owned()
}

async fn show(b: &Browser, hash: &str) {
    b.exec("location.hash = arguments[0]", json!([hash])).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn the_console_in_a_headless_browser() {
    let refunds = wiremock::MockServer::start().await;
    wiremock::Mock::given(wiremock::matchers::method("POST"))
        .and(wiremock::matchers::path("/refunds"))
        .respond_with(wiremock::ResponseTemplate::new(201).set_body_string("refund created"))
        .mount(&refunds)
        .await;
    let addr = refunds.address().to_string();
    let app = TestApp::spawn(Options {
        extra_env: vec![("BATON_HTTP_ALLOW".into(), addr.clone())],
        ..Options::default()
    })
    .await;
    check_headers(&app).await;
    let shots = screenshot_dir();
    println!("console screenshots: {}", shots.display());
    let b = Browser::start().await;

    // Sign in: a wrong token is refused, the right one kept in this tab only.
    b.goto(&format!("{}/console", app.url)).await;
    let token = b.wait_for("#token", WAIT).await;
    b.screenshot(&shots, "01-sign-in").await;
    b.type_text(&token, "not-the-token-0123456789").await;
    b.click(&b.wait_for("#signin-form button", WAIT).await)
        .await;
    b.wait_until(
        "a wrong token refused",
        "return document.getElementById('signin-error').textContent.includes('refused')",
        json!([]),
        WAIT,
    )
    .await;
    b.clear(&token).await;
    b.type_text(&token, TOKEN).await;
    b.click(&b.wait_for("#signin-form button", WAIT).await)
        .await;
    b.wait_for("#tasks-table", WAIT).await;
    let storage = b
        .exec(
            "return [sessionStorage.getItem('baton.apiToken'), localStorage.length, document.cookie]",
            json!([]),
        )
        .await;
    assert_eq!(
        storage,
        json!([TOKEN, 0, ""]),
        "the token is in sessionStorage only"
    );

    // A task appears in the list (which refreshes itself) and finishes.
    let id = app.submit_ok("#steps=3").await;
    let cells = wait_row(&b, &id, "succeeded").await;
    assert_eq!(cells[0], id, "{cells}");
    assert_eq!(
        (&cells[1], &cells[2], &cells[3]),
        (&json!("#steps=3"), &json!("HTTP"), &json!("—")),
        "asked, from, where: {cells}"
    );
    assert_eq!(cells[4], "default", "agent: {cells}");
    assert_eq!(cells[9], "3", "steps: {cells}");
    b.screenshot(&shots, "02-task-list").await;

    // Its page: the conversation, who wrote each entry, and the waterfall.
    b.click(
        &b.wait_for(&format!("tr[data-task-id=\"{id}\"] a"), WAIT)
            .await,
    )
    .await;
    let authors = b
        .wait_until(
            "the conversation",
            "const e = Array.from(document.querySelectorAll('#conversation .entry'));
             return e.some(x => x.dataset.type === 'assistant_message' && x.textContent.includes('done after 3 steps'))
               ? e.map(x => x.querySelector('.who').textContent) : null;",
            json!([]),
            WAIT,
        )
        .await;
    let authors: Vec<&str> = authors
        .as_array()
        .unwrap()
        .iter()
        .filter_map(Value::as_str)
        .collect();
    assert!(authors.contains(&"requester"), "{authors:?}");
    assert!(
        authors.iter().any(|a| a.starts_with("assistant")),
        "{authors:?}"
    );
    assert!(authors.contains(&"tool current_time"), "{authors:?}");
    // The streamed answer gave way to the answer: no delta is listed.
    let deltas = b
        .exec(
            "return [document.querySelectorAll('#conversation .entry[data-type=answer_delta]').length,
                     document.getElementById('conversation').textContent.includes('answer_delta')]",
            json!([]),
        )
        .await;
    assert_eq!(deltas, json!([0, false]), "{authors:?}");
    // The events came by the task's live stream, each shown once.
    assert!(
        app.log().contains(&format!("/tasks/{id}/stream")),
        "the console did not open the stream"
    );
    let shown = b
        .exec(
            "return document.querySelectorAll('#conversation .entry').length",
            json!([]),
        )
        .await;
    let listed = app
        .events(&id)
        .await
        .iter()
        .filter(|e| e["type"] != "answer_delta")
        .count();
    assert_eq!(shown, json!(listed), "{authors:?}");
    let bars = b
        .wait_until(
            "the waterfall's bars",
            "const g = Array.from(document.querySelectorAll('#waterfall svg g.span'));
             const names = g.map(x => x.dataset.name);
             const ok = names.includes('task') && names.includes('segment')
               && names.filter(n => n === 'llm_call').length === 3
               && names.filter(n => n === 'tool_call').length === 2;
             return ok ? g.map(x => { const r = x.querySelector('rect');
               return [x.dataset.name, +r.getAttribute('x'), +r.getAttribute('width')]; }) : null;",
            json!([]),
            WAIT,
        )
        .await;
    for bar in bars.as_array().unwrap() {
        let (x, w) = (bar[1].as_f64().unwrap(), bar[2].as_f64().unwrap());
        assert!(
            x >= 360.0 && x + w <= 1000.0 && w > 0.0,
            "bar inside the plot: {bar}"
        );
    }
    let label = b
        .exec(
            "return document.querySelector('#waterfall g.k-llm text').textContent",
            json!([]),
        )
        .await;
    assert!(label.as_str().unwrap().contains("tok"), "{label}");
    b.screenshot(&shots, "03-task-page").await;
    let chart = b.wait_for("#waterfall", WAIT).await;
    b.screenshot_of(&chart, &shots, "03-waterfall").await;

    // Fork from step 2, tools recorded: the new task's page opens and
    // says where it came from; the source lists it.
    let fork_button = b
        .wait_for("#conversation button.fork[data-step=\"2\"]", WAIT)
        .await;
    b.click(&fork_button).await;
    let tools = b
        .exec(
            "return document.getElementById('fork-tools').value",
            json!([]),
        )
        .await;
    assert_eq!(tools, "recorded", "recorded is the console's default");
    b.screenshot(&shots, "03b-fork-panel").await;
    b.click(&b.wait_for("#fork-go", WAIT).await).await;
    let forked = b
        .wait_until(
            "the fork's page",
            "const f = document.getElementById('forked-from');
             const m = /^#\\/tasks\\/([^/?]+)$/.exec(location.hash);
             return f && m && m[1] !== arguments[0] ? [m[1], f.textContent] : null;",
            json!([id]),
            WAIT,
        )
        .await;
    let fork = forked[0].as_str().unwrap().to_owned();
    assert_eq!(forked[1], format!("{id} at step 2"), "{forked}");
    let status = app.wait_done(&fork, WAIT).await;
    assert_eq!(status["status"], "succeeded", "{status}");
    assert_eq!(status["forked_from"], json!({"task_id": id, "step": 2}));
    assert_eq!(status["tools"], "recorded", "{status}");
    b.screenshot(&shots, "03c-forked-task").await;
    show(&b, &format!("#/tasks/{id}")).await;
    b.wait_for(&format!("#forks a[href=\"#/tasks/{fork}\"]"), WAIT)
        .await;

    // A side effect waits for approval; the list filters by status; the
    // Approve button lets it go on.
    let waiting = app
        .submit_ok(&format!(
            "#tool=http_request #args={{\"method\":\"POST\",\"url\":\"http://{addr}/refunds\",\"body\":\"{{}}\"}}"
        ))
        .await;
    app.wait_waiting(&waiting).await;
    show(&b, "#/tasks?status=waiting").await;
    wait_row(&b, &waiting, "waiting").await;
    let listed = b
        .exec(
            "return !!document.querySelector(`tr[data-task-id=\"${arguments[0]}\"]`)",
            json!([id]),
        )
        .await;
    assert_eq!(
        listed,
        json!(false),
        "the status filter hides the succeeded task"
    );
    show(&b, &format!("#/tasks/{waiting}")).await;
    let approve = b.wait_for("#approve", WAIT).await;
    let summary = b
        .exec(
            "return document.getElementById('approval-summary').textContent",
            json!([]),
        )
        .await;
    assert!(summary.as_str().unwrap().contains("/refunds"), "{summary}");
    b.screenshot(&shots, "04-waiting-for-approval").await;
    assert!(refunds.received_requests().await.unwrap().is_empty());
    b.click(&approve).await;
    b.wait_until(
        "the approved task succeeds",
        "const r = document.getElementById('result');
         return r && r.textContent.includes('refund created')
           && document.querySelector('#summary .badge').textContent === 'succeeded'
           && !document.getElementById('approve');",
        json!([]),
        WAIT,
    )
    .await;
    assert_eq!(app.task(&waiting).await["status"], "succeeded");
    assert_eq!(refunds.received_requests().await.unwrap().len(), 1);
    b.screenshot(&shots, "05-approved").await;

    // Hostile input is shown as the text it is: no element, no script run.
    let hostile = app.submit_ok(XSS).await;
    app.wait_done(&hostile, WAIT).await;
    show(&b, &format!("#/tasks/{hostile}")).await;
    let shown = b
        .wait_until(
            "the hostile input shown",
            "const u = document.querySelector('#conversation .entry[data-type=user_message] .text');
             const a = document.querySelector('#conversation .entry[data-type=assistant_message] .text');
             return u && a ? [u.textContent, a.textContent] : null;",
            json!([]),
            WAIT,
        )
        .await;
    assert_eq!(shown[0], XSS, "{shown}");
    assert!(shown[1].as_str().unwrap().contains(XSS), "{shown}");
    let inert = b
        .exec(
            "return [typeof window.__xss, document.querySelectorAll('#view img, #view script').length]",
            json!([]),
        )
        .await;
    assert_eq!(inert, json!(["undefined", 0]), "the payload stayed text");
    b.screenshot(&shots, "06-hostile-input-as-text").await;

    // Each task says what was asked, by whom and where; the list searches
    // the text on the server; tasks of one conversation link each other.
    let first = post_task(&app, "Rotate the BILLING keys\nthen tell me", "ops-chat").await;
    app.wait_done(&first, WAIT).await;
    let second = post_task(&app, "and the audit log", "ops-chat").await;
    app.wait_done(&second, WAIT).await;
    // The Slack requester is shown by display name (as text: markup in a
    // name stays inert).
    app.slack.set_user_name("U1", "Ana <b>Ops</b>");
    let mention = serde_json::to_vec(&json!({
        "type": "event_callback", "team_id": "T1", "api_app_id": "A1", "event_id": "EvC1",
        "event_time": 1_700_000_000,
        "event": {"type": "app_mention", "user": "U1", "text": "<@UBOT> billing report for Q3",
                  "ts": "1700000500.000100", "channel": "C1", "event_ts": "1700000500.000100"}
    }))
    .unwrap();
    let r = app
        .slack_post("/slack/events", &mention, "application/json", &[])
        .await;
    assert_eq!(r.status(), 200);
    show(&b, "#/tasks").await;
    let row = wait_row(&b, &first, "succeeded").await;
    assert_eq!(
        (&row[1], &row[2], &row[3]),
        (
            &json!("Rotate the BILLING keys"),
            &json!("HTTP"),
            &json!("thread ops-chat")
        ),
        "{row}"
    );
    let slack_row = b
        .wait_until(
            "the Slack task listed",
            "const r = Array.from(document.querySelectorAll('#tasks-table tbody tr'))
               .find(r => r.cells[1].textContent === 'billing report for Q3');
             return r ? Array.from(r.cells, c => c.textContent) : null;",
            json!([]),
            WAIT,
        )
        .await;
    assert_eq!(
        (&slack_row[2], &slack_row[3]),
        (&json!("Ana <b>Ops</b>"), &json!("#C1")),
        "{slack_row}"
    );
    b.screenshot(&shots, "06b-task-columns").await;
    // Typing searches once typing pauses: only tasks whose request says
    // "billing", in any case.
    let field = b.wait_for("#f-q", WAIT).await;
    b.type_text(&field, "billing").await;
    let listed = b
        .wait_until(
            "the search applied",
            "if (!location.hash.includes('q=billing')) return null;
             const rows = Array.from(document.querySelectorAll('#tasks-table tbody tr'));
             return rows.length === 2 ? rows.map(r => r.cells[1].textContent).sort() : null;",
            json!([]),
            WAIT,
        )
        .await;
    assert_eq!(
        listed,
        json!(["Rotate the BILLING keys", "billing report for Q3"]),
        "{listed}"
    );
    b.screenshot(&shots, "06c-search").await;
    // The conversation's link lists its tasks, and each task's page links
    // the others.
    show(&b, "#/tasks").await;
    let link = b
        .wait_for(
            &format!("tr[data-task-id=\"{second}\"] td:nth-child(4) a"),
            WAIT,
        )
        .await;
    b.click(&link).await;
    let ids = b
        .wait_until(
            "the conversation's tasks",
            "if (!document.getElementById('thread-scope')) return null;
             const rows = Array.from(document.querySelectorAll('#tasks-table tbody tr'));
             return rows.length === 2 ? rows.map(r => r.dataset.taskId) : null;",
            json!([]),
            WAIT,
        )
        .await;
    assert_eq!(ids, json!([second.clone(), first.clone()]), "newest first");
    show(&b, &format!("#/tasks/{second}")).await;
    b.wait_for(
        &format!("#conversation-tasks a[href=\"#/tasks/{first}\"]"),
        WAIT,
    )
    .await;

    // Schedules.
    let r = app
        .http
        .post(format!("{}/schedules", app.url))
        .bearer_auth(TOKEN)
        .json(&json!({"expression": "rate(1 hour)", "input": "check the <b>queues</b>"}))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 201);
    let schedule: Value = r.json().await.unwrap();
    let sid = schedule["schedule_id"].as_str().unwrap().to_owned();
    show(&b, "#/schedules").await;
    let row = b
        .wait_until(
            "the schedule listed",
            "const r = document.querySelector(`tr[data-schedule-id=\"${arguments[0]}\"]`);
             return r ? Array.from(r.cells, c => c.textContent) : null;",
            json!([sid]),
            WAIT,
        )
        .await;
    assert!(row[1].as_str().unwrap().contains("rate(1 hour)"), "{row}");
    assert_eq!(row[8], "check the <b>queues</b>", "{row}");
    // No word of the row is broken across lines.
    let split = b
        .exec(
            "const r = document.querySelector(`tr[data-schedule-id=\"${arguments[0]}\"]`);
             const split = [];
             for (const cell of r.cells) {
               const walker = document.createTreeWalker(cell, NodeFilter.SHOW_TEXT);
               for (let n = walker.nextNode(); n; n = walker.nextNode()) {
                 const re = /\\S+/g; let m;
                 while ((m = re.exec(n.data))) {
                   const range = document.createRange();
                   range.setStart(n, m.index); range.setEnd(n, m.index + m[0].length);
                   const lines = new Set(Array.from(range.getClientRects(), x => Math.round(x.top)));
                   if (lines.size > 1) split.push(m[0]);
                 }
               }
             }
             return split;",
            json!([sid]),
        )
        .await;
    assert_eq!(split, json!([]), "words broken mid-word: {split}");
    b.screenshot(&shots, "07-schedules").await;

    // The token never reached a URL or the server's log; sign-out forgets it.
    let href = b.current_url().await;
    assert!(!href.contains(TOKEN), "{href}");
    assert!(!app.log().contains(TOKEN), "the token is not logged");
    b.click(&b.wait_for("#signout", WAIT).await).await;
    b.wait_until(
        "signed out",
        "return !document.getElementById('signin').hidden
           && sessionStorage.getItem('baton.apiToken') === null",
        json!([]),
        WAIT,
    )
    .await;
    println!("console screenshots: {}", shots.display());
}

/// A deployed stack has the console: the ingest Lambda binary, given API
/// Gateway (payload 2.0) events through the Runtime API, answers with the
/// same files and headers. No AWS peer is needed: the files touch none.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_ingest_lambda_serves_the_console() {
    let bins = tokio::task::spawn_blocking(binaries)
        .await
        .expect("build task")
        .expect("function binaries");
    let api = RuntimeApi::start().await;
    // Nothing listens on port 9: a console request must not need AWS.
    let nowhere = "http://127.0.0.1:9";
    let vars: Vec<(String, String)> = [
        ("AWS_ENDPOINT_URL", nowhere.to_owned()),
        ("BATON_TABLE", "baton-console".to_owned()),
        ("BATON_QUEUE_URL", format!("{nowhere}/000000000000/work")),
        ("BATON_DLQ_URL", format!("{nowhere}/000000000000/dlq")),
        ("BATON_TRACE_BUCKET", "baton-console".to_owned()),
        ("BATON_LLM_PROVIDER", "scripted".to_owned()),
        ("BATON_API_TOKEN", TOKEN.to_owned()),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_owned(), v))
    .collect();
    let f = FunctionProcess::spawn(&bins.ingest, &api.address(), &vars).expect("spawn ingest");
    let sample = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/events/apigw_http_post_tasks.json"
    );
    let sample: Value = serde_json::from_str(&std::fs::read_to_string(sample).unwrap()).unwrap();
    for (route, path, ty, file) in [
        (
            "GET /console",
            "/console",
            "text/html",
            include_str!("../../shared/ingest/console/index.html"),
        ),
        (
            "GET /console/{file}",
            "/console/app.js",
            "text/javascript",
            include_str!("../../shared/ingest/console/app.js"),
        ),
        (
            "GET /console/{file}",
            "/console/app.css",
            "text/css",
            include_str!("../../shared/ingest/console/app.css"),
        ),
    ] {
        let mut e = sample.clone();
        e["routeKey"] = json!(route);
        e["rawPath"] = json!(path);
        e["requestContext"]["routeKey"] = json!(route);
        e["requestContext"]["http"]["method"] = json!("GET");
        e["requestContext"]["http"]["path"] = json!(path);
        let h = e["headers"].as_object_mut().unwrap();
        for k in [
            "authorization",
            "content-type",
            "content-length",
            "idempotency-key",
        ] {
            h.remove(k);
        }
        e.as_object_mut().unwrap().remove("body");
        let outcome = api
            .invoke(&e, Duration::from_secs(30))
            .await
            .unwrap_or_else(|err| panic!("{err}; {}", f.describe()));
        let r = outcome.json_response().unwrap();
        assert_eq!(r["statusCode"], 200, "{path}: {r}; {}", f.describe());
        assert_eq!(r["isBase64Encoded"], false, "{path}");
        assert_eq!(r["body"].as_str(), Some(file), "{path}");
        let headers = &r["headers"];
        assert!(
            headers["content-type"].as_str().unwrap().starts_with(ty),
            "{path}: {headers}"
        );
        assert_eq!(headers["content-security-policy"], CSP, "{path}");
        assert_eq!(headers["x-content-type-options"], "nosniff", "{path}");
    }
}
