//! Wake messages: the only thing that travels on the work queue.
//!
//! A wake is a signal, never a command: it names a task and nothing else
//! that matters, because the task's state lives in the store. Duplicates
//! are therefore harmless.

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
}
