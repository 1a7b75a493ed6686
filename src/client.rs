//! `baton task …`, `baton trace`, `baton approve` / `deny`, `baton
//! schedule …` and `baton connections …`: a client of the HTTP API.

mod approval;
mod connection;
mod event_stream;
mod listing;
mod schedule;

pub(crate) use approval::run_decision;
pub(crate) use connection::{run_connections, ConnectionCommand};
pub(crate) use schedule::{run_schedule, ScheduleCommand};

use anyhow::Context;
use clap::{Args, Subcommand};
use serde_json::Value;
use std::time::Duration;

#[derive(Args, Clone)]
pub(crate) struct ApiArgs {
    /// Base URL of the Baton HTTP API.
    #[arg(
        long,
        global = true,
        default_value = "http://127.0.0.1:3000",
        env = "BATON_URL"
    )]
    url: String,
    /// The API's bearer token. Without it (or BATON_API_TOKEN): the token
    /// `baton dev` wrote to its data directory (BATON_DATA_DIR, default
    /// .baton), `api-token`. Prefer the variable: a flag shows in `ps`.
    #[arg(long, global = true, env = "BATON_API_TOKEN", hide_env_values = true)]
    token: Option<String>,
    /// Where to open a task's live event stream, when not at --url: a
    /// deployed stack's `StreamUrl` (its streaming function URL).
    #[arg(long, global = true, env = "BATON_STREAM_URL")]
    stream_url: Option<String>,
}

#[derive(Subcommand)]
pub(crate) enum TaskCommand {
    /// Submit a task and print its id; with --wait, then its answer
    /// (progress goes to stderr).
    Submit {
        /// The instruction for the agent.
        text: String,
        /// Conversation id: messages on a thread with a running task steer it.
        #[arg(long)]
        thread: Option<String>,
        #[arg(long)]
        agent: Option<String>,
        /// Makes retries of this submission safe.
        #[arg(long)]
        idempotency_key: Option<String>,
        /// Follow the task until it ends and print its answer after its id
        /// (its progress on stderr).
        #[arg(long)]
        wait: bool,
    },
    /// Fork a task from a step: a new task with its transcript through
    /// step N that goes on from there (docs/api.md, Forking a task). Prints
    /// the new task's id; with --wait, then its answer.
    Fork {
        /// The task to fork.
        id: String,
        /// The last step of the source kept (0: only its input).
        #[arg(long)]
        from_step: u32,
        /// Ask this model at every step of the fork.
        #[arg(long)]
        model: Option<String>,
        /// Answer tool calls from the source's recorded results; run none.
        #[arg(long)]
        recorded: bool,
        /// Replace the last user message before the fork's first step.
        #[arg(long)]
        input: Option<String>,
        /// Run the fork on this agent (default: the source's).
        #[arg(long)]
        agent: Option<String>,
        /// Follow the fork until it ends and print its answer after its id
        /// (its progress on stderr).
        #[arg(long)]
        wait: bool,
    },
    /// Print a task's status JSON.
    Get { id: String },
    /// Follow a task's events until it ends.
    Tail { id: String },
    /// Ask a task to stop at its next step boundary.
    Cancel { id: String },
    /// List tasks, newest first (a table; --json for the API's JSON).
    List(listing::ListArgs),
}

/// A refused request: the API's status and its `{"error"}` message.
#[derive(Debug)]
pub(crate) struct HttpError {
    pub(crate) status: u16,
    pub(crate) message: String,
}

impl std::fmt::Display for HttpError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "HTTP {}: {}", self.status, self.message)
    }
}

impl std::error::Error for HttpError {}

/// `s` percent-encoded for a URL path segment or query value (RFC 3986
/// unreserved characters kept).
pub(crate) fn percent_encode(s: &str) -> String {
    s.bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'.' | b'_' | b'~' => {
                (b as char).to_string()
            }
            _ => format!("%{b:02X}"),
        })
        .collect()
}

/// `name=value&…`, each part percent-encoded.
pub(crate) fn query_string(pairs: &[(&str, &str)]) -> String {
    pairs
        .iter()
        .map(|(k, v)| format!("{}={}", percent_encode(k), percent_encode(v)))
        .collect::<Vec<_>>()
        .join("&")
}

/// The bearer token: `--token` or `BATON_API_TOKEN`, else the one `baton
/// dev` keeps in its data directory.
pub(crate) fn token(given: Option<&str>) -> anyhow::Result<String> {
    if let Some(t) = given.map(str::trim).filter(|t| !t.is_empty()) {
        return Ok(t.to_owned());
    }
    let dir = std::env::var("BATON_DATA_DIR")
        .map(Into::into)
        .unwrap_or_else(|_| crate::default_data_dir());
    let path = dir.join("api-token");
    std::fs::read_to_string(&path)
        .map(|t| t.trim().to_owned())
        .with_context(|| {
            format!(
                "no API token: set BATON_API_TOKEN or pass --token (no dev token at {})",
                path.display()
            )
        })
}

