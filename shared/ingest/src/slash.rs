//! Commands on Slack: a message that is one of the command words
//! ([`crate::commands`]), and the slash command `POST /slack/commands`
//! (`/baton WORD`, or `/baton` followed by anything else: a task, as a
//! mention would start).
//!
//! A slash command is verified like an event (the signature over the raw
//! body, a fresh timestamp: 401 otherwise, and nothing changes). Its
//! answer goes to its `response_url` (Slack's host only) while Slack waits
//! for the acknowledgment (each call bounded by the notice timeout, 1.5
//! s); if that fails, the answer is the acknowledgment's own body, which
//! Slack shows the same way.

use crate::commands::{Command, Context};
use crate::response::{json, Answer, ApiError};
use crate::slack::MessageKeys;
use crate::submission::Submission;
use crate::Ingest;
use baton_core::{ChannelType, Origin};
use baton_slack::commands::SlashCommand;
use baton_slack::events::InboundMessage;
use bytes::Bytes;
use http::{HeaderMap, Response, StatusCode};
use serde_json::json;

impl Ingest {
    /// A message to Baton that is a command word: answered to its sender
    /// (in a direct message, as a reply in its thread: an assistant thread
    /// has no notes for one person; elsewhere as a note only they see).
    pub(crate) async fn message_command(&self, command: Command, m: &InboundMessage) -> Answer {
        let MessageKeys {
            direct_message,
            thread_ts,
            conversation,
            dedupe_key,
        } = MessageKeys::of(m);
        let ctx = Context {
            argument: command.argument(&m.text),
            team_id: m.team_id.clone(),
            channel: m.channel.clone(),
            user: m.user.clone(),
            conversation: Some(conversation),
            thread_ts: Some(thread_ts.clone()),
            direct_message,
            dedupe_key,
        };
        // Slack redelivers an event it thinks went unanswered: the words
        // that only read are answered once (`cancel` claims its key when it
        // asks the task to stop, and answers each delivery).
        if command != Command::Cancel && !self.first_delivery(&ctx.dedupe_key).await? {
            return Ok(json(
                StatusCode::OK,
                &json!({"ok": true, "command": command.word(), "duplicate": true}),
            ));
        }
        let text = self.answer_command(command, &ctx).await?;
        if direct_message {
            self.post_reply(&m.channel, &thread_ts, &text).await;
        } else {
            self.tell(&m.channel, &m.user, Some(&thread_ts), &text)
                .await;
        }
        tracing::info!(command = command.word(), user = %m.user, "Slack command answered");
        Ok(json(
            StatusCode::OK,
            &json!({"ok": true, "command": command.word()}),
        ))
    }

    /// Whether this is the first delivery of the request claimed by `key`.
    async fn first_delivery(&self, key: &str) -> Result<bool, ApiError> {
        self.store
            .claim_once(key, baton_core::Instant::now())
            .await
            .map_err(|e| ApiError::unavailable_on(None, e))
    }

    /// A reply for everyone in `channel`'s thread; a failed one is logged.
    async fn post_reply(&self, channel: &str, thread_ts: &str, text: &str) {
        let Some(notices) = &self.notices else {
            tracing::warn!("no Slack bot token: the command could not be answered");
            return;
        };
        if let Err(e) = notices.post(channel, Some(thread_ts), text).await {
            tracing::warn!(error = %e, "could not answer the command");
        }
    }

    /// `POST /slack/commands`.
    pub(crate) async fn slack_command(&self, headers: &HeaderMap, body: &Bytes) -> Answer {
        self.verify_slack(headers, body)?;
        let c = baton_slack::commands::parse(body)
            .map_err(|e| ApiError::bad_request(format!("unreadable slash command: {e}")))?;
        let direct_message = c.is_direct_message();
        let ctx = Context {
            team_id: c.team_id.clone(),
            channel: c.channel_id.clone(),
            user: c.user_id.clone(),
            // A direct message is one conversation; a channel's thread is
            // not named by a slash command.
            conversation: direct_message.then(|| format!("slack:{}:{}", c.team_id, c.channel_id)),
            thread_ts: None,
            direct_message,
            dedupe_key: format!("slack:{}:command:{}", c.team_id, c.trigger_id),
            argument: Command::parse(&c.text).and_then(|command| command.argument(&c.text)),
        };
        let command = if c.text.trim().is_empty() {
            Some(Command::Help)
        } else {
            Command::parse(&c.text)
        };
        let text = match command {
            Some(command) => {
                let text = self.answer_command(command, &ctx).await?;
                tracing::info!(command = command.word(), user = %c.user_id, "slash command answered");
                text
            }
            None => match self.command_task(&c).await? {
                Some(text) => text,
                None => return Ok(empty_ack()),
            },
        };
        Ok(self.respond(&c, &text).await)
    }

