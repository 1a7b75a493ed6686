//! Local ↔ UTC conversion for the evaluator.
//!
//! chrono-tz's tables stop at the end of 2099, after which every zone would
//! be stuck on its 2099 year-end offset (no summer time), while cron
//! expressions may name years up to 2199. For years from 2100 on, the offset
//! is read from a proxy year in 2072-2099 with the same weekday of 1 January
//! and the same leap-ness, so rules like "last Sunday in March" fall on the
//! same dates. This assumes the rules in force in 2099 continue, which is
//! also what the tz database itself projects.

use chrono::{
    DateTime, Datelike, LocalResult, NaiveDate, NaiveDateTime, Offset, TimeDelta, TimeZone, Utc,
};
use chrono_tz::Tz;

/// First year chrono-tz has no transitions for.
const TABLE_END: i32 = 2100;
/// The proxy years: 28 consecutive years hold every (weekday, leap) pair.
const PROXY_FIRST: i32 = 2072;

fn is_leap(y: i32) -> bool {
    NaiveDate::from_ymd_opt(y, 2, 29).is_some()
}

fn jan1_weekday(y: i32) -> Option<u32> {
    NaiveDate::from_ymd_opt(y, 1, 1).map(|d| d.weekday().num_days_from_monday())
}

/// The year whose calendar (and so zone rules) stands in for `y`.
fn proxy_year(y: i32) -> Option<i32> {
    if y < TABLE_END {
        return Some(y);
    }
    let want = (jan1_weekday(y)?, is_leap(y));
    (PROXY_FIRST..TABLE_END).find(|p| jan1_weekday(*p) == Some(want.0) && is_leap(*p) == want.1)
}

/// Offset from UTC, in seconds, in force at the UTC instant `utc`.
pub(crate) fn offset_at(tz: Tz, utc: NaiveDateTime) -> Option<i32> {
    let proxy = utc.with_year(proxy_year(utc.year())?)?;
    Some(tz.offset_from_utc_datetime(&proxy).fix().local_minus_utc())
}

/// The local wall-clock time of `t` in `tz`.
pub(crate) fn to_local(tz: Tz, t: DateTime<Utc>) -> Option<NaiveDateTime> {
    let utc = t.naive_utc();
    utc.checked_add_signed(TimeDelta::seconds(i64::from(offset_at(tz, utc)?)))
}

/// The instants at which `tz` shows the wall-clock time `local`: none in a
/// gap, two (earliest first) in a fall-back overlap.
pub(crate) fn from_local(tz: Tz, local: NaiveDateTime) -> LocalResult<DateTime<Utc>> {
    let Some(proxy) = proxy_year(local.year()).and_then(|y| local.with_year(y)) else {
        return LocalResult::None;
    };
    let to_utc = |t: DateTime<Tz>| {
        local
            .checked_sub_signed(TimeDelta::seconds(i64::from(
                t.offset().fix().local_minus_utc(),
            )))
            .map(|n| n.and_utc())
    };
    match tz.from_local_datetime(&proxy) {
        LocalResult::Single(a) => to_utc(a).map_or(LocalResult::None, LocalResult::Single),
        LocalResult::Ambiguous(a, b) => match (to_utc(a), to_utc(b)) {
            (Some(a), Some(b)) => LocalResult::Ambiguous(a, b),
            (Some(a), None) | (None, Some(a)) => LocalResult::Single(a),
            (None, None) => LocalResult::None,
        },
        LocalResult::None => LocalResult::None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn proxy_years_share_the_calendar() {
        for y in 1970..2200 {
            let p = proxy_year(y).unwrap_or_else(|| panic!("no proxy for {y}"));
            assert!(p < TABLE_END);
            assert_eq!(jan1_weekday(p), jan1_weekday(y));
            assert_eq!(is_leap(p), is_leap(y));
        }
    }

    #[test]
    fn matches_chrono_tz_inside_its_table() {
        let tz = chrono_tz::Europe::Berlin;
        for (y, m, d, h) in [
            (2025, 3, 30, 0),
            (2025, 3, 30, 1),
            (2025, 10, 26, 0),
            (2025, 10, 26, 1),
            (2099, 7, 1, 12),
        ] {
            let t = Utc
                .with_ymd_and_hms(y, m, d, h, 30, 0)
                .single()
                .unwrap_or_default();
            assert_eq!(to_local(tz, t), Some(t.with_timezone(&tz).naive_local()));
            let local = t.with_timezone(&tz).naive_local();
            assert_eq!(
                from_local(tz, local).earliest(),
                tz.from_local_datetime(&local)
                    .earliest()
                    .map(|x| x.with_timezone(&Utc))
            );
        }
    }

    #[test]
    fn summer_time_continues_after_2099() {
        let tz = chrono_tz::Europe::Berlin;
        // 2150-03-29 is the last Sunday of March 2150.
        let local = |d, h| {
            NaiveDate::from_ymd_opt(2150, 3, d)
                .and_then(|x| x.and_hms_opt(h, 30, 0))
                .unwrap_or_default()
        };
        assert_eq!(from_local(tz, local(29, 2)), LocalResult::None);
        assert_eq!(
            from_local(tz, local(29, 3)).single().map(|t| t.naive_utc()),
            Some(local(29, 1))
        );
        assert_eq!(
            from_local(tz, local(28, 3)).single().map(|t| t.naive_utc()),
            Some(local(28, 2))
        );
        let summer = Utc
            .with_ymd_and_hms(2150, 7, 1, 10, 0, 0)
            .single()
            .unwrap_or_default();
        assert_eq!(
            to_local(tz, summer).map(|t| t.time().to_string()),
            Some("12:00:00".to_string())
        );
    }
}