pub(crate) struct Api {
    http: reqwest::Client,
    base: String,
    token: String,
    /// Base URL of `GET /tasks/{id}/stream` (`--stream-url`, else `base`).
    stream_base: String,
}

impl Api {
    pub(crate) fn new(args: &ApiArgs) -> anyhow::Result<Self> {
        let mut api = Api::at(&args.url, token(args.token.as_deref())?)?;
        if let Some(url) = args
            .stream_url
            .as_deref()
            .map(str::trim)
            .filter(|u| !u.is_empty())
        {
            api.stream_base = url.trim_end_matches('/').to_owned();
        }
        Ok(api)
    }

    /// A client of the API at `base` with `token`.
    pub(crate) fn at(base: &str, token: String) -> anyhow::Result<Self> {
        let http = reqwest::Client::builder()
            .timeout(Duration::from_secs(30))
            .build()?;
        let base = base.trim_end_matches('/').to_owned();
        Ok(Api {
            http,
            stream_base: base.clone(),
            base,
            token,
        })
    }

    /// A client of the API at `base` with a made-up token.
    #[cfg(test)]
    pub(crate) fn for_test(base: &str) -> Self {
        Api {
            http: reqwest::Client::new(),
            base: base.trim_end_matches('/').to_owned(),
            token: "test-token".to_owned(),
            stream_base: base.trim_end_matches('/').to_owned(),
        }
    }

    pub(crate) async fn call(
        &self,
        method: reqwest::Method,
        path: &str,
        body: Option<Value>,
        key: Option<&str>,
    ) -> anyhow::Result<Value> {
        let mut req = self
            .http
            .request(method, format!("{}{path}", self.base))
            .bearer_auth(&self.token);
        if let Some(b) = body {
            req = req.json(&b);
        }
        if let Some(k) = key {
            req = req.header("Idempotency-Key", k);
        }
        let resp = req
            .send()
            .await
            .with_context(|| format!("cannot reach {}", self.base))?;
        let status = resp.status();
        let value: Value = resp.json().await.unwrap_or(Value::Null);
        if !status.is_success() {
            let message = value
                .get("error")
                .and_then(Value::as_str)
                .unwrap_or("no error message")
                .to_owned();
            return Err(HttpError {
                status: status.as_u16(),
                message,
            }
            .into());
        }
        Ok(value)
    }
}

pub(crate) async fn run_task(args: ApiArgs, command: TaskCommand) -> anyhow::Result<()> {
    let api = Api::new(&args)?;
    match command {
        TaskCommand::Submit {
            text,
            thread,
            agent,
            idempotency_key,
            wait,
        } => {
            let mut body = serde_json::json!({ "input": text });
            if let Some(t) = thread {
                body["thread"] = t.into();
            }
            if let Some(a) = agent {
                body["agent"] = a.into();
            }
            let v = api
                .call(
                    reqwest::Method::POST,
                    "/tasks",
                    Some(body),
                    idempotency_key.as_deref(),
                )
                .await?;
            let id = v["task_id"].as_str().unwrap_or_default().to_owned();
            println!("{id}");
            if wait {
                follow(&api, &id, Follow::Answer).await
            } else {
                Ok(())
            }
        }
        TaskCommand::Fork {
            id,
            from_step,
            model,
            recorded,
            input,
            agent,
            wait,
        } => {
            let mut body = serde_json::json!({
                "from_step": from_step,
                "tools": if recorded { "recorded" } else { "live" },
            });
            for (name, value) in [("model", model), ("input", input), ("agent", agent)] {
                if let Some(v) = value {
                    body[name] = v.into();
                }
            }
            let v = api
                .call(
                    reqwest::Method::POST,
                    &format!("/tasks/{}/fork", percent_encode(&id)),
                    Some(body),
                    None,
                )
                .await?;
            let fork = v["task_id"].as_str().unwrap_or_default().to_owned();
            println!("{fork}");
            if wait {
                follow(&api, &fork, Follow::Answer).await
            } else {
                Ok(())
            }
        }
        TaskCommand::Get { id } => {
            let v = api
                .call(reqwest::Method::GET, &format!("/tasks/{id}"), None, None)
                .await?;
            println!("{}", serde_json::to_string_pretty(&v)?);
            Ok(())
        }
        TaskCommand::Tail { id } => follow(&api, &id, Follow::Events).await,
        TaskCommand::List(args) => listing::run(&api, args).await,
        TaskCommand::Cancel { id } => {
            let v = api
                .call(
                    reqwest::Method::POST,
                    &format!("/tasks/{id}/cancel"),
                    None,
                    None,
                )
                .await?;
            println!("{}", serde_json::to_string_pretty(&v)?);
            Ok(())
        }
    }
}

