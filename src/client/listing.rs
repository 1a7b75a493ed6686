//! `baton task list`: `GET /tasks`, a page or (`--all`) every page, as a
//! table or as JSON.

use super::{query_string, Api};
use baton_core::Instant;
use clap::Args;
use serde::Deserialize;
use serde_json::{json, Value};
use std::time::Duration;

#[derive(Args)]
pub(crate) struct ListArgs {
    /// Only tasks with this status (queued, running, waiting, succeeded,
    /// failed, cancelled).
    #[arg(long)]
    status: Option<String>,
    /// Only tasks of this agent.
    #[arg(long)]
    agent: Option<String>,
    /// Only tasks of this conversation (an HTTP `thread` as given).
    #[arg(long)]
    thread: Option<String>,
    /// Tasks per page, 1 to 100.
    #[arg(long, default_value_t = 20)]
    limit: u32,
    /// Start below this position (the `next_cursor` of an earlier page).
    #[arg(long)]
    cursor: Option<String>,
    /// Follow every page to the end of the listing.
    #[arg(long)]
    all: bool,
    /// Print the API's JSON instead of a table.
    #[arg(long)]
    json: bool,
}

/// Pages read, while they come back empty, before a filtered listing gives
/// up and says where to go on: each page examines at most
/// `baton_core::listing::MAX_EXAMINED` tasks, so a filter that matches
/// only old tasks may come back empty with a cursor.
const EMPTY_PAGES_FOLLOWED: usize = 10;

pub(crate) async fn run(api: &Api, args: ListArgs) -> anyhow::Result<()> {
    let (tasks, next) = fetch(api, &args).await?;
    if args.json {
        let body = json!({"tasks": tasks, "next_cursor": next});
        println!("{}", serde_json::to_string_pretty(&body)?);
        return Ok(());
    }
    print!("{}", render_table(&tasks, Instant::now()));
    if let Some(hint) = more_hint(tasks.is_empty(), next.as_deref()) {
        eprintln!("{hint}");
    }
    Ok(())
}

/// The tasks of one page — of every page with `--all`; of the first page
/// that has any (at most [`EMPTY_PAGES_FOLLOWED`]) otherwise — and the
/// cursor to go on from.
async fn fetch(api: &Api, args: &ListArgs) -> anyhow::Result<(Vec<Value>, Option<String>)> {
    let limit = args.limit.to_string();
    let mut cursor = args.cursor.clone();
    let mut tasks: Vec<Value> = Vec::new();
    let mut pages = 0usize;
    loop {
        let mut pairs: Vec<(&str, &str)> = vec![("limit", limit.as_str())];
        for (name, value) in [
            ("status", &args.status),
            ("agent", &args.agent),
            ("thread", &args.thread),
            ("cursor", &cursor),
        ] {
            if let Some(v) = value {
                pairs.push((name, v.as_str()));
            }
        }
        let path = format!("/tasks?{}", query_string(&pairs));
        let page = api.call(reqwest::Method::GET, &path, None, None).await?;
        pages += 1;
        tasks.extend(page["tasks"].as_array().cloned().unwrap_or_default());
        let next = page["next_cursor"].as_str().map(str::to_owned);
        let go_on = args.all || (tasks.is_empty() && pages < EMPTY_PAGES_FOLLOWED);
        match next {
            Some(c) if go_on => cursor = Some(c),
            _ => return Ok((tasks, next)),
        }
    }
}

/// What to tell about the rest of the listing: nothing at its end; where to
/// go on otherwise — and, when nothing was found, that only the newest
/// tasks were looked at, not that there are more of what was asked for.
fn more_hint(empty: bool, next: Option<&str>) -> Option<String> {
    let c = next?;
    Some(if empty {
        format!("none of the newest tasks match; to look at older ones: --cursor {c} (or --all)")
    } else {
        format!("more tasks: --cursor {c} (or --all)")
    })
}

/// The tasks as a table: id, status, agent, created, duration, cost.
/// `now` measures tasks still running.
pub(crate) fn render_table(tasks: &[Value], now: Instant) -> String {
    if tasks.is_empty() {
        return "no tasks\n".to_owned();
    }
    let rows: Vec<[String; 6]> = tasks.iter().map(|t| row(t, now)).collect();
    let header = ["ID", "STATUS", "AGENT", "CREATED", "DURATION", "COST"];
    let mut widths = header.map(str::len);
    for r in &rows {
        for (w, cell) in widths.iter_mut().zip(r) {
            *w = (*w).max(cell.chars().count());
        }
    }
    let line = |cells: [&str; 6]| -> String {
        let mut out = String::new();
        for (i, (cell, w)) in cells.iter().zip(widths).enumerate() {
            if i + 1 == cells.len() {
                out.push_str(cell);
            } else {
                out.push_str(&format!("{cell:<w$}  "));
            }
        }
        out.trim_end().to_owned() + "\n"
    };
    let mut out = line(header);
    for r in &rows {
        out.push_str(&line([&r[0], &r[1], &r[2], &r[3], &r[4], &r[5]]));
    }
    out
}

/// An instant of the API's JSON (RFC 3339 text).
fn instant(rfc3339: &Value) -> Option<Instant> {
    Instant::deserialize(rfc3339).ok()
}

