//! How the agent thinks before it acts and checks before it answers
//! (issue #22, docs/thinking.md): a router picks the model tier and prompt
//! modules, a planner writes a plan for complex requests, a supervisor
//! checks progress at checkpoints, and a quality gate judges an answer
//! before it is delivered.
//!
//! Each decision is one forced tool call ([`calls`]) whose answer is
//! recorded as a transcript entry (`route`, `plan`, `supervision`,
//! `verdict`) before it acts. Everything the loop needs to know of them is
//! read back from the transcript by the functions here, so a segment that
//! crashed after recording a decision acts on it, and one that crashed
//! before asks again: none is skipped or acted on twice.

pub mod calls;

use crate::sanitize::{is_no_reply, sanitize};
use baton_core::judgment::{PlanStep, SupervisorAction, Tier};
use baton_core::{Entry, EntryKind, Instant, Task};
use baton_settings::{AgentConfig, PlanMode};

/// Supervision and the gate check with the fast tier: an agent without
/// one is not checked (as it is not routed), so a deployment pays for
/// judgment only once it names a cheap model to judge with.
fn has_fast_tier(agent: &AgentConfig) -> bool {
    agent.tiers.fast.is_some()
}

/// The router's recorded choice: tier and modules.
pub fn route(transcript: &[Entry]) -> Option<(Tier, &[String])> {
    transcript.iter().rev().find_map(|e| match &e.kind {
        EntryKind::Route { tier, modules, .. } => Some((*tier, modules.as_slice())),
        _ => None,
    })
}

/// Whether the task still needs its routing call: the agent routes and no
/// choice is recorded. Routed once per task; a conversation's next turn is
/// a task of its own.
pub fn needs_route(agent: &AgentConfig, transcript: &[Entry]) -> bool {
    agent.routes()
        && !transcript
            .iter()
            .any(|e| matches!(e.kind, EntryKind::Route { .. }))
}

/// The tier the next model call runs on: the router's (the default tier
/// without one), moved up to `strong` by a supervisor's `escalate` or an
/// answer sent back by the gate. Never down.
pub fn tier(transcript: &[Entry]) -> Tier {
    let routed = route(transcript).map_or(Tier::Default, |(t, _)| t);
    let escalated = transcript.iter().any(|e| {
        matches!(
            e.kind,
            EntryKind::Supervision {
                action: SupervisorAction::Escalate,
                ..
            } | EntryKind::Verdict {
                sent_back: true,
                ..
            }
        )
    });
    if escalated {
        Tier::Strong
    } else {
        routed
    }
}

/// The current plan, with which steps are done: the latest `plan` entry
/// and the supervisor's `done` marks after it. `None` without a plan (or
/// when planning failed: an empty plan).
pub fn plan(transcript: &[Entry]) -> Option<(Vec<PlanStep>, Vec<bool>)> {
    let at = transcript
        .iter()
        .rposition(|e| matches!(&e.kind, EntryKind::Plan { .. }))?;
    let EntryKind::Plan { steps } = &transcript[at].kind else {
        return None;
    };
    if steps.is_empty() {
        return None;
    }
    let mut done = vec![false; steps.len()];
    for e in &transcript[at + 1..] {
        if let EntryKind::Supervision { done: marks, .. } = &e.kind {
            for &i in marks {
                if let Some(d) = done.get_mut(i) {
                    *d = true;
                }
            }
        }
    }
    Some((steps.clone(), done))
}

/// Whether a plan is to be written now: once per task, when the agent
/// plans `always`, or `auto` and the router said the request needs one;
/// and again after a supervisor's `replan`.
pub fn needs_plan(agent: &AgentConfig, transcript: &[Entry]) -> bool {
    let last_plan = transcript
        .iter()
        .rposition(|e| matches!(e.kind, EntryKind::Plan { .. }));
    let replan = transcript.iter().rposition(|e| {
        matches!(
            e.kind,
            EntryKind::Supervision {
                action: SupervisorAction::Replan,
                ..
            }
        )
    });
    if let Some(r) = replan {
        return last_plan.is_none_or(|p| p < r);
    }
    if last_plan.is_some() {
        return false;
    }
    match agent.plan {
        PlanMode::Never => false,
        PlanMode::Always => true,
        PlanMode::Auto => transcript.iter().any(|e| {
            matches!(
                e.kind,
                EntryKind::Route {
                    needs_plan: true,
                    ..
                }
            )
        }),
    }
}

