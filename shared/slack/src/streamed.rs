//! A task's answer streamed into its thread ([`baton_core::ReplySink`]'s
//! `stream_*` methods, for [`crate::replies::SlackReplies`]): opened with
//! `chat.startStream`, grown with `chat.appendStream`, and — once Slack has
//! closed the stream, or in a later segment — replaced with `chat.update`.
//! The finished answer replaces whatever streamed, so the message ends with
//! exactly the committed answer, however often it was retried.
//!
//! What streams is the model's Markdown made safe first
//! ([`crate::safe_markdown`]), as a posted answer is escaped mrkdwn: no
//! mention, no special link, whatever the model or a tool result wrote.

use crate::stream::{Chunk, Recipient, StreamEnd};
use crate::web::{ApiErrorKind, SlackClient, SlackError};
use baton_core::{Appended, Instant, Origin, ReplyError, StreamedMessage, Task};
use serde_json::Value;
use std::time::Duration;

fn failed(e: SlackError) -> ReplyError {
    ReplyError(e.to_string())
}

/// Whether `task`'s answer can stream: a conversation's Slack thread to
/// stream into. Children answer their parent, and scheduled firings (no
/// conversation) post whole, so a heartbeat finding held back as a repeat
/// never shows.
pub(crate) fn streams(task: &Task) -> bool {
    matches!(&task.source.origin, Origin::Slack { thread_ts, .. } if !thread_ts.is_empty())
        && task.source.parent.is_none()
        && task.conversation.thread.is_some()
}

/// A stream opened by [`open`], and what became of the plan it was to show.
pub(crate) struct Opened {
    pub message: StreamedMessage,
    pub plan: PlanSent,
}

/// Whether the plan went with a stream's start.
pub(crate) enum PlanSent {
    /// There was none to send.
    None,
    Shown,
    /// Slack refused the start with the plan's chunks (the stream was then
    /// opened without them).
    Refused(SlackError),
}

/// Opens the streaming message in the task's thread, showing `plan`'s
/// chunks (when given) and then `text` (as far as it is decided: see
/// [`crate::safe_markdown::decided`]). A start Slack refuses with the plan
/// is tried again without it: the plan never costs the answer its stream.
pub(crate) async fn open(
    client: &SlackClient,
    task: &Task,
    text: &str,
    plan: Option<Vec<Chunk>>,
) -> Result<Opened, ReplyError> {
    let Origin::Slack {
        team_id,
        channel,
        thread_ts,
        user,
        ..
    } = &task.source.origin
    else {
        return Err(ReplyError("not a Slack task".to_owned()));
    };
    // Slack wants the recipient in channels; in DMs it is the same person.
    let recipient = (!user.is_empty()).then(|| Recipient {
        user_id: user.clone(),
        team_id: team_id.clone(),
    });
    let text = crate::safe_markdown::decided(text);
    let mut sent = PlanSent::None;
    if let Some(mut chunks) = plan.filter(|p| !p.is_empty()) {
        if !text.is_empty() {
            chunks.push(Chunk::MarkdownText { text: text.clone() });
        }
        match client
            .start_stream_chunks(channel, thread_ts, recipient.as_ref(), &chunks)
            .await
        {
            Ok(ts) => {
                return Ok(Opened {
                    message: StreamedMessage {
                        channel: channel.clone(),
                        ts,
                    },
                    plan: PlanSent::Shown,
                })
            }
            // Refused for what it carried (not the thread, not for now).
            Err(
                e @ SlackError::Api {
                    kind: ApiErrorKind::Other,
                    ..
                },
            ) => sent = PlanSent::Refused(e),
            Err(e) => return Err(failed(e)),
        }
    }
    let ts = client
        .start_stream(channel, thread_ts, recipient.as_ref(), Some(&text))
        .await
        .map_err(failed)?;
    Ok(Opened {
        message: StreamedMessage {
            channel: channel.clone(),
            ts,
        },
        plan: sent,
    })
}

