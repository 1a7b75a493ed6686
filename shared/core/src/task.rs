//! The task: one run of an agent on one input, and the record the store
//! keeps of it. Everything the loop must remember across segments — counts,
//! budgets, the lease, pending signals — lives here, never in memory only.

use crate::clock::Millis;
use crate::conversation::Usage;
use crate::ids::TaskId;
use crate::lease::Lease;
use serde::{Deserialize, Serialize};

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum TaskStatus {
    Queued,
    Running,
    Waiting,
    Succeeded,
    Failed,
    Cancelled,
}

impl TaskStatus {
    pub fn is_terminal(self) -> bool {
        matches!(
            self,
            TaskStatus::Succeeded | TaskStatus::Failed | TaskStatus::Cancelled
        )
    }

    pub fn as_str(self) -> &'static str {
        match self {
            TaskStatus::Queued => "queued",
            TaskStatus::Running => "running",
            TaskStatus::Waiting => "waiting",
            TaskStatus::Succeeded => "succeeded",
            TaskStatus::Failed => "failed",
            TaskStatus::Cancelled => "cancelled",
        }
    }
}

/// Where a task came from, and so where its answer goes.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Origin {
    /// `POST /tasks`: the client polls or tails for the result.
    Http,
    /// A Slack mention or direct message: the answer is posted in the thread.
    Slack {
        team_id: String,
        channel: String,
        /// The thread to answer in (the mention's own `ts` when it was not
        /// in a thread).
        thread_ts: String,
        user: String,
    },
}

/// What a waiting task waits for. Serialised as the `waiting_for` of the
/// task status JSON.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum WaitingFor {
    Approval {
        approval_id: String,
        tool: String,
        summary: String,
    },
    Children {
        pending: u32,
    },
    Timer {
        until: String,
    },
}

/// Per-task budgets. They are state: a loop cannot outlive them across any
/// number of segments.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Limits {
    /// Completed LLM turns.
    pub max_steps: u32,
    /// Worker legs (hops through the queue). Replaces Lambda's own
    /// recursive-loop detection, which the template turns off.
    pub max_segments: u32,
    /// Input + output tokens over the whole task; 0 means no limit.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub max_tokens: u64,
    /// Wall-clock deadline; `None` means none.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub deadline_at: Option<Millis>,
}

fn is_zero(n: &u64) -> bool {
    *n == 0
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            max_steps: 50,
            max_segments: 200,
            max_tokens: 0,
            deadline_at: None,
        }
    }
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Task {
    pub id: TaskId,
    /// Bumped by every write; every write is conditional on it. Kept by
    /// the table beside the body, not in it.
    #[serde(default, skip_serializing)]
    pub version: u64,
    pub status: TaskStatus,
    /// The agent configuration to run (`default` unless asked otherwise).
    pub agent: String,
    pub origin: Origin,
    /// The conversation this task belongs to, if any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub thread: Option<String>,
    pub created_at: Millis,
    pub updated_at: Millis,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lease: Option<Lease>,
    /// Completed LLM turns.
    #[serde(default)]
    pub steps: u32,
    /// Worker legs started.
    #[serde(default)]
    pub segments: u32,
    /// Sequence number the next transcript entry gets.
    #[serde(default)]
    pub next_seq: u64,
    #[serde(default)]
    pub usage: Usage,
    pub limits: Limits,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub result: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub waiting_for: Option<WaitingFor>,
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub cancel_requested: bool,
    /// Messages that arrived for the task while it ran; the loop moves them
    /// into the transcript at the next step boundary.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub inbox: Vec<String>,
    /// Id of the commit that wrote this version. A writer whose commit
    /// failed ambiguously (a timeout, or an SDK retry of a write that had in
    /// fact succeeded) reads it back to learn whether its commit applied.
    #[serde(default)]
    pub last_commit: Option<String>,
}

impl Task {
    pub fn new(
        id: TaskId,
        agent: &str,
        origin: Origin,
        thread: Option<String>,
        limits: Limits,
        now: Millis,
    ) -> Self {
        Task {
            id,
            version: 0,
            status: TaskStatus::Queued,
            agent: agent.to_owned(),
            origin,
            thread,
            created_at: now,
            updated_at: now,
            lease: None,
            steps: 0,
            segments: 0,
            next_seq: 0,
            usage: Usage::default(),
            limits,
            result: None,
            error: None,
            waiting_for: None,
            cancel_requested: false,
            inbox: Vec::new(),
            last_commit: None,
        }
    }

    /// The task status JSON of the HTTP API (`GET /tasks/{id}`).
    pub fn status_json(&self) -> serde_json::Value {
        serde_json::json!({
            "task_id": self.id,
            "status": self.status.as_str(),
            "waiting_for": self.waiting_for,
            "result": self.result,
            "error": self.error,
            "steps": self.steps,
            "segments": self.segments,
            "usage": self.usage,
            "created_at": crate::clock::rfc3339(self.created_at),
            "updated_at": crate::clock::rfc3339(self.updated_at),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
        ] {
            assert!(v.get(k).is_some(), "missing {k}");
        }
        assert_eq!(v["status"], "queued");
        assert_eq!(v["usage"]["input_tokens"], 0);
    }

    #[test]
    fn waiting_for_serialises_with_kind() {
        let w = WaitingFor::Children { pending: 2 };
        assert_eq!(
            serde_json::to_value(&w).unwrap(),
            serde_json::json!({"kind": "children", "pending": 2})
        );
    }
}
