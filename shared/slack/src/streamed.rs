//! A task's answer streamed into its thread ([`baton_core::ReplySink`]'s
//! `stream_*` methods, for [`crate::replies::SlackReplies`]): opened with
//! `chat.startStream`, grown with `chat.appendStream`, and — once Slack has
//! closed the stream, or in a later segment — replaced with `chat.update`.
//! The finished answer replaces whatever streamed, so the message ends with
//! exactly the committed answer, however often it was retried.

use crate::stream::{Recipient, StreamEnd};
use crate::web::{SlackClient, SlackError};
use baton_core::{Appended, Origin, ReplyError, StreamedMessage, Task};
use serde_json::Value;

fn failed(e: SlackError) -> ReplyError {
    ReplyError(e.to_string())
}

/// Whether `task`'s answer can stream: a conversation's Slack thread to
/// stream into. Children answer their parent, and scheduled firings (no
/// conversation) post whole, so a heartbeat finding held back as a repeat
/// never shows.
pub(crate) fn streams(task: &Task) -> bool {
    matches!(&task.origin, Origin::Slack { thread_ts, .. } if !thread_ts.is_empty())
        && task.parent.is_none()
        && task.thread.is_some()
}

/// Opens the streaming message in the task's thread, showing `text`.
pub(crate) async fn open(
    client: &SlackClient,
    task: &Task,
    text: &str,
) -> Result<StreamedMessage, ReplyError> {
    let Origin::Slack {
        team_id,
        channel,
        thread_ts,
        user,
        ..
    } = &task.origin
    else {
        return Err(ReplyError("not a Slack task".to_owned()));
    };
    // Slack wants the recipient in channels; in DMs it is the same person.
    let recipient = (!user.is_empty()).then(|| Recipient {
        user_id: user.clone(),
        team_id: team_id.clone(),
    });
    let ts = client
        .start_stream(channel, thread_ts, recipient.as_ref(), Some(text))
        .await
        .map_err(failed)?;
    Ok(StreamedMessage {
        channel: channel.clone(),
        ts,
    })
}

/// Appends `text`; a stream Slack has closed is [`Appended::Closed`].
pub(crate) async fn append(
    client: &SlackClient,
    message: &StreamedMessage,
    text: &str,
) -> Result<Appended, ReplyError> {
    match client
        .append_stream(&message.channel, &message.ts, text)
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
        let m = open(&client, &t, "Hel").await.unwrap();
        assert_eq!(append(&client, &m, "lo").await.unwrap(), Appended::Added);
        fake.set_stream_expiry(Duration::from_millis(1));
        tokio::time::sleep(Duration::from_millis(20)).await;
        assert_eq!(append(&client, &m, "!").await.unwrap(), Appended::Closed);
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
}