/// Appends `shown[from..]` to a message showing `shown[..from]`, made safe
/// in the light of what it continues; a stream Slack has closed is
/// [`Appended::Closed`].
pub(crate) async fn append(
    client: &SlackClient,
    message: &StreamedMessage,
    shown: &str,
    from: usize,
) -> Result<Appended, ReplyError> {
    let added = shown
        .get(..from)
        .and_then(|before| crate::safe_markdown::appended(before, shown));
    let Some(added) = added else {
        // Not a continuation of what was sent (never for a growing text):
        // as if the stream had closed, so the caller replaces the text.
        return Ok(Appended::Closed);
    };
    if added.is_empty() {
        // All of it may yet change meaning (`](htt`): it goes with the
        // next chunk, or the final update.
        return Ok(Appended::Added);
    }
    match client
        .append_stream(&message.channel, &message.ts, &added)
        .await
    {
        Ok(()) => Ok(Appended::Added),
        Err(e) if e.is_not_streaming() => Ok(Appended::Closed),
        Err(e) => Err(failed(e)),
    }
}

/// Ends the stream if it is still open (nothing appended).
async fn stop(
    client: &SlackClient,
    message: &StreamedMessage,
    key: Option<&str>,
) -> Result<(), SlackError> {
    let end = StreamEnd {
        key,
        ..StreamEnd::default()
    };
    match client.stop_stream(&message.channel, &message.ts, end).await {
        Err(e) if !e.is_not_streaming() => Err(e),
        _ => Ok(()),
    }
}

/// Shows exactly `markdown` (converted to mrkdwn) in the message, with
/// `blocks` when given: the stream is stopped first, then the message
/// updated. Safe to repeat.
pub(crate) async fn replace(
    client: &SlackClient,
    message: &StreamedMessage,
    markdown: &str,
    blocks: Option<Value>,
    key: Option<&str>,
) -> Result<(), ReplyError> {
    stop(client, message, key).await.map_err(failed)?;
    let mrkdwn = crate::mrkdwn::from_markdown(markdown);
    client
        .update_message(&message.channel, &message.ts, &mrkdwn, blocks)
        .await
        .map_err(failed)
}

/// This app's bot id (`auth.test`), asked once and kept in `cache`.
pub(crate) async fn bot_id(
    client: &SlackClient,
    cache: &std::sync::Mutex<Option<String>>,
) -> Option<String> {
    if let Some(id) = cache.lock().ok().and_then(|c| c.clone()) {
        return Some(id);
    }
    let answer = match client.call("auth.test", &serde_json::json!({})).await {
        Ok(a) => a,
        Err(e) => {
            tracing::warn!(error = %e, "auth.test failed: a stream opened by a crashed attempt cannot be looked for");
            return None;
        }
    };
    let id = answer.get("bot_id").and_then(Value::as_str)?.to_owned();
    if let Ok(mut c) = cache.lock() {
        *c = Some(id.clone());
    }
    Some(id)
}

/// Slack's message clock skews from ours by at most this much.
const SKEW: Duration = Duration::from_secs(2);

/// The message an attempt that crashed opened after `since` but never
/// recorded: in the task's thread, by this app's bot, without a Baton post
/// key (every finished post carries one), the earliest since then. One
/// task runs on a thread at a time, so no other stream of ours is there.
pub(crate) async fn find(
    client: &SlackClient,
    bot_id: &str,
    task: &Task,
    since: Instant,
) -> Option<StreamedMessage> {
    let Origin::Slack {
        channel, thread_ts, ..
    } = &task.source.origin
    else {
        return None;
    };
    let fields = [
        ("channel", channel.as_str()),
        ("ts", thread_ts.as_str()),
        ("include_all_metadata", "true"),
        ("limit", "200"),
    ];
    let answer = match client.call_form("conversations.replies", &fields).await {
        Ok(a) => a,
        Err(e) => {
            tracing::warn!(task_id = %task.id, error = %e, "could not look for a stream opened by a crashed attempt");
            return None;
        }
    };
    answer
        .get("messages")
        .and_then(Value::as_array)?
        .iter()
        .filter(|m| m["bot_id"] == bot_id && m.get("metadata").is_none_or(Value::is_null))
        .filter_map(|m| m["ts"].as_str())
        .filter(|ts| *ts != thread_ts && ts_at(ts).is_some_and(|at| at >= since - SKEW))
        .min_by_key(|ts| ts_at(ts))
        .map(|ts| StreamedMessage {
            channel: channel.clone(),
            ts: ts.to_owned(),
        })
}

