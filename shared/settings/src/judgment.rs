//! How an agent thinks before it acts and checks before it answers
//! (issue #22): model tiers, the router and its prompt modules, plans,
//! supervision and the quality gate, as the agents file sets them
//! (`[models]`, `[modules.NAME]`, and the agent keys `models`, `router`,
//! `modules`, `plan`, `supervise`, `quality_gate`; docs/configuration.md).
//!
//! These are settings only: the loop decides what to do with them.

use serde::Deserialize;
use std::time::Duration;

pub use baton_core::judgment::Tier;

/// The tiers beside the default one (`models.fast`, `models.strong`).
/// The default tier is the agent's `model` ([`crate::AgentConfig::model`],
/// which `models.default` also sets), so that the one model every step
/// already uses is never stored twice.
/// [`crate::AgentConfig::tier_model`] resolves a tier to a model.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Tiers {
    /// Cheap and quick: the router, supervision and the quality gate.
    pub fast: Option<String>,
    /// For hard work and escalation.
    pub strong: Option<String>,
}

/// `router`: whether a task starts with a call to the fast tier choosing
/// its tier and prompt modules.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum RouterMode {
    /// Route when the agent has a fast tier; without one there is nothing
    /// to route with, and it does not ([`crate::AgentConfig::routes`]).
    #[default]
    Auto,
    Off,
}

/// `plan`: when a task writes a plan before it starts.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum PlanMode {
    /// When the router says the request needs one (`needs_plan`); so
    /// never without routing.
    #[default]
    Auto,
    /// Every task, routed or not.
    Always,
    Never,
}

/// `supervise.every_steps` when not set.
pub const DEFAULT_SUPERVISE_EVERY_STEPS: u32 = 5;
/// `supervise.every` when not set.
pub const DEFAULT_SUPERVISE_EVERY: Duration = Duration::from_secs(2 * 60);

/// How often a supervised task is checked: after every `every_steps`
/// steps, and at least every `every` of wall time.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Cadence {
    /// At least 1.
    pub every_steps: u32,
    /// Longer than zero.
    pub every: Duration,
}

impl Default for Cadence {
    fn default() -> Self {
        Cadence {
            every_steps: DEFAULT_SUPERVISE_EVERY_STEPS,
            every: DEFAULT_SUPERVISE_EVERY,
        }
    }
}

/// `supervise`: whether the fast tier checks a task's progress at
/// checkpoints, and how often. On by default.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Supervision {
    /// `supervise = false`.
    Off,
    On(Cadence),
}

impl Default for Supervision {
    fn default() -> Self {
        Supervision::On(Cadence::default())
    }
}

impl Supervision {
    /// The checkpoints' cadence, when supervised.
    pub fn cadence(&self) -> Option<Cadence> {
        match self {
            Supervision::Off => None,
            Supervision::On(c) => Some(*c),
        }
    }
}

/// `[modules.NAME]`: instructions the router may add to the system
/// prompt of a task that needs them.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PromptModule {
    /// Lower-case letters, digits, `-` and `_`: what the router answers.
    pub name: String,
    /// What the router is shown to choose by.
    pub description: String,
    /// The text that joins the system prompt (`prompt`, or `prompt_file`
    /// read at start).
    pub prompt: String,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tiers_are_named_as_the_router_names_them() {
        for tier in [Tier::Fast, Tier::Default, Tier::Strong] {
            let json = serde_json::to_value(tier).unwrap();
            assert_eq!(json, tier.as_str());
            assert_eq!(serde_json::from_value::<Tier>(json).unwrap(), tier);
        }
        assert!(serde_json::from_value::<Tier>("huge".into()).is_err());
    }

    #[test]
    fn supervision_is_on_every_5_steps_and_2_minutes_by_default() {
        assert_eq!(
            Supervision::default().cadence(),
            Some(Cadence {
                every_steps: 5,
                every: Duration::from_secs(120)
            })
        );
        assert_eq!(Supervision::Off.cadence(), None);
    }
}
