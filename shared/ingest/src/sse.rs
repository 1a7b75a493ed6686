//! Server-Sent Events framing (the WHATWG HTML standard's
//! `text/event-stream`) and where a client resumes.

use crate::response::ApiError;
use bytes::Bytes;
use http::HeaderMap;
use serde::Deserialize;

/// The reconnection delay suggested to clients (`retry:`), in
/// milliseconds.
pub(crate) const RETRY_MS: u64 = 3000;

/// One event: `id: <id>`, `event: <name>`, a `data:` line per line of
/// `data`, and the blank line that ends it.
pub(crate) fn event(id: Option<u64>, name: &str, data: &str) -> Bytes {
    let mut out = String::with_capacity(data.len() + 48);
    if let Some(id) = id {
        out.push_str(&format!("id: {id}\n"));
    }
    // A name is a store type (snake_case); a line break in it would start
    // a field of its own, so none is let through.
    let name: String = name.chars().filter(|c| !matches!(c, '\r' | '\n')).collect();
    out.push_str(&format!("event: {name}\n"));
    // Compact JSON has no line breaks, but a `data:` per line keeps any
    // text whole (the client joins them with `\n`).
    for line in data.split('\n') {
        out.push_str("data: ");
        out.push_str(line.strip_suffix('\r').unwrap_or(line));
        out.push('\n');
    }
    out.push('\n');
    Bytes::from(out)
}

/// A comment line, which clients ignore: a heartbeat that keeps proxies
/// from closing an idle stream.
pub(crate) fn comment(text: &str) -> Bytes {
    Bytes::from(format!(": {}\n\n", text.replace(['\r', '\n'], " ")))
}

/// The `retry:` hint.
pub(crate) fn retry() -> Bytes {
    Bytes::from(format!("retry: {RETRY_MS}\n\n"))
}

/// The `seq` after which a client wants events: the `Last-Event-ID`
/// header (what `EventSource` sends when it reconnects), else the `after`
/// or `last_event_id` query parameter (for clients that cannot set
/// headers); `None` from the start. Anything but a non-negative integer
/// is refused.
pub(crate) fn resume_after(
    headers: &HeaderMap,
    query: Option<&str>,
) -> Result<Option<u64>, ApiError> {
    if let Some(v) = headers.get("last-event-id") {
        let v = v
            .to_str()
            .map_err(|_| ApiError::bad_request("Last-Event-ID must be an event's seq"))?
            .trim();
        if !v.is_empty() {
            return parse_seq(v, "Last-Event-ID").map(Some);
        }
    }
    #[derive(Deserialize)]
    struct Q {
        after: Option<String>,
        last_event_id: Option<String>,
    }
    let q: Q = serde_urlencoded::from_str(query.unwrap_or(""))
        .map_err(|e| ApiError::bad_request(format!("invalid query: {e}")))?;
    match (q.after, q.last_event_id) {
        (Some(_), Some(_)) => Err(ApiError::bad_request(
            "give either after or last_event_id, not both",
        )),
        (Some(v), None) => parse_seq(&v, "after").map(Some),
        (None, Some(v)) => parse_seq(&v, "last_event_id").map(Some),
        (None, None) => Ok(None),
    }
}

fn parse_seq(v: &str, what: &str) -> Result<u64, ApiError> {
    v.trim().parse().map_err(|_| {
        ApiError::bad_request(format!(
            "{what} must be an event's seq (a non-negative integer)"
        ))
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use http::HeaderValue;

    #[test]
    fn an_event_is_its_id_name_data_and_a_blank_line() {
        let e = event(Some(7), "status", r#"{"seq":7,"type":"status"}"#);
        assert_eq!(
            e,
            "id: 7\nevent: status\ndata: {\"seq\":7,\"type\":\"status\"}\n\n"
        );
    }

    #[test]
    fn data_with_line_breaks_is_one_data_line_each_and_names_cannot_break() {
        let e = event(None, "end\nid: 99", "a\nb\r\nc");
        assert_eq!(e, "event: endid: 99\ndata: a\ndata: b\ndata: c\n\n");
    }

    #[test]
    fn comments_and_retry() {
        assert_eq!(comment("keep-alive"), ": keep-alive\n\n");
        assert_eq!(comment("a\nb"), ": a b\n\n");
        assert_eq!(retry(), "retry: 3000\n\n");
    }

    fn headers(last: Option<&str>) -> HeaderMap {
        let mut h = HeaderMap::new();
        if let Some(v) = last {
            h.insert("last-event-id", HeaderValue::from_str(v).unwrap());
        }
        h
    }

    #[test]
    fn the_header_wins_over_the_query() {
        assert_eq!(
            resume_after(&headers(Some("12")), Some("after=3")),
            Ok(Some(12))
        );
        assert_eq!(resume_after(&headers(None), Some("after=3")), Ok(Some(3)));
        assert_eq!(
            resume_after(&headers(None), Some("last_event_id=4")),
            Ok(Some(4))
        );
        assert_eq!(resume_after(&headers(Some(" ")), None), Ok(None));
        assert_eq!(resume_after(&headers(None), None), Ok(None));
    }

    #[test]
    fn anything_but_a_seq_is_refused() {
        for (h, q) in [
            (Some("-1"), None),
            (Some("x"), None),
            (None, Some("after=-2")),
            (None, Some("after=1e3")),
            (None, Some("last_event_id=")),
            (None, Some("after=1&last_event_id=2")),
        ] {
            let e = resume_after(&headers(h), q).unwrap_err();
            assert_eq!(e.status, http::StatusCode::BAD_REQUEST, "{h:?} {q:?}");
        }
    }
}
