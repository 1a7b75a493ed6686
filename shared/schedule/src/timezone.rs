//! The schedule's time zone: an IANA name, as EventBridge Scheduler's
//! `ScheduleExpressionTimezone` takes it. Default UTC.

use std::fmt;
use std::str::FromStr;

use chrono_tz::Tz;
use serde::{Deserialize, Deserializer, Serialize, Serializer};

use crate::error::{snippet, TimezoneError};

/// An IANA time zone such as `Europe/Berlin`; serialized as its name.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Timezone(Tz);

impl Timezone {
    /// UTC, the default when a schedule names no zone.
    pub const UTC: Timezone = Timezone(Tz::UTC);

    /// Parses an IANA name. Names are case-sensitive, as in the IANA
    /// database; a name that is only mis-cased gets a suggestion.
    /// Surrounding white space is ignored.
    pub fn parse(name: &str) -> Result<Timezone, TimezoneError> {
        let name = name.trim();
        if name.is_empty() {
            return Err(TimezoneError::Empty);
        }
        if let Ok(tz) = Tz::from_str(name) {
            return Ok(Timezone(tz));
        }
        match chrono_tz::TZ_VARIANTS
            .iter()
            .find(|tz| tz.name().eq_ignore_ascii_case(name))
        {
            Some(tz) => Err(TimezoneError::WrongCase {
                given: snippet(name),
                suggestion: tz.name(),
            }),
            None => Err(TimezoneError::Unknown(snippet(name))),
        }
    }

    /// The chrono-tz zone, for [`crate::Expression::next_after`].
    pub fn tz(self) -> Tz {
        self.0
    }

    /// The IANA name, e.g. `Europe/Berlin`.
    pub fn name(self) -> &'static str {
        self.0.name()
    }
}

impl Default for Timezone {
    fn default() -> Self {
        Timezone::UTC
    }
}

impl From<Tz> for Timezone {
    fn from(tz: Tz) -> Self {
        Timezone(tz)
    }
}

impl From<Timezone> for Tz {
    fn from(tz: Timezone) -> Self {
        tz.0
    }
}

impl FromStr for Timezone {
    type Err = TimezoneError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Timezone::parse(s)
    }
}

impl fmt::Display for Timezone {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl Serialize for Timezone {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(self.name())
    }
}

impl<'de> Deserialize<'de> for Timezone {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let s = String::deserialize(d)?;
        Timezone::parse(&s).map_err(serde::de::Error::custom)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_iana_names() {
        assert_eq!(
            Timezone::parse("Europe/Berlin").map(Timezone::name),
            Ok("Europe/Berlin")
        );
        assert_eq!(Timezone::parse(" UTC ").map(Timezone::tz), Ok(Tz::UTC));
        assert_eq!(Timezone::default(), Timezone::UTC);
    }

    #[test]
    fn refuses_unknown_names_with_a_reason() {
        assert_eq!(Timezone::parse(""), Err(TimezoneError::Empty));
        let err = Timezone::parse("europe/berlin").unwrap_err();
        assert_eq!(
            err.to_string(),
            "unknown time zone 'europe/berlin'; did you mean 'Europe/Berlin'? (names are case-sensitive)"
        );
        let err = Timezone::parse("Mars/Olympus").unwrap_err();
        assert!(err
            .to_string()
            .starts_with("unknown time zone 'Mars/Olympus'; use an IANA name"));
    }

    #[test]
    fn serde_as_string() {
        let tz = Timezone::parse("America/New_York").unwrap();
        let json = serde_json::to_string(&tz).unwrap();
        assert_eq!(json, "\"America/New_York\"");
        assert_eq!(serde_json::from_str::<Timezone>(&json).unwrap(), tz);
        assert!(serde_json::from_str::<Timezone>("\"Nowhere\"").is_err());
    }
}
