//! `forget approvals`: removes this conversation's "Always in this thread"
//! rules, so the calls they allowed ask for approval again. Anyone in the
//! thread may: it only takes permissions away.

use super::{Context, NO_THREAD};
use crate::response::ApiError;
use crate::Ingest;

pub(super) async fn answer(ingest: &Ingest, ctx: &Context) -> Result<String, ApiError> {
    let Some(key) = ctx.conversation.as_deref() else {
        return Ok(NO_THREAD.to_owned());
    };
    let mut forgotten = Vec::new();
    ingest
        .store
        .change_always(key, |rules| {
            forgotten = std::mem::take(rules);
            !forgotten.is_empty()
        })
        .await
        .map_err(|e| ApiError::unavailable_on(Some(key), e))?;
    if forgotten.is_empty() {
        return Ok("This thread has no approvals kept with *Always in this thread*.".to_owned());
    }
    tracing::info!(conversation = key, user = %ctx.user, rules = forgotten.len(), "always-rules forgotten");
    Ok(format!(
        "Forgot {} kept approval{} ({}): calls that need approval ask again in this thread.",
        forgotten.len(),
        if forgotten.len() == 1 { "" } else { "s" },
        super::status::rule_list(&forgotten)
    ))
}