fn row(t: &Value, now: Instant) -> [String; 6] {
    let text = |v: &Value| v.as_str().unwrap_or("-").to_owned();
    let status = t["status"].as_str().unwrap_or("?");
    let ended = matches!(status, "succeeded" | "failed" | "cancelled");
    let created = instant(&t["created_at"]);
    let end = if ended {
        instant(&t["updated_at"])
    } else {
        Some(now)
    };
    let duration = match (created, end) {
        (Some(a), Some(b)) => human_duration(b.since(a)),
        _ => "-".to_owned(),
    };
    let created_shown = created
        .and_then(Instant::to_utc)
        .map(|t| t.format("%Y-%m-%d %H:%M:%S").to_string())
        .unwrap_or_else(|| "-".to_owned());
    let cost = t["cost_usd"]
        .as_f64()
        .map(|c| format!("${c:.4}"))
        .unwrap_or_else(|| "-".to_owned());
    [
        text(&t["task_id"]),
        status.to_owned(),
        text(&t["agent"]),
        created_shown,
        duration,
        cost,
    ]
}

/// `850ms`, `12s`, `3m04s`, `2h05m`, `3d04h`.
fn human_duration(d: Duration) -> String {
    let ms = d.as_millis();
    let s = d.as_secs();
    match s {
        0 => format!("{ms}ms"),
        1..=59 => format!("{s}s"),
        60..=3599 => format!("{}m{:02}s", s / 60, s % 60),
        3600..=86_399 => format!("{}h{:02}m", s / 3600, s % 3600 / 60),
        _ => format!("{}d{:02}h", s / 86_400, s % 86_400 / 3600),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_table_of_tasks() {
        let tasks = vec![
            json!({"task_id": "0193-a", "status": "succeeded", "agent": "default",
                   "created_at": "2026-11-22T09:00:00.000Z",
                   "updated_at": "2026-11-22T09:03:04.500Z", "cost_usd": 0.01234}),
            json!({"task_id": "0193-bb", "status": "running", "agent": "ops",
                   "created_at": "2026-11-22T09:00:00.000Z",
                   "updated_at": "2026-11-22T09:00:01.000Z"}),
        ];
        let now = instant(&json!("2026-11-22T11:05:00.000Z")).unwrap();
        let table = render_table(&tasks, now);
        let lines: Vec<&str> = table.lines().collect();
        assert_eq!(
            lines,
            [
                "ID       STATUS     AGENT    CREATED              DURATION  COST",
                "0193-a   succeeded  default  2026-11-22 09:00:00  3m04s     $0.0123",
                "0193-bb  running    ops      2026-11-22 09:00:00  2h05m     -",
            ]
        );
        assert_eq!(render_table(&[], now), "no tasks\n");
        assert_eq!(human_duration(Duration::from_millis(850)), "850ms");
        assert_eq!(
            human_duration(Duration::from_secs(3 * 86_400 + 4 * 3_600)),
            "3d04h"
        );
    }

    #[test]
    fn an_empty_page_does_not_promise_more() {
        assert_eq!(more_hint(true, None), None);
        assert_eq!(more_hint(false, None), None);
        assert_eq!(
            more_hint(false, Some("c1")).as_deref(),
            Some("more tasks: --cursor c1 (or --all)")
        );
        let empty = more_hint(true, Some("c9")).unwrap_or_default();
        assert!(!empty.contains("more tasks"), "{empty}");
        assert!(empty.contains("--cursor c9"), "{empty}");
    }

    /// A filtered listing whose newest page matches nothing reads on to
    /// the first page that has a task, against a loopback API.
    #[tokio::test]
    async fn empty_filtered_pages_are_read_past() {
        use wiremock::matchers::{method, path, query_param, query_param_is_missing};
        use wiremock::{Mock, MockServer, ResponseTemplate};
        let server = MockServer::start().await;
        Mock::given(method("GET"))
            .and(path("/tasks"))
            .and(query_param("status", "failed"))
            .and(query_param_is_missing("cursor"))
            .respond_with(
                ResponseTemplate::new(200).set_body_json(json!({"tasks": [], "next_cursor": "p2"})),
            )
            .expect(1)
            .mount(&server)
            .await;
        Mock::given(method("GET"))
            .and(path("/tasks"))
            .and(query_param("cursor", "p2"))
            .respond_with(ResponseTemplate::new(200).set_body_json(json!({
                "tasks": [{"task_id": "t-old", "status": "failed"}],
                "next_cursor": "p3"
            })))
            .expect(1)
            .mount(&server)
            .await;
        let api = Api::for_test(&server.uri());
        let args = ListArgs {
            status: Some("failed".into()),
            agent: None,
            thread: None,
            limit: 20,
            cursor: None,
            all: false,
            json: false,
        };
        let (tasks, next) = fetch(&api, &args).await.expect("listing");
        assert_eq!(tasks.len(), 1);
        assert_eq!(tasks[0]["task_id"], "t-old");
        assert_eq!(next.as_deref(), Some("p3"));

        // Nothing anywhere near: it stops after a bounded number of pages.
        let server = MockServer::start().await;
        Mock::given(method("GET"))
            .and(path("/tasks"))
            .respond_with(
                ResponseTemplate::new(200).set_body_json(json!({"tasks": [], "next_cursor": "px"})),
            )
            .expect(EMPTY_PAGES_FOLLOWED as u64)
            .mount(&server)
            .await;
        let api = Api::for_test(&server.uri());
        let (tasks, next) = fetch(&api, &args).await.expect("listing");
        assert!(tasks.is_empty());
        assert_eq!(next.as_deref(), Some("px"));
    }

    #[test]
    fn query_values_are_encoded() {
        assert_eq!(
            query_string(&[("thread", "chat 1&x=y"), ("limit", "5")]),
            "thread=chat%201%26x%3Dy&limit=5"
        );
    }
}