    /// Answers `c` at its `response_url`; if that cannot be done, in the
    /// acknowledgment itself.
    async fn respond(&self, c: &SlashCommand, text: &str) -> Response<Bytes> {
        let sent = match &self.notices {
            Some(notices) => notices.respond(&c.response_url, text).await,
            None => Err(baton_core::NoticeError("no Slack bot token".into())),
        };
        match sent {
            Ok(()) => empty_ack(),
            Err(e) => {
                tracing::warn!(error = %e, "could not answer at the response_url; answering in the acknowledgment");
                json(
                    StatusCode::OK,
                    &json!({"response_type": "ephemeral", "text": text}),
                )
            }
        }
    }

    /// `/baton` and anything that is not a command: a task, as a mention
    /// would start. Slack gives a slash command no message to thread
    /// under, so Baton posts one (quoting the request) and the task
    /// answers in its thread. `Some`: what the sender is told instead.
    async fn command_task(&self, c: &SlashCommand) -> Result<Option<String>, ApiError> {
        let Some(notices) = &self.notices else {
            return Ok(Some(
                "I can't start a task from `/baton` without a bot token; mention me instead."
                    .to_owned(),
            ));
        };
        let quoted = format!("<@{}> asked: {}", c.user_id, neutralized(&c.text));
        let ts = match notices.post(&c.channel_id, None, &quoted).await {
            Ok(ts) => ts,
            Err(e) => {
                tracing::warn!(error = %e, channel = %c.channel_id, "could not post the task's first message");
                return Ok(Some(
                    "I couldn't post in this conversation (am I a member of it?): mention me instead."
                        .to_owned(),
                ));
            }
        };
        let direct_message = c.is_direct_message();
        let thread = if direct_message {
            format!("slack:{}:{}", c.team_id, c.channel_id)
        } else {
            format!("slack:{}:{}:{}", c.team_id, c.channel_id, ts)
        };
        let origin = Origin::Slack {
            team_id: c.team_id.clone(),
            channel: c.channel_id.clone(),
            thread_ts: ts.clone(),
            user: c.user_id.clone(),
            channel_type: direct_message.then_some(ChannelType::Im),
        };
        let agent = self
            .routes
            .agent_for(&c.team_id, &c.channel_id, direct_message);
        let submission = Submission {
            text: c.text.trim().to_owned(),
            agent: agent.to_owned(),
            thread: Some(thread.clone()),
            dedupe_key: Some(format!("slack:{}:command:{}", c.team_id, c.trigger_id)),
            fingerprint: None,
            attachments: Vec::new(),
            files: Vec::new(),
            // The message Baton posted for the command: its reaction shows
            // the task was taken, then how it ended.
            message_ts: Some(ts.clone()),
            model: None,
            user: None,
            origin: origin.clone(),
        };
        let answer = self.slack_message(submission).await;
        self.taken_or_told(answer, &origin, Some(&thread)).await?;
        tracing::info!(user = %c.user_id, "slash command started a task");
        Ok(None)
    }
}

/// Slack's acknowledgment with nothing to show: an empty 200.
fn empty_ack() -> Response<Bytes> {
    let mut r = Response::new(Bytes::new());
    *r.status_mut() = StatusCode::OK;
    r
}

/// `text` with no Slack markup left (`<…>` would mention, link or ping
/// `<!channel>`): angle brackets escaped; the entities Slack already
/// escaped stay as they are.
fn neutralized(text: &str) -> String {
    text.trim().replace('<', "&lt;").replace('>', "&gt;")
}

#[cfg(test)]
mod tests {
    #[test]
    fn quoted_text_cannot_ping_or_link() {
        assert_eq!(
            super::neutralized(" <!channel> look &lt;here&gt; "),
            "&lt;!channel&gt; look &lt;here&gt;"
        );
    }
}
