//! `baton schedule list|get|create|delete`: the schedule routes
//! (docs/schedules.md).

use super::{percent_encode, Api, ApiArgs};
use anyhow::bail;
use clap::{ArgGroup, Args, Subcommand};
use serde_json::{json, Value};

#[derive(Subcommand)]
pub(crate) enum ScheduleCommand {
    /// List the schedules (a table; --json for the API's JSON).
    List {
        #[arg(long)]
        json: bool,
    },
    /// Print one schedule's JSON.
    Get { id: String },
    /// Create a schedule: when (one of --cron, --rate, --at, --expression)
    /// and what (--input).
    Create(Box<CreateArgs>),
    /// Delete a schedule.
    Delete { id: String },
}

#[derive(Args)]
#[command(group(ArgGroup::new("when").required(true).args(["cron", "rate", "at", "expression"])))]
pub(crate) struct CreateArgs {
    /// Cron fields, EventBridge style: "0 9 ? * MON-FRI *".
    #[arg(long)]
    cron: Option<String>,
    /// An interval: "1 hour", "30 minutes".
    #[arg(long)]
    rate: Option<String>,
    /// Once, at a local time: 2026-12-01T09:00:00.
    #[arg(long)]
    at: Option<String>,
    /// A whole expression: cron(...), rate(...) or at(...).
    #[arg(long)]
    expression: Option<String>,
    /// IANA time zone the cron or at is read in (default UTC).
    #[arg(long)]
    timezone: Option<String>,
    /// The instruction each firing's task gets (a heartbeat's checklist).
    #[arg(long)]
    input: String,
    /// task (default) or heartbeat.
    #[arg(long)]
    kind: Option<String>,
    /// The agent to run (default `default`).
    #[arg(long)]
    agent: Option<String>,
    /// Post each answer in this Slack channel (else answers stay in the
    /// tasks).
    #[arg(long)]
    slack_channel: Option<String>,
    /// With --slack-channel: answer in this thread rather than as a new
    /// message each time.
    #[arg(long, requires = "slack_channel")]
    thread_ts: Option<String>,
}

impl CreateArgs {
    /// The `POST /schedules` body.
    fn body(&self) -> Value {
        let expression = match (&self.cron, &self.rate, &self.at, &self.expression) {
            (Some(c), ..) => format!("cron({c})"),
            (_, Some(r), ..) => format!("rate({r})"),
            (_, _, Some(a), _) => format!("at({a})"),
            (.., Some(e)) => e.clone(),
            // clap requires one of them.
            _ => String::new(),
        };
        let mut body = json!({"expression": expression, "input": self.input});
        if let Some(tz) = &self.timezone {
            body["timezone"] = json!(tz);
        }
        if let Some(kind) = &self.kind {
            body["kind"] = json!(kind);
        }
        if let Some(agent) = &self.agent {
            body["agent"] = json!(agent);
        }
        if let Some(channel) = &self.slack_channel {
            body["target"] = json!({"slack_channel": channel, "thread_ts": self.thread_ts});
        }
        body
    }
}

pub(crate) async fn run_schedule(args: ApiArgs, command: ScheduleCommand) -> anyhow::Result<()> {
    let api = Api::new(&args)?;
    match command {
        ScheduleCommand::List { json } => {
            let v = api
                .call(reqwest::Method::GET, "/schedules", None, None)
                .await?;
            if json {
                println!("{}", serde_json::to_string_pretty(&v)?);
            } else {
                let all = v["schedules"].as_array().cloned().unwrap_or_default();
                print!("{}", render_table(&all));
            }
        }
        ScheduleCommand::Get { id } => {
            let v = api
                .call(
                    reqwest::Method::GET,
                    &format!("/schedules/{}", percent_encode(&id)),
                    None,
                    None,
                )
                .await?;
            println!("{}", serde_json::to_string_pretty(&v)?);
        }
        ScheduleCommand::Create(create) => {
            let v = api
                .call(
                    reqwest::Method::POST,
                    "/schedules",
                    Some(create.body()),
                    None,
                )
                .await?;
            let Some(id) = v["schedule_id"].as_str() else {
                bail!("the API answered without a schedule id: {v}");
            };
            println!(
                "{id} (next: {})",
                v["next_fire_at"].as_str().unwrap_or("never")
            );
        }
        ScheduleCommand::Delete { id } => {
            api.call(
                reqwest::Method::DELETE,
                &format!("/schedules/{}", percent_encode(&id)),
                None,
                None,
            )
            .await?;
            println!("deleted {id}");
        }
    }
    Ok(())
}

/// Schedules as a table: id, expression, kind, agent, next firing, input.
fn render_table(schedules: &[Value]) -> String {
    if schedules.is_empty() {
        return "no schedules\n".to_owned();
    }
    let text = |v: &Value| v.as_str().unwrap_or("-").to_owned();
    let rows: Vec<[String; 6]> = schedules
        .iter()
        .map(|s| {
            [
                text(&s["schedule_id"]),
                text(&s["expression"]),
                text(&s["kind"]),
                text(&s["agent"]),
                text(&s["next_fire_at"]),
                super::short(s["input"].as_str().unwrap_or("")),
            ]
        })
        .collect();
    let header = ["ID", "EXPRESSION", "KIND", "AGENT", "NEXT", "INPUT"];
    super::columns(header, &rows)
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    #[derive(Parser)]
    struct Cli {
        #[command(subcommand)]
        command: ScheduleCommand,
    }

    fn create(args: &[&str]) -> Result<Value, clap::Error> {
        let cli = Cli::try_parse_from(["schedule", "create"].iter().chain(args))?;
        match cli.command {
            ScheduleCommand::Create(c) => Ok(c.body()),
            _ => panic!("not a create"),
        }
    }

    #[test]
    fn create_flags_make_the_route_body() {
        let b = create(&[
            "--cron",
            "0 9 ? * MON-FRI *",
            "--timezone",
            "Europe/Berlin",
            "--input",
            "hi",
            "--agent",
            "ops",
        ])
        .unwrap();
        assert_eq!(
            b,
            json!({"expression": "cron(0 9 ? * MON-FRI *)", "timezone": "Europe/Berlin",
                   "input": "hi", "agent": "ops"})
        );
        let b = create(&[
            "--rate",
            "1 hour",
            "--input",
            "x",
            "--kind",
            "heartbeat",
            "--slack-channel",
            "C1",
        ])
        .unwrap();
        assert_eq!(b["expression"], "rate(1 hour)");
        assert_eq!(b["kind"], "heartbeat");
        assert_eq!(
            b["target"],
            json!({"slack_channel": "C1", "thread_ts": null})
        );
        assert_eq!(
            create(&["--expression", "at(2030-01-01T00:00:00)", "--input", "x"]).unwrap()
                ["expression"],
            "at(2030-01-01T00:00:00)"
        );
        // Exactly one "when"; --thread-ts only with a channel.
        assert!(create(&["--input", "x"]).is_err());
        assert!(create(&["--cron", "a", "--rate", "b", "--input", "x"]).is_err());
        assert!(create(&["--rate", "1 hour", "--input", "x", "--thread-ts", "1.0"]).is_err());
    }

    #[test]
    fn a_table_of_schedules() {
        let t = render_table(&[json!({"schedule_id": "s1", "expression": "rate(1 hour)",
            "kind": "task", "agent": "default", "next_fire_at": null, "input": "do it"})]);
        assert_eq!(
            t.lines().collect::<Vec<_>>(),
            [
                "ID  EXPRESSION    KIND  AGENT    NEXT  INPUT",
                "s1  rate(1 hour)  task  default  -     do it"
            ]
        );
    }
}
