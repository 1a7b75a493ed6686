//! [`Expression`]: a parsed, validated EventBridge Scheduler schedule
//! expression, its canonical text, and its next fire time.

use std::fmt;
use std::str::FromStr;

use chrono::{DateTime, NaiveDateTime, TimeDelta, Utc};
use chrono_tz::Tz;
use serde::{Deserialize, Deserializer, Serialize, Serializer};

use crate::cron::Cron;
use crate::error::{snippet, ExpressionError};
use crate::zone;

/// EventBridge Scheduler's `ScheduleExpression` length limit.
const MAX_LEN: usize = 256;

/// How many consecutive local candidates may be skipped because they fall in
/// a DST gap or in the repeated hour of a fall-back. The longest real gap
/// (Pacific/Apia skipping 2011-12-30) is 1440 minutes; this only guards
/// against a pathological zone table.
const MAX_SKIPPED_CANDIDATES: usize = 10_000;

/// The three kinds of schedule.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ExpressionKind {
    /// `cron(...)`: recurring at matching local times.
    Cron,
    /// `rate(...)`: recurring at a fixed interval.
    Rate,
    /// `at(...)`: one time.
    At,
}

/// The unit of a `rate(...)` expression.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum RateUnit {
    /// `minute` / `minutes`.
    Minutes,
    /// `hour` / `hours`.
    Hours,
    /// `day` / `days` — always 24 hours, also across DST changes.
    Days,
}

impl RateUnit {
    fn seconds(self) -> i64 {
        match self {
            RateUnit::Minutes => 60,
            RateUnit::Hours => 3_600,
            RateUnit::Days => 86_400,
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Hash)]
enum Kind {
    Cron(Cron),
    Rate { value: u32, unit: RateUnit },
    At(NaiveDateTime),
}

/// A schedule expression exactly as Amazon EventBridge Scheduler reads it:
/// `cron(minutes hours day-of-month month day-of-week year)`,
/// `rate(value unit)` or `at(yyyy-mm-ddThh:mm:ss)`.
///
/// Built only by [`Expression::parse`], so every value is one EventBridge
/// Scheduler accepts (as far as its documentation tells). Equality, hashing,
/// [`Display`](fmt::Display) and serde all use the canonical text
/// ([`Expression::as_str`]), which is what the AWS adapter passes to
/// EventBridge Scheduler unchanged.
#[derive(Debug, Clone)]
pub struct Expression {
    text: String,
    kind: Kind,
}

impl PartialEq for Expression {
    fn eq(&self, other: &Self) -> bool {
        self.text == other.text
    }
}

impl Eq for Expression {}

impl std::hash::Hash for Expression {
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        self.text.hash(state);
    }
}

impl Expression {
    /// Parses and validates a schedule expression.
    ///
    /// White space around the expression, inside the parentheses and between
    /// fields is normalised; the keywords `cron`, `rate`, `at` and the rate
    /// units must be lower case (as documented); month and weekday names are
    /// case-insensitive and upper-cased in the canonical text. See the
    /// crate docs for the accepted grammar and the choices made where the
    /// EventBridge documentation is silent.
    pub fn parse(input: &str) -> Result<Expression, ExpressionError> {
        let s = input.trim();
        if s.is_empty() {
            return Err(ExpressionError::Empty);
        }
        let len = s.chars().count();
        if len > MAX_LEN {
            return Err(ExpressionError::TooLong(len));
        }
        let unknown = || ExpressionError::UnknownKind(snippet(s));
        let open = s.find('(').ok_or_else(unknown)?;
        let inner = s[open + 1..].strip_suffix(')').ok_or_else(unknown)?;
        match &s[..open] {
            "cron" => {
                let (cron, fields) = Cron::parse(inner)?;
                Ok(Expression {
                    text: format!("cron({fields})"),
                    kind: Kind::Cron(cron),
                })
            }
            "rate" => parse_rate(inner),
            "at" => parse_at(inner),
            _ => Err(unknown()),
        }
    }

    /// The canonical text, to store and to pass to EventBridge Scheduler.
    pub fn as_str(&self) -> &str {
        &self.text
    }

    /// Which kind of schedule this is.
    pub fn kind(&self) -> ExpressionKind {
        match self.kind {
            Kind::Cron(_) => ExpressionKind::Cron,
            Kind::Rate { .. } => ExpressionKind::Rate,
            Kind::At(_) => ExpressionKind::At,
        }
    }

    /// Whether the schedule fires more than once (`cron`, `rate`).
    pub fn is_recurring(&self) -> bool {
        !matches!(self.kind, Kind::At(_))
    }

