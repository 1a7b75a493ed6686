//! The Slack routes: Events API and interactivity.

use crate::response::{json, Answer, ApiError};
use crate::tasks::parse_id;
use crate::threads::Submission;
use crate::{Ingest, SlackIngest};
use baton_core::Origin;
use baton_slack::events::{Inbound, InboundMessage};
use baton_slack::interactivity::Interaction;
use bytes::Bytes;
use http::{HeaderMap, StatusCode};
use serde_json::json;

impl Ingest {
    fn slack_settings(&self) -> Result<&SlackIngest, ApiError> {
        self.slack.as_ref().ok_or_else(|| {
            ApiError::not_found("Slack is not configured (SLACK_SIGNING_SECRET is not set)")
        })
    }

    /// Checks the Slack signature over the raw body. Nothing else about the
    /// request is read before this passes.
    fn verify_slack(&self, headers: &HeaderMap, body: &Bytes) -> Result<&SlackIngest, ApiError> {
        let slack = self.slack_settings()?;
        let header = |name: &str| {
            headers
                .get(name)
                .and_then(|v| v.to_str().ok())
                .unwrap_or("")
        };
        let now = baton_core::now_ms() / 1000;
        baton_slack::signature::verify(
            &slack.signing_secret,
            header("x-slack-request-timestamp"),
            header("x-slack-signature"),
            body,
            now,
        )
        .map_err(|e| ApiError::unauthorized(format!("Slack signature check failed: {e}")))?;
        Ok(slack)
    }

    pub(crate) async fn slack_events(&self, headers: &HeaderMap, body: &Bytes) -> Answer {
        let slack = self.verify_slack(headers, body)?;
        let inbound = baton_slack::events::classify(body, slack.bot_user_id.as_deref())
            .map_err(|e| ApiError::bad_request(format!("unreadable Slack event: {e}")))?;
        match inbound {
            Inbound::UrlVerification { challenge } => {
                Ok(json(StatusCode::OK, &json!({ "challenge": challenge })))
            }
            Inbound::Ignored { reason } => {
                tracing::debug!(?reason, "Slack event ignored");
                Ok(json(
                    StatusCode::OK,
                    &json!({"ok": true, "ignored": reason}),
                ))
            }
            Inbound::Message(m) => {
                let submitted = self.submit(slack_submission(m)).await?;
                tracing::info!(task_id = %submitted.task_id(), outcome = ?submitted, "Slack message accepted");
                Ok(json(StatusCode::OK, &json!({"ok": true})))
            }
        }
    }

    pub(crate) async fn slack_interactivity(&self, headers: &HeaderMap, body: &Bytes) -> Answer {
        self.verify_slack(headers, body)?;
        let interaction = baton_slack::interactivity::parse(body)
            .map_err(|e| ApiError::bad_request(format!("unreadable Slack interaction: {e}")))?;
        let action = match interaction {
            Interaction::BlockAction(a) => a,
            Interaction::Unsupported { payload_type } => {
                tracing::info!(%payload_type, "unsupported Slack interaction ignored");
                return Ok(json(
                    StatusCode::OK,
                    &json!({"ok": true, "ignored": "unsupported interaction"}),
                ));
            }
        };
        match action.action_id.as_str() {
            "cancel_task" => {
                let id = parse_id(action.value.as_deref().unwrap_or_default())?;
                // A 409 (already ended) is still a fine answer for a button.
                match self.cancel_task(id.as_str()).await {
                    Ok(_) => {}
                    Err(e) if e.status == StatusCode::CONFLICT => {}
                    Err(e) => return Err(e),
                }
                Ok(json(StatusCode::OK, &json!({"ok": true})))
            }
            other => {
                tracing::info!(action_id = %other, "unsupported Slack action ignored");
                Ok(json(
                    StatusCode::OK,
                    &json!({"ok": true, "ignored": "unsupported action"}),
                ))
            }
        }
    }
}

/// The conversation key of a Slack message: its thread, or the message
/// itself when it starts one.
fn slack_submission(m: InboundMessage) -> Submission {
    let thread_ts = m.thread_ts.clone().unwrap_or_else(|| m.ts.clone());
    Submission {
        text: m.text,
        agent: "default".to_owned(),
        thread: Some(format!("slack:{}:{}:{}", m.team_id, m.channel, thread_ts)),
        dedupe_key: Some(format!("slack:{}:{}", m.team_id, m.event_id)),
        origin: Origin::Slack {
            team_id: m.team_id,
            channel: m.channel,
            thread_ts,
            user: m.user,
        },
    }
}
