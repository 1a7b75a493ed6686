//! A thread's earlier messages (`conversations.replies`): the Slack
//! implementation of the thread-history port (`baton_core::ThreadHistory`),
//! read when a task is mentioned in a thread it has not read.

use crate::web::{ApiErrorKind, SlackClient, SlackError};
use async_trait::async_trait;
use baton_core::thread::ts_order;
use baton_core::{EarlierMessage, HistoryError, Origin, Task, ThreadHistory, UnreadThread};
use serde_json::Value;
use std::collections::VecDeque;
use std::sync::Mutex;

/// Messages asked for per page (Slack's most is 1000; it suggests 200).
const PAGE: &str = "200";
/// The most pages read: a thread longer than this many pages is read
/// from its start up to here, and its newest messages kept of those.
const MAX_PAGES: usize = 10;

/// Reads threads with the bot's token, leaving out the bot's own messages
/// (its earlier answers are in the conversation already).
pub struct SlackThreads {
    client: SlackClient,
    bot_id: Mutex<Option<String>>,
}

impl SlackThreads {
    pub fn new(client: SlackClient) -> Self {
        SlackThreads {
            client,
            bot_id: Mutex::new(None),
        }
    }
}

#[async_trait]
impl ThreadHistory for SlackThreads {
    async fn earlier(
        &self,
        task: &Task,
        unread: &UnreadThread,
        limit: usize,
    ) -> Result<Vec<EarlierMessage>, HistoryError> {
        let Origin::Slack {
            channel, thread_ts, ..
        } = &task.source.origin
        else {
            return Ok(Vec::new());
        };
        let Some(before) = task.conversation.message_ts.as_deref() else {
            return Ok(Vec::new());
        };
        if limit == 0 || thread_ts.is_empty() {
            return Ok(Vec::new());
        }
        let bot = crate::streamed::bot_id(&self.client, &self.bot_id).await;
        let mut kept: VecDeque<EarlierMessage> = VecDeque::with_capacity(limit);
        let mut cursor = String::new();
        for _ in 0..MAX_PAGES {
            let mut fields = vec![
                ("channel", channel.as_str()),
                ("ts", thread_ts.as_str()),
                ("latest", before),
                ("limit", PAGE),
            ];
            if let Some(after) = unread.after.as_deref() {
                fields.push(("oldest", after));
            }
            if !cursor.is_empty() {
                fields.push(("cursor", cursor.as_str()));
            }
            let answer = self
                .client
                .call_form("conversations.replies", &fields)
                .await
                .map_err(history_error)?;
            let messages = answer.get("messages").and_then(Value::as_array);
            for m in messages.into_iter().flatten() {
                let Some(message) = earlier_message(m, bot.as_deref()) else {
                    continue;
                };
                // Slack returns the thread's parent whatever the bounds:
                // the bounds are applied here, exclusive at both ends.
                let newer = unread
                    .after
                    .as_deref()
                    .is_none_or(|a| ts_order(&message.ts, a).is_gt());
                if !(newer && ts_order(&message.ts, before).is_lt()) {
                    continue;
                }
                if kept.iter().any(|k| k.ts == message.ts) {
                    continue;
                }
                if kept.len() == limit {
                    kept.pop_front();
                }
                kept.push_back(message);
            }
            cursor = answer["response_metadata"]["next_cursor"]
                .as_str()
                .unwrap_or_default()
                .to_owned();
            if cursor.is_empty() {
                break;
            }
        }
        let mut kept: Vec<EarlierMessage> = kept.into();
        kept.sort_by(|a, b| ts_order(&a.ts, &b.ts));
        Ok(kept)
    }
}

/// What a refusal means: for good (scopes, membership) or for now.
fn history_error(e: SlackError) -> HistoryError {
    match &e {
        SlackError::Api {
            kind: ApiErrorKind::App | ApiErrorKind::Conversation,
            ..
        } => HistoryError::Refused(e.to_string()),
        _ => HistoryError::Failed(e.to_string()),
    }
}

