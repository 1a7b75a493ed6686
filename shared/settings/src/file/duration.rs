//! Durations as the file writes them (`"90s"`, `"1h30m"`).

use serde::de::{self, Deserializer, Visitor};
use serde::Deserialize;
use std::fmt;
use std::time::Duration;

/// A positive duration written as a string: `"90s"`, `"15m"`, `"2h"`,
/// `"1d"`, `"500ms"`, or a sum such as `"1h30m"`.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(super) struct DurationSpec(pub(super) Duration);

impl<'de> Deserialize<'de> for DurationSpec {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl Visitor<'_> for V {
            type Value = DurationSpec;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a duration such as \"90s\", \"15m\", \"2h\" or \"1h30m\"")
            }
            fn visit_str<E: de::Error>(self, v: &str) -> Result<DurationSpec, E> {
                parse_duration(v).map(DurationSpec).map_err(E::custom)
            }
        }
        d.deserialize_str(V)
    }
}

/// Parses a duration such as `"90s"`, `"15m"`, `"2h"`, `"1d"`, `"250ms"` or
/// `"1h30m"`. Zero is refused: every duration in the file is a limit.
pub fn parse_duration(text: &str) -> Result<Duration, String> {
    let bad =
        || format!("`{text}` is not a duration; write e.g. \"90s\", \"15m\", \"2h\" or \"1h30m\"");
    let s = text.trim();
    if s.is_empty() {
        return Err(bad());
    }
    let mut total_ms: u64 = 0;
    let mut rest = s;
    while !rest.is_empty() {
        let digits = rest
            .find(|c: char| !c.is_ascii_digit())
            .unwrap_or(rest.len());
        if digits == 0 {
            return Err(bad());
        }
        let n: u64 = rest[..digits].parse().map_err(|_| bad())?;
        rest = &rest[digits..];
        let unit_len = rest
            .find(|c: char| c.is_ascii_digit())
            .unwrap_or(rest.len());
        let unit_ms: u64 = match &rest[..unit_len] {
            "ms" => 1,
            "s" => 1000,
            "m" => 60_000,
            "h" => 3_600_000,
            "d" => 86_400_000,
            _ => return Err(bad()),
        };
        rest = &rest[unit_len..];
        total_ms = n
            .checked_mul(unit_ms)
            .and_then(|v| total_ms.checked_add(v))
            .ok_or_else(|| format!("`{text}` is too long"))?;
    }
    if total_ms == 0 {
        return Err(format!("`{text}`: must be longer than zero"));
    }
    Ok(Duration::from_millis(total_ms))
}
