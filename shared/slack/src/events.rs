//! The Slack Events API: envelope types and a classifier that turns a
//! verified request body into what Baton acts on.
//!
//! Baton answers two kinds of user messages: an `app_mention` in a channel
//! and a plain message in a direct-message (`im`) conversation with the bot.
//! Of Slack's agent surfaces it reads the Stop button of an agent session
//! and the start of an assistant thread ([`surfaces`]).
//! Everything else — bot posts (including Baton's own), edits, deletions,
//! joins, other event types — is [`Inbound::Ignored`] so the caller can answer
//! 200 without queueing work (a non-2xx answer makes Slack retry).

mod surfaces;

use std::fmt;

use baton_core::ChannelType;
use serde::{Deserialize, Serialize};
pub use surfaces::{SessionStopped, ThreadStarted};

/// The outer object of every Events API request, tagged by `type`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum Envelope {
    /// Sent once when the request URL is configured; answer with `challenge`.
    UrlVerification(UrlVerification),
    /// An event the app subscribed to.
    EventCallback(EventCallback),
    /// Slack is dropping events because the app exceeded its rate limit.
    AppRateLimited(AppRateLimited),
    /// Any envelope type this crate does not know.
    #[serde(other)]
    Unknown,
}

/// `{"type": "url_verification", "challenge": ...}`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct UrlVerification {
    /// Echo this back in the response body.
    pub challenge: String,
}

/// `{"type": "event_callback", ...}`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct EventCallback {
    /// Workspace the event happened in.
    pub team_id: String,
    /// The receiving app.
    pub api_app_id: String,
    /// Unique per event, stable across Slack's retries: the dedupe key.
    pub event_id: String,
    /// When the event was dispatched (Unix seconds).
    pub event_time: i64,
    /// Installations the event is visible to; the bot's own user id is here.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub authorizations: Option<Vec<Authorization>>,
    /// The inner event. Kept as raw JSON because its shape depends on its
    /// `type` (e.g. `user` is a string in messages but an object in
    /// `user_change`); see [`MessageEvent`].
    pub event: serde_json::Value,
}

/// One entry of `authorizations`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Authorization {
    /// Enterprise Grid organisation, if any.
    #[serde(default)]
    pub enterprise_id: Option<String>,
    /// Workspace of the installation.
    #[serde(default)]
    pub team_id: Option<String>,
    /// The installing user — for a bot install, the bot's own user id.
    pub user_id: String,
    /// Whether `user_id` is a bot user.
    #[serde(default)]
    pub is_bot: bool,
}

/// `{"type": "app_rate_limited", ...}`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct AppRateLimited {
    /// Workspace whose events are being dropped.
    pub team_id: String,
    /// Start of the limited minute (Unix seconds).
    pub minute_rate_limited: i64,
    /// The app concerned.
    pub api_app_id: String,
}

/// The fields of `message` and `app_mention` events Baton reads. All are
/// optional here because which ones exist depends on the subtype; the
/// classifier decides which are required.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct MessageEvent {
    /// `message` or `app_mention`.
    #[serde(rename = "type")]
    pub event_type: String,
    /// Set for everything but plain user messages (`bot_message`,
    /// `message_changed`, `channel_join`, ...).
    #[serde(default)]
    pub subtype: Option<String>,
    /// Author's user id.
    #[serde(default)]
    pub user: Option<String>,
    /// Set when a bot or app posted the message.
    #[serde(default)]
    pub bot_id: Option<String>,
    /// Message text in Slack's markup (`&`, `<`, `>` escaped).
    #[serde(default)]
    pub text: Option<String>,
    /// The message's own timestamp (its id within the channel).
    #[serde(default)]
    pub ts: Option<String>,
    /// Parent message's ts when the message is a thread reply.
    #[serde(default)]
    pub thread_ts: Option<String>,
    /// Channel (or DM conversation) id.
    #[serde(default)]
    pub channel: Option<String>,
    /// `im`, `mpim`, `channel`, `group`, `app_home` (message events only).
    #[serde(default)]
    pub channel_type: Option<String>,
    /// Files shared with the message (`file_share` messages, and mentions
    /// posted with files).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub files: Vec<SlackFile>,
}

