//! `baton eval export [--feedback up|down|any] [--since 30d] [--task ID…]`:
//! rated answers (the Slack feedback buttons) and chosen tasks as eval
//! cases, one JSON line each on stdout (the case format of docs/evals.md).
//!
//! Rated answers come from `GET /tasks?feedback=&since=` (the listing
//! filters them, so unrated tasks are never read one by one); each case's
//! input is the task's first user message, read from its events.

use crate::client::{query_string, Api, ApiArgs};
use anyhow::Context;
use baton_core::Instant;
use clap::{Args, ValueEnum};
use serde_json::{json, Value};
use std::time::Duration;

#[derive(Args)]
pub(crate) struct ExportArgs {
    #[command(flatten)]
    api: ApiArgs,
    /// Rated answers to export: `up` (most votes thumbs-up), `down` (most
    /// votes thumbs-down, or tied) or `any`. The default without --task:
    /// any.
    #[arg(long, value_enum)]
    feedback: Option<Feedback>,
    /// Only answers rated on tasks created this recently: `30d`, `12h`,
    /// `2w`, `90m`.
    #[arg(long, value_parser = parse_age)]
    since: Option<Duration>,
    /// Export these tasks too (a succeeded task without votes as if rated
    /// thumbs-up). Repeat it or give several ids.
    #[arg(long = "task", value_name = "ID", num_args = 1..)]
    tasks: Vec<String>,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
enum Feedback {
    Up,
    Down,
    Any,
}

impl Feedback {
    fn as_str(self) -> &'static str {
        match self {
            Feedback::Up => "up",
            Feedback::Down => "down",
            Feedback::Any => "any",
        }
    }
}

/// The longest `--since`: ten years.
const MAX_AGE: Duration = Duration::from_secs(3650 * 86_400);

/// Why a `--since` is refused.
#[derive(Debug, PartialEq, Eq, thiserror::Error)]
enum AgeError {
    #[error("expected a whole number and a unit (m, h, d or w), such as 30d, 12h or 2w")]
    Malformed,
    #[error("must be more than zero and at most ten years")]
    OutOfRange,
}

/// `30d`, `12h`, `2w`, `90m` as a duration.
fn parse_age(text: &str) -> Result<Duration, AgeError> {
    let text = text.trim();
    let unit_at = text.len().checked_sub(1).ok_or(AgeError::Malformed)?;
    let (number, unit) = text.split_at(unit_at);
    if number.is_empty() || !number.bytes().all(|b| b.is_ascii_digit()) {
        return Err(AgeError::Malformed);
    }
    let secs_per = match unit {
        "m" => 60,
        "h" => 3_600,
        "d" => 86_400,
        "w" => 7 * 86_400,
        _ => return Err(AgeError::Malformed),
    };
    let n: u64 = number.parse().map_err(|_| AgeError::OutOfRange)?;
    let age = n
        .checked_mul(secs_per)
        .map(Duration::from_secs)
        .ok_or(AgeError::OutOfRange)?;
    if age.is_zero() || age > MAX_AGE {
        return Err(AgeError::OutOfRange);
    }
    Ok(age)
}

/// What the case of a task is built from: its votes' verdict, or (a chosen
/// task without votes) its success.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Kind {
    /// Rated thumbs-up, or a chosen succeeded task: the answer to match.
    Good,
    /// Rated thumbs-down (or tied): the answer to do better than.
    Bad,
}

/// Rubric of a case whose reference a person approved.
const AS_GOOD: &str = "A person rated the reference answer thumbs-up. The answer must be at \
     least as good: it answers the request as correctly and completely as the reference, \
     contradicts none of its facts, and is no less clear.";
/// Rubric of a case whose reference a person rejected.
const BETTER_THAN: &str = "A person rated the reference answer thumbs-down. The answer must \
     avoid its faults: it answers the request correctly and completely where the reference \
     did not, and repeats none of the reference's errors, omissions or unhelpful parts.";