/// Whether a supervision checkpoint is due before the next model call:
/// the agent is supervised and has a fast tier, a step was taken since
/// the last checkpoint,
/// and `every_steps` steps or `every` of wall time have passed since it
/// (or since the task started).
pub fn supervision_due(
    agent: &AgentConfig,
    task: &Task,
    transcript: &[Entry],
    now: Instant,
) -> bool {
    let Some(cadence) = agent.supervision.cadence().filter(|_| has_fast_tier(agent)) else {
        return false;
    };
    let last = transcript.iter().rev().find_map(|e| match &e.kind {
        EntryKind::Supervision { step, .. } => Some((*step, e.at)),
        _ => None,
    });
    let (since_step, since_at) = last.unwrap_or((0, transcript.first().map_or(now, |e| e.at)));
    if task.budget.steps <= since_step {
        return false;
    }
    task.budget.steps - since_step >= cadence.every_steps || now.since(since_at) >= cadence.every
}

/// The supervisor's `stop`, when it was the last checkpoint's decision:
/// its reason.
pub fn stopped(transcript: &[Entry]) -> Option<String> {
    transcript.iter().rev().find_map(|e| match &e.kind {
        EntryKind::Supervision {
            action: SupervisorAction::Stop,
            note,
            ..
        } => Some(
            note.clone()
                .filter(|n| !n.trim().is_empty())
                .unwrap_or_else(|| "it was not making progress".to_owned()),
        ),
        _ => None,
    })
}

/// What happens to a final answer before delivery.
#[derive(Clone, Debug, PartialEq)]
pub enum Gate {
    /// Delivered as it is.
    Deliver,
    /// Judged first: a `verdict` call. `retried`: the answer is the turn's
    /// second, delivered whatever the verdict.
    Judge { retried: bool },
    /// It only narrates what it will do: sent back by rule, no call.
    Narrates,
}

/// What the gate does with the answer of step `step` (nothing without a
/// fast tier or with `quality_gate = false`).
pub fn gate(
    agent: &AgentConfig,
    task: &Task,
    transcript: &[Entry],
    step: u32,
    answer: &str,
) -> Gate {
    // A sub-agent's answer is its parent's material, judged with the
    // parent's answer; a silent answer is not sent to anyone.
    if !agent.quality_gate
        || !has_fast_tier(agent)
        || task.source.parent.is_some()
        || is_no_reply(&sanitize(answer))
    {
        return Gate::Deliver;
    }
    let judged = transcript
        .iter()
        .any(|e| matches!(&e.kind, EntryKind::Verdict { step: s, .. } if *s == step));
    if judged {
        return Gate::Deliver;
    }
    let retried = sent_back_this_turn(transcript);
    if !retried && narrates(answer) {
        return Gate::Narrates;
    }
    Gate::Judge { retried }
}

/// Whether an answer of this turn was already sent back (one retry per
/// turn: a turn starts at a person's message).
fn sent_back_this_turn(transcript: &[Entry]) -> bool {
    let start = transcript
        .iter()
        .rposition(|e| matches!(e.kind, EntryKind::UserMessage { .. }))
        .unwrap_or(0);
    transcript[start..].iter().any(|e| {
        matches!(
            e.kind,
            EntryKind::Verdict {
                sent_back: true,
                ..
            }
        )
    })
}

/// An answer that only says what the model is about to do ("Let me check
/// that…") instead of doing it: short, and opening or ending as an
/// announcement. Cheap and deliberately narrow: the gate's model call
/// catches the rest.
pub fn narrates(answer: &str) -> bool {
    let t = answer.trim();
    // A question to the person is not narration.
    if t.is_empty() || t.chars().count() > 300 || t.contains('?') {
        return false;
    }
    let lower = t.to_lowercase();
    const OPENINGS: [&str; 9] = [
        "let me ",
        "i'll ",
        "i will ",
        "i’ll ",
        "i am going to ",
        "i'm going to ",
        "i’m going to ",
        "one moment",
        "give me a moment",
    ];
    let opens = OPENINGS.iter().any(|o| lower.starts_with(o));
    let trails = t.ends_with(':') || t.ends_with("...") || t.ends_with('…');
    opens && (trails || lower.lines().count() == 1)
}

#[cfg(test)]
mod tests;
