//! The prices themselves: one model's, the built-in ones, and the table
//! of them an agent carries (so the agent's settings need nothing of what
//! a price is used for, above).

use baton_core::Usage;
use std::collections::BTreeMap;
use std::sync::Arc;

/// The price of one model, in US dollars per million tokens.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct ModelPrice {
    pub input_per_mtok: f64,
    pub output_per_mtok: f64,
}

impl ModelPrice {
    /// What `usage` costs at this price, in US dollars.
    pub fn cost(&self, usage: Usage) -> f64 {
        (usage.input_tokens as f64 * self.input_per_mtok
            + usage.output_tokens as f64 * self.output_per_mtok)
            / 1_000_000.0
    }
}

/// Prices known without configuration: `(model id, input, output)` in US
/// dollars per million tokens. Anthropic's published prices as shown on
/// its model pages (platform.claude.com/docs/en/models/…/overview), read on
/// 2026-11-22: Claude Sonnet 4.5 $3 / $15, Claude Haiku 4.5 $1 / $5,
/// Claude Sonnet 5 $2 / $10. Only exact ids match; `[prices]` in the agents
/// file overrides any of them and adds others.
pub const BUILTIN_PRICES: &[(&str, f64, f64)] = &[
    ("claude-sonnet-4-5", 3.0, 15.0),
    ("claude-sonnet-4-5-20250929", 3.0, 15.0),
    ("claude-haiku-4-5", 1.0, 5.0),
    ("claude-haiku-4-5-20251001", 1.0, 5.0),
    ("claude-sonnet-5", 2.0, 10.0),
];

/// Prices by model id. Cheap to clone.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct ModelPrices(Arc<BTreeMap<String, ModelPrice>>);

impl ModelPrices {
    /// No prices at all.
    pub fn none() -> Self {
        ModelPrices::default()
    }

    /// The [`BUILTIN_PRICES`].
    pub fn builtin() -> Self {
        ModelPrices::none().with(BUILTIN_PRICES.iter().map(|(m, i, o)| {
            (
                (*m).to_owned(),
                ModelPrice {
                    input_per_mtok: *i,
                    output_per_mtok: *o,
                },
            )
        }))
    }

    /// These prices with `overrides` laid over them.
    pub fn with(&self, overrides: impl IntoIterator<Item = (String, ModelPrice)>) -> Self {
        let mut map = (*self.0).clone();
        map.extend(overrides);
        ModelPrices(Arc::new(map))
    }

    /// The price of `model`, if known (exact id).
    pub fn get(&self, model: &str) -> Option<ModelPrice> {
        self.0.get(model).copied()
    }

    /// Every priced model id, in order.
    pub fn models(&self) -> impl Iterator<Item = &str> {
        self.0.keys().map(String::as_str)
    }
}
