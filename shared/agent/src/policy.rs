//! The agents file's Cedar policies (docs/policies.md), asked in Baton's
//! terms: the task says who is served and from where; [`baton_policy`]
//! decides.

use baton_core::{ChannelType, Origin as TaskOrigin, Task, ToolCall};
use baton_policy::{Action, Origin, Policies, Principal, Request, Verdict};
use chrono::{DateTime, Utc};

/// The name of the deployment's one API token (`BATON_API_TOKEN`).
const API_TOKEN: &str = "default";

/// Whom `task` serves now ([`Task::serving`]): a Slack person, or the
/// HTTP API's token, with `roles`, theirs ([`served`]). Crons and
/// heartbeats carry their creator's origin.
pub(crate) fn principal(task: &Task, roles: &[String]) -> Principal {
    let roles = roles.to_vec();
    match task.serving() {
        TaskOrigin::Slack { team_id, user, .. } => Principal::User {
            team: team_id,
            user,
            roles,
        },
        TaskOrigin::Http => Principal::Api {
            token: API_TOKEN.to_owned(),
            roles,
        },
    }
}

/// The person `task` serves, as the roles lookup names them.
pub(crate) fn served(task: &Task) -> baton_core::Person {
    match task.serving() {
        TaskOrigin::Slack { team_id, user, .. } => baton_core::Person::slack(team_id, user),
        TaskOrigin::Http => baton_core::Person::api_default(),
    }
}

fn origin(task: &Task) -> Origin<'_> {
    match &task.origin {
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