/// The majority of the status JSON's `feedback` votes; a tie counts as a
/// thumbs-down, as the server's `feedback=` filter decides
/// (`baton_core::feedback::verdict`).
fn verdict(task: &Value) -> Option<Kind> {
    let votes = task["feedback"].as_array().filter(|v| !v.is_empty())?;
    let up = votes.iter().filter(|v| v["value"] == "positive").count();
    Some(if up * 2 > votes.len() {
        Kind::Good
    } else {
        Kind::Bad
    })
}

/// The case of `task` (its status JSON) with `input`, or why it has none.
fn case_of(task: &Value, input: &str, chosen: bool) -> anyhow::Result<Value> {
    let id = task["task_id"].as_str().unwrap_or_default();
    let kind = match verdict(task) {
        Some(kind) => kind,
        None if task["status"] == "succeeded" => Kind::Good,
        None if chosen => anyhow::bail!(
            "task {id} is {} without votes: only a succeeded or rated task has an answer to \
             export",
            task["status"].as_str().unwrap_or("?")
        ),
        None => anyhow::bail!("task {id} has no votes"),
    };
    let answer = task["result"]
        .as_str()
        .filter(|r| !r.trim().is_empty())
        .with_context(|| format!("task {id} has no answer to keep as the reference"))?;
    let rubric = match kind {
        Kind::Good => AS_GOOD,
        Kind::Bad => BETTER_THAN,
    };
    Ok(json!({
        "id": id,
        "input": input,
        "expect": {"judge": rubric},
        "reference": answer,
        "task_id": id,
    }))
}

pub(crate) async fn run(args: ExportArgs) -> anyhow::Result<()> {
    let api = Api::new(&args.api)?;
    // Without chosen tasks, every rated answer.
    let feedback = args
        .feedback
        .or(args.tasks.is_empty().then_some(Feedback::Any));
    let since = args
        .since
        .map(|age| Instant(Instant::now().millis() - age.as_millis() as i64));
    let mut tasks: Vec<(Value, bool)> = Vec::new();
    if let Some(f) = feedback {
        for t in rated(&api, f, since).await? {
            tasks.push((t, false));
        }
    }
    for id in &args.tasks {
        if tasks.iter().any(|(t, _)| t["task_id"] == id.as_str()) {
            continue;
        }
        let t = api
            .call(
                reqwest::Method::GET,
                &format!("/tasks/{}", crate::client::percent_encode(id)),
                None,
                None,
            )
            .await
            .with_context(|| format!("task {id}"))?;
        tasks.push((t, true));
    }
    // Every case is built before any is printed: an error leaves no
    // partial file behind a redirection.
    let mut lines = Vec::with_capacity(tasks.len());
    let mut skipped = 0usize;
    for (task, chosen) in &tasks {
        let id = task["task_id"].as_str().unwrap_or_default();
        let input = first_input(&api, id).await?;
        match (case_of(task, &input, *chosen), chosen) {
            (Ok(case), _) => lines.push(serde_json::to_string(&case)?),
            (Err(e), true) => return Err(e),
            // A rated task without an answer text (it cannot be a case).
            (Err(e), false) => {
                eprintln!("skipped: {e}");
                skipped += 1;
            }
        }
    }
    for line in &lines {
        println!("{line}");
    }
    eprintln!(
        "exported {} case(s){}",
        lines.len(),
        if skipped > 0 {
            format!(", skipped {skipped}")
        } else {
            String::new()
        }
    );
    Ok(())
}

/// Every task the listing keeps for `feedback` (and `since`), following
/// its pages to the end.
async fn rated(
    api: &Api,
    feedback: Feedback,
    since: Option<Instant>,
) -> anyhow::Result<Vec<Value>> {
    let since = since.map(|s| s.to_string());
    let mut cursor: Option<String> = None;
    let mut tasks = Vec::new();
    loop {
        let mut pairs = vec![("feedback", feedback.as_str()), ("limit", "100")];
        if let Some(s) = &since {
            pairs.push(("since", s));
        }
        if let Some(c) = &cursor {
            pairs.push(("cursor", c));
        }
        let page = api
            .call(
                reqwest::Method::GET,
                &format!("/tasks?{}", query_string(&pairs)),
                None,
                None,
            )
            .await?;
        tasks.extend(page["tasks"].as_array().cloned().unwrap_or_default());
        match page["next_cursor"].as_str() {
            Some(c) => cursor = Some(c.to_owned()),
            None => return Ok(tasks),
        }
    }
}

