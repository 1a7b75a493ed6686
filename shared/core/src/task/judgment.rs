//! What the agent decides about its own work (issue #22), as the transcript
//! records it: the router's choice of model tier and prompt modules, the
//! plan, the supervisor's checkpoints and the quality gate's verdicts.
//! Each is an entry written before it acts, so a retried segment acts on
//! the recorded decision instead of asking again.

use serde::{Deserialize, Serialize};

/// A model tier, as the router names it (`"fast"`, `"default"`,
/// `"strong"`). Ordered: escalation only ever moves up.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Tier {
    Fast,
    Default,
    Strong,
}

impl Tier {
    pub fn as_str(self) -> &'static str {
        match self {
            Tier::Fast => "fast",
            Tier::Default => "default",
            Tier::Strong => "strong",
        }
    }
}

/// One step of a plan.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct PlanStep {
    pub title: String,
    /// How to tell the step is complete.
    pub done_when: String,
}

/// A plan as a numbered list, each step with how to tell it is done.
pub fn plan_text(steps: &[PlanStep]) -> String {
    steps
        .iter()
        .enumerate()
        .map(|(i, s)| format!("{}. {} (done when: {})", i + 1, s.title, s.done_when))
        .collect::<Vec<_>>()
        .join("\n")
}

/// What a supervision checkpoint decided.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum SupervisorAction {
    /// On track: nothing changes.
    Continue,
    /// A note for the model joins the context.
    Note,
    /// The plan is rewritten.
    Replan,
    /// The strong tier answers from here on.
    Escalate,
    /// The requester is asked, as the `ask_user` tool asks.
    AskUser,
    /// The task ends, with a summary of what was done and the reason.
    Stop,
}

impl SupervisorAction {
    pub fn as_str(self) -> &'static str {
        match self {
            SupervisorAction::Continue => "continue",
            SupervisorAction::Note => "note",
            SupervisorAction::Replan => "replan",
            SupervisorAction::Escalate => "escalate",
            SupervisorAction::AskUser => "ask_user",
            SupervisorAction::Stop => "stop",
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tiers_and_actions_are_named_as_the_forced_tools_name_them() {
        for tier in [Tier::Fast, Tier::Default, Tier::Strong] {
            assert_eq!(serde_json::to_value(tier).unwrap(), tier.as_str());
        }
        assert!(Tier::Fast < Tier::Default && Tier::Default < Tier::Strong);
        for a in [
            SupervisorAction::Continue,
            SupervisorAction::Note,
            SupervisorAction::Replan,
            SupervisorAction::Escalate,
            SupervisorAction::AskUser,
            SupervisorAction::Stop,
        ] {
            assert_eq!(serde_json::to_value(a).unwrap(), a.as_str());
        }
        assert!(serde_json::from_value::<Tier>("huge".into()).is_err());
    }
}
