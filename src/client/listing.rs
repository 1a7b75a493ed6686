//! `baton task list`: `GET /tasks`, a page or (`--all`) every page, as a
//! table or as JSON.

use super::{query_string, Api};
use clap::Args;
use serde_json::{json, Value};

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

pub(crate) async fn run(api: &Api, args: ListArgs) -> anyhow::Result<()> {
    let limit = args.limit.to_string();
    let mut cursor = args.cursor.clone();
    let mut tasks: Vec<Value> = Vec::new();
    let next = loop {
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
        tasks.extend(page["tasks"].as_array().cloned().unwrap_or_default());
        let next = page["next_cursor"].as_str().map(str::to_owned);
        match next {
            Some(c) if args.all => cursor = Some(c),
            _ => break next,
        }
    };
    if args.json {
        let body = json!({"tasks": tasks, "next_cursor": next});
        println!("{}", serde_json::to_string_pretty(&body)?);
        return Ok(());
    }
    print!(
        "{}",
        render_table(&tasks, chrono::Utc::now().timestamp_millis())
    );
    if let Some(c) = next {
        eprintln!("more tasks: --cursor {c} (or --all)");
    }
    Ok(())
}

/// The tasks as a table: id, status, agent, created, duration, cost.
/// `now_ms` measures tasks still running.
pub(crate) fn render_table(tasks: &[Value], now_ms: i64) -> String {
    if tasks.is_empty() {
        return "no tasks\n".to_owned();
    }
    let rows: Vec<[String; 6]> = tasks.iter().map(|t| row(t, now_ms)).collect();
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

fn millis(rfc3339: &Value) -> Option<i64> {
    chrono::DateTime::parse_from_rfc3339(rfc3339.as_str()?)
        .ok()
        .map(|t| t.timestamp_millis())
}

fn row(t: &Value, now_ms: i64) -> [String; 6] {
    let text = |v: &Value| v.as_str().unwrap_or("-").to_owned();
    let status = t["status"].as_str().unwrap_or("?");
    let ended = matches!(status, "succeeded" | "failed" | "cancelled");
    let created = millis(&t["created_at"]);
    let end = if ended {
        millis(&t["updated_at"])
    } else {
        Some(now_ms)
    };
    let duration = match (created, end) {
        (Some(a), Some(b)) => human_duration(b - a),
        _ => "-".to_owned(),
    };
    let created_shown = created
        .and_then(chrono::DateTime::from_timestamp_millis)
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
fn human_duration(ms: i64) -> String {
    let ms = ms.max(0);
    let s = ms / 1000;
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
        let now = millis(&json!("2026-11-22T11:05:00.000Z")).unwrap();
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
        assert_eq!(human_duration(850), "850ms");
        assert_eq!(human_duration(3 * 86_400_000 + 4 * 3_600_000), "3d04h");
    }

    #[test]
    fn query_values_are_encoded() {
        assert_eq!(
            query_string(&[("thread", "chat 1&x=y"), ("limit", "5")]),
            "thread=chat%201%26x%3Dy&limit=5"
        );
    }
}