/// The task's input: the text of its first user message.
async fn first_input(api: &Api, id: &str) -> anyhow::Result<String> {
    let v = api
        .call(
            reqwest::Method::GET,
            &format!("/tasks/{}/events", crate::client::percent_encode(id)),
            None,
            None,
        )
        .await
        .with_context(|| format!("events of task {id}"))?;
    v["events"]
        .as_array()
        .into_iter()
        .flatten()
        .find(|e| e["type"] == "user_message")
        .and_then(|e| e["text"].as_str())
        .map(str::to_owned)
        .with_context(|| format!("task {id} has no input message in its first events"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ages_are_read_and_garbage_refused() {
        assert_eq!(parse_age("30d"), Ok(Duration::from_secs(30 * 86_400)));
        assert_eq!(parse_age("12h"), Ok(Duration::from_secs(12 * 3_600)));
        assert_eq!(parse_age("2w"), Ok(Duration::from_secs(14 * 86_400)));
        assert_eq!(parse_age("90m"), Ok(Duration::from_secs(90 * 60)));
        for bad in [
            "", "d", "30", "30x", "-3d", "3.5d", "thirty", "3 d", "d30", "1dd",
        ] {
            assert_eq!(parse_age(bad), Err(AgeError::Malformed), "{bad:?}");
        }
        for bad in [
            "0d",
            "99999999999999999999d",
            "3651d",
            "18446744073709551615w",
        ] {
            assert_eq!(parse_age(bad), Err(AgeError::OutOfRange), "{bad:?}");
        }
    }

    fn task(status: &str, votes: &[&str]) -> Value {
        let votes: Vec<Value> = votes
            .iter()
            .map(|v| json!({"user": "U", "value": v}))
            .collect();
        json!({"task_id": "t1", "status": status, "result": "the answer", "feedback": votes})
    }

    #[test]
    fn votes_decide_the_rubric() {
        let up = case_of(&task("succeeded", &["positive"]), "q?", false).unwrap();
        assert_eq!(
            up,
            json!({"id": "t1", "input": "q?", "expect": {"judge": AS_GOOD},
                   "reference": "the answer", "task_id": "t1"})
        );
        let down = case_of(
            &task("succeeded", &["negative", "positive", "negative"]),
            "q?",
            false,
        )
        .unwrap();
        assert_eq!(down["expect"]["judge"], BETTER_THAN);
        // A tie is a thumbs-down.
        let tie = case_of(&task("succeeded", &["positive", "negative"]), "q?", false).unwrap();
        assert_eq!(tie["expect"]["judge"], BETTER_THAN);
        // A chosen task: succeeded is good, anything else without votes refused.
        let chosen = case_of(&task("succeeded", &[]), "q?", true).unwrap();
        assert_eq!(chosen["expect"]["judge"], AS_GOOD);
        let failed = case_of(&task("failed", &[]), "q?", true).unwrap_err();
        assert!(
            failed.to_string().contains("failed without votes"),
            "{failed}"
        );
        // What `eval run` reads (its parser refuses unknown fields).
        for case in [&up, &down, &chosen] {
            let read: super::super::case::Case =
                serde_json::from_value(case.clone()).expect("a case eval run reads");
            assert_eq!(read.task_id.as_deref(), Some("t1"));
            assert_eq!(read.reference.as_deref(), Some("the answer"));
            assert!(read.expect.judge.is_some());
        }
        let mut silent = task("succeeded", &["positive"]);
        silent["result"] = Value::Null;
        assert!(case_of(&silent, "q?", false).is_err());
    }
}
