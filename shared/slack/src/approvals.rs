//! Approval requests in Slack: a message with Approve / Deny buttons (and
//! "Always in this thread" where the task has a conversation to keep the
//! rule on) in the task's thread, replaced by the decision once taken.

use async_trait::async_trait;
use baton_core::approval::{requester, ApprovalPrompts};
use baton_core::{Approval, Origin, PostKey, PostedMessage, ReplyError, Task, Verdict};
use serde_json::{json, Value};

/// Slack `action_id`s of the buttons.
pub const APPROVE_ACTION: &str = "approve";
pub const DENY_ACTION: &str = "deny";
/// Approves the call and allows its kind for the rest of the conversation.
pub const ALWAYS_ACTION: &str = "always";
/// The third button's label (a contract of issue #26).
pub const ALWAYS_LABEL: &str = "Always in this thread";

/// The summary as it may appear in a Slack message: mrkdwn-escaped and
/// without backticks, inside a code span.
fn slack_code(text: &str) -> String {
    format!("`{}`", crate::mrkdwn::escape(&text.replace('`', "'")))
}

/// Slack: a message with Approve / Deny buttons in the task's thread.
pub struct SlackApprovals {
    client: crate::web::SlackClient,
}

impl SlackApprovals {
    pub fn new(client: crate::web::SlackClient) -> Self {
        SlackApprovals { client }
    }
}

/// The value both buttons carry: which approval of which task.
pub fn button_value(task: &Task, approval: &Approval) -> String {
    format!("{}:{}", task.id, approval.approval_id)
}

/// Splits a button value back into task id and approval id.
pub fn parse_button_value(value: &str) -> Option<(&str, &str)> {
    value
        .split_once(':')
        .filter(|(t, a)| !t.is_empty() && !a.is_empty())
}

fn request_text(task: &Task, a: &Approval) -> String {
    let who = requester(task)
        .map(|u| format!(" Requested by <@{u}>."))
        .unwrap_or_default();
    format!(
        ":raised_hand: *Approval needed* for {}: {}.{who} Expires {}.",
        slack_code(&a.tool),
        slack_code(&a.summary),
        a.expires_at
    )
}

/// Blocks of the request message: the text and the buttons — Approve,
/// Deny, and "Always in this thread" when the request offers it (the task
/// has a conversation, [`Approval::always`]).
pub fn request_blocks(task: &Task, a: &Approval) -> Value {
    let value = button_value(task, a);
    let mut buttons = vec![
        json!({"type": "button", "action_id": APPROVE_ACTION, "style": "primary",
               "text": {"type": "plain_text", "text": "Approve"}, "value": value}),
        json!({"type": "button", "action_id": DENY_ACTION, "style": "danger",
               "text": {"type": "plain_text", "text": "Deny"}, "value": value}),
    ];
    if a.always.is_some() && task.conversation.thread.is_some() {
        buttons.push(json!({"type": "button", "action_id": ALWAYS_ACTION,
            "text": {"type": "plain_text", "text": ALWAYS_LABEL}, "value": value}));
    }
    json!([
        {"type": "section", "text": {"type": "mrkdwn", "text": request_text(task, a)}},
        {"type": "actions", "block_id": format!("approval:{}", a.approval_id), "elements": buttons}
    ])
}

/// Who decided, as the decided message says it: a person by mention, the
/// HTTP API in words.
fn decided_by(by: Option<&str>) -> String {
    match by {
        None => String::new(),
        Some(baton_core::task::API_DECIDER) => " by the API".to_owned(),
        Some(user) => format!(" by <@{user}>"),
    }
}

/// The text that replaces the request once decided (no buttons left).
pub fn decided_text(a: &Approval) -> String {
    let what = format!("{}: {}", slack_code(&a.tool), slack_code(&a.summary));
    match &a.decision {
        None => format!("Approval pending for {what}"),
        Some(d) => match d.verdict {
            Verdict::Approved => format!(
                ":white_check_mark: Approved{} — {what}",
                decided_by(d.by.as_deref())
            ),
            Verdict::Denied => format!(
                ":no_entry: Denied{} — {what} was not run",
                decided_by(d.by.as_deref())
            ),
            Verdict::Expired => format!(
                ":hourglass: Expired without a decision — {what} was not run (counts as denied)"
            ),
        },
    }
}

#[async_trait]
impl ApprovalPrompts for SlackApprovals {
    async fn ask(
        &self,
        task: &Task,
        approval: &Approval,
        post: &PostKey,
    ) -> Result<Option<PostedMessage>, ReplyError> {
        let Origin::Slack {
            channel, thread_ts, ..
        } = &task.source.origin
        else {
            return Ok(None);
        };
        let ts = self
            .client
            .post_once(
                channel,
                Some(thread_ts.as_str()).filter(|t| !t.is_empty()),
                &request_text(task, approval),
                Some(request_blocks(task, approval)),
                &post.key,
                post.maybe_posted,
            )
            .await
            .map_err(|e| ReplyError(e.to_string()))?;
        Ok(Some(PostedMessage {
            channel: channel.clone(),
            ts,
        }))
    }

