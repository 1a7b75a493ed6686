//! Slack interactivity requests (button clicks and the like).
//!
//! Slack POSTs `application/x-www-form-urlencoded` with a single `payload`
//! field holding JSON. Baton handles `block_actions` (its approve/deny and
//! cancel buttons, and the feedback buttons under answers, whose click
//! carries the pressed button's `value` like a button's); other payload types are reported as unsupported so the
//! caller can still answer 200.

use serde::{Deserialize, Serialize};

/// One click on an interactive Block Kit element.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct BlockAction {
    /// Who clicked.
    pub user_id: String,
    /// Workspace.
    pub team_id: String,
    /// Channel of the message holding the element, when it is in a message.
    pub channel: Option<String>,
    /// ts of the message holding the element.
    pub message_ts: Option<String>,
    /// Thread the message is in, if any.
    pub thread_ts: Option<String>,
    /// The element's `action_id` (e.g. `approve`).
    pub action_id: String,
    /// The element's `block_id`.
    pub block_id: Option<String>,
    /// The element's `value` (buttons) or selected option's value (menus).
    pub value: Option<String>,
    /// URL to post a response to (valid 30 minutes, 5 uses).
    pub response_url: Option<String>,
    /// For opening a modal (valid 3 seconds).
    pub trigger_id: Option<String>,
    /// When the click happened (Slack's `action_ts`), to order clicks.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub action_ts: Option<String>,
}

/// A parsed interactivity request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Interaction {
    /// A `block_actions` payload; Slack sends one action per click. Boxed
    /// to keep the enum small.
    BlockAction(Box<BlockAction>),
    /// Any other payload type (`view_submission`, `shortcut`, ...).
    Unsupported {
        /// The payload's `type`.
        payload_type: String,
    },
}

/// A body that is not a valid interactivity request; answer 400.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum InteractivityError {
    /// Not form-encoded, or no `payload` field.
    #[error("interactivity request has no `payload` form field")]
    MissingPayload,
    /// `payload` is not the JSON Slack sends.
    #[error("malformed interactivity payload: {0}")]
    Malformed(String),
    /// A `block_actions` payload without any action.
    #[error("block_actions payload has no actions")]
    NoActions,
}

#[derive(Deserialize)]
struct TypeOnly {
    #[serde(rename = "type")]
    payload_type: String,
}

#[derive(Deserialize)]
struct RawBlockActions {
    user: RawUser,
    #[serde(default)]
    team: Option<RawTeam>,
    #[serde(default)]
    container: Option<RawContainer>,
    #[serde(default)]
    channel: Option<RawId>,
    #[serde(default)]
    message: Option<RawMessage>,
    #[serde(default)]
    response_url: Option<String>,
    #[serde(default)]
    trigger_id: Option<String>,
    #[serde(default)]
    actions: Vec<RawAction>,
}

#[derive(Deserialize)]
struct RawUser {
    id: String,
    #[serde(default)]
    team_id: Option<String>,
}

#[derive(Deserialize)]
struct RawTeam {
    id: String,
}

#[derive(Deserialize)]
struct RawId {
    id: String,
}

#[derive(Deserialize)]
struct RawContainer {
    #[serde(default)]
    message_ts: Option<String>,
    #[serde(default)]
    channel_id: Option<String>,
    #[serde(default)]
    thread_ts: Option<String>,
}

#[derive(Deserialize)]
struct RawMessage {
    #[serde(default)]
    ts: Option<String>,
    #[serde(default)]
    thread_ts: Option<String>,
}

#[derive(Deserialize)]
struct RawAction {
    action_id: String,
    #[serde(default)]
    block_id: Option<String>,
    #[serde(default)]
    value: Option<String>,
    #[serde(default)]
    selected_option: Option<RawOption>,
    #[serde(default)]
    action_ts: Option<String>,
}

#[derive(Deserialize)]
struct RawOption {
    #[serde(default)]
    value: Option<String>,
}

/// Parses the raw (already verified) form body of an interactivity request.
pub fn parse(body: &[u8]) -> Result<Interaction, InteractivityError> {
    let fields: Vec<(String, String)> =
        serde_urlencoded::from_bytes(body).map_err(|_| InteractivityError::MissingPayload)?;
    let payload = fields
        .into_iter()
        .find(|(k, _)| k == "payload")
        .map(|(_, v)| v)
        .ok_or(InteractivityError::MissingPayload)?;
    parse_payload(&payload)
}