    /// The interval of a `rate(...)` expression.
    pub fn rate_interval(&self) -> Option<TimeDelta> {
        match self.kind {
            Kind::Rate { value, unit } => TimeDelta::try_seconds(i64::from(value) * unit.seconds()),
            _ => None,
        }
    }

    /// The local date and time of an `at(...)` expression.
    pub fn at_local(&self) -> Option<NaiveDateTime> {
        match self.kind {
            Kind::At(t) => Some(t),
            _ => None,
        }
    }

    /// The first fire time strictly after `after`, or `None` if the schedule
    /// never fires again.
    ///
    /// `tz` is the schedule's time zone; `start` is when the schedule starts
    /// (its creation time, EventBridge's `StartDate`). No kind fires before
    /// `start`.
    ///
    /// * **rate**: fires at `start`, `start + interval`, `start + 2·interval`, …
    ///   (EventBridge Scheduler invokes a rate schedule without a
    ///   `StartDate` immediately, then at every interval). The interval is
    ///   elapsed time: a day is 24 hours even when DST makes the local day
    ///   23 or 25 hours long, as documented. `tz` does not matter. Without
    ///   `start` (not documented; our choice) the schedule counts from
    ///   `after`, i.e. the answer is `after + interval`.
    /// * **at**: fires once at the local time in `tz`. Not documented for
    ///   DST, so we choose: a local time that occurs twice fires at its first
    ///   occurrence; one that does not exist (spring forward) fires at the
    ///   same wall-clock distance after the gap's start, i.e. shifted later
    ///   by the gap (02:30 on a day Berlin jumps from 02:00 to 03:00 fires at
    ///   03:30 CEST) — a one-time schedule should not silently never fire.
    /// * **cron**: fires at every local minute in `tz` that matches, as the
    ///   EventBridge Scheduler documentation on daylight saving time says:
    ///   a matching local time that does not exist (spring forward) is
    ///   skipped; a matching local time that occurs twice (fall back) fires
    ///   only once, at its first occurrence (the documentation says "only
    ///   once" without saying which; we take the first, so e.g.
    ///   `cron(0/15 * * * ? *)` in Europe/Berlin is silent during the
    ///   repeated hour 02:00–02:59 CET).
    ///
    /// Fire times are whole minutes for cron; EventBridge itself invokes
    /// within the following 60 seconds. Never scans minute by minute: an
    /// expression that never fires (Feb 30, years in the past) returns
    /// `None` after at most a few thousand set operations.
    pub fn next_after(
        &self,
        after: DateTime<Utc>,
        tz: Tz,
        start: Option<DateTime<Utc>>,
    ) -> Option<DateTime<Utc>> {
        // "Strictly after `floor`" expresses both "> after" and ">= start".
        let floor = match start {
            Some(s) if s > after => s.checked_sub_signed(TimeDelta::nanoseconds(1))?,
            _ => after,
        };
        match &self.kind {
            Kind::At(local) => at_instant(*local, tz).filter(|t| *t > floor),
            Kind::Rate { value, unit } => {
                let anchor = start.unwrap_or(after);
                rate_next(anchor, i64::from(*value) * unit.seconds(), floor)
            }
            Kind::Cron(cron) => cron_next(cron, tz, floor),
        }
    }

    /// The parsed cron, for the crate's property tests.
    #[cfg(test)]
    pub(crate) fn cron_for_tests(&self) -> Option<&Cron> {
        match &self.kind {
            Kind::Cron(c) => Some(c),
            _ => None,
        }
    }

    /// Successive fire times after `after` (see [`Expression::next_after`]).
    pub fn upcoming(
        &self,
        after: DateTime<Utc>,
        tz: Tz,
        start: Option<DateTime<Utc>>,
    ) -> impl Iterator<Item = DateTime<Utc>> + '_ {
        let mut cursor = after;
        std::iter::from_fn(move || {
            let next = self.next_after(cursor, tz, start)?;
            cursor = next;
            Some(next)
        })
    }
}

