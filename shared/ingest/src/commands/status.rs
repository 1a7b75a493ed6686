//! `status`: what this thread's task is doing and what it waits for.

use super::{Context, NOTHING_RUNS, NO_THREAD};
use crate::response::ApiError;
use crate::Ingest;
use baton_core::always::AlwaysRule;
use baton_core::wait;
use baton_core::{Task, TaskStatus, WaitingFor};

pub(super) async fn answer(ingest: &Ingest, ctx: &Context) -> Result<String, ApiError> {
    if ctx.conversation.is_none() {
        return Ok(NO_THREAD.to_owned());
    }
    let mut out = match ingest.thread_task(ctx).await? {
        Some((_, task)) => describe(&task),
        None => NOTHING_RUNS.to_owned(),
    };
    if let Some(key) = ctx.conversation.as_deref() {
        let rules = ingest
            .store
            .thread(key)
            .await
            .map_err(|e| ApiError::unavailable_on(Some(key), e))?
            .map(|t| t.always)
            .unwrap_or_default();
        if !rules.is_empty() {
            out.push_str(&format!(
                "\nAlways allowed in this thread: {} (`forget approvals` removes them).",
                rule_list(&rules)
            ));
        }
    }
    Ok(out)
}

/// Always-rules in words: `http_request GET api.example.com` (by <@U1>), …
pub(super) fn rule_list(rules: &[AlwaysRule]) -> String {
    rules
        .iter()
        .map(|r| {
            let by = match r.by.as_str() {
                baton_core::task::API_DECIDER => "the API".to_owned(),
                user => format!("<@{}>", one_line(user)),
            };
            format!(
                "`{}` (by {by})",
                one_line(&r.allowed.to_string()).replace('`', "'")
            )
        })
        .collect::<Vec<_>>()
        .join(", ")
}

/// One line on a task: its id, agent, state, steps and what it waits for.
pub(super) fn describe(task: &Task) -> String {
    let doing = match task.status() {
        TaskStatus::Queued => "is queued".to_owned(),
        TaskStatus::Running => "is working".to_owned(),
        TaskStatus::Waiting => "is waiting".to_owned(),
        done => format!("has ended ({})", done.as_str()),
    };
    let mut out = format!(
        "Task `{}` (agent *{}*) {doing}, {} step{} so far",
        task.id,
        task.agent,
        task.budget.steps,
        if task.budget.steps == 1 { "" } else { "s" }
    );
    if task.cancel_requested {
        out.push_str(", stopping");
    }
    if let Some(w) = &task.waiting_for() {
        out.push_str(": waiting for ");
        out.push_str(&waiting_for(w));
    }
    out.push('.');
    out
}

/// What a waiting task waits for, in words.
fn waiting_for(w: &WaitingFor) -> String {
    match w {
        WaitingFor::Approval(wait::Approval { tool, summary, .. }) => {
            format!("approval to run `{tool}` ({})", one_line(summary))
        }
        WaitingFor::Children(wait::Children { pending }) => {
            format!("{pending} sub-task(s) to finish")
        }
        WaitingFor::Timer(wait::Timer { until }) => format!("its timer, until {until}"),
        WaitingFor::Capacity(wait::Capacity { scope, limit }) => {
            let whose = match scope {
                baton_core::CapacityScope::User => "this person",
                baton_core::CapacityScope::Team => "this workspace",
                baton_core::CapacityScope::Api => "the HTTP API",
                baton_core::CapacityScope::Agent => "this agent",
            };
            format!("a free slot ({whose} has {limit} tasks running, its limit)")
        }
        WaitingFor::Turn(wait::Turn { behind }) => {
            format!("its turn: it starts when task {behind} ends")
        }
        WaitingFor::Reply(wait::Reply { question, .. }) => {
            format!("its requester's answer to: {}", one_line(question))
        }
        // Not the URL: whoever holds it may resume the task.
        WaitingFor::Callback(wait::Callback { expires_at, .. }) => {
            format!("a callback, until {expires_at}")
        }
        // Not the URL: it is the requester's own Connect link.
        WaitingFor::Connection(wait::Connection {
            provider,
            expires_at,
            ..
        }) => format!("its requester to connect `{provider}`, until {expires_at}"),
    }
}

/// The first line of `text`, at most 120 characters, with Slack markup
/// characters escaped.
pub(super) fn one_line(text: &str) -> String {
    let line = text.lines().next().unwrap_or_default();
    let mut short: String = line.chars().take(120).collect();
    if short.len() < line.len() {
        short.push('…');
    }
    baton_slack::mrkdwn::escape(&short)
}

#[cfg(test)]
mod tests {
    use super::*;
    use baton_core::{Limits, Origin, TaskId};

    #[test]
    fn rules_are_listed_with_who_chose_them() {
        use baton_core::always::Allowed;
        let rules = [
            AlwaysRule {
                allowed: Allowed::Http {
                    method: "GET".into(),
                    host: "api.example.com".into(),
                },
                by: "U1".into(),
                at: baton_core::Instant(0),
            },
            AlwaysRule {
                allowed: Allowed::Tool {
                    tool: "deploy".into(),
                },
                by: "api".into(),
                at: baton_core::Instant(0),
            },
        ];
        assert_eq!(
            rule_list(&rules),
            "`http_request GET api.example.com` (by <@U1>), `deploy` (by the API)"
        );
    }

    #[test]
    fn a_task_is_described_with_what_it_waits_for() {
        let mut t = Task::new(
            TaskId::generate(),
            "ops",
            Origin::Http,
            None,
            Limits::default(),
            0,
        );
        t.budget.steps = 1;
        t.wait(WaitingFor::Approval(wait::Approval {
            approval_id: "a1".into(),
            tool: "deploy".into(),
            summary: "ship <v2>\nmore".into(),
        }));
        let text = describe(&t);
        assert!(
            text.contains("agent *ops*) is waiting, 1 step so far"),
            "{text}"
        );
        assert!(
            text.ends_with("approval to run `deploy` (ship &lt;v2&gt;)."),
            "{text}"
        );
    }
}
