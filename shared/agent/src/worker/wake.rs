//! A `wake` message: run the task's next segment under a lease, renewing
//! the lease and the message's visibility while it runs.

use super::{Deps, Disposition};
use crate::segment::{Segment, SegmentBudget};
use baton_core::{Delivery, Instant, TaskId, Wake};

pub(super) async fn handle(
    deps: &Deps,
    delivery: &Delivery,
    wake: &Wake,
    budget: SegmentBudget,
) -> Disposition {
    let owner = format!(
        "{}-{}",
        deps.settings.instance_id,
        &uuid::Uuid::new_v4().simple().to_string()[..8]
    );
    let heartbeat = spawn_heartbeat(deps, wake.task_id.clone(), owner.clone(), &delivery.receipt);
    let result = Segment::run(deps, &wake.task_id, owner.clone(), budget).await;
    heartbeat.abort();
    match result {
        Ok(end) => {
            tracing::info!(task_id = %wake.task_id, outcome = ?end, "segment ended");
            Disposition::Ack
        }
        Err(e) => {
            let reason = e.to_string();
            release_after_failure(deps, &wake.task_id, &owner, e.plain()).await;
            if e.is_transient() {
                tracing::warn!(task_id = %wake.task_id, %reason, "segment failed; the message will be retried");
                Disposition::Retry {
                    reason,
                    after: deps.settings.retry_delay,
                }
            } else {
                tracing::error!(task_id = %wake.task_id, %reason, "segment failed for good; left for the dead-letter queue");
                Disposition::Poison { reason }
            }
        }
    }
}

/// Renews the lease and the message's visibility while a segment runs.
fn spawn_heartbeat(
    deps: &Deps,
    id: TaskId,
    owner: String,
    receipt: &str,
) -> tokio::task::JoinHandle<()> {
    let store = deps.store.clone();
    let queue = deps.queue.clone();
    let s = deps.settings.clone();
    let receipt = receipt.to_owned();
    tokio::spawn(async move {
        loop {
            tokio::time::sleep(s.heartbeat_every).await;
            let renewed = store
                .update(&id, None, |t| {
                    Ok(t.renew_lease(&owner, Instant::now(), s.lease_ttl)
                        .ok()
                        .map(|()| Vec::new()))
                })
                .await;
            if let Err(e) = renewed {
                tracing::warn!(error = %e, "lease renewal failed");
            }
            if let Err(e) = queue.extend(&receipt, s.visibility).await {
                tracing::warn!(error = %e, "visibility extension failed");
            }
        }
    })
}

/// After a failure: record why and free the lease, so the retried message
/// does not have to wait for it to expire. Best effort: the store itself may
/// be what failed.
async fn release_after_failure(deps: &Deps, id: &TaskId, owner: &str, reason: &str) {
    let _ = deps
        .store
        .update(id, None, |t| {
            if !t.lease().is_held_by(owner) {
                return Ok(None);
            }
            // Queued again: its retried message takes the lease anew.
            t.requeue();
            t.answer.error = Some(reason.to_owned());
            Ok(Some(Vec::new()))
        })
        .await;
}