fn parse_rate(inner: &str) -> Result<Expression, ExpressionError> {
    let parts: Vec<&str> = inner.split_ascii_whitespace().collect();
    let [value_text, unit_text] = parts[..] else {
        return Err(ExpressionError::RateShape(snippet(inner.trim())));
    };
    let value = if value_text.bytes().all(|b| b.is_ascii_digit()) {
        value_text.parse::<u32>().ok().filter(|v| *v > 0)
    } else {
        None
    }
    .ok_or_else(|| ExpressionError::RateValue(snippet(value_text)))?;
    let (unit, singular, plural) = match unit_text {
        "minute" | "minutes" => (RateUnit::Minutes, "minute", "minutes"),
        "hour" | "hours" => (RateUnit::Hours, "hour", "hours"),
        "day" | "days" => (RateUnit::Days, "day", "days"),
        other => return Err(ExpressionError::RateUnit(snippet(other))),
    };
    // Documented: the unit is singular exactly when the value is 1.
    let expected = if value == 1 { singular } else { plural };
    if unit_text != expected {
        return Err(ExpressionError::RateUnitNumber {
            value: value.to_string(),
            unit: unit_text.to_string(),
            expected: expected.to_string(),
        });
    }
    Ok(Expression {
        text: format!("rate({value} {expected})"),
        kind: Kind::Rate { value, unit },
    })
}

fn parse_at(inner: &str) -> Result<Expression, ExpressionError> {
    let body = inner.trim();
    // Exactly yyyy-mm-ddThh:mm:ss: chrono alone would also take signs,
    // longer years or missing zero padding.
    let layout_ok = body.len() == 19
        && body.bytes().enumerate().all(|(i, b)| match i {
            4 | 7 => b == b'-',
            10 => b == b'T',
            13 | 16 => b == b':',
            _ => b.is_ascii_digit(),
        });
    if !layout_ok {
        return Err(ExpressionError::AtFormat(snippet(body)));
    }
    let local = NaiveDateTime::parse_from_str(body, "%Y-%m-%dT%H:%M:%S")
        .map_err(|_| ExpressionError::AtInvalid(body.to_string()))?;
    Ok(Expression {
        text: format!("at({})", local.format("%Y-%m-%dT%H:%M:%S")),
        kind: Kind::At(local),
    })
}

/// The instant of a one-time local time (see `next_after` for DST).
fn at_instant(local: NaiveDateTime, tz: Tz) -> Option<DateTime<Utc>> {
    if let Some(t) = zone::from_local(tz, local).earliest() {
        return Some(t);
    }
    // In a gap: read the wall clock with the offset in force before the gap.
    // A day back is before any real gap began (the longest is one day).
    let before = local.checked_sub_signed(TimeDelta::days(1))?;
    let offset = zone::offset_at(tz, before)?;
    local
        .checked_sub_signed(TimeDelta::seconds(i64::from(offset)))
        .map(|naive| naive.and_utc())
}

/// First `anchor + k·period` (k ≥ 0) strictly after `floor`.
fn rate_next(
    anchor: DateTime<Utc>,
    period_secs: i64,
    floor: DateTime<Utc>,
) -> Option<DateTime<Utc>> {
    if anchor > floor {
        return Some(anchor);
    }
    const NANOS: i128 = 1_000_000_000;
    let as_nanos = |t: DateTime<Utc>| {
        i128::from(t.timestamp()) * NANOS + i128::from(t.timestamp_subsec_nanos())
    };
    let period = i128::from(period_secs) * NANOS;
    let k = (as_nanos(floor) - as_nanos(anchor)).div_euclid(period) + 1;
    let next = as_nanos(anchor).checked_add(k.checked_mul(period)?)?;
    let secs = i64::try_from(next.div_euclid(NANOS)).ok()?;
    let nanos = u32::try_from(next.rem_euclid(NANOS)).ok()?;
    DateTime::from_timestamp(secs, nanos)
}

/// First cron fire strictly after `floor`, with the DST rules of `next_after`.
fn cron_next(cron: &Cron, tz: Tz, floor: DateTime<Utc>) -> Option<DateTime<Utc>> {
    let mut cursor = zone::to_local(tz, floor)?;
    for _ in 0..MAX_SKIPPED_CANDIDATES {
        let candidate = cron.next_local_after(cursor)?;
        // `earliest()` is None in a gap (skipped) and the first occurrence of
        // a repeated time; that occurrence may already lie before `floor`
        // when `floor` is in the second pass of a fall-back hour, in which
        // case the time has fired already and is skipped too.
        if let Some(t) = zone::from_local(tz, candidate).earliest() {
            if t > floor {
                return Some(t);
            }
        }
        cursor = candidate;
    }
    None
}

impl fmt::Display for Expression {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.text)
    }
}

impl FromStr for Expression {
    type Err = ExpressionError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Expression::parse(s)
    }
}

impl AsRef<str> for Expression {
    fn as_ref(&self) -> &str {
        &self.text
    }
}

impl Serialize for Expression {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&self.text)
    }
}

impl<'de> Deserialize<'de> for Expression {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let s = String::deserialize(d)?;
        Expression::parse(&s).map_err(serde::de::Error::custom)
    }
}
