//! `GET /tasks` through the real `baton dev` on both backends: newest
//! first, filters, pagination with cursors, the 400s and the 401; the CLI
//! over it (`baton task list`, `approve`, `deny`, `schedule …`); and
//! retention stamping a finished task's expiry.

use crate::common::{Backend, Options, TestApp, TOKEN};
use serde_json::{json, Value};
use std::collections::HashSet;
use std::time::Duration;

const LONG: Duration = Duration::from_secs(60);
const RETENTION_DAYS: i64 = 7;

const AGENTS: &str = "[agents.default]\n\n[agents.ops]\nsystem_prompt = \"You run operations.\"\n";

async fn submit(app: &TestApp, body: Value) -> String {
    let r = app
        .http
        .post(format!("{}/tasks", app.url))
        .bearer_auth(TOKEN)
        .json(&body)
        .send()
        .await
        .expect("POST /tasks");
    let status = r.status();
    let v: Value = r.json().await.unwrap_or(Value::Null);
    assert_eq!(status, 202, "{v}\n{}", app.log());
    v["task_id"].as_str().expect("task_id").to_owned()
}

/// Every page of `GET /tasks?{query}` with `limit`, checking each page.
async fn all_pages(app: &TestApp, query: &str, limit: usize) -> Vec<Value> {
    let mut out = Vec::new();
    let mut cursor: Option<String> = None;
    for _ in 0..100 {
        let mut path = format!("/tasks?limit={limit}");
        if !query.is_empty() {
            path.push('&');
            path.push_str(query);
        }
        if let Some(c) = &cursor {
            path.push_str(&format!("&cursor={c}"));
        }
        let (status, page) = app.get(&path).await;
        assert_eq!(status, 200, "{path}: {page}");
        let tasks = page["tasks"].as_array().expect("tasks").clone();
        assert!(tasks.len() <= limit, "{page}");
        out.extend(tasks);
        match page["next_cursor"].as_str() {
            Some(c) => cursor = Some(c.to_owned()),
            None => {
                assert!(page["next_cursor"].is_null(), "{page}");
                return out;
            }
        }
    }
    panic!("the listing did not end");
}

fn ids(tasks: &[Value]) -> Vec<String> {
    tasks
        .iter()
        .map(|t| t["task_id"].as_str().expect("task_id").to_owned())
        .collect()
}

fn as_set(ids: &[String]) -> HashSet<String> {
    ids.iter().cloned().collect()
}

