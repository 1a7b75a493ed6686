//! Server-sent events (the `text/event-stream` format the OpenAI and
//! Anthropic APIs stream in), parsed incrementally from a body that
//! arrives in arbitrary pieces: a line, a UTF-8 character or a `\r\n` may
//! be split across TCP reads.
//!
//! Follows the WHATWG rules the APIs rely on: lines end with `\n`, `\r\n`
//! or `\r`; `field: value` (one space after the colon dropped); lines
//! starting with `:` are comments (keep-alives); several `data:` lines
//! join with `\n`; a blank line dispatches the event, unless it has no
//! data. `id:` and `retry:` are ignored: a dropped stream is retried from
//! scratch, never resumed.

use crate::http::{self, Chunks};
use crate::secret::Secret;
use baton_core::{Completion, DeltaSink, LlmError};

/// One dispatched event.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct SseEvent {
    /// The `event:` field, when there was one (Anthropic names every
    /// event; OpenAI names none).
    pub(crate) event: Option<String>,
    /// The `data:` lines, joined by `\n`.
    pub(crate) data: String,
}

/// An incremental parser: [`SseParser::push`] bytes as they arrive,
/// [`SseParser::finish`] at the end of the body.
#[derive(Debug, Default)]
pub(crate) struct SseParser {
    /// Bytes not yet part of a complete line.
    pending: Vec<u8>,
    event: Option<String>,
    data: Option<String>,
}

impl SseParser {
    /// Reads `bytes` and returns the events they complete.
    pub(crate) fn push(&mut self, bytes: &[u8]) -> Vec<SseEvent> {
        self.pending.extend_from_slice(bytes);
        let mut events = Vec::new();
        let mut start = 0;
        let mut i = 0;
        while i < self.pending.len() {
            let end = match self.pending[i] {
                b'\n' => i + 1,
                b'\r' => match self.pending.get(i + 1) {
                    Some(b'\n') => i + 2,
                    Some(_) => i + 1,
                    // A `\r` last: its `\n` may be in the next piece.
                    None => break,
                },
                _ => {
                    i += 1;
                    continue;
                }
            };
            let line = String::from_utf8_lossy(&self.pending[start..i]).into_owned();
            if let Some(event) = self.line(&line) {
                events.push(event);
            }
            start = end;
            i = end;
        }
        self.pending.drain(..start);
        events
    }

    /// The end of the body: an event whose lines all ended (with no blank
    /// line after them) still dispatches, as some servers end that way;
    /// one with a line cut off mid-way is dropped, so a truncated event is
    /// never read as a whole one.
    pub(crate) fn finish(&mut self) -> Option<SseEvent> {
        let rest = std::mem::take(&mut self.pending);
        match rest.as_slice() {
            [] => self.dispatch(),
            [line @ .., b'\r'] => {
                let line = String::from_utf8_lossy(line).into_owned();
                self.line(&line).or_else(|| self.dispatch())
            }
            _ => {
                self.event = None;
                self.data = None;
                None
            }
        }
    }

    /// Reads one line (without its end); a blank line may dispatch.
    fn line(&mut self, line: &str) -> Option<SseEvent> {
        if line.is_empty() {
            return self.dispatch();
        }
        if line.starts_with(':') {
            return None;
        }
        let (field, value) = match line.split_once(':') {
            Some((field, value)) => (field, value.strip_prefix(' ').unwrap_or(value)),
            None => (line, ""),
        };
        match field {
            "event" => self.event = Some(value.to_owned()),
            "data" => match &mut self.data {
                Some(data) => {
                    data.push('\n');
                    data.push_str(value);
                }
                None => self.data = Some(value.to_owned()),
            },
            _ => {}
        }
        None
    }

    fn dispatch(&mut self) -> Option<SseEvent> {
        let event = self.event.take();
        let data = self.data.take()?;
        Some(SseEvent { event, data })
    }
}

/// Reads the events of a streamed body, handing each to `on_event` until
/// it says the answer is complete (`Ok(true)`), and returns whether it
/// did: `false` means the body ended first.
pub(crate) async fn read_events(
    chunks: &mut Chunks,
    mut on_event: impl FnMut(SseEvent) -> Result<bool, LlmError>,
) -> Result<bool, LlmError> {
    let mut parser = SseParser::default();
    while let Some(bytes) = chunks.next().await? {
        for event in parser.push(&bytes) {
            if on_event(event)? {
                return Ok(true);
            }
        }
    }
    match parser.finish() {
        Some(event) => on_event(event),
        None => Ok(false),
    }
}

