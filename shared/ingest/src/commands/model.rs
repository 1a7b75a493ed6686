//! `model`: the agent and model that answer here.

use super::Context;
use crate::Ingest;

/// The agent this conversation is routed to and its model (and fallbacks).
pub(super) fn answer(ingest: &Ingest, ctx: &Context) -> String {
    let agent = ingest
        .routes
        .agent_for(&ctx.team_id, &ctx.channel, ctx.direct_message);
    let config = ingest.agents.resolve(agent);
    let mut out = format!(
        "Here the agent *{}* answers, with the model `{}`",
        config.name, config.model
    );
    if !config.fallback_models.is_empty() {
        let fallbacks: Vec<String> = config
            .fallback_models
            .iter()
            .map(|m| format!("`{m}`"))
            .collect();
        out.push_str(&format!(" (then {} if it fails)", fallbacks.join(", ")));
    }
    out.push('.');
    out
}
