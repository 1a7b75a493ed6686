//! `ask_user`: a question the agent asked its requester, and the reply.
//!
//! The worker records the question on the task and waits at zero compute
//! (`waiting_for: {"kind": "reply", ...}`); the requester's next message in
//! the conversation — taken by ingest, which may run before or after the
//! worker starts waiting — is recorded here as the reply and lifts the
//! wait; the worker then answers the call with it. Unanswered by
//! `expires_at`, the call's result says so.

use crate::clock::Instant;
pub use crate::task::parts::{Question, Reply};
use crate::task::{Task, TaskStatus, WaitingFor};
use crate::transcript::EntryKind;

/// The tool that asks.
pub const ASK_USER: &str = "ask_user";

/// The question of call `call_id`, if it was asked.
pub fn question<'t>(t: &'t Task, call_id: &str) -> Option<&'t Question> {
    t.waits.questions.iter().find(|q| q.call_id == call_id)
}

/// The question waiting for a reply, if the task waits for one.
pub fn open(t: &Task) -> Option<&Question> {
    if t.status != TaskStatus::Waiting || !matches!(t.waiting_for, Some(WaitingFor::Reply(_))) {
        return None;
    }
    t.waits.questions.iter().find(|q| q.reply.is_none())
}

/// Records `text` as the reply to the task's unanswered question, if it
/// has one that has not expired, and lifts the wait if the task waits for
/// it (it is queued again: wake it). A question asked but not yet waited
/// for (the worker is between the two) is answered all the same, and the
/// worker then goes on without waiting. `None`: no question to answer.
pub fn reply(t: &mut Task, text: &str, by: Option<&str>, now: Instant) -> Option<Vec<EntryKind>> {
    if t.status.is_terminal() {
        return None;
    }
    let q = t
        .waits
        .questions
        .iter_mut()
        .find(|q| q.reply.is_none() && q.expires_at > now)?;
    q.reply = Some(Reply {
        text: text.to_owned(),
        by: by.map(str::to_owned),
        at: now,
    });
    let waiting =
        t.status == TaskStatus::Waiting && matches!(t.waiting_for, Some(WaitingFor::Reply(_)));
    if waiting {
        t.wake();
    }
    Some(vec![EntryKind::Status {
        status: t.status,
        detail: format!(
            "reply received{}",
            by.map(|b| format!(" from {b}")).unwrap_or_default()
        ),
    }])
}

/// What the model gets for an `ask_user` call once it is settled: the
/// reply, or that none came in time; `None` while it is still open.
pub fn result_of(q: &Question, now: Instant) -> Option<String> {
    match &q.reply {
        Some(r) => Some(r.text.clone()),
        None if q.expires_at <= now => Some(format!(
            "no reply: nobody answered by {}; go on without it or say what you need",
            q.expires_at
        )),
        None => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::task::{Limits, Origin};
    use crate::TaskId;

    fn waiting_task() -> Task {
        let mut t = Task::new(
            TaskId::generate(),
            "default",
            Origin::Http,
            None,
            Limits {
                max_steps: 10,
                max_segments: 10,
                max_tokens: 0,
                deadline_at: None,
            },
            0,
        );
        t.waits.questions.push(Question {
            step: 1,
            call_id: "c1".into(),
            question: "Which environment?".into(),
            asked_at: Instant(0),
            expires_at: Instant(1_000),
            reply: None,
        });
        t.wait(WaitingFor::Reply(crate::task::wait::Reply {
            question: "Which environment?".into(),
            expires_at: crate::Instant(1_000),
        }));
        t
    }

    #[test]
    fn a_reply_lifts_the_wait_once() {
        let mut t = waiting_task();
        assert!(open(&t).is_some());
        assert!(reply(&mut t, "staging", Some("U1"), Instant(10)).is_some());
        assert_eq!(t.status, TaskStatus::Queued);
        assert!(t.waiting_for.is_none());
        let q = question(&t, "c1").unwrap();
        assert_eq!(result_of(q, Instant(10)).as_deref(), Some("staging"));
        assert_eq!(q.reply.as_ref().unwrap().by.as_deref(), Some("U1"));
        // Nothing open any more: a second message is no reply.
        assert!(reply(&mut t, "prod", None, Instant(11)).is_none());
    }

    #[test]
    fn an_unanswered_question_expires() {
        let t = waiting_task();
        assert!(!crate::wait::is_over(&t, Instant(999)));
        assert!(crate::wait::is_over(&t, Instant(1_000)));
        let q = question(&t, "c1").unwrap();
        assert_eq!(result_of(q, Instant(999)), None);
        assert!(result_of(q, Instant(1_000))
            .unwrap()
            .starts_with("no reply"));
    }
}
