//! Messages on the work queue.
//!
//! A wake is a signal, never a command: it names a task and nothing else
//! that matters, because the task's state lives in the store. Duplicates
//! are therefore harmless. Besides wakes, the queue carries the reaper's
//! periodic `{"kind":"reap"}` (sent by a schedule).

use crate::ids::TaskId;
use serde::{Deserialize, Serialize};

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Wake {
    pub task_id: TaskId,
    /// Why it was sent (`created`, `handover`, `retry`, `reaper`, …): for logs only.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
}

impl Wake {
    pub fn new(task_id: TaskId, reason: &str) -> Self {
        Wake {
            task_id,
            reason: Some(reason.to_owned()),
        }
    }

    pub fn to_body(&self) -> String {
        // A struct of a string and an optional string always serialises.
        serde_json::to_string(self).unwrap_or_default()
    }

    /// Parses a queue message body. Untrusted: anything else is an error.
    pub fn parse(body: &str) -> Result<Self, serde_json::Error> {
        serde_json::from_str(body)
    }
}

/// Any message the worker may receive.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum WorkMessage {
    Wake(Wake),
    /// Run one reaper sweep.
    Reap,
    /// A schedule fired: create its task.
    Schedule(ScheduleFire),
}

/// The body EventBridge Scheduler (or the embedded scheduler) sends when a
/// schedule fires.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ScheduleFire {
    pub schedule_id: String,
    /// The firing's scheduled time (RFC 3339), when the sender knows it
    /// (`<aws.scheduler.scheduled-time>`); makes the firing's dedupe key.
    #[serde(default)]
    pub scheduled_time: Option<String>,
}

#[derive(Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
enum Tagged {
    Wake(Wake),
    Reap,
    Schedule(ScheduleFire),
}

impl WorkMessage {
    /// Parses a queue message body: `{"kind": ...}`, or a bare wake.
    pub fn parse(body: &str) -> Result<Self, serde_json::Error> {
        let value: serde_json::Value = serde_json::from_str(body)?;
        if value.get("kind").is_some() {
            Ok(match serde_json::from_value::<Tagged>(value)? {
                Tagged::Wake(w) => WorkMessage::Wake(w),
                Tagged::Reap => WorkMessage::Reap,
                Tagged::Schedule(s) => WorkMessage::Schedule(s),
            })
        } else {
            serde_json::from_value(value).map(WorkMessage::Wake)
        }
    }

    pub fn to_body(&self) -> String {
        match self {
            WorkMessage::Wake(w) => w.to_body(),
            WorkMessage::Reap => r#"{"kind":"reap"}"#.to_owned(),
            WorkMessage::Schedule(s) => {
                let mut v = serde_json::to_value(s).unwrap_or_default();
                v["kind"] = "schedule".into();
                v.to_string()
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trips_and_rejects_garbage() {
        let w = Wake::new(TaskId::generate(), "created");
        assert_eq!(Wake::parse(&w.to_body()).unwrap(), w);
        assert!(Wake::parse("{\"task_id\":\"x\"}").is_err());
        assert!(Wake::parse("[]").is_err());
    }

    #[test]
    fn parses_every_message_kind() {
        let w = Wake::new(TaskId::generate(), "created");
        assert_eq!(
            WorkMessage::parse(&w.to_body()).unwrap(),
            WorkMessage::Wake(w.clone())
        );
        let tagged = format!(r#"{{"kind":"wake","task_id":"{}"}}"#, w.task_id);
        assert!(matches!(
            WorkMessage::parse(&tagged).unwrap(),
            WorkMessage::Wake(_)
        ));
        assert_eq!(
            WorkMessage::parse(r#"{"kind":"reap"}"#).unwrap(),
            WorkMessage::Reap
        );
        let fire = WorkMessage::Schedule(ScheduleFire {
            schedule_id: "s1".into(),
            scheduled_time: None,
        });
        assert_eq!(WorkMessage::parse(&fire.to_body()).unwrap(), fire);
        assert!(WorkMessage::parse(r#"{"kind":"nuke"}"#).is_err());
        assert!(WorkMessage::parse("not json").is_err());
    }
}
