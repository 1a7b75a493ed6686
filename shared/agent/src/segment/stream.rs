//! Streaming an answer as the model writes it: into the conversation's
//! message (Slack's `chat.startStream`, through the reply port) and, for
//! HTTP clients, as `answer_delta` events. Both in chunks, so a fast model
//! makes a few writes a second, not one per token.
//!
//! The committed `assistant_message` stays the answer: when the task
//! delivers it, the message is replaced by exactly its text. What streams
//! before is a view of work in progress, so:
//!
//! - the message is recorded on the task ([`AnswerStream`]) before any
//!   text goes to it, and later steps, segments and retries write into
//!   that same message;
//! - a segment that did not open the message (a hand-over, a crash) does
//!   not know what it shows, and replaces its text instead of appending;
//! - a stream Slack has closed (after some minutes) is updated in place;
//! - a failure to stream is logged and never fails the task: the answer is
//!   still delivered whole at the end.

use super::Segment;
use crate::error::WorkerError;
use crate::model_choice::{Answer, ModelsFailed};
use baton_core::{
    AnswerStream, Appended, CompletionRequest, DeltaSink, EntryKind, Origin, StreamedMessage,
};
use std::time::{Duration, Instant};
use tokio::sync::mpsc;

/// A chunk goes out once it holds this many characters…
pub(crate) const CHUNK_CHARS: usize = 300;
/// …or once this long has passed since the last one.
pub(crate) const CHUNK_WAIT: Duration = Duration::from_secs(1);
/// Replacing a message's whole text is heavier on Slack's rate limits than
/// appending: at most this often.
const REPLACE_EVERY: Duration = Duration::from_secs(1);

/// What the model wrote, as the provider reports it.
pub(super) enum Delta {
    Text(String),
    /// The call is retried from scratch.
    Restart,
}

/// The provider's side of the channel the segment reads deltas from
/// while it awaits the call.
pub(super) struct ChannelSink(pub(super) mpsc::UnboundedSender<Delta>);

impl DeltaSink for ChannelSink {
    fn text(&self, delta: &str) {
        // The segment stopped listening (it gave up on the call): nothing
        // to tell.
        let _ = self.0.send(Delta::Text(delta.to_owned()));
    }

    fn restart(&self) {
        let _ = self.0.send(Delta::Restart);
    }
}

/// Text waiting to go out, and when the last chunk went.
#[derive(Debug)]
pub(crate) struct Chunker {
    pending: String,
    last: Instant,
}

impl Chunker {
    pub(crate) fn new(now: Instant) -> Self {
        Chunker {
            pending: String::new(),
            last: now,
        }
    }

    pub(crate) fn push(&mut self, text: &str) {
        self.pending.push_str(text);
    }

    /// Whether a chunk should go out now.
    pub(crate) fn due(&self, now: Instant) -> bool {
        !self.pending.is_empty()
            && (self.pending.chars().count() >= CHUNK_CHARS
                || now.duration_since(self.last) >= CHUNK_WAIT)
    }

    /// When the pending text falls due by time, if there is any.
    pub(crate) fn deadline(&self) -> Option<Instant> {
        (!self.pending.is_empty()).then(|| self.last + CHUNK_WAIT)
    }

    /// The pending text, as one chunk.
    pub(crate) fn take(&mut self, now: Instant) -> String {
        self.last = now;
        std::mem::take(&mut self.pending)
    }

    /// Forgets the pending text (the call restarted).
    pub(crate) fn clear(&mut self) {
        self.pending.clear();
    }
}

/// How this segment writes into the task's streamed message.
#[derive(Debug, Default)]
pub(super) struct ChatStream {
    /// The message, once this segment knows it.
    message: Option<StreamedMessage>,
    /// Appending works while the stream is open and this segment knows all
    /// the message shows; otherwise the whole text is replaced.
    appending: bool,
    /// What the message shows, as far as this segment wrote it.
    shown: String,
    /// `shown`'s length before the current step's text.
    step_start: usize,
    last_replace: Option<Instant>,
    /// Streaming into the chat failed: the answer is delivered whole.
    broken: bool,
}

/// One model call's streaming: where its text goes.
pub(super) struct CallStream {
    step: u32,
    chunker: Chunker,
    to_chat: bool,
    to_events: bool,
    restart: bool,
    first_chunk: bool,
    /// This call's text since its last restart.
    text: String,
}

impl CallStream {
    pub(super) fn push(&mut self, delta: Delta) {
        match delta {
            Delta::Text(t) => {
                self.chunker.push(&t);
                self.text.push_str(&t);
            }
            Delta::Restart => {
                self.chunker.clear();
                self.text.clear();
                self.restart = true;
            }
        }
    }

    pub(super) fn due(&self) -> bool {
        self.chunker.due(Instant::now()) || (self.restart && self.to_events)
    }

    pub(super) fn deadline(&self) -> Option<Instant> {
        self.chunker.deadline()
    }
}

