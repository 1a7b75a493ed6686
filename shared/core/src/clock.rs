//! Wall-clock time. Every instant the task record keeps is an [`Instant`]:
//! milliseconds since the Unix epoch inside, so code compares numbers and
//! never parses a string at each use. On the wire and in the store each
//! field keeps the form it always had: RFC 3339 text by default (the HTTP
//! API's form), integer milliseconds where a field was stored so
//! ([`as_millis`], [`as_millis_opt`]).

use std::time::Duration;

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

/// A wall-clock instant: milliseconds inside; RFC 3339 text when
/// serialised unless the field says [`as_millis`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Instant(pub Millis);

impl Instant {
    /// Later than every instant: what a missing deadline compares as.
    pub const MAX: Instant = Instant(Millis::MAX);

    pub fn now() -> Instant {
        Instant(now_ms())
    }

    pub fn millis(self) -> Millis {
        self.0
    }

    /// Whole seconds since the Unix epoch (rounded down): the form of
    /// item expiry times (DynamoDB TTL).
    pub fn unix_secs(self) -> i64 {
        self.0.div_euclid(1000)
    }

    /// `self + d`, the last representable instant when that overflows.
    pub fn saturating_add(self, d: Duration) -> Instant {
        let ms = Millis::try_from(d.as_millis()).unwrap_or(Millis::MAX);
        Instant(self.0.saturating_add(ms))
    }

    /// `self - d`, the first representable instant when that overflows.
    pub fn saturating_sub(self, d: Duration) -> Instant {
        let ms = Millis::try_from(d.as_millis()).unwrap_or(Millis::MAX);
        Instant(self.0.saturating_sub(ms))
    }

    /// The earlier of `self` and `limit`, if there is one (a deadline).
    pub fn capped(self, limit: Option<Instant>) -> Instant {
        limit.map_or(self, |l| self.min(l))
    }

    /// The instant as a chrono date-time, for calendar arithmetic (cron
    /// expressions, months); `None` outside chrono's range.
    pub fn to_utc(self) -> Option<chrono::DateTime<chrono::Utc>> {
        chrono::DateTime::from_timestamp_millis(self.0)
    }

    /// How long after `earlier` this is; zero when it is not after.
    pub fn since(self, earlier: Instant) -> Duration {
        Duration::from_millis(u64::try_from(self.0.saturating_sub(earlier.0)).unwrap_or(0))
    }
}

impl From<Millis> for Instant {
    fn from(ms: Millis) -> Instant {
        Instant(ms)
    }
}

/// To the millisecond (a finer fraction is dropped).
impl<Tz: chrono::TimeZone> From<chrono::DateTime<Tz>> for Instant {
    fn from(t: chrono::DateTime<Tz>) -> Instant {
        Instant(t.timestamp_millis())
    }
}

impl std::ops::Add<Duration> for Instant {
    type Output = Instant;
    /// Saturating: a huge duration means "never", not a panic.
    fn add(self, d: Duration) -> Instant {
        self.saturating_add(d)
    }
}

impl std::ops::Sub<Duration> for Instant {
    type Output = Instant;
    fn sub(self, d: Duration) -> Instant {
        self.saturating_sub(d)
    }
}

/// RFC 3339, as the API shows it.
impl std::fmt::Display for Instant {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&rfc3339(self.0))
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

/// `#[serde(with = "clock::as_millis")]`: an [`Instant`] stored as integer
/// milliseconds, for the fields that were written so before they were
/// instants (rows already stored read and write the same).
pub mod as_millis {
    use super::{Instant, Millis};
    use serde::{Deserialize, Deserializer, Serializer};

    pub fn serialize<S: Serializer>(at: &Instant, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_i64(at.0)
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Instant, D::Error> {
        Millis::deserialize(d).map(Instant)
    }
}

/// [`as_millis`] for an `Option<Instant>` (absent or `null`: `None`).
pub mod as_millis_opt {
    use super::{Instant, Millis};
    use serde::{Deserialize, Deserializer, Serializer};

    pub fn serialize<S: Serializer>(at: &Option<Instant>, s: S) -> Result<S::Ok, S::Error> {
        match at {
            Some(at) => s.serialize_some(&at.0),
            None => s.serialize_none(),
        }
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Option<Instant>, D::Error> {
        Option::<Millis>::deserialize(d).map(|ms| ms.map(Instant))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn formats_rfc3339() {
        assert_eq!(super::rfc3339(0), "1970-01-01T00:00:00.000Z");
        assert_eq!(Instant(0).to_string(), "1970-01-01T00:00:00.000Z");
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

    #[derive(serde::Serialize, serde::Deserialize, PartialEq, Debug)]
    struct Row {
        #[serde(with = "as_millis")]
        at: Instant,
        #[serde(
            default,
            skip_serializing_if = "Option::is_none",
            with = "as_millis_opt"
        )]
        until: Option<Instant>,
    }

    #[test]
    fn a_millis_field_reads_and_writes_integers_as_before() {
        for old in [r#"{"at":1767225600123,"until":5}"#, r#"{"at":-1}"#] {
            let row: Row = serde_json::from_str(old).unwrap();
            assert_eq!(serde_json::to_string(&row).unwrap(), old);
        }
        let row: Row = serde_json::from_str(r#"{"at":7,"until":null}"#).unwrap();
        assert_eq!(
            row,
            Row {
                at: Instant(7),
                until: None
            }
        );
        // Text is not what such a field holds.
        assert!(serde_json::from_str::<Row>(r#"{"at":"1970-01-01T00:00:00.007Z"}"#).is_err());
    }

    #[test]
    fn arithmetic_saturates_and_deadlines_cap() {
        let t = Instant(1_000);
        assert_eq!(t + Duration::from_secs(1), Instant(2_000));
        assert_eq!(t - Duration::from_millis(1_500), Instant(-500));
        assert_eq!(t + Duration::MAX, Instant::MAX);
        assert_eq!(Instant::MAX + Duration::from_millis(1), Instant::MAX);
        assert_eq!(t.capped(None), t);
        assert_eq!(t.capped(Some(Instant(10))), Instant(10));
        assert_eq!(t.capped(Some(Instant(5_000))), t);
        assert_eq!(Instant(1_500).since(t), Duration::from_millis(500));
        assert_eq!(t.since(Instant(1_500)), Duration::ZERO);
        assert_eq!(Instant(1_999).unix_secs(), 1);
        assert_eq!(Instant(-1).unix_secs(), -1);
    }

    #[test]
    fn converts_to_and_from_chrono() {
        let at = Instant(1_767_225_600_123);
        let t = at.to_utc().unwrap();
        assert_eq!(t.to_rfc3339(), "2026-01-01T00:00:00.123+00:00");
        assert_eq!(Instant::from(t), at);
        assert_eq!(Instant::MAX.to_utc(), None);
    }
}
