//! What model calls cost: per-model prices (the `[prices]` table over
//! [`BUILTIN_PRICES`]), the cost of a completion, and the per-task cost
//! budget (`limits.max_cost_usd`).
//!
//! Cost is computed from the token usage the provider reports and the
//! per-million-token prices of the model that answered. A model without a
//! price costs nothing here, which is why the agents file refuses
//! `max_cost_usd` on an agent any of whose models has no price.

mod table;

pub use table::{ModelPrice, ModelPrices, BUILTIN_PRICES};

use crate::agent::AgentConfig;
use baton_core::{Task, Usage};

/// Every model an agent's calls may be answered by: its model (the
/// default tier), its fallbacks, its escalation model, its fast and strong
/// tiers.
pub fn models_of(agent: &AgentConfig) -> Vec<&str> {
    let all = std::iter::once(agent.model.as_str())
        .chain(agent.fallback_models.iter().map(String::as_str))
        .chain(agent.escalation.as_ref().map(|e| e.model.as_str()))
        .chain(agent.tiers.fast.as_deref())
        .chain(agent.tiers.strong.as_deref());
    let mut out: Vec<&str> = Vec::new();
    for m in all {
        if !out.contains(&m) {
            out.push(m);
        }
    }
    out
}

/// The models of [`models_of`] without a price.
pub fn unpriced_models(agent: &AgentConfig) -> Vec<&str> {
    let mut out: Vec<&str> = models_of(agent)
        .into_iter()
        .filter(|m| agent.prices.get(m).is_none())
        .collect();
    out.sort_unstable();
    out.dedup();
    out
}

/// What a completion by `model` with `usage` cost, in US dollars; 0 when
/// the model has no price. `model` is the id the call asked for (what
/// [`crate::model_choice::Answer::model`] says), not the one the provider
/// echoed, which may carry a date suffix.
pub fn completion_cost(agent: &AgentConfig, model: &str, usage: Usage) -> f64 {
    agent.prices.get(model).map_or(0.0, |p| p.cost(usage))
}

/// Whether the task has used up its agent's cost budget; the message to end
/// it with if so (e.g. `cost budget exhausted: $0.52 of $0.50`). Checked
/// before each LLM call.
pub fn exhausted(task: &Task, agent: &AgentConfig) -> Option<String> {
    let max = agent.max_cost_usd?;
    (task.budget.cost_usd >= max).then(|| {
        format!(
            "cost budget exhausted: {} of {}",
            usd(task.budget.cost_usd),
            usd(max)
        )
    })
}

/// `$1.23`, rounded to the cent.
pub fn usd(amount: f64) -> String {
    format!("${amount:.2}")
}

/// `5,000,000`.
pub fn thousands(n: u64) -> String {
    let digits = n.to_string();
    let mut out = String::with_capacity(digits.len() + digits.len() / 3);
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::context::Escalation;
    use baton_core::{Limits, Origin, TaskId};

    fn agent() -> AgentConfig {
        let mut a = AgentConfig::new("default", "claude-sonnet-4-5");
        a.fallback_models = vec!["cheap".into()];
        a.escalation = Some(Escalation {
            model: "big".into(),
            after_tool_errors: 3,
        });
        a
    }

    fn task(origin: Origin) -> Task {
        Task::new(
            TaskId::generate(),
            "default",
            origin,
            None,
            Limits::default(),
            0,
        )
    }

    fn usage(i: u64, o: u64) -> Usage {
        Usage {
            input_tokens: i,
            output_tokens: o,
        }
    }

    #[test]
    fn cost_is_tokens_times_price_per_million() {
        let a = agent();
        let c = completion_cost(&a, "claude-sonnet-4-5", usage(100_000, 10_000));
        assert!((c - 0.45).abs() < 1e-9, "{c}");
        assert_eq!(completion_cost(&a, "cheap", usage(1_000_000, 0)), 0.0);
        let a = AgentConfig {
            prices: a.prices.with([(
                "cheap".to_owned(),
                ModelPrice {
                    input_per_mtok: 0.5,
                    output_per_mtok: 0.0,
                },
            )]),
            ..a
        };
        assert_eq!(completion_cost(&a, "cheap", usage(2_000_000, 9)), 1.0);
        // The dated id the provider may echo is priced on its own.
        assert!(completion_cost(&a, "claude-sonnet-4-5-20250929", usage(1, 0)) > 0.0);
    }

    #[test]
    fn unpriced_models_cover_fallbacks_and_escalation() {
        let a = agent();
        assert_eq!(models_of(&a), ["claude-sonnet-4-5", "cheap", "big"]);
        assert_eq!(unpriced_models(&a), ["big", "cheap"]);
        let mut none = AgentConfig::new("x", "claude-haiku-4-5");
        none.prices = ModelPrices::none();
        assert_eq!(unpriced_models(&none), ["claude-haiku-4-5"]);
        assert!(unpriced_models(&AgentConfig::new("x", "claude-haiku-4-5")).is_empty());
        // The tiers are models the agent uses too.
        let mut tiered = AgentConfig::new("x", "claude-haiku-4-5");
        tiered.tiers.fast = Some("tiny".into());
        tiered.tiers.strong = Some("claude-sonnet-4-5".into());
        assert_eq!(
            models_of(&tiered),
            ["claude-haiku-4-5", "tiny", "claude-sonnet-4-5"]
        );
        assert_eq!(unpriced_models(&tiered), ["tiny"]);
    }

    #[test]
    fn cost_budget_is_exhausted_at_the_limit() {
        let mut a = agent();
        let mut t = task(Origin::Http);
        t.budget.cost_usd = 0.52;
        assert_eq!(exhausted(&t, &a), None, "no budget set");
        a.max_cost_usd = Some(0.5);
        assert_eq!(
            exhausted(&t, &a).as_deref(),
            Some("cost budget exhausted: $0.52 of $0.50")
        );
        t.budget.cost_usd = 0.4999;
        assert_eq!(exhausted(&t, &a), None);
        t.budget.cost_usd = 0.5;
        assert!(exhausted(&t, &a).is_some());
    }

    #[test]
    fn numbers_are_written_for_people() {
        assert_eq!(thousands(0), "0");
        assert_eq!(thousands(999), "999");
        assert_eq!(thousands(1000), "1,000");
        assert_eq!(thousands(5_000_000), "5,000,000");
        assert_eq!(thousands(12_345_678), "12,345,678");
        assert_eq!(usd(2.0), "$2.00");
    }
}