impl Segment<'_> {
    /// Asks the step's models (with their fallbacks) within `window`,
    /// streaming the answer's text as it comes when the task streams.
    /// `Err(Elapsed)` inside: the call outlasted the window.
    pub(super) async fn ask_model(
        &mut self,
        request: &CompletionRequest,
        window: Duration,
    ) -> Result<Result<Result<Answer, ModelsFailed>, tokio::time::error::Elapsed>, WorkerError>
    {
        // Decided up front: the call borrows nothing of the segment, which
        // writes (chunks, events) while it runs.
        let choice = crate::model_choice::Choice::for_task(
            self.agent,
            self.task.model.as_deref(),
            &self.transcript,
        );
        let llm = self.deps.llm.clone();
        let Some(mut call_stream) = self.call_stream() else {
            let call = choice.ask(llm.as_ref(), request, None);
            return Ok(tokio::time::timeout(window, call).await);
        };
        let (tx, mut rx) = mpsc::unbounded_channel();
        let sink = ChannelSink(tx);
        let call = tokio::time::timeout(window, choice.ask(llm.as_ref(), request, Some(&sink)));
        tokio::pin!(call);
        let result = loop {
            let deadline = call_stream.deadline().map(tokio::time::Instant::from_std);
            tokio::select! {
                result = &mut call => break result,
                Some(delta) = rx.recv() => {
                    call_stream.push(delta);
                    if call_stream.due() {
                        self.flush_stream(&mut call_stream, false).await?;
                    }
                }
                _ = sleep_until(deadline), if deadline.is_some() => {
                    self.flush_stream(&mut call_stream, false).await?;
                }
            }
        };
        // What the provider sent before it returned.
        while let Ok(delta) = rx.try_recv() {
            call_stream.push(delta);
        }
        if result.as_ref().is_ok_and(|r| r.is_ok()) {
            self.flush_stream(&mut call_stream, true).await?;
        }
        Ok(result)
    }

    /// Whether this call's answer streams, and where: `None` when it does
    /// not at all (the agent turned streaming off, or nobody follows).
    pub(super) fn call_stream(&mut self) -> Option<CallStream> {
        if !self.agent.stream {
            return None;
        }
        let to_chat = !self.stream.broken && self.deps.replies.streams_for(&self.task);
        let to_events = matches!(self.task.source.origin, Origin::Http);
        (to_chat || to_events).then(|| {
            // A new step's text follows the last step's in the message.
            self.stream.step_start = self.stream.shown.len();
            CallStream {
                step: self.task.budget.steps + 1,
                chunker: Chunker::new(Instant::now()),
                to_chat,
                to_events,
                restart: false,
                first_chunk: true,
                text: String::new(),
            }
        })
    }

    /// Sends the call's pending text on: a chunk into the chat message, an
    /// `answer_delta` event. Chat failures are logged and end streaming for
    /// the segment; a store failure is the segment's. Text that may yet be
    /// `NO_REPLY` (or `HEARTBEAT_OK`) waits until the call is `last`, and
    /// then never goes to the chat: a silent answer shows nothing.
    pub(super) async fn flush_stream(
        &mut self,
        call: &mut CallStream,
        last: bool,
    ) -> Result<(), WorkerError> {
        let silent = call.to_chat && could_be_silent(&call.text);
        if silent && !last {
            return Ok(());
        }
        let restart = std::mem::take(&mut call.restart);
        let text = call.chunker.take(Instant::now());
        if text.is_empty() && !restart {
            return Ok(());
        }
        if call.to_events {
            let delta = EntryKind::AnswerDelta {
                step: call.step,
                text: text.clone(),
                restart,
            };
            self.commit(|_| Some(vec![delta.clone()])).await?;
        }
        if call.to_chat && !self.stream.broken && !silent {
            let separate = std::mem::take(&mut call.first_chunk) && self.stream.step_start > 0;
            if let Err(e) = self.chat_chunk(&text, restart, separate).await {
                if let WorkerError::Reply(e) = &e {
                    tracing::warn!(task_id = %self.task.id, error = %e, "streaming the answer failed; it is posted whole at the end");
                    self.stream.broken = true;
                } else {
                    return Err(e);
                }
            }
        }
        Ok(())
    }

    /// One chunk into the chat message, opening (and recording) the
    /// message first when there is none.
    async fn chat_chunk(
        &mut self,
        text: &str,
        restart: bool,
        separate: bool,
    ) -> Result<(), WorkerError> {
        if restart {
            // Appended text cannot be taken back: show the step afresh.
            self.stream.shown.truncate(self.stream.step_start);
            self.stream.appending = false;
        }
        if text.is_empty() {
            return Ok(());
        }
        let Some(message) = self.stream_message(text).await? else {
            // Just opened, showing `text`.
            return Ok(());
        };
        let start = self.stream.shown.len();
        if separate {
            self.stream.shown.push_str("\n\n");
        }
        self.stream.shown.push_str(text);
        if self.stream.appending {
            match self
                .deps
                .replies
                .stream_append(&self.task, &message, &self.stream.shown, start)
                .await?
            {
                Appended::Added => return Ok(()),
                Appended::Closed => self.stream.appending = false,
            }
        }
        let now = Instant::now();
        if self
            .stream
            .last_replace
            .is_some_and(|t| now.duration_since(t) < REPLACE_EVERY)
        {
            return Ok(());
        }
        self.stream.last_replace = Some(now);
        self.deps
            .replies
            .stream_replace(&self.task, &message, &self.stream.shown)
            .await?;
        Ok(())
    }

    /// The task's streamed message: the one this segment knows, the one
    /// recorded on the task (or left unrecorded by a crashed attempt, if
    /// the front end finds it), or — `None` — a new one opened showing
    /// `text`, recorded before and after opening so a crash in between
    /// can be recovered from.
    async fn stream_message(&mut self, text: &str) -> Result<Option<StreamedMessage>, WorkerError> {
        if let Some(m) = &self.stream.message {
            return Ok(Some(m.clone()));
        }
        let recorded = self.task.answer.answer_stream.clone();
        let found = match &recorded {
            Some(AnswerStream {
                message: Some(m), ..
            }) => Some(m.clone()),
            Some(AnswerStream {
                opened_at,
                message: None,
            }) => self.deps.replies.stream_find(&self.task, *opened_at).await,
            None => None,
        };
        if let Some(m) = found {
            if recorded.as_ref().and_then(|r| r.message.as_ref()) != Some(&m) {
                self.record_stream(Some(m.clone())).await?;
            }
            // Written by an earlier segment: its text is unknown here.
            self.stream.message = Some(m.clone());
            self.stream.appending = false;
            return Ok(Some(m));
        }
        self.record_stream(None).await?;
        let m = self.deps.replies.stream_open(&self.task, text).await?;
        self.record_stream(Some(m.clone())).await?;
        self.stream.shown.push_str(text);
        self.stream.message = Some(m);
        self.stream.appending = true;
        Ok(None)
    }

    /// Records the message (or, before opening it, that one is being
    /// opened now).
    async fn record_stream(&mut self, message: Option<StreamedMessage>) -> Result<(), WorkerError> {
        let opened_at = baton_core::Instant::now();
        self.commit(|t| {
            t.answer.answer_stream = Some(AnswerStream {
                opened_at: t
                    .answer
                    .answer_stream
                    .as_ref()
                    .filter(|_| message.is_some())
                    .map_or(opened_at, |s| s.opened_at),
                message: message.clone(),
            });
            Some(Vec::new())
        })
        .await
    }
}