/// A file on a message, as the event describes it.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct SlackFile {
    /// Slack's file id.
    #[serde(default)]
    pub id: String,
    /// The file's name.
    #[serde(default)]
    pub name: String,
    /// Its media type, as Slack guessed it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mimetype: Option<String>,
    /// Its size in bytes.
    #[serde(default)]
    pub size: u64,
    /// Where the bot downloads it (with its token and the `files:read`
    /// scope); absent for files the bot may not see.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub url_private_download: Option<String>,
}

/// How a message reached the bot.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum MessageKind {
    /// `@bot ...` in a channel (`app_mention`).
    Mention,
    /// A message in the bot's direct-message conversation.
    DirectMessage,
}

/// A user message Baton should act on.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct InboundMessage {
    /// Workspace.
    pub team_id: String,
    /// Slack's event id, the natural dedupe key.
    pub event_id: String,
    /// Channel or DM conversation id.
    pub channel: String,
    /// Author's user id.
    pub user: String,
    /// Text in Slack markup with a leading mention of the bot removed.
    pub text: String,
    /// The message's ts.
    pub ts: String,
    /// Parent ts when the message is in a thread.
    pub thread_ts: Option<String>,
    /// Mention or direct message.
    pub kind: MessageKind,
    /// What Slack says the conversation is (message events say;
    /// `app_mention` events do not).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub channel_type: Option<ChannelType>,
    /// Files shared with the message, not yet downloaded.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub files: Vec<SlackFile>,
}

impl InboundMessage {
    /// The ts identifying the conversation: the thread's parent when in a
    /// thread, else the message itself (replies go under it).
    pub fn conversation_ts(&self) -> &str {
        self.thread_ts.as_deref().unwrap_or(&self.ts)
    }
}

/// Why an event needs no work.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "reason", content = "detail", rename_all = "snake_case")]
pub enum IgnoreReason {
    /// Posted by a bot or app (`bot_id` set).
    BotMessage,
    /// Posted by the bot's own user.
    OwnMessage,
    /// A message with a subtype (edit, delete, join, ...).
    Subtype(String),
    /// A top-level `message` outside a direct-message conversation
    /// (channel messages reach Baton as `app_mention`; thread replies as
    /// [`Inbound::ThreadReply`]).
    NotDirectMessage,
    /// A channel message that mentions the bot: handled as the
    /// `app_mention` Slack sends for it too.
    MentionsBot,
    /// An event type Baton does not handle.
    UnsupportedEvent(String),
    /// Slack reported it is rate limiting the app's events.
    AppRateLimited,
    /// An envelope type Baton does not know.
    UnsupportedEnvelope,
}

impl fmt::Display for IgnoreReason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::BotMessage => f.write_str("message from a bot"),
            Self::OwnMessage => f.write_str("message from this bot"),
            Self::Subtype(s) => write!(f, "message subtype {s}"),
            Self::NotDirectMessage => f.write_str("message outside a direct message"),
            Self::MentionsBot => f.write_str("message mentioning the bot (handled as app_mention)"),
            Self::UnsupportedEvent(t) => write!(f, "unsupported event type {t}"),
            Self::AppRateLimited => f.write_str("app_rate_limited notice"),
            Self::UnsupportedEnvelope => f.write_str("unsupported envelope type"),
        }
    }
}

/// What a verified Events API request asks of Baton.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Inbound {
    /// Answer 200 with this challenge.
    UrlVerification {
        /// The value to echo.
        challenge: String,
    },
    /// A user message to act on.
    Message(InboundMessage),
    /// A message in a channel thread that does not mention the bot: it
    /// may answer a question the bot asked there, and is nothing else.
    ThreadReply(InboundMessage),
    /// Someone clicked Stop on the agent session of a thread
    /// (`agent_session_stopped`): stop its task, like a `stop` message.
    SessionStopped(SessionStopped),
    /// A user opened an assistant thread (`assistant_thread_started`).
    ThreadStarted(ThreadStarted),
    /// Answer 200 and do nothing.
    Ignored {
        /// Why (for logs and tests).
        reason: IgnoreReason,
    },
}

/// A request body that is not a valid Events API payload; answer 400.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum EventError {
    /// Not JSON, or not an envelope Slack would send.
    #[error("malformed Slack event payload: {0}")]
    Malformed(String),
    /// A field Baton needs is absent.
    #[error("Slack event payload is missing `{0}`")]
    MissingField(&'static str),
}

