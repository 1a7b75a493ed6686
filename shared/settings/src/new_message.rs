//! `on_new_message`: what a message does when it arrives on a
//! conversation whose task is still running (docs/configuration.md).
//!
//! An answer to the running task's `ask_user` question and the stop words
//! are not new messages: they act on the running task in every mode.

use serde::{Deserialize, Serialize};

/// `[agents.NAME] on_new_message`. The values are a contract.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum OnNewMessage {
    /// Into the running task's inbox: the loop reads it at its next step.
    #[default]
    Steer,
    /// The conversation's next task, started once the running one ends.
    Queue,
    /// The running task is cancelled at its next safe point, and the
    /// message starts the next task, which sees the interrupted exchange.
    Interrupt,
    /// Refused: the sender is told a task is running, nothing changes.
    Reject,
}

impl OnNewMessage {
    pub fn as_str(self) -> &'static str {
        match self {
            OnNewMessage::Steer => "steer",
            OnNewMessage::Queue => "queue",
            OnNewMessage::Interrupt => "interrupt",
            OnNewMessage::Reject => "reject",
        }
    }
}

#[cfg(test)]
mod tests {
    use super::OnNewMessage;
    use crate::{AgentConfig, AgentsSource};
    use std::path::Path;

    fn load(text: &str) -> Result<crate::AgentsConfig, crate::ConfigFileError> {
        AgentsSource::new("baton.toml", text, Path::new("/nonexistent-baton-dir"))
            .load(&AgentConfig::new("default", "m"), &[])
    }

    #[test]
    fn steer_by_default_set_in_defaults_or_per_agent() {
        let cfg = load("[agents.a]\n").unwrap();
        assert_eq!(
            cfg.agents.get("a").unwrap().on_new_message,
            OnNewMessage::Steer
        );
        let cfg = load(
            "[defaults]\non_new_message = \"queue\"\n[agents.a]\n[agents.b]\non_new_message = \"reject\"\n",
        )
        .unwrap();
        assert_eq!(
            cfg.agents.get("a").unwrap().on_new_message,
            OnNewMessage::Queue
        );
        assert_eq!(
            cfg.agents.get("b").unwrap().on_new_message,
            OnNewMessage::Reject
        );
        let cfg = load("[agents.c]\non_new_message = \"interrupt\"\n").unwrap();
        assert_eq!(
            cfg.agents.get("c").unwrap().on_new_message,
            OnNewMessage::Interrupt
        );
    }

    #[test]
    fn an_unknown_value_refuses_the_file_naming_it() {
        let e = match load("[agents.a]\non_new_message = \"later\"\n") {
            Ok(_) => panic!("accepted"),
            Err(e) => e.to_string(),
        };
        assert!(
            e.contains("agents.a.on_new_message") && e.contains("unknown variant `later`"),
            "{e}"
        );
    }
}