/// Whether an answer beginning with `text` may still turn out to be one
/// that posts nothing ([`crate::sanitize::is_no_reply`]).
fn could_be_silent(text: &str) -> bool {
    let t = text.trim();
    [crate::sanitize::NO_REPLY, "HEARTBEAT_OK"]
        .iter()
        .any(|token| token.starts_with(t))
}

/// Sleeps until `deadline` (never, without one).
async fn sleep_until(deadline: Option<tokio::time::Instant>) {
    match deadline {
        Some(d) => tokio::time::sleep_until(d).await,
        None => std::future::pending().await,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn chunks_go_by_size_or_by_time() {
        let start = Instant::now();
        let mut c = Chunker::new(start);
        assert!(!c.due(start + CHUNK_WAIT * 2), "nothing pending");
        assert_eq!(c.deadline(), None);
        c.push("hello ");
        assert!(!c.due(start), "small and fresh");
        assert_eq!(c.deadline(), Some(start + CHUNK_WAIT));
        assert!(c.due(start + CHUNK_WAIT), "small but old");
        c.push(&"x".repeat(CHUNK_CHARS));
        assert!(c.due(start), "large");
        assert_eq!(c.take(start), format!("hello {}", "x".repeat(CHUNK_CHARS)));
        assert!(!c.due(start + CHUNK_WAIT * 2));
        c.push("a");
        c.clear();
        assert_eq!(c.take(start), "");
    }

    #[test]
    fn silent_answers_are_recognised_while_written() {
        for maybe in ["", "  ", "NO_", "NO_REPLY", "HEART", "HEARTBEAT_OK\n"] {
            assert!(could_be_silent(maybe), "{maybe:?}");
        }
        for not in ["NO_REPLY because", "Hello", "no_reply"] {
            assert!(!could_be_silent(not), "{not:?}");
        }
    }

    #[test]
    fn the_sink_forwards_text_and_restarts() {
        let (tx, mut rx) = mpsc::unbounded_channel();
        let sink = ChannelSink(tx);
        sink.text("é");
        sink.restart();
        assert!(matches!(rx.try_recv(), Ok(Delta::Text(t)) if t == "é"));
        assert!(matches!(rx.try_recv(), Ok(Delta::Restart)));
        drop(rx);
        sink.text("nobody listens; no panic");
    }
}
