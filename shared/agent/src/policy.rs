//! The agents file's Cedar policies (docs/policies.md), asked in Baton's
//! terms: the task says who is served and from where; [`baton_policy`]
//! decides.

use baton_core::{Actor, ChannelType, Origin as TaskOrigin, Task, ToolCall};
use baton_policy::{Action, Origin, Policies, Principal, Request, Verdict};
use chrono::{DateTime, Utc};

/// The name of the deployment's one API token (`BATON_API_TOKEN`).
const API_TOKEN: &str = "default";

/// Whom `task` acts for ([`Task::actor`]), as the policies name them: a
/// Slack person, or the HTTP API's token, with `roles`, theirs
/// ([`served`]). A schedule's task acts for its creator; a sub-agent for
/// its parent's person.
pub(crate) fn principal(task: &Task, roles: &[String]) -> Principal {
    let roles = roles.to_vec();
    match task.actor() {
        Actor::Slack { team, user } => Principal::User { team, user, roles },
        Actor::Api { .. } => Principal::Api {
            token: API_TOKEN.to_owned(),
            roles,
        },
    }
}

/// The person `task` acts for, as the roles lookup names them.
pub(crate) fn served(task: &Task) -> baton_core::Person {
    task.actor().role_holder()
}

fn origin(task: &Task) -> Origin<'_> {
    match &task.source.origin {
        TaskOrigin::Slack {
            channel,
            thread_ts,
            channel_type,
            ..
        } => Origin {
            channel,
            channel_type: channel_type.map_or("", kind),
            thread: thread_ts,
        },
        TaskOrigin::Http => Origin {
            channel: "",
            channel_type: "api",
            thread: "",
        },
    }
}

fn kind(k: ChannelType) -> &'static str {
    match k {
        ChannelType::Im => "im",
        ChannelType::Mpim => "mpim",
        ChannelType::Channel => "channel",
        ChannelType::Group => "group",
    }
}

fn time(now: baton_core::Instant) -> DateTime<Utc> {
    DateTime::from_timestamp_millis(now.0).unwrap_or_default()
}

/// What the policies say about `call` by `task`'s agent at `now`.
pub(crate) fn call(
    policies: &Policies,
    task: &Task,
    roles: &[String],
    call: &ToolCall,
    now: baton_core::Instant,
) -> Verdict {
    let principal = principal(task, roles);
    policies.decide(&Request {
        principal: &principal,
        action: Action::CallTool {
            tool: &call.name,
            agent: &task.agent,
            args: &call.arguments,
        },
        origin: origin(task),
        now: time(now),
    })
}

/// What the policies say about `task` starting; the reason it may not,
/// naming the policy.
pub(crate) fn start_refusal(
    policies: &Policies,
    task: &Task,
    roles: &[String],
    now: baton_core::Instant,
) -> Option<String> {
    let principal = principal(task, roles);
    let verdict = policies.decide(&Request {
        principal: &principal,
        action: Action::StartTask { agent: &task.agent },
        origin: origin(task),
        now: time(now),
    });
    verdict.refusal(&format!("starting a task of agent `{}`", task.agent))
}