    async fn decided(&self, task: &Task, approval: &Approval) -> Result<(), ReplyError> {
        let text = decided_text(approval);
        if let Some(m) = &approval.message {
            let blocks = json!([{"type": "section", "text": {"type": "mrkdwn", "text": text}}]);
            self.client
                .update_message(&m.channel, &m.ts, &text, Some(blocks))
                .await
                .map_err(|e| ReplyError(e.to_string()))?;
        }
        // Expiry happens with nobody watching: say so in the thread too.
        let expired = approval
            .decision
            .as_ref()
            .is_some_and(|d| d.verdict == Verdict::Expired);
        if let (
            true,
            Origin::Slack {
                channel, thread_ts, ..
            },
        ) = (expired, &task.source.origin)
        {
            // Updating the request is safe to repeat; the notice is looked
            // for first, so a retried update does not post it twice.
            let key = format!("{}:{}:expired", task.id, approval.approval_id);
            self.client
                .post_once(
                    channel,
                    Some(thread_ts.as_str()).filter(|t| !t.is_empty()),
                    &text,
                    None,
                    &key,
                    true,
                )
                .await
                .map_err(|e| ReplyError(e.to_string()))?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use baton_core::{Limits, Millis, TaskId};

    fn task_with_approval(expires_at: Millis) -> Task {
        let mut t = Task::new(
            TaskId::generate(),
            "default",
            Origin::Slack {
                team_id: "T1".into(),
                channel: "C1".into(),
                thread_ts: "1.0".into(),
                user: "U1".into(),
                channel_type: None,
            },
            None,
            Limits::default(),
            0,
        );
        t.waits.approvals.push(Approval {
            approval_id: "ap-1-call_1".into(),
            step: 1,
            call_id: "call_1".into(),
            tool: "http_request".into(),
            summary: "POST https://example.com".into(),
            requested_at: baton_core::Instant(0),
            expires_at: baton_core::Instant(expires_at),
            message: None,
            decision: None,
            always: None,
        });
        t
    }

    #[test]
    fn slack_text_cannot_mention_or_link() {
        let mut t = task_with_approval(10_000);
        t.waits.approvals[0].summary = "POST <!channel> <https://evil|ok> `x`".into();
        let text = request_text(&t, &t.waits.approvals[0]);
        assert!(
            !text.contains("<!channel>") && !text.contains("<https"),
            "{text}"
        );
        assert!(text.contains("&lt;!channel&gt;"), "{text}");
    }

    #[test]
    fn buttons_carry_task_and_approval() {
        let t = task_with_approval(10_000);
        let blocks = request_blocks(&t, &t.waits.approvals[0]);
        let buttons = blocks[1]["elements"].as_array().unwrap();
        assert_eq!(buttons[0]["action_id"], APPROVE_ACTION);
        assert_eq!(buttons[1]["action_id"], DENY_ACTION);
        let value = buttons[0]["value"].as_str().unwrap();
        assert_eq!(
            parse_button_value(value),
            Some((t.id.as_str(), "ap-1-call_1"))
        );
        assert_eq!(parse_button_value("garbage"), None);
    }

    #[test]
    fn always_is_offered_only_where_a_rule_can_be_kept() {
        let labels = |t: &Task| -> Vec<String> {
            request_blocks(t, &t.waits.approvals[0])[1]["elements"]
                .as_array()
                .unwrap()
                .iter()
                .map(|b| b["text"]["text"].as_str().unwrap().to_owned())
                .collect()
        };
        let mut t = task_with_approval(10_000);
        assert_eq!(labels(&t), ["Approve", "Deny"]);
        t.waits.approvals[0].always = Some(baton_core::always::Allowed::Http {
            method: "POST".into(),
            host: "example.com".into(),
        });
        // No conversation: no rule to keep, no button.
        assert_eq!(labels(&t), ["Approve", "Deny"]);
        t.conversation.thread = Some("slack:T1:C1:1.0".into());
        assert_eq!(labels(&t), ["Approve", "Deny", "Always in this thread"]);
        let blocks = request_blocks(&t, &t.waits.approvals[0]);
        let always = &blocks[1]["elements"][2];
        assert_eq!(always["action_id"], ALWAYS_ACTION);
        assert_eq!(always["value"], blocks[1]["elements"][0]["value"]);
    }

    #[test]
    fn an_expired_decision_says_so() {
        let mut t = task_with_approval(10_000);
        t.waits.approvals[0].decision = Some(baton_core::Decision {
            verdict: Verdict::Expired,
            by: None,
            at: baton_core::Instant(10_000),
            rule: None,
        });
        assert!(decided_text(&t.waits.approvals[0]).contains("Expired"));
    }
}
