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

/// An instant that the API (and the stored task) shows as RFC 3339 text:
/// milliseconds inside, so code compares numbers and never parses a string
/// again at each use.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Instant(pub Millis);

impl Instant {
    pub fn millis(self) -> Millis {
        self.0
    }
}

impl serde::Serialize for Instant {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&rfc3339(self.0))
    }
}

impl<'de> serde::Deserialize<'de> for Instant {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let text = String::deserialize(d)?;
        chrono::DateTime::parse_from_rfc3339(&text)
            .map(|t| Instant(t.timestamp_millis()))
            .map_err(|e| {
                serde::de::Error::custom(format!("`{text}` is not an RFC 3339 instant: {e}"))
            })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn formats_rfc3339() {
        assert_eq!(super::rfc3339(0), "1970-01-01T00:00:00.000Z");
    }

    #[test]
    fn an_instant_is_rfc3339_on_the_wire_and_millis_inside() {
        let at = Instant(1_767_225_600_123);
        let json = serde_json::to_string(&at).unwrap();
        assert_eq!(json, "\"2026-01-01T00:00:00.123Z\"");
        assert_eq!(serde_json::from_str::<Instant>(&json).unwrap(), at);
        // Written by another zone or without milliseconds: the same instant.
        let other: Instant = serde_json::from_str("\"2026-01-01T01:00:00.123+01:00\"").unwrap();
        assert_eq!(other, at);
        assert!(serde_json::from_str::<Instant>("\"soon\"").is_err());
    }
}
