//! The task: one run of an agent on one input, and the record the store
//! keeps of it. Everything the loop must remember across segments — counts,
//! budgets, the lease, pending signals — lives here, never in memory only.

use crate::clock::Instant;
use crate::ids::TaskId;
use crate::lease::LeaseSlot;
use crate::llm::Usage;
use crate::task::parts::{
    feedback_json, Answer, Approval, Budget, Conversation, Fork, Limits, Origin, Source,
    TaskStatus, Waits,
};
use crate::task::wait::WaitingFor;
use serde::{Deserialize, Serialize};

/// The task's approvals as its status shows them: what was asked and how
/// it was decided, by whom, and by which rule when no one was asked.
fn approvals_json(approvals: &[Approval]) -> serde_json::Value {
    approvals
        .iter()
        .map(|a| {
            let mut v = serde_json::json!({
                "approval_id": a.approval_id,
                "tool": a.tool,
                "summary": a.summary,
            });
            if let Some(d) = &a.decision {
                v["decision"] = serde_json::json!(d.verdict);
                v["by"] = serde_json::json!(d.by);
                if let Some(rule) = &d.rule {
                    v["rule"] = serde_json::json!(rule);
                }
            }
            v
        })
        .collect()
}

/// A rule of the task record that a write broke: such a task is never
/// stored ([`crate::store::TaskStore`] refuses it).
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub enum Invariant {
    /// A waiting task must say what it waits for, or nothing would ever
    /// wake it.
    #[error("a waiting task must say what it waits for")]
    WaitingForNothing,
    /// No worker runs a waiting task, so none may hold its lease.
    #[error("a waiting task holds no lease")]
    WaitingWithLease,
    /// Only a waiting task waits for something: a queued, running or
    /// ended one that kept its `waiting_for` would be shown as waiting.
    #[error("a {0} task waits for nothing")]
    NotWaitingButWaitingFor(&'static str),
    /// A running task is one a worker holds (or held, if it crashed):
    /// between segments a task is queued.
    #[error("a running task holds a lease")]
    RunningWithoutLease,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Task {
    pub id: TaskId,
    /// Bumped by every write; every write is conditional on it. Kept by
    /// the table beside the body, not in it.
    #[serde(default, skip_serializing)]
    pub version: u64,
    pub(crate) status: TaskStatus,
    /// The agent configuration to run (`default` unless asked otherwise).
    pub agent: String,
    #[serde(with = "crate::clock::as_millis")]
    pub created_at: Instant,
    #[serde(with = "crate::clock::as_millis")]
    pub updated_at: Instant,
    #[serde(default, skip_serializing_if = "LeaseSlot::is_free")]
    pub(crate) lease: LeaseSlot,
    /// Sequence number the next transcript entry gets.
    #[serde(default)]
    pub next_seq: u64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) waiting_for: Option<WaitingFor>,
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub cancel_requested: bool,
    /// The model every step asks instead of the agent's (no tier,
    /// escalation or fallback stands in for it): set by the client that
    /// created the task, to evaluate or compare models.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model: Option<String>,
    #[serde(flatten)]
    pub source: Source,
    #[serde(flatten)]
    pub budget: Budget,
    #[serde(flatten)]
    pub conversation: Conversation,
    #[serde(flatten)]
    pub waits: Waits,
    #[serde(flatten)]
    pub answer: Answer,
    #[serde(flatten)]
    pub fork: Fork,
}

impl Task {
    /// Whether the task keeps the record's rules ([`Invariant`]): checked
    /// by the store on every write, so a change that breaks one is refused
    /// rather than stored.
    ///
    /// A running task with no lease is allowed: it is one between two
    /// segments (handed over, or released after a failure) whose next
    /// wake is on its way.
    pub fn check(&self) -> Result<(), Invariant> {
        match (self.status, &self.waiting_for) {
            (TaskStatus::Waiting, None) => Err(Invariant::WaitingForNothing),
            (TaskStatus::Waiting, Some(_)) if !self.lease.is_free() => {
                Err(Invariant::WaitingWithLease)
            }
            (TaskStatus::Waiting, Some(w)) if w.is_admission() => {
                Err(Invariant::NotWaitingButWaitingFor("waiting"))
            }
            (TaskStatus::Waiting, Some(_)) => Ok(()),
            // Waiting for a slot is being queued: no worker holds it.
            (TaskStatus::Queued, Some(w)) if w.is_admission() && self.lease.is_free() => Ok(()),
            (status, Some(_)) => Err(Invariant::NotWaitingButWaitingFor(status.as_str())),
            (TaskStatus::Running, None) if self.lease.is_free() => {
                Err(Invariant::RunningWithoutLease)
            }
            (_, None) => Ok(()),
        }
    }

    /// A task record as stored, at `version`. Records of earlier releases
    /// kept a handed-over task `running` with no lease; they read as
    /// `queued`, which they were, so [`Task::check`] holds for them too.
    pub fn from_record(data: &str, version: u64) -> Result<Task, serde_json::Error> {
        let mut task: Task = serde_json::from_str(data)?;
        task.version = version;
        if task.status == TaskStatus::Running && task.lease.is_free() {
            task.status = TaskStatus::Queued;
        }
        Ok(task)
    }

    /// Whom the task acts for, decided here and nowhere else, from the
    /// author of the message that started its turn (it never changes
    /// while the task lives): a child acts for its parent's actor (copied
    /// into its [`crate::task::ParentLink`] at delegation); a Slack task for the author of
    /// its message; a schedule's task for the schedule's creator; an HTTP
    /// task for the API's client and the person it named, if any. Whose
    /// connections, memory, budgets, roles and Cedar principal apply.
    pub fn actor(&self) -> crate::task::author::Actor {
        use crate::task::author::Actor;
        if let Some(parent) = &self.source.parent {
            return match &parent.actor {
                Some(a) => a.clone(),
                // Links of earlier releases kept the parent's person only.
                None => Actor::of_person(self.source.user.as_ref()),
            };
        }
        if let Origin::Slack { team_id, user, .. } = &self.source.origin {
            if let Some(a) = Actor::slack(team_id, user) {
                return a;
            }
        }
        if let Some((team, user)) = self.source.schedule_person() {
            if let Some(a) = Actor::slack(team, user) {
                return a;
            }
        }
        Actor::Api {
            person: self.source.user.clone(),
        }
    }

    /// Whose connections the task's per-person tools use: its
    /// [`Task::actor`]'s person; `None` for an API client that named
    /// nobody.
    pub fn acting_for(&self) -> Option<crate::connection::PersonKey> {
        self.actor().person()
    }

    pub fn new(
        id: TaskId,
        agent: &str,
        origin: Origin,
        thread: Option<String>,
        limits: Limits,
        now: impl Into<Instant>,
    ) -> Self {
        let now = now.into();
        Task {
            id,
            version: 0,
            status: TaskStatus::Queued,
            agent: agent.to_owned(),
            created_at: now,
            updated_at: now,
            lease: LeaseSlot::default(),
            next_seq: 0,
            waiting_for: None,
            cancel_requested: false,
            model: None,
            source: Source {
                origin,
                user: None,
                parent: None,
                schedule_id: None,
                schedule_owner: None,
            },
            budget: Budget {
                limits,
                usage: Usage::default(),
                steps: 0,
                segments: 0,
                cost_usd: 0.0,
                holds_capacity: false,
            },
            conversation: Conversation {
                thread,
                ..Conversation::default()
            },
            waits: Waits::default(),
            answer: Answer::default(),
            fork: Fork::default(),
        }
    }

    /// The task whose trace this one belongs to: the root of its
    /// delegation tree (itself, unless it is a child task).
    pub fn trace_root(&self) -> &TaskId {
        match &self.source.parent {
            Some(p) => p.root_task_id.as_ref().unwrap_or(&p.task_id),
            None => &self.id,
        }
    }

    /// Who asked for the task and where: `{"kind": "slack", "user",
    /// "channel", "direct_message"}`, `{"kind": "schedule",
    /// "schedule_id"}`, `{"kind": "delegate", "parent_task_id"}` or
    /// `{"kind": "http"}`. The Slack user is their id: the routes that show
    /// tasks add their display name when shown, not kept on the task.
    pub fn requester_json(&self) -> serde_json::Value {
        if let Some(p) = &self.source.parent {
            return serde_json::json!({"kind": "delegate", "parent_task_id": p.task_id});
        }
        if let Some(s) = &self.source.schedule_id {
            return serde_json::json!({"kind": "schedule", "schedule_id": s});
        }
        match &self.source.origin {
            Origin::Slack { user, channel, .. } => serde_json::json!({
                "kind": "slack", "user": user, "channel": channel,
                "direct_message": self.source.origin.is_direct_message(),
            }),
            Origin::Http => serde_json::json!({"kind": "http"}),
        }
    }

    /// The task status JSON of the HTTP API (`GET /tasks/{id}`, and each
    /// task of `GET /tasks`).
    pub fn status_json(&self) -> serde_json::Value {
        let mut v = serde_json::json!({
            "task_id": self.id,
            "status": self.status.as_str(),
            "agent": self.agent,
            "thread": self.conversation.shown_thread(),
            "waiting_for": self.waiting_for,
            "result": self.answer.result,
            "error": self.answer.error,
            "steps": self.budget.steps,
            "segments": self.budget.segments,
            "usage": self.budget.usage,
            "created_at": self.created_at,
            "updated_at": self.updated_at,
        });
        // Additions to the contract's shape, present only when they say
        // something.
        if self.budget.cost_usd > 0.0 {
            v["cost_usd"] = serde_json::json!(self.budget.cost_usd);
        }
        if let Some(p) = &self.source.parent {
            v["parent_task_id"] = serde_json::json!(p.task_id);
        }
        if !self.answer.feedback.is_empty() {
            v["feedback"] = feedback_json(&self.answer.feedback);
        }
        if let Some(summary) = &self.conversation.summary {
            v["summary"] = serde_json::json!(summary);
        }
        if let Some(model) = &self.model {
            v["model"] = serde_json::json!(model);
        }
        v["requester"] = self.requester_json();
        if let Some(f) = &self.fork.forked_from {
            v["forked_from"] = serde_json::json!({"task_id": f.task_id, "step": f.step});
        }
        if !self.fork.forks.is_empty() {
            v["forks"] = serde_json::json!(self.fork.forks);
        }
        if !self.fork.tools.is_live() {
            v["tools"] = serde_json::json!(self.fork.tools.as_str());
        }
        if !self.waits.approvals.is_empty() {
            v["approvals"] = approvals_json(&self.waits.approvals);
        }
        if !self.waits.children.is_empty() {
            v["children"] = serde_json::json!(self
                .waits
                .children
                .iter()
                .map(|c| serde_json::json!({
                    "task_id": c.task_id,
                    "agent": c.agent,
                    "status": c.outcome.as_ref().map(|o| o.status.as_str()),
                }))
                .collect::<Vec<_>>());
        }
        v
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::task::parts::ChannelType;

    fn slack(channel: &str, channel_type: Option<ChannelType>) -> Origin {
        Origin::Slack {
            team_id: "T1".into(),
            channel: channel.into(),
            thread_ts: "1.0".into(),
            user: "U1".into(),
            channel_type,
        }
    }

    #[test]
    fn only_a_direct_message_is_private_to_its_user() {
        assert!(slack("D1", Some(ChannelType::Im)).is_direct_message());
        assert!(!slack("C1", Some(ChannelType::Channel)).is_direct_message());
        assert!(!slack("G1", Some(ChannelType::Group)).is_direct_message());
        assert!(!slack("G2", Some(ChannelType::Mpim)).is_direct_message());
        // Slack did not say (a mention; a task of an earlier release).
        assert!(slack("D1", None).is_direct_message());
        assert!(!slack("C1", None).is_direct_message());
        // What Slack says wins over the id's look.
        assert!(!slack("D1", Some(ChannelType::Mpim)).is_direct_message());
        assert!(!Origin::Http.is_direct_message());
        assert_eq!(ChannelType::parse("im"), Some(ChannelType::Im));
        assert_eq!(ChannelType::parse("app_home"), None);
    }

    #[test]
    fn origins_of_earlier_releases_still_read() {
        let old = r#"{"kind":"slack","team_id":"T1","channel":"C1","thread_ts":"1.0","user":"U1"}"#;
        let o: Origin = serde_json::from_str(old).unwrap();
        assert_eq!(o, slack("C1", None));
        let json = serde_json::to_string(&slack("D1", Some(ChannelType::Im))).unwrap();
        assert!(json.contains(r#""channel_type":"im""#), "{json}");
    }

    #[test]
    fn status_json_has_the_contract_fields() {
        let t = Task::new(
            TaskId::generate(),
            "default",
            Origin::Http,
            None,
            Limits::default(),
            0,
        );
        let v = t.status_json();
        for k in [
            "task_id",
            "status",
            "waiting_for",
            "result",
            "error",
            "steps",
            "segments",
            "usage",
            "created_at",
            "updated_at",
            "agent",
            "thread",
        ] {
            assert!(v.get(k).is_some(), "missing {k}");
        }
        assert_eq!(v["status"], "queued");
        assert_eq!(v["agent"], "default");
        assert_eq!(v["thread"], serde_json::Value::Null);
        let mut t = t;
        t.conversation.thread = Some("http:chat-1".into());
        assert_eq!(t.status_json()["thread"], "chat-1");
        t.conversation.thread = Some("slack:T1:C1:1.0".into());
        assert_eq!(t.status_json()["thread"], "slack:T1:C1:1.0");
        assert_eq!(v["usage"]["input_tokens"], 0);
    }

    /// A task row as stored by releases whose instants were bare
    /// milliseconds: it reads, and is written back byte for byte.
    const OLD_ROW: &str = concat!(
        r#"{"id":"0190a5e4-7f3b-7cc0-8a1e-2b3c4d5e6f70","status":"waiting","agent":"default","#,
        r#""origin":{"kind":"http"},"created_at":1767225600000,"updated_at":1767225601000,"#,
        r#""steps":2,"segments":1,"next_seq":5,"usage":{"input_tokens":10,"output_tokens":3},"#,
        r#""limits":{"max_steps":50,"max_segments":200,"deadline_at":1767229200000},"#,
        r#""waiting_for":{"kind":"timer","until":"2026-01-01T00:10:00.000Z"},"#,
        r#""last_commit":null,"#,
        r#""approvals":[{"approval_id":"ap-1-c1","step":1,"call_id":"c1","tool":"http_request","#,
        r#""summary":"POST https://x.test","requested_at":1767225600500,"expires_at":1767229200000,"#,
        r#""decision":{"verdict":"approved","by":"U1","at":1767225600900}}],"#,
        r#""questions":[{"step":2,"call_id":"c2","question":"Which env?","#,
        r#""asked_at":1767225601000,"expires_at":1767229200000,"#,
        r#""reply":{"text":"staging","by":"U1","at":1767225602000}}],"#,
        r#""feedback":[{"user":"U2","rating":"positive","at":1767225603000,"#,
        r#""action_ts":"1767225603.000100"}],"#,
        r#""answer_stream":{"opened_at":1767225602500,"message":{"channel":"C1","ts":"1.0"}}}"#,
    );

    #[test]
    fn rows_of_earlier_releases_read_and_write_back_the_same() {
        let t: Task = serde_json::from_str(OLD_ROW).unwrap();
        assert_eq!(
            t.budget.limits.deadline_at,
            Some(Instant(1_767_229_200_000))
        );
        assert_eq!(t.created_at, Instant(1_767_225_600_000));
        assert_eq!(t.updated_at, Instant(1_767_225_601_000));
        // The API shows them as text, as it always did.
        assert_eq!(t.status_json()["created_at"], "2026-01-01T00:00:00.000Z");
        let a = &t.waits.approvals[0];
        assert_eq!(a.requested_at, Instant(1_767_225_600_500));
        assert_eq!(a.expires_at, Instant(1_767_229_200_000));
        assert_eq!(
            a.decision.as_ref().map(|d| d.at),
            Some(Instant(1_767_225_600_900))
        );
        let q = &t.waits.questions[0];
        assert_eq!(q.asked_at, Instant(1_767_225_601_000));
        assert_eq!(q.expires_at, Instant(1_767_229_200_000));
        assert_eq!(
            q.reply.as_ref().map(|r| r.at),
            Some(Instant(1_767_225_602_000))
        );
        assert_eq!(t.answer.feedback[0].at, Instant(1_767_225_603_000));
        assert_eq!(
            t.status_json()["feedback"][0]["at"],
            "2026-01-01T00:00:03.000Z"
        );
        assert_eq!(
            t.answer.answer_stream.as_ref().map(|s| s.opened_at),
            Some(Instant(1_767_225_602_500))
        );
        // The same fields with the same values (their order in the text is
        // the parts' order now, which no reader depends on).
        let written: serde_json::Value = serde_json::to_value(&t).unwrap();
        let old: serde_json::Value = serde_json::from_str(OLD_ROW).unwrap();
        assert_eq!(written, old);
    }

    #[test]
    fn waiting_for_serialises_with_kind() {
        let w = WaitingFor::Children(crate::task::wait::Children { pending: 2 });
        assert_eq!(
            serde_json::to_value(&w).unwrap(),
            serde_json::json!({"kind": "children", "pending": 2})
        );
    }
}

#[cfg(test)]
mod invariant_tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn a_handed_over_task_of_an_earlier_release_reads_as_queued() {
        let mut t = Task::new(
            TaskId::generate(),
            "default",
            Origin::Http,
            None,
            Limits::default(),
            0,
        );
        t.status = TaskStatus::Running;
        let old = serde_json::to_string(&t).unwrap_or_default();
        let read = Task::from_record(&old, 7).ok();
        assert_eq!(read.as_ref().map(|t| t.status), Some(TaskStatus::Queued));
        assert_eq!(read.as_ref().map(|t| t.version), Some(7));
        assert_eq!(read.map(|t| t.check()), Some(Ok(())));
        // One a worker holds stays running.
        assert!(t.lease.take("w", Instant(0), Duration::from_secs(1)));
        let held = serde_json::to_string(&t).unwrap_or_default();
        let read = Task::from_record(&held, 1).ok();
        assert_eq!(read.map(|t| t.status), Some(TaskStatus::Running));
    }

    #[test]
    fn the_record_rules_hold_or_name_what_broke() {
        let timer = || {
            WaitingFor::Timer(crate::task::wait::Timer {
                until: crate::clock::Instant(1),
            })
        };
        // (status, waits for something, holds a lease) -> the rule broken.
        let cases = [
            (TaskStatus::Queued, false, false, Ok(())),
            (
                TaskStatus::Queued,
                true,
                false,
                Err(Invariant::NotWaitingButWaitingFor("queued")),
            ),
            (TaskStatus::Running, false, true, Ok(())),
            // Between two segments a task is queued, not running.
            (
                TaskStatus::Running,
                false,
                false,
                Err(Invariant::RunningWithoutLease),
            ),
            (
                TaskStatus::Running,
                true,
                true,
                Err(Invariant::NotWaitingButWaitingFor("running")),
            ),
            (TaskStatus::Waiting, true, false, Ok(())),
            (
                TaskStatus::Waiting,
                false,
                false,
                Err(Invariant::WaitingForNothing),
            ),
            (
                TaskStatus::Waiting,
                true,
                true,
                Err(Invariant::WaitingWithLease),
            ),
            (TaskStatus::Succeeded, false, false, Ok(())),
            (
                TaskStatus::Failed,
                true,
                false,
                Err(Invariant::NotWaitingButWaitingFor("failed")),
            ),
            (
                TaskStatus::Cancelled,
                true,
                false,
                Err(Invariant::NotWaitingButWaitingFor("cancelled")),
            ),
        ];
        for (status, waits, leased, want) in cases {
            let mut t = Task::new(
                TaskId::generate(),
                "default",
                Origin::Http,
                None,
                Limits::default(),
                0,
            );
            t.status = status;
            t.waiting_for = waits.then(timer);
            if leased {
                assert!(t.lease.take("w", Instant(0), Duration::from_millis(10)));
            }
            assert_eq!(
                t.check(),
                want,
                "{status:?}, waits: {waits}, leased: {leased}"
            );
        }
    }

    #[test]
    fn the_helpers_keep_the_rules() {
        let mut t = Task::new(
            TaskId::generate(),
            "default",
            Origin::Http,
            None,
            Limits::default(),
            0,
        );
        t.status = TaskStatus::Running;
        assert!(t.lease.take("w", Instant(0), Duration::from_millis(10)));
        t.wait(WaitingFor::Children(crate::task::wait::Children {
            pending: 1,
        }));
        assert_eq!(t.check(), Ok(()));
        assert!(t.lease.is_free());
        t.wake();
        assert_eq!((t.status, t.check()), (TaskStatus::Queued, Ok(())));
    }
}

#[cfg(test)]
mod acting_for_tests {
    use super::*;
    use crate::connection::PersonKey;
    use crate::task::parts::{ChannelType, ParentLink};

    fn task(origin: Origin) -> Task {
        Task::new(TaskId::generate(), "a", origin, None, Limits::default(), 0)
    }

    fn slack_in_channel() -> Origin {
        Origin::Slack {
            team_id: "T1".into(),
            channel: "C1".into(),
            thread_ts: "1.0".into(),
            user: "U1".into(),
            channel_type: Some(ChannelType::Channel),
        }
    }

    #[test]
    fn a_slack_task_acts_for_the_author_of_its_message_whatever_comes_later() {
        let mut t = task(slack_in_channel());
        assert_eq!(t.acting_for(), Some(PersonKey::new("T1", "U1")));
        // A message in its inbox, marked or not, changes nothing.
        t.conversation
            .inbox
            .push(crate::task::author::InboxMessage {
                text: "[from <@U2>] recall my door code".into(),
                from: None,
            });
        assert_eq!(t.acting_for(), Some(PersonKey::new("T1", "U1")));
        // A user named over HTTP never overrides the Slack person.
        t.source.user = Some(PersonKey::new("api", "mallory"));
        assert_eq!(t.acting_for(), Some(PersonKey::new("T1", "U1")));
    }

    #[test]
    fn a_stored_second_speaker_of_earlier_releases_is_ignored() {
        let t = task(slack_in_channel());
        let mut json: serde_json::Value = serde_json::to_value(&t).unwrap();
        json["speaker"] = "U2".into();
        let back = Task::from_record(&json.to_string(), 1).unwrap();
        assert_eq!(back.acting_for(), Some(PersonKey::new("T1", "U1")));
    }

    #[test]
    fn a_schedule_acts_for_its_creator() {
        let mut t = task(Origin::Http);
        t.source.schedule_owner = Some("slack:T9:U9".into());
        assert_eq!(t.acting_for(), Some(PersonKey::new("T9", "U9")));
        // An API-made schedule has no person.
        t.source.schedule_owner = Some("api".into());
        assert_eq!(t.acting_for(), None);
    }

    #[test]
    fn a_child_acts_for_the_person_copied_from_its_parent() {
        let mut parent = task(slack_in_channel());
        if let Origin::Slack { user, .. } = &mut parent.source.origin {
            *user = "U2".into();
        }
        // The child is made with the parent's origin and acts for whom
        // the parent acted for when it delegated.
        let mut child = task(parent.source.origin.clone());
        child.source.parent = Some(ParentLink {
            task_id: parent.id.clone(),
            call_id: "c".into(),
            root_task_id: None,
            actor: None,
        });
        child.source.user = parent.acting_for();
        assert_eq!(child.acting_for(), Some(PersonKey::new("T1", "U2")));
        // A child of a task acting for nobody acts for nobody.
        child.source.user = None;
        assert_eq!(child.acting_for(), None);
    }

    #[test]
    fn an_http_task_acts_for_the_named_user_or_nobody() {
        let mut t = task(Origin::Http);
        assert_eq!(t.acting_for(), None);
        t.source.user = Some(PersonKey::new("api", "alice"));
        assert_eq!(t.acting_for(), Some(PersonKey::new("api", "alice")));
        // Stored and read back.
        let json = serde_json::to_string(&t).unwrap_or_default();
        let back = Task::from_record(&json, 1).map(|b| b.acting_for());
        assert_eq!(back.ok().flatten(), Some(PersonKey::new("api", "alice")));
    }
}