/// What following a task prints.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Follow {
    /// `task tail`: its events on stdout, then its result.
    Events,
    /// `task submit --wait`: its progress on stderr (without the answer's
    /// text), then its result alone on stdout, so a script reads the id
    /// and the answer and nothing else.
    Answer,
}

/// Prints events as they come, until the task ends; then its result, once.
/// Through the task's live event stream, else (an older server, a proxy
/// that buffers) by polling its events.
async fn follow(api: &Api, id: &str, how: Follow) -> anyhow::Result<()> {
    let mut after: Option<u64> = None;
    let mut print = |e: &Value| print_event(e, how);
    let ended = match api.stream_events(id, &mut after, &mut print).await {
        event_stream::Streamed::Ended(end) => end,
        event_stream::Streamed::Unavailable => poll_until_ended(api, id, &mut after, how).await?,
    };
    let status = ended["status"].as_str().unwrap_or("?");
    let result = ended["result"].as_str().filter(|r| !r.is_empty());
    match (status, how) {
        ("succeeded", Follow::Events) => println!("\n{}", result.unwrap_or("")),
        ("succeeded", Follow::Answer) => println!("{}", result.unwrap_or("")),
        _ => {
            // A task stopped by a limit still has its closing summary.
            if let Some(r) = result {
                println!("{r}");
            }
            anyhow::bail!("task {status}: {}", ended["error"].as_str().unwrap_or(""))
        }
    }
    Ok(())
}