async fn listing_filters_pages_and_the_cli(backend: Backend) {
    let server = wiremock::MockServer::start().await;
    wiremock::Mock::given(wiremock::matchers::method("POST"))
        .respond_with(wiremock::ResponseTemplate::new(201).set_body_string("created"))
        .mount(&server)
        .await;
    let addr = server.address().to_string();
    let app = TestApp::spawn(Options {
        backend,
        extra_env: vec![
            ("BATON_HTTP_ALLOW".into(), addr.clone()),
            ("BATON_AGENTS_TOML".into(), AGENTS.into()),
            (
                "BATON_TASK_RETENTION_DAYS".into(),
                RETENTION_DAYS.to_string(),
            ),
        ],
        ..Options::default()
    })
    .await;

    // Seven quick tasks (two on `ops`, one on a thread), then two that wait
    // for an approval.
    let mut quick = Vec::new();
    for i in 0..7 {
        let mut body = json!({"input": format!("#reply=answer {i}")});
        if i % 3 == 1 {
            body["agent"] = json!("ops");
        }
        if i == 4 {
            body["thread"] = json!("chat-1");
        }
        quick.push(submit(&app, body).await);
    }
    let ops: Vec<String> = quick
        .iter()
        .enumerate()
        .filter(|(i, _)| i % 3 == 1)
        .map(|(_, id)| id.clone())
        .collect();
    let post = format!(
        "#tool=http_request #args={{\"method\":\"POST\",\"url\":\"http://{addr}/things\",\"body\":\"{{}}\"}}"
    );
    let to_approve = submit(&app, json!({"input": post})).await;
    let to_deny = submit(&app, json!({"input": post})).await;
    for id in &quick {
        let t = app.wait_done(id, LONG).await;
        assert_eq!(t["status"], "succeeded", "{t}");
    }
    let approve_id = app.wait_waiting(&to_approve).await["waiting_for"]["approval_id"]
        .as_str()
        .unwrap()
        .to_owned();
    let deny_id = app.wait_waiting(&to_deny).await["waiting_for"]["approval_id"]
        .as_str()
        .unwrap()
        .to_owned();
    let everyone: Vec<String> = quick
        .iter()
        .chain([&to_approve, &to_deny])
        .cloned()
        .collect();

    // Unauthenticated: refused.
    let r = app
        .http
        .get(format!("{}/tasks", app.url))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 401);
    let r = app
        .http
        .get(format!("{}/tasks", app.url))
        .bearer_auth("wrong-token-0123456789")
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 401);

    // Every task once, newest first, whatever the page size.
    let one_page = all_pages(&app, "", 100).await;
    assert_eq!(as_set(&ids(&one_page)), as_set(&everyone));
    assert_eq!(one_page.len(), everyone.len(), "no task twice");
    let created: Vec<&str> = one_page
        .iter()
        .map(|t| t["created_at"].as_str().unwrap())
        .collect();
    assert!(
        created.windows(2).all(|w| w[0] >= w[1]),
        "newest first: {created:?}"
    );
    assert_eq!(ids(&all_pages(&app, "", 2).await), ids(&one_page));
    assert_eq!(ids(&all_pages(&app, "", 4).await), ids(&one_page));
    // The default page is 20: all nine, and no cursor.
    let (_, page) = app.get("/tasks").await;
    assert_eq!(ids(page["tasks"].as_array().unwrap()), ids(&one_page));
    assert!(page["next_cursor"].is_null());
    // Each task as GET /tasks/{id} shows it, with its agent and thread,
    // but for the files it sent (one read more per task: only there).
    let ops_task = one_page.iter().find(|t| t["task_id"] == ops[0]).unwrap();
    assert_eq!(ops_task["agent"], "ops");
    let mut single = app.task(&ops[0]).await;
    assert_eq!(single["files"], serde_json::json!([]));
    single.as_object_mut().unwrap().remove("files");
    assert_eq!(ops_task, &single);

    // Filters, across pages: the listing's order, fewer tasks.
    let in_order = |keep: &[String]| -> Vec<String> {
        ids(&one_page)
            .into_iter()
            .filter(|id| keep.contains(id))
            .collect()
    };
    let by_agent = all_pages(&app, "agent=ops", 1).await;
    let want_ops = in_order(&ops);
    assert_eq!(ids(&by_agent), want_ops);
    let by_thread = all_pages(&app, "thread=chat-1", 5).await;
    assert_eq!(ids(&by_thread), [quick[4].clone()]);
    assert_eq!(by_thread[0]["thread"], "chat-1");
    let waiting = all_pages(&app, "status=waiting", 1).await;
    assert_eq!(
        ids(&waiting),
        in_order(&[to_deny.clone(), to_approve.clone()])
    );
    let succeeded = all_pages(&app, "status=succeeded&agent=default", 2).await;
    let default_quick: Vec<String> = quick
        .iter()
        .filter(|id| !ops.contains(id))
        .cloned()
        .collect();
    assert_eq!(ids(&succeeded), in_order(&default_quick));
    assert!(all_pages(&app, "agent=nobody", 5).await.is_empty());

    // Bad parameters: 400 naming the parameter.
    for (query, named) in [
        ("status=done", "status"),
        ("limit=0", "limit"),
        ("limit=101", "limit"),
        ("limit=x", "limit"),
        ("cursor=bm9wZQ", "cursor"),
        ("agent=", "agent"),
        ("colour=red", "colour"),
        ("agent=a&agent=b", "agent"),
    ] {
        let (status, v) = app.get(&format!("/tasks?{query}")).await;
        assert_eq!(status, 400, "{query}: {v}");
        assert!(
            v["error"].as_str().unwrap().contains(&format!("`{named}`")),
            "{query}: {v}"
        );
    }
    let r = app
        .http
        .delete(format!("{}/tasks", app.url))
        .bearer_auth(TOKEN)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 405);

    // The CLI: the same listing, as JSON and as a table.
    let (ok, out, err) = app
        .cli(&["task", "list", "--all", "--limit", "2", "--json"])
        .await;
    assert!(ok, "{err}");
    let listed: Value = serde_json::from_str(&out).expect("JSON");
    assert_eq!(ids(listed["tasks"].as_array().unwrap()), ids(&one_page));
    assert!(listed["next_cursor"].is_null());
    let (ok, out, err) = app.cli(&["task", "list", "--agent", "ops"]).await;
    assert!(ok, "{err}");
    let lines: Vec<&str> = out.lines().collect();
    assert!(
        lines[0].starts_with("ID") && lines[0].contains("DURATION"),
        "{out}"
    );
    assert_eq!(lines.len(), 1 + ops.len(), "{out}");
    assert!(lines[1].starts_with(&want_ops[0]) && lines[1].contains("succeeded"));
    let (ok, out, err) = app.cli(&["task", "list", "--limit", "3"]).await;
    assert!(ok, "{err}");
    assert_eq!(out.lines().count(), 4, "{out}");
    assert!(err.contains("--cursor"), "a hint to go on: {err}");
    let (ok, _, err) = app.cli(&["task", "list", "--status", "done"]).await;
    assert!(!ok);
    assert!(
        err.contains("HTTP 400") && err.contains("`status`"),
        "{err}"
    );

    // Approve and deny from the CLI.
    let (ok, _, err) = app.cli(&["approve", &to_approve, "ap-9-nope"]).await;
    assert!(!ok);
    assert!(
        err.contains(&format!("task {to_approve} has no approval ap-9-nope")),
        "{err}"
    );
    let (ok, out, err) = app.cli(&["approve", &to_approve, &approve_id]).await;
    assert!(ok, "{err}");
    assert!(
        out.starts_with(&format!("approved {approve_id} of task {to_approve}")),
        "{out}"
    );
    let (ok, out, err) = app.cli(&["deny", &to_deny, &deny_id]).await;
    assert!(ok, "{err}");
    assert!(out.starts_with("denied "), "{out}");
    let approved = app.wait_done(&to_approve, LONG).await;
    assert_eq!(approved["status"], "succeeded", "{approved}");
    assert!(
        approved["result"].as_str().unwrap().contains("created"),
        "{approved}"
    );
    app.wait_done(&to_deny, LONG).await;
    assert_eq!(
        server.received_requests().await.unwrap().len(),
        1,
        "only the approved call was made"
    );
    let (ok, _, err) = app.cli(&["deny", &to_approve, &approve_id]).await;
    assert!(!ok);
    assert!(err.contains("not decided again"), "{err}");

    // Schedules from the CLI.
    let (ok, out, err) = app
        .cli(&[
            "schedule",
            "create",
            "--rate",
            "1 hour",
            "--input",
            "hourly check",
            "--agent",
            "ops",
        ])
        .await;
    assert!(ok, "{err}");
    let schedule_id = out.split_whitespace().next().unwrap().to_owned();
    assert!(out.contains("(next: "), "{out}");
    let (ok, out, err) = app.cli(&["schedule", "list"]).await;
    assert!(ok, "{err}");
    assert!(
        out.lines()
            .any(|l| l.starts_with(&schedule_id) && l.contains("rate(1 hour)")),
        "{out}"
    );
    let (ok, out, _) = app.cli(&["schedule", "list", "--json"]).await;
    assert!(ok);
    let v: Value = serde_json::from_str(&out).unwrap();
    assert_eq!(v["schedules"][0]["agent"], "ops");
    let (ok, _, err) = app
        .cli(&[
            "schedule",
            "create",
            "--cron",
            "0 9 * * * *",
            "--input",
            "x",
        ])
        .await;
    assert!(!ok, "a cron with both days given is refused");
    assert!(err.contains("HTTP 400"), "{err}");
    let (ok, out, err) = app.cli(&["schedule", "delete", &schedule_id]).await;
    assert!(ok, "{err}");
    assert_eq!(out.trim(), format!("deleted {schedule_id}"));
    let (ok, out, _) = app.cli(&["schedule", "list"]).await;
    assert!(ok);
    assert_eq!(out.trim(), "no schedules");

    // Retention: a finished task expires RETENTION_DAYS after it ended, its
    // entries later; a waiting one never did.
    let store = app.store().await;
    let record = |id: &str| {
        let key = baton_core::Key::new(format!("TASK#{id}"), "TASK");
        let table = store.table().clone();
        async move { table.get(&key).await.unwrap().expect("task item") }
    };
    let ended = store
        .get(&baton_core::TaskId::parse(&quick[0]).unwrap())
        .await
        .unwrap()
        .unwrap();
    assert_eq!(
        record(&quick[0]).await.expires_at,
        Some(ended.updated_at.unix_secs() + RETENTION_DAYS * 24 * 3600)
    );
    let entries = store
        .table()
        .query(&format!("TASK#{}", quick[0]), "E#", None, 100)
        .await
        .unwrap();
    assert!(!entries.is_empty());
    for e in entries {
        let at = e.expires_at.expect("an entry expires");
        assert!(
            at >= ended.created_at.unix_secs() + (RETENTION_DAYS + 30) * 24 * 3600,
            "{e:?}"
        );
    }
}

#[test]
fn a_bad_retention_is_refused_at_start_up() {
    let stderr = crate::common::refused_start("", &[("BATON_TASK_RETENTION_DAYS", "90d")]);
    assert!(
        stderr.contains("BATON_TASK_RETENTION_DAYS: must be a whole number of days"),
        "{stderr}"
    );
}

mod embedded {
    #[tokio::test(flavor = "multi_thread")]
    async fn listing_filters_pages_and_the_cli() {
        super::listing_filters_pages_and_the_cli(crate::common::Backend::Embedded).await;
    }
}

mod aws {
    #[tokio::test(flavor = "multi_thread")]
    async fn listing_filters_pages_and_the_cli() {
        super::listing_filters_pages_and_the_cli(crate::common::Backend::Aws).await;
    }
}
