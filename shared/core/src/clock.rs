//! Wall-clock time as milliseconds since the Unix epoch: the unit every
//! persisted timestamp uses, because DynamoDB and the embedded store compare
//! numbers, not strings.

/// Milliseconds since the Unix epoch.
pub type Millis = i64;

/// The current wall-clock time.
pub fn now_ms() -> Millis {
    chrono::Utc::now().timestamp_millis()
}

/// Formats a timestamp as RFC 3339 (UTC, millisecond precision), the form the
/// HTTP API uses.
pub fn rfc3339(ms: Millis) -> String {
    chrono::DateTime::from_timestamp_millis(ms)
        .unwrap_or_default()
        .to_rfc3339_opts(chrono::SecondsFormat::Millis, true)
}

#[cfg(test)]
mod tests {
    #[test]
    fn formats_rfc3339() {
        assert_eq!(super::rfc3339(0), "1970-01-01T00:00:00.000Z");
    }
}