/// One message of a `conversations.replies` answer, unless it is the
/// bot's own or says nothing (a join, a deleted message).
fn earlier_message(m: &Value, bot: Option<&str>) -> Option<EarlierMessage> {
    let text = |k: &str| m.get(k).and_then(Value::as_str).filter(|s| !s.is_empty());
    let ts = text("ts")?.to_owned();
    if bot.is_some_and(|b| text("bot_id") == Some(b)) {
        return None;
    }
    // Joins, topic changes, ...: not discussion. A file share and a bot's
    // message are.
    if text("subtype")
        .is_some_and(|s| !matches!(s, "file_share" | "bot_message" | "thread_broadcast"))
    {
        return None;
    }
    let files: Vec<String> = m
        .get("files")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(|f| {
            f.get("name")
                .or_else(|| f.get("title"))
                .and_then(Value::as_str)
                .map(str::to_owned)
        })
        .collect();
    let body = text("text").unwrap_or_default().to_owned();
    if body.trim().is_empty() && files.is_empty() {
        return None;
    }
    Some(EarlierMessage {
        ts,
        user: text("user").map(str::to_owned),
        name: text("username").map(str::to_owned),
        text: body,
        files,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::FakeSlack;
    use baton_core::{Limits, TaskId};

    fn task_at(ts: &str) -> Task {
        let mut t = Task::new(
            TaskId::generate(),
            "default",
            Origin::Slack {
                team_id: "T1".into(),
                channel: "C1".into(),
                thread_ts: "100.000001".into(),
                user: "U1".into(),
                channel_type: None,
            },
            None,
            Limits::default(),
            baton_core::Instant::now(),
        );
        t.conversation.message_ts = Some(ts.into());
        t
    }

    #[tokio::test]
    async fn the_newest_earlier_messages_are_kept_without_the_bots_own() {
        let fake = FakeSlack::start().await;
        fake.add_thread_message("C1", "100.000001", "100.000001", "U1", "the parent", &[]);
        fake.add_thread_message(
            "C1",
            "100.000001",
            "101.000000",
            "U2",
            "first",
            &["plan.pdf"],
        );
        fake.add_bot_thread_message("C1", "100.000001", "102.000000", "Baton's earlier answer");
        fake.add_thread_message("C1", "100.000001", "103.000000", "U3", "second", &[]);
        fake.add_thread_message("C1", "100.000001", "104.000000", "U1", "the mention", &[]);
        fake.add_thread_message("C1", "100.000001", "105.000000", "U2", "after it", &[]);
        let threads = SlackThreads::new(fake.client());
        let task = task_at("104.000000");
        let all = threads
            .earlier(&task, &UnreadThread { after: None }, 10)
            .await
            .expect("read");
        let texts: Vec<&str> = all.iter().map(|m| m.text.as_str()).collect();
        assert_eq!(texts, ["the parent", "first", "second"]);
        assert_eq!(all[1].files, ["plan.pdf"]);
        assert_eq!(all[1].user.as_deref(), Some("U2"));
        // The newest two only; and nothing the conversation took in before.
        let two = threads
            .earlier(&task, &UnreadThread { after: None }, 2)
            .await
            .expect("read");
        assert_eq!(
            two.iter().map(|m| m.text.as_str()).collect::<Vec<_>>(),
            ["first", "second"]
        );
        let after = UnreadThread {
            after: Some("101.000000".into()),
        };
        let newer = threads.earlier(&task, &after, 10).await.expect("read");
        assert_eq!(
            newer.iter().map(|m| m.text.as_str()).collect::<Vec<_>>(),
            ["second"]
        );
    }

    #[tokio::test]
    async fn refusals_are_told_apart_from_failures() {
        let fake = FakeSlack::start().await;
        let threads = SlackThreads::new(
            fake.client()
                .with_retry_policy(0, std::time::Duration::ZERO),
        );
        let task = task_at("104.000000");
        fake.fail_next("conversations.replies", "missing_scope");
        let e = threads
            .earlier(&task, &UnreadThread { after: None }, 5)
            .await;
        assert!(matches!(e, Err(HistoryError::Refused(_))), "{e:?}");
        fake.fail_next("conversations.replies", "internal_error");
        let e = threads
            .earlier(&task, &UnreadThread { after: None }, 5)
            .await;
        assert!(matches!(e, Err(HistoryError::Failed(_))), "{e:?}");
    }
}
