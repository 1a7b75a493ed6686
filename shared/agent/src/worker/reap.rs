//! A `reap` message (the reaper schedule on AWS, a timer in `baton dev`):
//! finish half-done schedule changes, then re-send lost wakes.

use super::{Deps, Disposition};
use crate::reaper::Reaper;
use baton_core::Instant;
use std::time::Duration;

/// How long a task may sit without progress before the reaper acts, at the
/// least (a tiny visibility in tests must not make it fire on live tasks).
const MIN_STALE_AFTER: Duration = Duration::from_secs(5);

pub(super) async fn handle(deps: &Deps) -> Disposition {
    if let Some(service) = &deps.schedules {
        match service.repair(Instant::now()).await {
            Ok(0) => {}
            Ok(n) => tracing::info!(repaired = n, "schedules repaired"),
            Err(e) => tracing::warn!(error = %e, "schedule repair failed"),
        }
    }
    let stale_after = (deps.settings.visibility * 2).max(MIN_STALE_AFTER);
    let reaper = Reaper::new(deps.store.clone(), deps.queue.clone(), stale_after)
        .with_connections(deps.connections.clone());
    match reaper.sweep().await {
        Ok(n) => tracing::info!(resent = n, "reaper sweep done"),
        // The next sweep will try again; no need to retry this one.
        Err(e) => tracing::warn!(error = %e, "reaper sweep failed"),
    }
    Disposition::Ack
}