/// Polls the task's events after `after` until it ends; the ended task.
async fn poll_until_ended(
    api: &Api,
    id: &str,
    after: &mut Option<u64>,
    how: Follow,
) -> anyhow::Result<Value> {
    loop {
        print_new_events(api, id, after, how).await?;
        let task = api
            .call(reqwest::Method::GET, &format!("/tasks/{id}"), None, None)
            .await?;
        let status = task["status"].as_str().unwrap_or("?");
        if matches!(status, "succeeded" | "failed" | "cancelled") {
            // One more read so no event written just before the end is missed.
            print_new_events(api, id, after, how).await?;
            return Ok(task);
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
}

fn print_event(e: &Value, how: Follow) {
    match (how, describe_event(e, how)) {
        (_, None) => {}
        (Follow::Events, Some(line)) => println!("{line}"),
        (Follow::Answer, Some(line)) => eprintln!("{line}"),
    }
}

/// Prints every event after `after`, page by page, and moves `after` on.
async fn print_new_events(
    api: &Api,
    id: &str,
    after: &mut Option<u64>,
    how: Follow,
) -> anyhow::Result<()> {
    loop {
        let q = after.map(|n| format!("?after={n}")).unwrap_or_default();
        let v = api
            .call(
                reqwest::Method::GET,
                &format!("/tasks/{id}/events{q}"),
                None,
                None,
            )
            .await?;
        let page = v["events"].as_array().cloned().unwrap_or_default();
        if page.is_empty() {
            return Ok(());
        }
        for e in &page {
            *after = e["seq"].as_u64().or(*after);
            print_event(e, how);
        }
    }
}

/// One line for an event; `None` for what `how` leaves out. The answer's
/// text is never in it: the result is printed whole at the end.
fn describe_event(e: &Value, how: Follow) -> Option<String> {
    let seq = e["seq"].as_u64().unwrap_or(0);
    let at = e["at"].as_str().unwrap_or("");
    let what = match e["type"].as_str().unwrap_or("") {
        "user_message" => format!("user: {}", short(e["text"].as_str().unwrap_or(""))),
        "recap" => format!(
            "earlier in this conversation: {} turn(s){}",
            e["turns"].as_array().map_or(0, Vec::len),
            if e["summary"].is_string() {
                " and a digest"
            } else {
                ""
            }
        ),
        "assistant_message" => {
            let calls: Vec<&str> = e["tool_calls"]
                .as_array()
                .into_iter()
                .flatten()
                .filter_map(|c| c["name"].as_str())
                .collect();
            if calls.is_empty() {
                let text = e["text"].as_str().unwrap_or("");
                format!("assistant answered ({} characters)", text.chars().count())
            } else {
                format!("assistant calls {}", calls.join(", "))
            }
        }
        // Pieces of the answer, which the end prints whole.
        "answer_delta" if how == Follow::Answer => return None,
        "answer_delta" if e["restart"].as_bool() == Some(true) => {
            "writing (the model call restarted)".to_owned()
        }
        "answer_delta" => format!("writing: {}", short(e["text"].as_str().unwrap_or(""))),
        "tool_started" => format!("tool {} started", e["name"].as_str().unwrap_or("")),
        "tool_result" => format!(
            "tool {}{}: {}",
            e["name"].as_str().unwrap_or(""),
            if e["is_error"].as_bool() == Some(true) {
                " failed"
            } else {
                ""
            },
            short(e["content"].as_str().unwrap_or(""))
        ),
        "status" => match e["status"].as_str().unwrap_or("") {
            // Their detail is the answer or the error, printed at the end.
            ended @ ("succeeded" | "failed" | "cancelled") => format!("[{ended}]"),
            status => format!("[{status}] {}", e["detail"].as_str().unwrap_or("")),
        },
        "attachment" => format!(
            "file {} ({}, {} bytes){}",
            e["name"].as_str().unwrap_or(""),
            e["media_type"].as_str().unwrap_or(""),
            e["bytes"].as_u64().unwrap_or(0),
            e["note"]
                .as_str()
                .map(|n| format!(": not kept, {n}"))
                .unwrap_or_default()
        ),
        other => other.to_owned(),
    };
    Some(format!("{seq:>4} {at} {what}"))
}

/// Six columns of text, each as wide as its widest cell (the last one
/// left ragged), the header first: the CLI's listings.
pub(crate) fn columns(header: [&str; 6], rows: &[[String; 6]]) -> String {
    let mut widths = header.map(str::len);
    for r in rows {
        for (w, cell) in widths.iter_mut().zip(r) {
            *w = (*w).max(cell.chars().count());
        }
    }
    let line = |cells: [&str; 6]| -> String {
        let mut out = String::new();
        for (cell, w) in cells.iter().zip(widths).take(5) {
            out.push_str(&format!("{cell:<w$}  "));
        }
        out.push_str(cells[5]);
        out.trim_end().to_owned() + "\n"
    };
    let mut out = line(header);
    for r in rows {
        out.push_str(&line([&r[0], &r[1], &r[2], &r[3], &r[4], &r[5]]));
    }
    out
}

pub(crate) fn short(s: &str) -> String {
    let one_line = s.replace('\n', " ");
    if one_line.chars().count() > 100 {
        format!("{}…", one_line.chars().take(100).collect::<String>())
    } else {
        one_line
    }
}

/// `baton trace ID`: spans as an indented timeline with bars.
pub(crate) async fn run_trace(args: ApiArgs, id: &str) -> anyhow::Result<()> {
    let api = Api::new(&args)?;
    let v = api
        .call(
            reqwest::Method::GET,
            &format!("/tasks/{id}/trace"),
            None,
            None,
        )
        .await?;
    print!("{}", render_trace(&v));
    Ok(())
}

/// Renders a trace JSON as a text timeline (pure, for tests).
pub(crate) fn render_trace(v: &Value) -> String {
    let spans = v["spans"].as_array().cloned().unwrap_or_default();
    if spans.is_empty() {
        return "no spans\n".to_owned();
    }
    let start = spans
        .iter()
        .filter_map(|s| s["start_ms"].as_i64())
        .min()
        .unwrap_or(0);
    let end = spans
        .iter()
        .filter_map(|s| s["end_ms"].as_i64())
        .max()
        .unwrap_or(start)
        .max(start + 1);
    let width = 40.0;
    let scale = width / (end - start) as f64;
    let depth = |s: &Value| -> usize {
        let mut d = 0;
        let mut parent = s["parent_id"].as_str().map(str::to_owned);
        while let Some(p) = parent {
            d += 1;
            if d > 8 {
                break;
            }
            parent = spans
                .iter()
                .find(|x| x["span_id"].as_str() == Some(&p))
                .and_then(|x| x["parent_id"].as_str().map(str::to_owned));
        }
        d
    };
    let mut out = String::new();
    for s in &spans {
        let (a, b) = (
            s["start_ms"].as_i64().unwrap_or(start),
            s["end_ms"].as_i64().unwrap_or(start),
        );
        let from = ((a - start) as f64 * scale) as usize;
        let len = (((b - a) as f64 * scale) as usize).max(1);
        let bar: String = " ".repeat(from.min(40)) + &"█".repeat(len.min(40 - from.min(39)));
        let attrs = &s["attributes"];
        let mut label = s["name"].as_str().unwrap_or("?").to_owned();
        for key in ["segment", "tool", "model", "status"] {
            if let Some(x) = attrs.get(key).filter(|x| !x.is_null()) {
                label.push_str(&format!(
                    " {key}={}",
                    x.as_str()
                        .map(str::to_owned)
                        .unwrap_or_else(|| x.to_string())
                ));
            }
        }
        if attrs["error"].as_bool() == Some(true) {
            label.push_str(" ERROR");
        }
        let indent = "  ".repeat(depth(s));
        out.push_str(&format!(
            "{:>8}ms {:<41}|{indent}{label} ({} ms)\n",
            a - start,
            bar,
            b - a
        ));
    }
    out
}
