//! `wait_for_callback`: mint the call's token (once), record its lookup
//! item and then the callback on the task, show the URL where the task's
//! followers read (the Slack thread; HTTP clients see it in
//! `waiting_for`), and wait at zero compute until the first POST to it,
//! which ingest records on the task. Uncalled by `expires_at`, a wake
//! lets the model go on without it. The turn's other calls may carry the
//! URL to another system: `{{callback_url}}` in their arguments.

use super::arguments::asks_for_callback_url;
use super::{start_waiting, Segment, Step};
use crate::callback::{args_of, mint_token, url_of};
use crate::error::WorkerError;
use crate::progress;
use baton_core::callback::{self, hash_token, Callback};
use baton_core::store::callbacks::CallbackRecord;
use baton_core::{EntryKind, Instant, TaskStatus, ToolCall, WaitingFor};

impl Segment<'_> {
    pub(super) async fn wait_for_callback(&mut self, step: u32, calls: Vec<ToolCall>) -> Step {
        self.make_callbacks(step, &calls).await?;
        // One callback waits at a time; another call of the turn waits
        // once this one is settled.
        self.commit(|t| {
            if t.cancel_requested {
                return None;
            }
            let open = t
                .waits
                .callbacks
                .iter()
                .find(|c| c.delivered.is_none() && c.expires_at > Instant::now())?;
            let waiting_for = WaitingFor::Callback(baton_core::wait::Callback {
                url: open.url.clone().unwrap_or_default(),
                expires_at: open.expires_at,
            });
            let detail = format!("waiting for a callback: {}", open.description);
            Some(vec![start_waiting(t, waiting_for, detail)])
        })
        .await?;
        let expires_at = callback::open(&self.task).map(|c| c.expires_at);
        self.parked(expires_at, progress::WAITING_FOR_CALLBACK)
            .await
    }

    /// The URL the turn's other calls get in place of
    /// [`crate::callback::CALLBACK_URL`]:
    /// that of its first `wait_for_callback` call, the callback made first
    /// when one of `pending` writes the placeholder. That is how the model
    /// hands the URL to another system itself (a CI trigger, a webhook
    /// registration) in the same turn as it waits; the calls are decided
    /// and run with it in place ([`super::arguments`]). A POST that comes
    /// before the task waits is kept all the same ([`callback::deliver`]).
    /// `None` when no call asks, or the callback was called already (its
    /// URL forgotten: the placeholder stays).
    pub(super) async fn callback_url(
        &mut self,
        step: u32,
        waits: &[ToolCall],
        pending: &[(ToolCall, bool)],
    ) -> Result<Option<String>, WorkerError> {
        // Only a tool's call gets the URL ([`super::arguments::as_run`]).
        let asks = pending
            .iter()
            .any(|(c, _)| self.tools.contains_key(&c.name) && asks_for_callback_url(c));
        // A recorded fork runs nothing: it makes no callback either.
        if waits.is_empty() || !asks || self.recorded.is_some() {
            return Ok(None);
        }
        self.make_callbacks(step, waits).await?;
        Ok(waits
            .iter()
            .find_map(|w| callback::callback(&self.task, &w.id)?.url.clone()))
    }

    /// Makes the callback of each of `calls` that has none yet: its token
    /// minted, its lookup item and then the callback on the task
    /// recorded, its URL told where the task's followers read.
    async fn make_callbacks(&mut self, step: u32, calls: &[ToolCall]) -> Result<(), WorkerError> {
        let now = Instant::now();
        for call in calls {
            if callback::callback(&self.task, &call.id).is_some() {
                continue;
            }
            let Ok((description, expires_after)) = args_of(&call.arguments) else {
                continue;
            };
            let expires_at = (now + expires_after).capped(self.task.budget.limits.deadline_at);
            let token = mint_token();
            let token_hash = hash_token(&token);
            let url = url_of(&self.deps.settings.public_url, &token);
            // The lookup item first: a URL the task shows is always found.
            let record = CallbackRecord {
                task_id: self.task.id.clone(),
                call_id: call.id.clone(),
                expires_at,
            };
            self.deps
                .store
                .record_callback(&token_hash, &record)
                .await?;
            let made = Callback {
                step,
                call_id: call.id.clone(),
                description: description.clone(),
                token_hash,
                url: Some(url.clone()),
                created_at: now,
                expires_at,
                delivered: None,
            };
            self.commit(|t| {
                if callback::callback(t, &made.call_id).is_some() {
                    return None;
                }
                t.waits.callbacks.push(made.clone());
                // The URL is a capability: not in the entry (the events).
                Some(vec![EntryKind::Status {
                    status: TaskStatus::Running,
                    detail: format!("callback made: {description}"),
                }])
            })
            .await?;
            let text = format!(
                "Waiting for a callback: {description}\nWhoever should resume this task POSTs a \
                 JSON body to this URL (once, until {expires_at}):\n{url}"
            );
            let key = format!("{}:callback:{}", self.task.id, call.id);
            self.post_once(key, &text, "the callback URL").await?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::super::harness::{roomy, Harness};
    use super::super::SegmentEnd;
    use baton_core::callback::{deliver, hash_token};
    use baton_core::{Completion, EntryKind, TaskStatus, ToolCall, WaitingFor};
    use serde_json::json;

    fn wait_call(args: serde_json::Value) -> Completion {
        Completion {
            tool_calls: vec![ToolCall {
                id: "w".into(),
                name: "wait_for_callback".into(),
                arguments: args,
            }],
            ..Completion::default()
        }
    }

    #[tokio::test]
    async fn a_callback_waits_with_no_worker_and_its_body_is_the_result() {
        let h = Harness::new(|a| a.tools = None);
        h.llm.then(wait_call(json!({"description": "CI result"})));
        let id = h.task("run CI and wait").await;
        assert_eq!(h.run(&id, roomy()).await, SegmentEnd::Waiting);
        let task = h.get(&id).await;
        let Some(WaitingFor::Callback(baton_core::wait::Callback { url, .. })) =
            &task.waiting_for()
        else {
            panic!("waits for a callback: {:?}", task.waiting_for());
        };
        assert!(task.lease().is_free(), "no worker holds a waiting task");
        let token = url.rsplit('/').next().unwrap_or_default().to_owned();
        assert_eq!(token.len(), 64, "{url}");
        // The lookup item names the task and call; the token is not in it.
        let record = h.store.callback_record(&hash_token(&token)).await.unwrap();
        assert_eq!(
            record.map(|r| (r.task_id, r.call_id)),
            Some((id.clone(), "w".into()))
        );
        // A duplicate wake finds nothing to do.
        assert!(matches!(h.run(&id, roomy()).await, SegmentEnd::Dropped(_)));
        let (woken, _) = h
            .store
            .update(&id, None, |t| {
                Ok(deliver(
                    t,
                    &hash_token(&token),
                    json!({"status": "passed"}),
                    baton_core::Instant::now(),
                )
                .ok())
            })
            .await
            .unwrap();
        assert_eq!(woken.status(), TaskStatus::Queued);
        assert_eq!(
            h.run(&id, roomy()).await,
            SegmentEnd::Finished(TaskStatus::Succeeded)
        );
        let result = h
            .transcript(&id)
            .await
            .into_iter()
            .find_map(|e| match e.kind {
                EntryKind::ToolResult {
                    call_id, content, ..
                } if call_id == "w" => Some(content),
                _ => None,
            });
        let result = result.unwrap_or_default();
        assert!(result.contains("\"passed\""), "{result}");
        let task = h.get(&id).await;
        assert_eq!(task.waits.callbacks[0].url, None);
        assert!(
            task.waits.callbacks[0]
                .delivered
                .as_ref()
                .is_some_and(|d| d.body.is_none()),
            "the body is dropped from the record once in the result"
        );
    }

    /// The model hands the URL over itself: a call of the same turn
    /// writing `{{callback_url}}` runs with the URL in its place, the
    /// callback made before it; the transcript keeps the placeholder.
    #[tokio::test]
    async fn a_call_of_the_same_turn_gets_the_url_in_place_of_its_placeholder() {
        let h = Harness::new(|a| a.tools = None);
        let mut turn = wait_call(json!({"description": "CI result"}));
        turn.tool_calls.push(ToolCall {
            id: "ci".into(),
            name: "count".into(),
            arguments: json!({"url": "{{callback_url}}", "note": ["keep", "on {{callback_url}}"]}),
        });
        h.llm.then(turn);
        let id = h.task("start CI and wait for it").await;
        assert_eq!(h.run(&id, roomy()).await, SegmentEnd::Waiting);
        let task = h.get(&id).await;
        let Some(WaitingFor::Callback(baton_core::wait::Callback { url, .. })) =
            &task.waiting_for()
        else {
            panic!("waits for a callback: {:?}", task.waiting_for());
        };
        let seen = h.tool.arguments.lock().unwrap().clone();
        assert_eq!(seen.len(), 1);
        assert_eq!(seen[0]["url"], json!(url));
        assert_eq!(seen[0]["note"], json!(["keep", format!("on {url}")]));
        let call_args = h
            .transcript(&id)
            .await
            .into_iter()
            .find_map(|e| match e.kind {
                EntryKind::AssistantMessage { tool_calls, .. } => tool_calls
                    .into_iter()
                    .find(|c| c.id == "ci")
                    .map(|c| c.arguments),
                _ => None,
            });
        assert_eq!(
            call_args.map(|a| a["url"].clone()),
            Some(json!("{{callback_url}}")),
            "the transcript holds what the model wrote"
        );
    }

    /// A system that calls back before the task waits (the call that told
    /// it still running) is heard: the task does not wait at all.
    #[tokio::test]
    async fn a_callback_called_before_the_task_waits_is_its_result() {
        let h = Harness::new(|a| a.tools = None);
        h.tool.meddle(super::super::harness::Meddle::CallBack);
        let mut turn = wait_call(json!({"description": "fast CI"}));
        turn.tool_calls.push(ToolCall {
            id: "ci".into(),
            name: "count".into(),
            arguments: json!({"url": "{{callback_url}}"}),
        });
        h.llm.then(turn);
        let id = h.task("start CI and wait for it").await;
        assert_eq!(
            h.run(&id, roomy()).await,
            SegmentEnd::Finished(TaskStatus::Succeeded)
        );
        let result = h
            .transcript(&id)
            .await
            .into_iter()
            .find_map(|e| match e.kind {
                EntryKind::ToolResult {
                    call_id, content, ..
                } if call_id == "w" => Some(content),
                _ => None,
            });
        assert!(result.unwrap_or_default().contains("\"early\""));
    }

    #[tokio::test]
    async fn an_uncalled_callback_tells_the_model_nobody_called() {
        let h = Harness::new(|a| a.tools = None);
        h.llm.then(wait_call(
            json!({"description": "CI", "expires_after": "1s"}),
        ));
        let id = h.task("wait briefly").await;
        assert_eq!(h.run(&id, roomy()).await, SegmentEnd::Waiting);
        assert!(!h.queue.sent().is_empty(), "a wake is armed for the expiry");
        tokio::time::sleep(std::time::Duration::from_millis(1_100)).await;
        assert_eq!(
            h.run(&id, roomy()).await,
            SegmentEnd::Finished(TaskStatus::Succeeded)
        );
        let result = h
            .transcript(&id)
            .await
            .into_iter()
            .find_map(|e| match e.kind {
                EntryKind::ToolResult {
                    call_id, content, ..
                } if call_id == "w" => Some(content),
                _ => None,
            });
        assert!(result.unwrap_or_default().starts_with("no callback"));
    }
}
