//! One task per kind of wait, for the tests of whoever applies
//! [`super::is_over`] (this crate, the worker, the reaper).

use crate::clock::Instant;
use crate::connection::{ConnectionWait, PersonKey};
use crate::task::parts::{Callback, Question};
use crate::task::{Approval, Child, ChildOutcome, Limits, Origin, Task, TaskStatus, WaitingFor};
use crate::TaskId;
use std::time::Duration;

/// How many kinds of wait there are.
pub const KINDS: usize = 8;

/// A kind's place in [`cases`]. A new kind fails to compile here; given a
/// place, it fails [`KINDS`]'s tests until [`cases`] has one of it.
pub fn index(w: &WaitingFor) -> usize {
    match w {
        WaitingFor::Approval(_) => 0,
        WaitingFor::Children(_) => 1,
        WaitingFor::Timer(_) => 2,
        WaitingFor::Capacity(_) => 3,
        WaitingFor::Turn(_) => 4,
        WaitingFor::Callback(_) => 5,
        WaitingFor::Connection(_) => 6,
        WaitingFor::Reply(_) => 7,
    }
}

/// A kind of wait as a task last changed an hour before `now`: `lost`,
/// whose wait was over by its record long ago (its expiry passed, or what
/// it waited for is on it) and whose wake never came; and `waiting`, with
/// nothing to wake it for yet (`None` for the waits of a `queued` task,
/// which its admission decides at each wake).
pub struct Case {
    pub kind: &'static str,
    pub lost: Task,
    pub waiting: Option<Task>,
}

/// The person a connection case waits for.
pub fn person() -> PersonKey {
    PersonKey::new("T1", "U1")
}

/// The provider a connection case waits for.
pub const PROVIDER: &str = "api";

fn task(now: Instant) -> Task {
    Task::new(
        TaskId::generate(),
        "default",
        Origin::Http,
        None,
        Limits::default(),
        now - Duration::from_secs(3600),
    )
}

fn waiting(mut t: Task, w: WaitingFor) -> Task {
    t.wait(w);
    t
}

/// Every kind of wait, in [`index`] order.
pub fn cases(now: Instant) -> Vec<Case> {
    let hour = Duration::from_secs(3600);
    let (past, future) = (now - hour, now + hour);
    vec![
        Case {
            kind: "approval",
            lost: approval(now, past),
            waiting: Some(approval(now, future)),
        },
        Case {
            kind: "children",
            lost: children(now, true),
            waiting: Some(children(now, false)),
        },
        Case {
            kind: "timer",
            lost: waiting(task(now), WaitingFor::Timer(super::Timer { until: past })),
            waiting: Some(waiting(
                task(now),
                WaitingFor::Timer(super::Timer { until: future }),
            )),
        },
        Case {
            kind: "capacity",
            lost: queued(
                task(now),
                WaitingFor::Capacity(super::Capacity {
                    scope: crate::CapacityScope::Agent,
                    limit: 1,
                }),
            ),
            waiting: None,
        },
        Case {
            kind: "turn",
            lost: queued(
                task(now),
                WaitingFor::Turn(super::Turn {
                    behind: TaskId::generate(),
                }),
            ),
            waiting: None,
        },
        Case {
            kind: "callback",
            lost: callback(now, past),
            waiting: Some(callback(now, future)),
        },
        Case {
            kind: "connection",
            lost: connection(now, past),
            waiting: Some(connection(now, future)),
        },
        Case {
            kind: "reply",
            lost: reply(now, past),
            waiting: Some(reply(now, future)),
        },
    ]
}

fn queued(mut t: Task, w: WaitingFor) -> Task {
    t.waiting_for = Some(w);
    t
}

fn approval(now: Instant, expires_at: Instant) -> Task {
    let mut t = task(now);
    t.waits.approvals.push(Approval {
        approval_id: "ap-1-call_1".into(),
        step: 1,
        call_id: "call_1".into(),
        tool: "http_request".into(),
        summary: "POST https://example.com/".into(),
        requested_at: t.created_at,
        expires_at,
        message: None,
        decision: None,
        always: None,
    });
    waiting(
        t,
        WaitingFor::Approval(super::Approval {
            approval_id: "ap-1-call_1".into(),
            tool: "http_request".into(),
            summary: "POST https://example.com/".into(),
        }),
    )
}

/// `reported`: the child's outcome is on the parent, which still waits.
fn children(now: Instant, reported: bool) -> Task {
    let mut t = task(now);
    t.waits.children.push(Child {
        task_id: TaskId::generate(),
        agent: "default".into(),
        call_id: "call_1".into(),
        outcome: reported.then(|| ChildOutcome {
            status: TaskStatus::Succeeded,
            text: "done".into(),
            usage: Default::default(),
        }),
    });
    waiting(t, WaitingFor::Children(super::Children { pending: 1 }))
}

fn callback(now: Instant, expires_at: Instant) -> Task {
    let mut t = task(now);
    let url = "https://baton.invalid/callbacks/token".to_owned();
    t.waits.callbacks.push(Callback {
        step: 1,
        call_id: "call_1".into(),
        description: "CI result".into(),
        token_hash: crate::callback::hash_token("token"),
        url: Some(url.clone()),
        created_at: t.created_at,
        expires_at,
        delivered: None,
    });
    waiting(t, WaitingFor::Callback(super::Callback { url, expires_at }))
}

fn connection(now: Instant, expires_at: Instant) -> Task {
    let mut t = task(now);
    let url = "https://baton.invalid/connect/state".to_owned();
    t.waits.connections.push(ConnectionWait {
        step: 1,
        call_id: "call_1".into(),
        provider: PROVIDER.into(),
        person: person(),
        url: url.clone(),
        created_at: t.created_at,
        expires_at,
        retrying: false,
    });
    waiting(
        t,
        WaitingFor::Connection(super::Connection {
            provider: PROVIDER.into(),
            url,
            expires_at,
        }),
    )
}

fn reply(now: Instant, expires_at: Instant) -> Task {
    let mut t = task(now);
    t.waits.questions.push(Question {
        step: 1,
        call_id: "call_1".into(),
        question: "Which environment?".into(),
        asked_at: t.created_at,
        expires_at,
        reply: None,
    });
    waiting(
        t,
        WaitingFor::Reply(super::Reply {
            question: "Which environment?".into(),
            expires_at,
        }),
    )
}