/// Parses the JSON of the `payload` field.
pub fn parse_payload(json: &str) -> Result<Interaction, InteractivityError> {
    let TypeOnly { payload_type } =
        serde_json::from_str(json).map_err(|e| InteractivityError::Malformed(e.to_string()))?;
    if payload_type != "block_actions" {
        return Ok(Interaction::Unsupported { payload_type });
    }
    let raw: RawBlockActions =
        serde_json::from_str(json).map_err(|e| InteractivityError::Malformed(e.to_string()))?;
    let action = raw
        .actions
        .into_iter()
        .next()
        .ok_or(InteractivityError::NoActions)?;
    let team_id = raw
        .team
        .map(|t| t.id)
        .or(raw.user.team_id)
        .ok_or_else(|| InteractivityError::Malformed("missing team id".into()))?;
    let container = raw.container.unwrap_or(RawContainer {
        message_ts: None,
        channel_id: None,
        thread_ts: None,
    });
    let (msg_ts, msg_thread) = match raw.message {
        Some(m) => (m.ts, m.thread_ts),
        None => (None, None),
    };
    Ok(Interaction::BlockAction(Box::new(BlockAction {
        user_id: raw.user.id,
        team_id,
        channel: raw.channel.map(|c| c.id).or(container.channel_id),
        message_ts: container.message_ts.or(msg_ts),
        thread_ts: container.thread_ts.or(msg_thread),
        action_id: action.action_id,
        block_id: action.block_id,
        value: action
            .value
            .or_else(|| action.selected_option.and_then(|o| o.value)),
        response_url: raw.response_url,
        trigger_id: raw.trigger_id,
        action_ts: action.action_ts,
    })))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    const BLOCK_ACTIONS: &str = include_str!("../../../events/slack_block_actions.json");

    fn form(payload: &str) -> Vec<u8> {
        serde_urlencoded::to_string([("payload", payload)])
            .expect("encode")
            .into_bytes()
    }

    #[test]
    fn block_actions_fixture_parses() {
        let got = parse(&form(BLOCK_ACTIONS));
        assert_eq!(
            got,
            Ok(Interaction::BlockAction(Box::new(BlockAction {
                user_id: "U061F7AUR".into(),
                team_id: "T061EG9R6".into(),
                channel: Some("C0LAN2Q65".into()),
                message_ts: Some("1700000300.000400".into()),
                thread_ts: Some("1515449522.000016".into()),
                action_id: "approve".into(),
                block_id: Some("approval-actions".into()),
                value: Some("01HZX3T9K6Q0Y2J7W5V8N4M1PB:apr_01HZX3V0A1".into()),
                response_url: Some(
                    "https://hooks.slack.com/actions/T061EG9R6/6131645371313/Yk3W0q1JvR7d2sF9hT4uLm8c"
                        .into()
                ),
                trigger_id: Some(
                    "6131645371313.6018497463.3b4f1c7c1c8f3b0d6c2b7a1e9f0d2c3b".into()
                ),
                action_ts: Some("1700000321.123456".into()),
            })))
        );
    }

    #[test]
    fn other_form_fields_are_tolerated() {
        let mut body = b"foo=bar&".to_vec();
        body.extend(form(BLOCK_ACTIONS));
        assert!(matches!(parse(&body), Ok(Interaction::BlockAction(_))));
    }

    #[test]
    fn select_menus_report_the_selected_value() {
        let p = json!({
            "type": "block_actions",
            "user": {"id": "U1", "team_id": "T1"},
            "actions": [{"action_id": "pick", "type": "static_select",
                         "selected_option": {"value": "opt-2", "text": {"type": "plain_text", "text": "Two"}}}]
        });
        let Ok(Interaction::BlockAction(a)) = parse(&form(&p.to_string())) else {
            panic!("expected a block action");
        };
        assert_eq!(a.value.as_deref(), Some("opt-2"));
        assert_eq!(a.team_id, "T1");
        assert_eq!(a.channel, None);
    }

    #[test]
    fn other_payload_types_are_unsupported() {
        let p = json!({"type": "view_submission", "user": {"id": "U1"}, "view": {}});
        assert_eq!(
            parse(&form(&p.to_string())),
            Ok(Interaction::Unsupported {
                payload_type: "view_submission".into()
            })
        );
    }

    #[test]
    fn bad_bodies_are_errors() {
        assert_eq!(parse(b""), Err(InteractivityError::MissingPayload));
        assert_eq!(parse(b"token=abc"), Err(InteractivityError::MissingPayload));
        assert!(matches!(
            parse(&form("{not json")),
            Err(InteractivityError::Malformed(_))
        ));
        assert!(matches!(
            parse(&form(r#"{"no_type": 1}"#)),
            Err(InteractivityError::Malformed(_))
        ));
        // block_actions without a user.
        assert!(matches!(
            parse(&form(r#"{"type": "block_actions", "actions": []}"#)),
            Err(InteractivityError::Malformed(_))
        ));
        let no_actions = json!({"type": "block_actions", "user": {"id": "U1"},
                                "team": {"id": "T1"}, "actions": []});
        assert_eq!(
            parse(&form(&no_actions.to_string())),
            Err(InteractivityError::NoActions)
        );
    }
}