/// Parses and classifies an Events API request body (already verified).
///
/// `bot_user_id` is the bot's own user id; when `None`, the first bot entry
/// of the payload's `authorizations` is used. It serves to ignore the bot's
/// own messages and to strip a leading `<@BOT>` from the text.
pub fn classify(body: &[u8], bot_user_id: Option<&str>) -> Result<Inbound, EventError> {
    let envelope: Envelope =
        serde_json::from_slice(body).map_err(|e| EventError::Malformed(e.to_string()))?;
    match envelope {
        Envelope::UrlVerification(v) => Ok(Inbound::UrlVerification {
            challenge: v.challenge,
        }),
        Envelope::AppRateLimited(_) => Ok(ignored(IgnoreReason::AppRateLimited)),
        Envelope::Unknown => Ok(ignored(IgnoreReason::UnsupportedEnvelope)),
        Envelope::EventCallback(cb) => classify_callback(cb, bot_user_id),
    }
}

fn ignored(reason: IgnoreReason) -> Inbound {
    Inbound::Ignored { reason }
}

fn classify_callback(cb: EventCallback, bot_user_id: Option<&str>) -> Result<Inbound, EventError> {
    let event_type = cb
        .event
        .get("type")
        .and_then(serde_json::Value::as_str)
        .ok_or(EventError::MissingField("event.type"))?;
    let kind = match event_type {
        "agent_session_stopped" => {
            return surfaces::session_stopped(&cb).map(Inbound::SessionStopped)
        }
        "assistant_thread_started" => {
            return surfaces::thread_started(&cb).map(Inbound::ThreadStarted)
        }
        "app_mention" => MessageKind::Mention,
        "message" => MessageKind::DirectMessage,
        other => return Ok(ignored(IgnoreReason::UnsupportedEvent(other.to_string()))),
    };
    let ev: MessageEvent = serde_json::from_value(cb.event.clone())
        .map_err(|e| EventError::Malformed(format!("event: {e}")))?;

    // Bot and subtype checks come before field checks: edits, deletions and
    // bot posts legitimately lack `user`.
    if ev.bot_id.as_deref().is_some_and(|b| !b.is_empty()) {
        return Ok(ignored(IgnoreReason::BotMessage));
    }
    // A `file_share` is a user's message with files; every other subtype
    // (edits, deletions, joins, ...) is not a message to act on.
    if let Some(subtype) = ev.subtype.filter(|s| !s.is_empty() && s != "file_share") {
        return Ok(ignored(IgnoreReason::Subtype(subtype)));
    }
    let own_id = bot_user_id.map(str::to_owned).or_else(|| {
        cb.authorizations
            .as_ref()
            .and_then(|a| a.iter().find(|a| a.is_bot))
            .map(|a| a.user_id.clone())
    });
    let user = ev
        .user
        .filter(|u| !u.is_empty())
        .ok_or(EventError::MissingField("event.user"))?;
    if own_id.as_deref() == Some(user.as_str()) {
        return Ok(ignored(IgnoreReason::OwnMessage));
    }
    // A plain message outside a DM matters only as a reply in a thread
    // (the answer to an `ask_user` question needs no mention).
    let thread_reply =
        kind == MessageKind::DirectMessage && ev.channel_type.as_deref() != Some("im");
    if thread_reply && ev.thread_ts.as_deref().is_none_or(str::is_empty) {
        return Ok(ignored(IgnoreReason::NotDirectMessage));
    }
    let channel = ev
        .channel
        .filter(|c| !c.is_empty())
        .ok_or(EventError::MissingField("event.channel"))?;
    let ts = ev
        .ts
        .filter(|t| !t.is_empty())
        .ok_or(EventError::MissingField("event.ts"))?;
    // Slack sends `text` on every user message, but "" is a valid value and a
    // missing one is better treated as empty than bounced back for retries.
    let raw_text = ev.text.unwrap_or_default();
    if thread_reply
        && own_id
            .as_deref()
            .is_some_and(|id| raw_text.contains(&format!("<@{id}>")))
    {
        // It also arrives as an `app_mention`, which is what acts on it.
        return Ok(ignored(IgnoreReason::MentionsBot));
    }
    let text = match (own_id.as_deref(), kind) {
        (Some(id), _) => strip_leading_mention(&raw_text, Some(id)),
        // Without a known bot id, an app_mention's leading mention is the bot.
        (None, MessageKind::Mention) => strip_leading_mention(&raw_text, None),
        (None, MessageKind::DirectMessage) => raw_text.trim().to_string(),
    };

    let message = InboundMessage {
        channel_type: ev.channel_type.as_deref().and_then(ChannelType::parse),
        team_id: cb.team_id,
        event_id: cb.event_id,
        channel,
        user,
        text,
        ts,
        thread_ts: ev.thread_ts.filter(|t| !t.is_empty()),
        kind,
        files: ev.files,
    };
    Ok(if thread_reply {
        Inbound::ThreadReply(message)
    } else {
        Inbound::Message(message)
    })
}

