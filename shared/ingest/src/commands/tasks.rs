//! `tasks`: the sender's running and waiting tasks, and only theirs.
//!
//! Read from the store's index of tasks that have not ended (sharded, read
//! evenly: no hot key, no scan), at most [`SCANNED`] of them, and kept when
//! the sender asked for them in this workspace.

use super::status::describe;
use super::Context;
use crate::response::ApiError;
use crate::Ingest;
use baton_core::Origin;

/// Most tasks that have not ended read to find the sender's.
pub(super) const SCANNED: usize = 500;
/// Most tasks listed.
const SHOWN: usize = 20;

pub(super) async fn answer(ingest: &Ingest, ctx: &Context) -> Result<String, ApiError> {
    let active = ingest
        .store
        .active_tasks(SCANNED)
        .await
        .map_err(ApiError::unavailable)?;
    let mut mine: Vec<_> = active
        .into_iter()
        .filter(|t| !t.status().is_terminal())
        .filter(|t| {
            matches!(&t.source.origin, Origin::Slack { team_id, user, .. }
                if *team_id == ctx.team_id && *user == ctx.user)
        })
        .collect();
    if mine.is_empty() {
        return Ok("You have no running or waiting tasks.".to_owned());
    }
    mine.sort_by_key(|t| std::cmp::Reverse(t.created_at));
    let mut out = format!("Your running and waiting tasks ({}):\n", mine.len());
    for t in mine.iter().take(SHOWN) {
        let place = match &t.source.origin {
            Origin::Slack { channel, .. } if t.source.origin.is_direct_message() => {
                format!("in our DM ({channel})")
            }
            Origin::Slack { channel, .. } => format!("in <#{channel}>"),
            Origin::Http => String::new(),
        };
        out.push_str(&format!("• {} {place}\n", describe(t)));
    }
    if mine.len() > SHOWN {
        out.push_str(&format!("…and {} more.\n", mine.len() - SHOWN));
    }
    Ok(out.trim_end().to_owned())
}