/// When a message was posted, from its ts (`1700000000.000100`), to the
/// millisecond.
fn ts_at(ts: &str) -> Option<Instant> {
    let (secs, frac) = ts.split_once('.')?;
    let secs: i64 = secs.parse().ok()?;
    let millis: i64 = frac.get(..3).unwrap_or("0").parse().ok()?;
    Some(Instant(secs.checked_mul(1000)?.checked_add(millis)?))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::FakeSlack;
    use baton_core::{Limits, TaskId};
    use std::time::Duration;

    fn task() -> Task {
        Task::new(
            TaskId::generate(),
            "default",
            Origin::Slack {
                team_id: "T1".into(),
                channel: "C1".into(),
                thread_ts: "1.1".into(),
                user: "U1".into(),
                channel_type: None,
            },
            Some("slack:T1:C1:1.1".into()),
            Limits::default(),
            0,
        )
    }

    #[tokio::test]
    async fn a_closed_stream_is_replaced_in_place() {
        let fake = FakeSlack::start().await;
        let client = fake.client();
        let t = task();
        let m = open(&client, &t, "Hel", None).await.unwrap().message;
        assert_eq!(
            append(&client, &m, "Hello", 3).await.unwrap(),
            Appended::Added
        );
        fake.set_stream_expiry(Duration::from_millis(1));
        tokio::time::sleep(Duration::from_millis(20)).await;
        assert_eq!(
            append(&client, &m, "Hello!", 5).await.unwrap(),
            Appended::Closed
        );
        replace(&client, &m, "Hello, **world**", None, Some("k"))
            .await
            .unwrap();
        replace(&client, &m, "Hello, **world**", None, Some("k"))
            .await
            .unwrap();
        let posted = fake.posted();
        assert_eq!(posted.len(), 1, "one message: {posted:?}");
        let shown = fake.message("C1", &m.ts).unwrap();
        assert_eq!(shown.text, "Hello, *world*");
        assert!(streams(&t));
    }

    /// What the model wrote reaches Slack as text, chunk by chunk: no
    /// mention, no special link, even with a chunk ending inside one.
    #[tokio::test]
    async fn streamed_text_is_made_safe_across_chunks() {
        let fake = FakeSlack::start().await;
        let client = fake.client();
        let t = task();
        let answer = "Tell <!everyone>: see [x](!here:x), [docs](https://a.io) and \\<@U1>.";
        let cuts = [4, 7, 26, 27, 29, 42, 44, 60, answer.len()];
        let m = open(&client, &t, &answer[..cuts[0]], None)
            .await
            .unwrap()
            .message;
        for pair in cuts.windows(2) {
            let shown = &answer[..pair[1]];
            assert_eq!(
                append(&client, &m, shown, pair[0]).await.unwrap(),
                Appended::Added
            );
        }
        let streamed: String = ["chat.startStream", "chat.appendStream"]
            .iter()
            .flat_map(|method| fake.calls(method))
            .filter_map(|c| c["markdown_text"].as_str().map(str::to_owned))
            .collect();
        assert_eq!(
            streamed,
            "Tell &lt;!everyone>: see [x\\](!here:x), [docs](https://a.io) and &lt;@U1>."
        );
        assert_eq!(streamed, crate::safe_markdown::escape(answer));
        assert_eq!(fake.message("C1", &m.ts).unwrap().text, streamed);
    }

    #[tokio::test]
    async fn an_unrecorded_stream_is_found_by_its_bot_and_time() {
        let fake = FakeSlack::start().await;
        let client = fake.client();
        let t = task();
        let cache = std::sync::Mutex::new(None);
        let bot = bot_id(&client, &cache).await.unwrap();
        let before = Instant::now();
        // A finished post of ours (keyed) is not it.
        client
            .post_message_keyed("C1", Some("1.1"), "earlier", None, "k0")
            .await
            .unwrap();
        assert_eq!(find(&client, &bot, &t, before).await, None);
        let m = open(&client, &t, "partial", None).await.unwrap().message;
        assert_eq!(find(&client, &bot, &t, before).await, Some(m));
        // Opened before the attempt began: not it.
        assert_eq!(
            find(&client, &bot, &t, before + Duration::from_secs(60)).await,
            None
        );
        assert_eq!(find(&client, "B0OTHER", &t, before).await, None);
        assert_eq!(ts_at("1700000000.123456"), Some(Instant(1_700_000_000_123)));
        assert_eq!(ts_at("nonsense"), None);
    }
}