/// Removes a leading `<@ID>` or `<@ID|label>` (for `bot_id`, or any user when
/// `None`) and trims the result.
pub fn strip_leading_mention(text: &str, bot_id: Option<&str>) -> String {
    let trimmed = text.trim_start();
    let Some(rest) = trimmed.strip_prefix("<@") else {
        return text.trim().to_string();
    };
    let Some(end) = rest.find('>') else {
        return text.trim().to_string();
    };
    let inner = &rest[..end];
    let id = inner.split('|').next().unwrap_or(inner);
    let matches = match bot_id {
        Some(bot) => id == bot,
        None => !id.is_empty(),
    };
    if matches {
        rest[end + 1..].trim().to_string()
    } else {
        text.trim().to_string()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    const URL_VERIFICATION: &str = include_str!("../../../events/slack_url_verification.json");
    const APP_MENTION: &str = include_str!("../../../events/slack_app_mention.json");
    const MESSAGE_IM: &str = include_str!("../../../events/slack_message_im.json");
    const BOT_MESSAGE: &str = include_str!("../../../events/slack_bot_message.json");
    const BOT: &str = "U0LAN0Z89";

    fn with_event(base: &str, patch: serde_json::Value) -> Vec<u8> {
        let mut v: serde_json::Value = serde_json::from_str(base).expect("fixture is JSON");
        let event = v["event"].as_object_mut().expect("event object");
        for (k, val) in patch.as_object().expect("patch object") {
            if val.is_null() {
                event.remove(k);
            } else {
                event.insert(k.clone(), val.clone());
            }
        }
        serde_json::to_vec(&v).expect("serialise")
    }

    fn reason(r: Result<Inbound, EventError>) -> IgnoreReason {
        match r {
            Ok(Inbound::Ignored { reason }) => reason,
            other => panic!("expected Ignored, got {other:?}"),
        }
    }

    #[test]
    fn url_verification_returns_the_challenge() {
        assert_eq!(
            classify(URL_VERIFICATION.as_bytes(), None),
            Ok(Inbound::UrlVerification {
                challenge: "3eZbrw1aBm2rZgRNFdxV2595E9CY3gmdALWMmHkvFXO7tYXAYM8P".into()
            })
        );
    }

    #[test]
    fn app_mention_becomes_a_mention_with_the_mention_stripped() {
        let got = classify(APP_MENTION.as_bytes(), Some(BOT));
        assert_eq!(
            got,
            Ok(Inbound::Message(InboundMessage {
                team_id: "T061EG9R6".into(),
                event_id: "Ev0LAN670R".into(),
                channel: "C0LAN2Q65".into(),
                user: "U061F7AUR".into(),
                text: "what is the status of the deploy? Compare <https://example.com/a?b=1&amp;c=2|the runbook> & report".into(),
                ts: "1515449522.000016".into(),
                thread_ts: None,
                kind: MessageKind::Mention,
                // app_mention events do not say.
                channel_type: None,
                files: Vec::new(),
            }))
        );
    }

    #[test]
    fn bot_id_falls_back_to_authorizations() {
        let Ok(Inbound::Message(m)) = classify(APP_MENTION.as_bytes(), None) else {
            panic!("expected a message");
        };
        assert!(m.text.starts_with("what is"), "{}", m.text);
        assert_eq!(m.conversation_ts(), "1515449522.000016");
    }

    #[test]
    fn im_message_becomes_a_direct_message_in_its_thread() {
        let Ok(Inbound::Message(m)) = classify(MESSAGE_IM.as_bytes(), Some(BOT)) else {
            panic!("expected a message");
        };
        assert_eq!(m.kind, MessageKind::DirectMessage);
        assert_eq!(m.channel_type, Some(ChannelType::Im));
        assert_eq!(m.channel, "D024BE91L");
        assert_eq!(m.user, "U061F7AUR");
        assert_eq!(m.text, "Can you summarise yesterday's incidents?");
        assert_eq!(m.ts, "1700000123.000200");
        assert_eq!(m.thread_ts.as_deref(), Some("1700000000.000100"));
        assert_eq!(m.conversation_ts(), "1700000000.000100");
        assert_eq!(m.event_id, "Ev06A1B2C3D4");
    }

    #[test]
    fn bot_message_fixture_is_ignored() {
        assert_eq!(
            reason(classify(BOT_MESSAGE.as_bytes(), Some(BOT))),
            IgnoreReason::BotMessage
        );
    }

    #[test]
    fn bot_id_without_subtype_is_ignored() {
        let body = with_event(MESSAGE_IM, json!({"bot_id": "B123"}));
        assert_eq!(reason(classify(&body, Some(BOT))), IgnoreReason::BotMessage);
    }

    #[test]
    fn subtypes_are_ignored() {
        for subtype in [
            "message_changed",
            "message_deleted",
            "channel_join",
            "file_comment",
        ] {
            let body = with_event(MESSAGE_IM, json!({"subtype": subtype, "user": null}));
            assert_eq!(
                reason(classify(&body, Some(BOT))),
                IgnoreReason::Subtype(subtype.into())
            );
        }
    }

    #[test]
    fn files_are_read_from_file_shares_and_mentions() {
        let files = json!([
            {"id": "F1", "name": "notes.txt", "mimetype": "text/plain", "size": 12,
             "url_private_download": "https://files.slack.com/files-pri/T1-F1/download/notes.txt"},
            {"id": "F2", "name": "hidden", "mode": "hidden_by_limit"}
        ]);
        let body = with_event(
            MESSAGE_IM,
            json!({"subtype": "file_share", "files": files.clone()}),
        );
        let Ok(Inbound::Message(m)) = classify(&body, Some(BOT)) else {
            panic!("a file_share is a message");
        };
        assert_eq!(m.files.len(), 2);
        assert_eq!(m.files[0].name, "notes.txt");
        assert_eq!(m.files[0].size, 12);
        assert_eq!(m.files[0].mimetype.as_deref(), Some("text/plain"));
        assert!(m.files[1].url_private_download.is_none());
        let body = with_event(APP_MENTION, json!({"files": files}));
        let Ok(Inbound::Message(m)) = classify(&body, Some(BOT)) else {
            panic!("a mention with files is a message");
        };
        assert_eq!(m.files[0].id, "F1");
    }

    #[test]
    fn own_messages_are_ignored_even_without_bot_id() {
        let body = with_event(MESSAGE_IM, json!({"user": BOT}));
        assert_eq!(reason(classify(&body, Some(BOT))), IgnoreReason::OwnMessage);
        // Also when the id only comes from `authorizations`.
        assert_eq!(reason(classify(&body, None)), IgnoreReason::OwnMessage);
    }

    #[test]
    fn top_level_channel_messages_are_ignored_and_thread_replies_kept_apart() {
        for ct in [json!("channel"), json!("mpim"), json!(null)] {
            let body = with_event(
                MESSAGE_IM,
                json!({"channel_type": ct, "thread_ts": null, "channel": "C1"}),
            );
            assert_eq!(
                reason(classify(&body, Some(BOT))),
                IgnoreReason::NotDirectMessage
            );
            let body = with_event(
                MESSAGE_IM,
                json!({"channel_type": ct, "thread_ts": "1700000000.000100", "channel": "C1"}),
            );
            match classify(&body, Some(BOT)) {
                Ok(Inbound::ThreadReply(m)) => {
                    assert_eq!(m.thread_ts.as_deref(), Some("1700000000.000100"));
                    assert_eq!(m.channel, "C1");
                }
                other => panic!("expected a thread reply, got {other:?}"),
            }
        }
    }

    #[test]
    fn unknown_event_types_are_ignored() {
        // `user` is an object here: must not be a parse error.
        let body = with_event(
            MESSAGE_IM,
            json!({"type": "user_change", "user": {"id": "U1", "name": "x"}}),
        );
        assert_eq!(
            reason(classify(&body, Some(BOT))),
            IgnoreReason::UnsupportedEvent("user_change".into())
        );
    }

    #[test]
    fn app_rate_limited_and_unknown_envelopes_are_ignored() {
        let rl = json!({"token": "x", "type": "app_rate_limited", "team_id": "T1",
                        "minute_rate_limited": 1518467820, "api_app_id": "A1"});
        assert_eq!(
            reason(classify(rl.to_string().as_bytes(), None)),
            IgnoreReason::AppRateLimited
        );
        let unknown = json!({"type": "something_new", "x": 1});
        assert_eq!(
            reason(classify(unknown.to_string().as_bytes(), None)),
            IgnoreReason::UnsupportedEnvelope
        );
    }

    #[test]
    fn malformed_payloads_are_errors() {
        assert!(matches!(
            classify(b"not json", None),
            Err(EventError::Malformed(_))
        ));
        assert!(matches!(
            classify(b"[]", None),
            Err(EventError::Malformed(_))
        ));
        // No type at all.
        assert!(matches!(
            classify(br#"{"challenge":"x"}"#, None),
            Err(EventError::Malformed(_))
        ));
        // url_verification without its challenge.
        assert!(matches!(
            classify(br#"{"type":"url_verification"}"#, None),
            Err(EventError::Malformed(_))
        ));
        // event_callback without event_id.
        let mut v: serde_json::Value = serde_json::from_str(APP_MENTION).expect("json");
        v.as_object_mut().expect("obj").remove("event_id");
        assert!(matches!(
            classify(v.to_string().as_bytes(), None),
            Err(EventError::Malformed(_))
        ));
        // A field of the wrong type.
        let body = with_event(APP_MENTION, json!({"text": 5}));
        assert!(matches!(
            classify(&body, None),
            Err(EventError::Malformed(_))
        ));
    }

    #[test]
    fn missing_required_message_fields_are_errors() {
        assert_eq!(
            classify(&with_event(APP_MENTION, json!({"type": null})), None),
            Err(EventError::MissingField("event.type"))
        );
        for (field, name) in [
            ("user", "event.user"),
            ("channel", "event.channel"),
            ("ts", "event.ts"),
        ] {
            let body = with_event(APP_MENTION, json!({ field: null }));
            assert_eq!(
                classify(&body, Some(BOT)),
                Err(EventError::MissingField(name))
            );
        }
    }

    #[test]
    fn missing_text_is_empty() {
        let body = with_event(MESSAGE_IM, json!({"text": null}));
        let Ok(Inbound::Message(m)) = classify(&body, Some(BOT)) else {
            panic!("expected a message");
        };
        assert_eq!(m.text, "");
    }

    #[test]
    fn strip_leading_mention_cases() {
        let cases = [
            ("<@U0LAN0Z89> hi", Some(BOT), "hi"),
            ("  <@U0LAN0Z89|baton>   hi there ", Some(BOT), "hi there"),
            ("<@U0LAN0Z89>", Some(BOT), ""),
            ("<@UOTHER> hi", Some(BOT), "<@UOTHER> hi"),
            ("hi <@U0LAN0Z89>", Some(BOT), "hi <@U0LAN0Z89>"),
            ("<@UOTHER> hi", None, "hi"),
            ("<@broken hi", Some(BOT), "<@broken hi"),
            ("<!here> hi", None, "<!here> hi"),
            ("", None, ""),
        ];
        for (input, bot, want) in cases {
            assert_eq!(strip_leading_mention(input, bot), want, "{input:?}");
        }
    }

    #[test]
    fn envelope_round_trips() {
        let env: Envelope = serde_json::from_str(APP_MENTION).expect("parse");
        let Envelope::EventCallback(cb) = &env else {
            panic!("expected event_callback");
        };
        assert_eq!(cb.event_time, 1515449522);
        assert_eq!(cb.authorizations.as_ref().map(Vec::len), Some(1));
        let again: Envelope =
            serde_json::from_value(serde_json::to_value(&env).expect("ser")).expect("de");
        assert_eq!(again, env);
    }
}