/// A wire format's streamed answer, built up event by event
/// ([`read_answer`]).
pub(crate) trait StreamedAnswer: Default {
    /// The format's whole (unstreamed) response body.
    type Whole: serde::de::DeserializeOwned;
    /// Reads one event, telling `sink` new text; `Ok(true)` once the
    /// answer is complete.
    fn event(
        &mut self,
        event: &SseEvent,
        key: Option<&Secret>,
        sink: &dyn DeltaSink,
    ) -> Result<bool, LlmError>;
    /// The completion of the answer read.
    fn finish(self) -> Result<Completion, LlmError>;
    /// The completion of a whole response.
    fn decode_whole(whole: &Self::Whole) -> Result<Completion, LlmError>;
}

/// Reads a streamed answer of format `A`, telling `sink` its text as it
/// comes. A server (or proxy) that answered whole instead is read whole,
/// its text told at once.
pub(crate) async fn read_answer<A: StreamedAnswer>(
    mut chunks: Chunks,
    key: Option<&Secret>,
    sink: &dyn DeltaSink,
) -> Result<Completion, LlmError> {
    if chunks.content_type().starts_with("application/json") {
        let whole: A::Whole = http::decode_json(&chunks.rest().await?)?;
        let completion = A::decode_whole(&whole)?;
        if !completion.content.is_empty() {
            sink.text(&completion.content);
        }
        return Ok(completion);
    }
    let mut answer = A::default();
    let done = read_events(&mut chunks, |event| answer.event(&event, key, sink)).await?;
    if !done {
        return Err(http::cut_short());
    }
    answer.finish()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn data(event: Option<&str>, data: &str) -> SseEvent {
        SseEvent {
            event: event.map(str::to_owned),
            data: data.to_owned(),
        }
    }

    /// Feeds `body` in pieces of `size` bytes and returns every event.
    fn parse_in_pieces(body: &[u8], size: usize) -> Vec<SseEvent> {
        let mut parser = SseParser::default();
        let mut events = Vec::new();
        for piece in body.chunks(size) {
            events.extend(parser.push(piece));
        }
        events.extend(parser.finish());
        events
    }

    #[test]
    fn events_come_out_the_same_however_the_body_is_cut() {
        let body = "event: message_start\r\ndata: {\"a\":\"é😀\"}\r\n\r\n: ping\n\nevent: delta\ndata: line one\ndata:line two\n\ndata: [DONE]\n\n";
        let expected = vec![
            data(Some("message_start"), "{\"a\":\"é😀\"}"),
            data(Some("delta"), "line one\nline two"),
            data(None, "[DONE]"),
        ];
        for size in 1..=body.len() {
            assert_eq!(
                parse_in_pieces(body.as_bytes(), size),
                expected,
                "pieces of {size}"
            );
        }
    }

    #[test]
    fn lone_carriage_returns_end_lines() {
        let body = b"data: a\r\rdata: b\r\r";
        for size in 1..=body.len() {
            assert_eq!(
                parse_in_pieces(body, size),
                vec![data(None, "a"), data(None, "b")],
                "pieces of {size}"
            );
        }
    }

    #[test]
    fn comments_events_without_data_and_unknown_fields_dispatch_nothing() {
        let body = b": keep-alive\n\nevent: ping\n\nid: 7\nretry: 10\n\ndata\n\n";
        // `data` alone is a data line with an empty value.
        assert_eq!(parse_in_pieces(body, 3), vec![data(None, "")]);
    }

    #[test]
    fn the_end_of_the_body_keeps_a_finished_line_and_drops_a_cut_one() {
        assert_eq!(
            parse_in_pieces(b"data: [DONE]\n", 4),
            vec![data(None, "[DONE]")]
        );
        assert_eq!(
            parse_in_pieces(b"data: [DONE]\r", 4),
            vec![data(None, "[DONE]")]
        );
        assert_eq!(parse_in_pieces(b"data: {\"choices\":[", 4), vec![]);
        assert_eq!(parse_in_pieces(b"data: a\ndata: b", 4), vec![]);
    }
}
