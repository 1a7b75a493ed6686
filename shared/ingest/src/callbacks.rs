//! `POST /callbacks/{token}`: the one-time URL a `wait_for_callback` call
//! made. No bearer: the token is the capability. Its hash finds the task
//! in one read ([`baton_core::TaskStore::callback_record`]); the first
//! POST's JSON body is recorded on the task by a conditional write
//! ([`baton_core::callback::deliver`]), so of two racing POSTs exactly one
//! wins (202) and the other sees it used (409). Unknown, forged, expired
//! and voided (the task cancelled or ended) tokens are all 404: the
//! answer does not tell which.

use crate::response::{json, json_body, Answer, ApiError};
use crate::Ingest;
use baton_core::callback::{self, Refused};
use baton_core::{Instant, StoreError, TaskStatus, Wake};
use bytes::Bytes;
use http::{HeaderMap, StatusCode};
use serde_json::json;
use std::time::Duration;

/// Why a callback POST was not taken.
#[derive(Debug, thiserror::Error)]
enum CallbackError {
    #[error(transparent)]
    Store(#[from] StoreError),
    #[error(transparent)]
    Refused(#[from] Refused),
}

/// A token as minted: 64 lowercase hex digits. Anything else is no token.
fn well_formed(token: &str) -> bool {
    token.len() == 64
        && token
            .bytes()
            .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
}

fn no_such_callback() -> ApiError {
    ApiError::not_found("no such callback (unknown, expired, or its task ended)")
}

impl Ingest {
    pub(crate) async fn call_back(&self, token: &str, headers: &HeaderMap, body: &Bytes) -> Answer {
        if !well_formed(token) {
            return Err(no_such_callback());
        }
        let body: serde_json::Value = json_body(headers, body)?;
        let hash = callback::hash_token(token);
        let record = self
            .store
            .callback_record(&hash)
            .await
            .map_err(ApiError::unavailable)?
            .ok_or_else(no_such_callback)?;
        let result = self
            .store
            .update_with(&record.task_id, None, |t| {
                let entries = callback::deliver(t, &hash, body.clone(), Instant::now())?;
                Ok::<_, CallbackError>(Some(entries))
            })
            .await;
        let task = match result {
            Ok((task, _)) => task,
            Err(CallbackError::Refused(Refused::Used)) => {
                return Err(ApiError::new(
                    StatusCode::CONFLICT,
                    "this callback was used already",
                ))
            }
            Err(CallbackError::Refused(Refused::Unknown | Refused::Void))
            | Err(CallbackError::Store(StoreError::NotFound(_))) => return Err(no_such_callback()),
            Err(CallbackError::Store(e)) => return Err(ApiError::unavailable(e)),
        };
        tracing::info!(task_id = %task.id, call_id = %record.call_id, "callback received");
        if task.status() == TaskStatus::Queued {
            self.queue
                .send(
                    &Wake::new(task.id.clone(), "callback").to_body(),
                    Duration::ZERO,
                )
                .await
                .map_err(ApiError::unavailable)?;
        }
        Ok(json(StatusCode::ACCEPTED, &json!({"accepted": true})))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ApiToken;
    use baton_core::callback::{hash_token, Callback};
    use baton_core::store::callbacks::CallbackRecord;
    use baton_core::wait;
    use baton_core::{now_ms, EntryKind, Limits, Origin, Task, TaskId, TaskStore, WaitingFor};
    use baton_embedded::{EmbeddedBackend, QueueConfig};
    use baton_settings::{AgentConfig, Agents};
    use serde_json::Value;

    struct Rig {
        _dir: tempfile::TempDir,
        store: TaskStore,
        ingest: Ingest,
    }

    /// A task waiting for the callback of `token`, which expires in
    /// `expires_in`.
    async fn rig(token: &str, expires_in: Duration) -> (Rig, TaskId) {
        let dir = tempfile::tempdir().unwrap();
        let backend = EmbeddedBackend::open(dir.path(), QueueConfig::default()).unwrap();
        let store = TaskStore::new(backend.table.clone(), backend.blobs.clone());
        let ingest = Ingest::new(
            store.clone(),
            backend.queue.clone(),
            Agents::new(AgentConfig::new("default", "scripted"), Vec::new()),
            Some(ApiToken::parse("test-token-0123456789abcdef").unwrap()),
            None,
        );
        let mut t = Task::new(
            TaskId::generate(),
            "default",
            Origin::Http,
            None,
            Limits::default(),
            now_ms(),
        );
        let expires_at = Instant::now() + expires_in;
        let url = format!("http://x/callbacks/{token}");
        t.waits.callbacks.push(Callback {
            step: 1,
            call_id: "w".into(),
            description: "CI".into(),
            token_hash: hash_token(token),
            url: Some(url.clone()),
            created_at: Instant::now(),
            expires_at,
            delivered: None,
        });
        t.wait(WaitingFor::Callback(wait::Callback { url, expires_at }));
        store
            .create(
                &t,
                vec![EntryKind::UserMessage {
                    text: "x".into(),
                    from: None,
                }],
                None,
            )
            .await
            .unwrap();
        let record = CallbackRecord {
            task_id: t.id.clone(),
            call_id: "w".into(),
            expires_at,
        };
        store
            .record_callback(&hash_token(token), &record)
            .await
            .unwrap();
        (
            Rig {
                _dir: dir,
                store,
                ingest,
            },
            t.id,
        )
    }

    /// A POST without any bearer.
    async fn post(r: &Rig, token: &str, content_type: &str, body: &[u8]) -> (u16, Value) {
        let req = http::Request::builder()
            .method("POST")
            .uri(format!("/callbacks/{token}"))
            .header("content-type", content_type)
            .body(Bytes::copy_from_slice(body))
            .unwrap();
        let resp = r.ingest.handle(req).await;
        (
            resp.status().as_u16(),
            serde_json::from_slice(resp.body()).unwrap_or(Value::Null),
        )
    }

    fn token(c: char) -> String {
        c.to_string().repeat(64)
    }

    #[tokio::test]
    async fn of_two_racing_posts_exactly_one_wins_and_wakes_the_task() {
        let (r, id) = rig(&token('a'), Duration::from_secs(3600)).await;
        let (json_ct, a) = ("application/json", token('a'));
        let (one, two) = tokio::join!(
            post(&r, &a, json_ct, br#"{"status":"passed"}"#),
            post(&r, &a, json_ct, br#"{"status":"failed"}"#),
        );
        let mut codes = [one.0, two.0];
        codes.sort();
        assert_eq!(codes, [202, 409], "{one:?} {two:?}");
        let task = r.store.get(&id).await.unwrap().unwrap();
        assert_eq!(task.status(), TaskStatus::Queued);
        let body = task.waits.callbacks[0]
            .delivered
            .clone()
            .and_then(|d| d.body);
        let winner = if one.0 == 202 { "passed" } else { "failed" };
        assert_eq!(body, Some(json!({"status": winner})));
        // Later POSTs change nothing.
        let again = post(&r, &token('a'), json_ct, b"{}").await;
        assert_eq!(again.0, 409);
        assert_eq!(
            r.store.get(&id).await.unwrap().unwrap().version,
            task.version
        );
    }

    #[tokio::test]
    async fn forged_bad_expired_and_voided_posts_change_nothing() {
        let (r, id) = rig(&token('b'), Duration::from_secs(3600)).await;
        let before = r.store.get(&id).await.unwrap().unwrap().version;
        let ct = "application/json";
        assert_eq!(post(&r, &token('c'), ct, b"{}").await.0, 404, "forged");
        assert_eq!(post(&r, "short", ct, b"{}").await.0, 404, "not a token");
        assert_eq!(post(&r, &token('b'), "text/plain", b"{}").await.0, 415);
        assert_eq!(post(&r, &token('b'), ct, b"{not json").await.0, 400);
        let big = format!("{{\"x\":\"{}\"}}", "y".repeat(256 * 1024));
        assert_eq!(post(&r, &token('b'), ct, big.as_bytes()).await.0, 413);
        assert_eq!(r.store.get(&id).await.unwrap().unwrap().version, before);
        // Cancelling the task voids the token.
        r.store
            .update(&id, None, |t| {
                t.cancel_requested = true;
                Ok(Some(Vec::new()))
            })
            .await
            .unwrap();
        assert_eq!(post(&r, &token('b'), ct, b"{}").await.0, 404);
        let (r, id) = rig(&token('d'), Duration::from_millis(1)).await;
        tokio::time::sleep(Duration::from_millis(5)).await;
        assert_eq!(post(&r, &token('d'), ct, b"{}").await.0, 404, "expired");
        let task = r.store.get(&id).await.unwrap().unwrap();
        assert_eq!(task.status(), TaskStatus::Waiting);
    }

    #[test]
    fn only_minted_shapes_are_tokens() {
        assert!(well_formed(&"ab12".repeat(16)));
        assert!(!well_formed(&"AB12".repeat(16)));
        assert!(!well_formed(&"ab12".repeat(15)));
        assert!(!well_formed(&format!("{}..", "a".repeat(62))));
    }
}
