//! Identifiers that cross trust boundaries, parsed once at the edge.

use serde::{Deserialize, Serialize};
use std::fmt;

/// A task identifier: a UUID v7 (time-ordered) in its hyphenated form.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub struct TaskId(String);

#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum IdError {
    #[error("not a valid task id: expected a UUID")]
    InvalidTaskId,
}

impl TaskId {
    /// A new, time-ordered id.
    pub fn generate() -> Self {
        TaskId(uuid::Uuid::now_v7().hyphenated().to_string())
    }

    /// Parses an id from untrusted input (a URL path, a queue message).
    pub fn parse(s: &str) -> Result<Self, IdError> {
        uuid::Uuid::try_parse(s)
            .map(|u| TaskId(u.hyphenated().to_string()))
            .map_err(|_| IdError::InvalidTaskId)
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl TryFrom<String> for TaskId {
    type Error = IdError;
    fn try_from(s: String) -> Result<Self, IdError> {
        TaskId::parse(&s)
    }
}

impl From<TaskId> for String {
    fn from(id: TaskId) -> String {
        id.0
    }
}

impl fmt::Display for TaskId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_generated_and_rejects_garbage() {
        let id = TaskId::generate();
        assert_eq!(TaskId::parse(id.as_str()).unwrap(), id);
        assert!(TaskId::parse("../../etc/passwd").is_err());
        assert!(serde_json::from_str::<TaskId>("\"nope\"").is_err());
    }
}
