//! Behaviour tests: documented examples, DST edges, rejections, properties.

use chrono::{DateTime, TimeDelta, TimeZone, Utc};
use chrono_tz::Tz;
use proptest::prelude::*;

use crate::{Expression, ExpressionError, ExpressionKind, Timezone};

const BERLIN: Tz = chrono_tz::Europe::Berlin;
const NEW_YORK: Tz = chrono_tz::America::New_York;
const UTC: Tz = chrono_tz::UTC;

fn utc(y: i32, mo: u32, d: u32, h: u32, mi: u32) -> DateTime<Utc> {
    Utc.with_ymd_and_hms(y, mo, d, h, mi, 0)
        .single()
        .expect("valid test time")
}

fn expr(s: &str) -> Expression {
    Expression::parse(s).unwrap_or_else(|e| panic!("{s}: {e}"))
}

fn next(s: &str, tz: Tz, after: DateTime<Utc>) -> Option<DateTime<Utc>> {
    expr(s).next_after(after, tz, None)
}

/// Expression, zone, `after`, expected next fire.
type NextCase = (&'static str, Tz, DateTime<Utc>, Option<DateTime<Utc>>);

#[test]
fn next_fire_table() {
    let cases: &[NextCase] = &[
        // Every weekday at 9:00 Berlin; Fri 09:00 CET is the `after` itself,
        // so the next is Monday, 09:00 CEST after the spring change.
        (
            "cron(0 9 ? * MON-FRI *)",
            BERLIN,
            utc(2025, 3, 28, 8, 0),
            Some(utc(2025, 3, 31, 7, 0)),
        ),
        (
            "cron(0 9 ? * MON-FRI *)",
            BERLIN,
            utc(2025, 3, 27, 7, 59),
            Some(utc(2025, 3, 27, 8, 0)),
        ),
        (
            "cron(0 9 ? * 2-6 *)",
            BERLIN,
            utc(2025, 3, 28, 8, 0),
            Some(utc(2025, 3, 31, 7, 0)),
        ),
        // 0/15
        (
            "cron(0/15 * * * ? *)",
            UTC,
            utc(2025, 1, 1, 10, 7),
            Some(utc(2025, 1, 1, 10, 15)),
        ),
        (
            "cron(0/15 * * * ? *)",
            UTC,
            utc(2025, 1, 1, 10, 15),
            Some(utc(2025, 1, 1, 10, 30)),
        ),
        (
            "cron(0/15 * * * ? *)",
            UTC,
            utc(2025, 12, 31, 23, 50),
            Some(utc(2026, 1, 1, 0, 0)),
        ),
        (
            "cron(*/5 * * * ? *)",
            UTC,
            utc(2025, 1, 1, 10, 7),
            Some(utc(2025, 1, 1, 10, 10)),
        ),
        (
            "cron(1/10 * * * ? *)",
            UTC,
            utc(2025, 1, 1, 10, 1),
            Some(utc(2025, 1, 1, 10, 11)),
        ),
        // L: last day of the month, leap and common years.
        (
            "cron(0 0 L * ? *)",
            UTC,
            utc(2024, 2, 10, 0, 0),
            Some(utc(2024, 2, 29, 0, 0)),
        ),
        (
            "cron(0 0 L * ? *)",
            UTC,
            utc(2024, 2, 29, 0, 0),
            Some(utc(2024, 3, 31, 0, 0)),
        ),
        (
            "cron(0 0 L * ? *)",
            UTC,
            utc(2025, 2, 10, 0, 0),
            Some(utc(2025, 2, 28, 0, 0)),
        ),
        // 15W: 2025-03-15 is a Saturday → Friday 14th; 2025-06-15 a Sunday → Monday 16th.
        (
            "cron(0 12 15W * ? *)",
            UTC,
            utc(2025, 3, 1, 0, 0),
            Some(utc(2025, 3, 14, 12, 0)),
        ),
        (
            "cron(0 12 15W * ? *)",
            UTC,
            utc(2025, 6, 1, 0, 0),
            Some(utc(2025, 6, 16, 12, 0)),
        ),
        (
            "cron(0 12 LW * ? *)",
            UTC,
            utc(2025, 5, 1, 0, 0),
            Some(utc(2025, 5, 30, 12, 0)),
        ),
        // 3#2: second Tuesday; 6L: last Friday.
        (
            "cron(0 10 ? * 3#2 *)",
            UTC,
            utc(2025, 4, 1, 0, 0),
            Some(utc(2025, 4, 8, 10, 0)),
        ),
        (
            "cron(0 10 ? * 6L *)",
            UTC,
            utc(2025, 4, 1, 0, 0),
            Some(utc(2025, 4, 25, 10, 0)),
        ),
        (
            "cron(0 10 ? * 6L *)",
            UTC,
            utc(2025, 4, 25, 10, 0),
            Some(utc(2025, 5, 30, 10, 0)),
        ),
        // Feb with five Sundays: next in 2032.
        (
            "cron(0 0 ? 2 1#5 *)",
            UTC,
            utc(2025, 1, 1, 0, 0),
            Some(utc(2032, 2, 29, 0, 0)),
        ),
        // Year bounds.
        (
            "cron(0 0 1 1 ? 2199)",
            UTC,
            utc(2190, 6, 1, 0, 0),
            Some(utc(2199, 1, 1, 0, 0)),
        ),
        ("cron(0 0 1 1 ? 2199)", UTC, utc(2199, 1, 1, 0, 0), None),
        (
            "cron(0 0 1 1 ? 1970)",
            UTC,
            utc(1960, 1, 1, 0, 0),
            Some(utc(1970, 1, 1, 0, 0)),
        ),
        (
            "cron(0 0 1 1 ? 1970-2020)",
            UTC,
            utc(2025, 1, 1, 0, 0),
            None,
        ),
        (
            "cron(59 23 31 12 ? *)",
            UTC,
            utc(2199, 12, 31, 23, 59),
            None,
        ),
        // Never fires.
        ("cron(0 0 30 2 ? *)", UTC, utc(2025, 1, 1, 0, 0), None),
        (
            "cron(0 0 31 4,6,9,11 ? *)",
            UTC,
            utc(2025, 1, 1, 0, 0),
            None,
        ),
        // Examples from the EventBridge cron reference.
        (
            "cron(0 10 * * ? *)",
            UTC,
            utc(2025, 1, 1, 10, 0),
            Some(utc(2025, 1, 2, 10, 0)),
        ),
        (
            "cron(15 12 * * ? *)",
            UTC,
            utc(2025, 1, 1, 0, 0),
            Some(utc(2025, 1, 1, 12, 15)),
        ),
        (
            "cron(0 18 ? * MON-FRI *)",
            UTC,
            utc(2025, 1, 3, 18, 0),
            Some(utc(2025, 1, 6, 18, 0)),
        ),
        (
            "cron(0 8 1 * ? *)",
            UTC,
            utc(2025, 1, 1, 8, 0),
            Some(utc(2025, 2, 1, 8, 0)),
        ),
        (
            "cron(0/10 * ? * MON-FRI *)",
            UTC,
            utc(2025, 1, 3, 23, 55),
            Some(utc(2025, 1, 6, 0, 0)),
        ),
        (
            "cron(0/5 8-17 ? * MON-FRI *)",
            UTC,
            utc(2025, 1, 6, 17, 55),
            Some(utc(2025, 1, 7, 8, 0)),
        ),
        (
            "cron(0 9 ? * 2#1 *)",
            UTC,
            utc(2025, 5, 1, 0, 0),
            Some(utc(2025, 5, 5, 9, 0)),
        ),
        (
            "cron(0 10 ? * 6L 2002-2005)",
            UTC,
            utc(2025, 1, 1, 0, 0),
            None,
        ),
        (
            "cron(0 10 ? * 6L 2002-2005)",
            UTC,
            utc(2002, 1, 1, 0, 0),
            Some(utc(2002, 1, 25, 10, 0)),
        ),
    ];
    for (s, tz, after, want) in cases {
        assert_eq!(next(s, *tz, *after), *want, "{s} in {tz} after {after}");
    }
}

#[test]
fn never_firing_expressions_return_quickly() {
    let started = std::time::Instant::now();
    for s in [
        "cron(0 0 30 2 ? *)",
        "cron(0 0 31 4,6,9,11 ? *)",
        "cron(* * 31 2 ? *)",
        "cron(0 0 1 1 ? 1970-1980)",
        "cron(* * ? 2 2#5 2026-2027)",
    ] {
        for tz in [UTC, BERLIN, NEW_YORK] {
            assert_eq!(
                next(s, tz, utc(1971, 1, 1, 0, 0).max(utc(2025, 1, 1, 0, 0))),
                None,
                "{s}"
            );
        }
    }
    assert!(
        started.elapsed() < std::time::Duration::from_secs(1),
        "{:?}",
        started.elapsed()
    );
}

#[test]
fn dst_berlin_spring_forward_skips_missing_local_times() {
    // 2025-03-30: 02:00 CET jumps to 03:00 CEST (01:00 UTC).
    let e = expr("cron(30 2 * * ? *)");
    let fires: Vec<_> = e
        .upcoming(utc(2025, 3, 29, 0, 0), BERLIN, None)
        .take(2)
        .collect();
    assert_eq!(
        fires,
        vec![utc(2025, 3, 29, 1, 30), utc(2025, 3, 31, 0, 30)]
    );
    // Every 15 minutes: 01:45 CET is followed by 03:00 CEST.
    assert_eq!(
        next("cron(0/15 * * * ? *)", BERLIN, utc(2025, 3, 30, 0, 45)),
        Some(utc(2025, 3, 30, 1, 0))
    );
}

#[test]
fn dst_berlin_fall_back_fires_repeated_times_once() {
    // 2025-10-26: 03:00 CEST goes back to 02:00 CET (01:00 UTC).
    let e = expr("cron(30 2 * * ? *)");
    let fires: Vec<_> = e
        .upcoming(utc(2025, 10, 25, 12, 0), BERLIN, None)
        .take(2)
        .collect();
    assert_eq!(
        fires,
        vec![utc(2025, 10, 26, 0, 30), utc(2025, 10, 27, 1, 30)]
    );

    let e = expr("cron(0/15 * * * ? *)");
    let fires: Vec<_> = e
        .upcoming(utc(2025, 10, 25, 23, 50), BERLIN, None)
        .take(6)
        .collect();
    assert_eq!(
        fires,
        vec![
            utc(2025, 10, 26, 0, 0), // 02:00 CEST
            utc(2025, 10, 26, 0, 15),
            utc(2025, 10, 26, 0, 30),
            utc(2025, 10, 26, 0, 45), // 02:45 CEST
            utc(2025, 10, 26, 2, 0),  // 03:00 CET; the second 02:xx pass is silent
            utc(2025, 10, 26, 2, 15),
        ]
    );
    // Asked from inside the repeated hour (02:20 CET, second pass).
    assert_eq!(
        e.next_after(utc(2025, 10, 26, 1, 20), BERLIN, None),
        Some(utc(2025, 10, 26, 2, 0))
    );

    // Weekdays 9:00 keep their wall-clock time across the change.
    let e = expr("cron(0 9 ? * MON-FRI *)");
    let fires: Vec<_> = e
        .upcoming(utc(2025, 10, 24, 0, 0), BERLIN, None)
        .take(2)
        .collect();
    assert_eq!(
        fires,
        vec![utc(2025, 10, 24, 7, 0), utc(2025, 10, 27, 8, 0)]
    );
}

#[test]
fn dst_rules_hold_in_far_future_years() {
    // chrono-tz extends the zone rules: summer time still applies in 2150.
    assert_eq!(
        next("cron(0 12 * * ? *)", BERLIN, utc(2150, 7, 1, 0, 0)),
        Some(utc(2150, 7, 1, 10, 0))
    );
    assert_eq!(
        next("cron(0 12 * * ? *)", BERLIN, utc(2150, 12, 1, 0, 0)),
        Some(utc(2150, 12, 1, 11, 0))
    );
}

#[test]
fn dst_new_york_both_transitions() {
    // 2025-03-09: 02:00 EST jumps to 03:00 EDT (07:00 UTC).
    let fires: Vec<_> = expr("cron(30 2 * * ? *)")
        .upcoming(utc(2025, 3, 8, 0, 0), NEW_YORK, None)
        .take(2)
        .collect();
    assert_eq!(fires, vec![utc(2025, 3, 8, 7, 30), utc(2025, 3, 10, 6, 30)]);
    let hourly = expr("cron(0 * * * ? *)");
    let fires: Vec<_> = hourly
        .upcoming(utc(2025, 3, 9, 5, 30), NEW_YORK, None)
        .take(3)
        .collect();
    assert_eq!(
        fires,
        vec![
            utc(2025, 3, 9, 6, 0),
            utc(2025, 3, 9, 7, 0),
            utc(2025, 3, 9, 8, 0)
        ]
    );

    // 2025-11-02: 02:00 EDT goes back to 01:00 EST (06:00 UTC).
    let fires: Vec<_> = expr("cron(30 1 * * ? *)")
        .upcoming(utc(2025, 11, 1, 0, 0), NEW_YORK, None)
        .take(3)
        .collect();
    assert_eq!(
        fires,
        vec![
            utc(2025, 11, 1, 5, 30),
            utc(2025, 11, 2, 5, 30),
            utc(2025, 11, 3, 6, 30)
        ]
    );
    let fires: Vec<_> = hourly
        .upcoming(utc(2025, 11, 2, 4, 30), NEW_YORK, None)
        .take(3)
        .collect();
    // 01:00 EDT, then 01:00 EST (06:00 UTC) is the repeat and is skipped, 02:00 EST.
    assert_eq!(
        fires,
        vec![
            utc(2025, 11, 2, 5, 0),
            utc(2025, 11, 2, 7, 0),
            utc(2025, 11, 2, 8, 0)
        ]
    );
}

#[test]
fn rate_counts_elapsed_time_from_start() {
    let e = expr("rate(5 minutes)");
    let start = Some(utc(2025, 1, 1, 10, 0));
    assert_eq!(
        e.next_after(utc(2025, 1, 1, 9, 0), UTC, start),
        Some(utc(2025, 1, 1, 10, 0))
    );
    assert_eq!(
        e.next_after(utc(2025, 1, 1, 10, 0), UTC, start),
        Some(utc(2025, 1, 1, 10, 5))
    );
    assert_eq!(
        e.next_after(utc(2025, 1, 1, 10, 7), UTC, start),
        Some(utc(2025, 1, 1, 10, 10))
    );
    assert_eq!(
        e.next_after(utc(2025, 1, 1, 10, 10), UTC, start),
        Some(utc(2025, 1, 1, 10, 15))
    );
    // Seconds of the start are kept: counting is exact elapsed time.
    let start_s = Some(utc(2025, 1, 1, 10, 0) + TimeDelta::seconds(17));
    assert_eq!(
        e.next_after(utc(2025, 1, 1, 10, 4), UTC, start_s),
        Some(utc(2025, 1, 1, 10, 5) + TimeDelta::seconds(17))
    );
    // A day is 24 hours across Berlin's spring change (13:00 CET → 14:00 CEST).
    let day = expr("rate(1 day)");
    let start = Some(utc(2025, 3, 29, 12, 0));
    assert_eq!(
        day.next_after(utc(2025, 3, 29, 12, 0), BERLIN, start),
        Some(utc(2025, 3, 30, 12, 0))
    );
    // Without a start, counts from `after`.
    assert_eq!(
        expr("rate(2 hours)").next_after(utc(2025, 1, 1, 10, 3), UTC, None),
        Some(utc(2025, 1, 1, 12, 3))
    );
    assert_eq!(
        expr("rate(2 hours)").rate_interval(),
        Some(TimeDelta::hours(2))
    );
    // Huge values do not overflow.
    let huge = expr("rate(4294967295 days)");
    assert_eq!(
        huge.next_after(utc(2025, 1, 1, 0, 0), UTC, Some(utc(2024, 1, 1, 0, 0))),
        None
    );
}

#[test]
fn at_fires_once_in_local_time() {
    let e = expr("at(2026-12-01T09:00:00)");
    assert_eq!(e.kind(), ExpressionKind::At);
    assert!(!e.is_recurring());
    assert_eq!(
        e.next_after(utc(2026, 1, 1, 0, 0), BERLIN, None),
        Some(utc(2026, 12, 1, 8, 0))
    );
    assert_eq!(
        e.next_after(utc(2026, 1, 1, 0, 0), UTC, None),
        Some(utc(2026, 12, 1, 9, 0))
    );
    assert_eq!(e.next_after(utc(2026, 12, 1, 8, 0), BERLIN, None), None);
    // Never before the start.
    assert_eq!(
        e.next_after(utc(2026, 1, 1, 0, 0), BERLIN, Some(utc(2026, 12, 2, 0, 0))),
        None
    );
    // A non-existent local time fires shifted by the gap (03:30 CEST / EDT).
    assert_eq!(
        expr("at(2025-03-30T02:30:00)").next_after(utc(2025, 1, 1, 0, 0), BERLIN, None),
        Some(utc(2025, 3, 30, 1, 30))
    );
    assert_eq!(
        expr("at(2025-03-09T02:30:00)").next_after(utc(2025, 1, 1, 0, 0), NEW_YORK, None),
        Some(utc(2025, 3, 9, 7, 30))
    );
    // A repeated local time fires at its first occurrence.
    assert_eq!(
        expr("at(2025-10-26T02:30:00)").next_after(utc(2025, 1, 1, 0, 0), BERLIN, None),
        Some(utc(2025, 10, 26, 0, 30))
    );
}

#[test]
fn cron_respects_start() {
    let e = expr("cron(0 9 * * ? *)");
    let start = Some(utc(2025, 1, 5, 9, 0));
    // A fire exactly at the start counts.
    assert_eq!(
        e.next_after(utc(2025, 1, 1, 0, 0), UTC, start),
        Some(utc(2025, 1, 5, 9, 0))
    );
    assert_eq!(
        e.next_after(utc(2025, 1, 5, 9, 0), UTC, start),
        Some(utc(2025, 1, 6, 9, 0))
    );
}

#[test]
fn rejections_say_why() {
    let cases: &[(&str, &str)] = &[
        ("", "schedule expression is empty; use cron(...), rate(...) or at(...)"),
        ("every day", "unknown schedule expression 'every day'; use cron(minutes hours day-of-month month day-of-week year), rate(value unit) or at(yyyy-mm-ddThh:mm:ss)"),
        ("cron(0 9 * * MON *)", "day-of-month and day-of-week cannot both be specified; use ? in one of them"),
        ("cron(0 9 * * * *)", "day-of-month and day-of-week cannot both be specified; use ? in one of them"),
        ("cron(0 9 1 * 2 *)", "day-of-month and day-of-week cannot both be specified; use ? in one of them"),
        ("cron(0 9 ? * ? *)", "day-of-month and day-of-week cannot both be ?; give a value or * in one of them"),
        ("cron(0 9 ? FOO * *)", "unknown month 'FOO'; use 1-12 or JAN-DEC"),
        ("cron(0 9 ? * FUN *)", "unknown day of week 'FUN'; use 1-7 (1 = Sunday) or SUN-SAT"),
        ("cron(0 9 * * ?)", "cron expression needs exactly 6 fields (minutes hours day-of-month month day-of-week year), got 5"),
        ("cron(0 9 ? * MON-FRI * *)", "cron expression needs exactly 6 fields (minutes hours day-of-month month day-of-week year), got 7"),
        ("cron(60 * * * ? *)", "minutes value 60 is out of range; use 0-59"),
        ("cron(0 24 * * ? *)", "hours value 24 is out of range; use 0-23"),
        ("cron(0 0 0 * ? *)", "day-of-month value 0 is out of range; use 1-31"),
        ("cron(0 0 32W * ? *)", "day-of-month value 32 is out of range; use 1-31"),
        ("cron(0 0 * 13 ? *)", "month value 13 is out of range; use 1-12"),
        ("cron(0 0 ? * 8 *)", "day-of-week value 8 is out of range; use 1-7"),
        ("cron(0 0 ? * 0 *)", "day-of-week value 0 is out of range; use 1-7"),
        ("cron(0 0 1 1 ? 1969)", "year value 1969 is out of range; use 1970-2199"),
        ("cron(0 0 1 1 ? 2200)", "year value 2200 is out of range; use 1970-2199"),
        ("cron(0 0 ? * 3#1,6#3 *)", "day-of-week field: '3#1' must stand alone, not in a list or range"),
        ("cron(0 0 ? * 3#6 *)", "day-of-week '3#6': the number after # must be 1-5 (the 1st to 5th such day of the month)"),
        ("cron(0 0 ? * 8#1 *)", "day-of-week value 8 is out of range; use 1-7"),
        ("cron(0 0 ? * 1/2 *)", "'/' is not allowed in the day-of-week field (allowed there: , - * ? L #)"),
        ("cron(L 0 * * ? *)", "'L' is not allowed in the minutes field (allowed there: , - * /)"),
        ("cron(0 0 ? * 15W *)", "'W' is not allowed in the day-of-week field (allowed there: , - * ? L #)"),
        ("cron(0 0 ? 1#2 * *)", "'#' is not allowed in the month field (allowed there: , - * /)"),
        ("cron(0 ? * * ? *)", "'?' is not allowed in the hours field (allowed there: , - * /)"),
        ("cron(0 0 1,L * ? *)", "day-of-month field: 'L' must stand alone, not in a list or range"),
        ("cron(0 0 1-L * ? *)", "day-of-month field: 'L' must stand alone, not in a list or range"),
        ("cron(0 0 15W/2 * ? *)", "day-of-month field: '15W' must stand alone, not in a list or range"),
        ("cron(0 0 W * ? *)", "day-of-month field: 'W' is not a valid value; use 1-31 with the wildcards , - * ? / L W"),
        ("cron(0 0 5L * ? *)", "day-of-month field: '5L' is not a valid value; use 1-31 with the wildcards , - * ? / L W"),
        ("cron(0 0 ? * 5W *)", "'W' is not allowed in the day-of-week field (allowed there: , - * ? L #)"),
        ("cron(0 0 ? * 2#0 *)", "day-of-week '2#0': the number after # must be 1-5 (the 1st to 5th such day of the month)"),
        ("cron(0 0 ? * 2# *)", "day-of-week field: '2#' is not a valid value; use 1-7 with the wildcards , - * ? L #"),
        ("cron(0 0 ? * L-2 *)", "day-of-week field: 'L' must stand alone, not in a list or range"),
        ("cron(0 0 ? jan-foo * *)", "unknown month 'foo'; use 1-12 or JAN-DEC"),
        ("cron(0 0 ? * 6L,2 *)", "day-of-week field: '6L' must stand alone, not in a list or range"),
        ("cron(0 0 ? * FRI#2 *)", "day-of-week field: 'FRI#2' is not a valid value; use 1-7 with the wildcards , - * ? L #"),
        ("cron(0 22-2 * * ? *)", "hours range '22-2' runs backwards; write it as two ranges or a list (e.g. 22-23,0-2)"),
        ("cron(0 0 ? * SAT-SUN *)", "day-of-week range 'SAT-SUN' runs backwards; write it as two ranges or a list (e.g. 22-23,0-2)"),
        ("cron(0/0 * * * ? *)", "minutes increment in '0/0' must be between 1 and 59"),
        ("cron(0/60 * * * ? *)", "minutes increment in '0/60' must be between 1 and 59"),
        ("cron(0 0/24 * * ? *)", "hours increment in '0/24' must be between 1 and 23"),
        ("cron(1,,2 * * * ? *)", "minutes field '1,,2' has an empty value; separate values with single commas"),
        ("cron(1-2-3 * * * ? *)", "minutes field: '1-2-3' is not a valid value; use 0-59 with the wildcards , - * /"),
        ("cron(0 0 * * ? 20x5)", "year field: '20x5' is not a valid value; use 1970-2199 with the wildcards , - * /"),
        ("rate(0 minutes)", "rate value '0' must be a positive whole number, e.g. rate(5 minutes)"),
        ("rate(-5 minutes)", "rate value '-5' must be a positive whole number, e.g. rate(5 minutes)"),
        ("rate(1.5 hours)", "rate value '1.5' must be a positive whole number, e.g. rate(5 minutes)"),
        ("rate(1 hours)", "rate(1 hours) is not valid: write rate(1 hour) (singular unit only when the value is 1)"),
        ("rate(5 hour)", "rate(5 hour) is not valid: write rate(5 hours) (singular unit only when the value is 1)"),
        ("rate(5 weeks)", "unknown rate unit 'weeks'; use minute, minutes, hour, hours, day or days"),
        ("rate(5 Minutes)", "unknown rate unit 'Minutes'; use minute, minutes, hour, hours, day or days"),
        ("rate(5)", "rate expression needs a value and a unit, e.g. rate(5 minutes), got '5'"),
        ("at(2026-02-30T09:00:00)", "at(2026-02-30T09:00:00) is not a real date and time"),
        ("at(2026-12-01T25:00:00)", "at(2026-12-01T25:00:00) is not a real date and time"),
        ("at(2026-12-01 09:00:00)", "at() needs a local date and time as yyyy-mm-ddThh:mm:ss without offset or fraction (set the time zone separately), got '2026-12-01 09:00:00'"),
        ("at(2026-12-01T09:00:00Z)", "at() needs a local date and time as yyyy-mm-ddThh:mm:ss without offset or fraction (set the time zone separately), got '2026-12-01T09:00:00Z'"),
        ("at(2026-12-01T09:00)", "at() needs a local date and time as yyyy-mm-ddThh:mm:ss without offset or fraction (set the time zone separately), got '2026-12-01T09:00'"),
    ];
    for (input, message) in cases {
        match Expression::parse(input) {
            Ok(e) => panic!("{input} was accepted as {e}"),
            Err(err) => assert_eq!(err.to_string(), *message, "{input}"),
        }
    }
    // Keywords are lower case.
    assert!(matches!(
        Expression::parse("CRON(0 9 ? * * *)"),
        Err(ExpressionError::UnknownKind(_))
    ));
    assert!(matches!(
        Expression::parse("cron 0 9 ? * * *"),
        Err(ExpressionError::UnknownKind(_))
    ));
    // 256 characters at most, and echoed input is shortened.
    let long = format!("cron({})", "1,".repeat(200));
    assert_eq!(Expression::parse(&long), Err(ExpressionError::TooLong(406)));
    let junk = format!("x{}", "y".repeat(200));
    let msg = Expression::parse(&junk).unwrap_err().to_string();
    assert!(msg.len() < 250, "{msg}");
}

#[test]
fn canonical_text_is_what_eventbridge_gets() {
    let cases = [
        ("cron(0 9 ? * MON-FRI *)", "cron(0 9 ? * MON-FRI *)"),
        ("  cron( 0  9 ? *  mon-fri * ) ", "cron(0 9 ? * MON-FRI *)"),
        ("cron(0 0 l * ? *)", "cron(0 0 L * ? *)"),
        ("cron(0 0 15w * ? *)", "cron(0 0 15W * ? *)"),
        ("cron(0 10 ? * 6l 2002-2005)", "cron(0 10 ? * 6L 2002-2005)"),
        ("rate(05 minutes)", "rate(5 minutes)"),
        ("rate( 1  day )", "rate(1 day)"),
        ("at( 2026-12-01T09:00:00 )", "at(2026-12-01T09:00:00)"),
    ];
    for (input, canonical) in cases {
        let e = expr(input);
        assert_eq!(e.as_str(), canonical);
        assert_eq!(e.to_string(), canonical);
        assert_eq!(expr(canonical), e);
    }
}

#[test]
fn serde_as_string() {
    #[derive(serde::Serialize, serde::Deserialize, PartialEq, Debug)]
    struct Stored {
        expression: Expression,
        timezone: Timezone,
    }
    let stored = Stored {
        expression: expr("cron(0 9 ? * mon-fri *)"),
        timezone: Timezone::parse("Europe/Berlin").unwrap(),
    };
    let json = serde_json::to_string(&stored).unwrap();
    assert_eq!(
        json,
        r#"{"expression":"cron(0 9 ? * MON-FRI *)","timezone":"Europe/Berlin"}"#
    );
    assert_eq!(serde_json::from_str::<Stored>(&json).unwrap(), stored);
    let bad = r#"{"expression":"cron(0 9 * * MON *)","timezone":"UTC"}"#;
    let err = serde_json::from_str::<Stored>(bad).unwrap_err().to_string();
    assert!(err.contains("cannot both be specified"), "{err}");
}

// ---------- properties ----------

const ZONES: [Tz; 6] = [
    chrono_tz::UTC,
    chrono_tz::Europe::Berlin,
    chrono_tz::America::New_York,
    chrono_tz::Australia::Lord_Howe, // 30-minute DST shift
    chrono_tz::Asia::Kathmandu,      // +05:45
    chrono_tz::Pacific::Apia,        // skipped a whole day in 2011
];

fn valid_cron() -> impl Strategy<Value = String> {
    let minutes = prop::sample::select(vec![
        "*", "0/15", "*/5", "7", "0,30", "10-20", "5-50/7", "59",
    ]);
    let hours = prop::sample::select(vec!["*", "9", "0-5", "*/3", "1,2,3", "22", "2"]);
    let dom = prop::sample::select(vec!["*", "L", "15W", "1", "LW", "1-10", "*/2", "31", "1W"]);
    let dow = prop::sample::select(vec![
        "*", "MON-FRI", "6L", "3#2", "1", "L", "SUN,SAT", "2#5",
    ]);
    let months = prop::sample::select(vec!["*", "JAN", "3,10,11", "*/2", "FEB"]);
    let years = prop::sample::select(vec!["*", "2011-2030", "2025", "2010-2012"]);
    (minutes, hours, dom, dow, months, years, any::<bool>()).prop_map(
        |(mi, h, dom, dow, mo, y, by_month)| {
            let (dom, dow) = if by_month { (dom, "?") } else { ("?", dow) };
            format!("cron({mi} {h} {dom} {mo} {dow} {y})")
        },
    )
}

fn instant() -> impl Strategy<Value = DateTime<Utc>> {
    // 2009-01-01 .. 2032-01-01, at any second.
    (1_230_768_000i64..1_956_528_000i64)
        .prop_map(|s| DateTime::from_timestamp(s, 0).unwrap_or(DateTime::UNIX_EPOCH))
}

/// Whether `t` is a fire time by definition: a whole minute whose local time
/// matches, counted at its first occurrence only.
fn is_fire(e: &Expression, tz: Tz, t: DateTime<Utc>) -> bool {
    let local = t.with_timezone(&tz).naive_local();
    let cron = e.cron_for_tests().expect("cron expression");
    cron.matches(local)
        && tz
            .from_local_datetime(&local)
            .earliest()
            .map(|f| f.with_timezone(&Utc))
            == Some(t)
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(300))]

    #[test]
    fn parse_never_panics(s in ".{0,300}") {
        let _ = Expression::parse(&s);
    }

    #[test]
    fn parse_never_panics_on_near_misses(
        inner in "[0-9A-Za-z*?,/#LW -]{0,40}",
        kind in prop::sample::select(vec!["cron", "rate", "at"]),
    ) {
        if let Ok(e) = Expression::parse(&format!("{kind}({inner})")) {
            // Whatever is accepted round-trips through its canonical text.
            let again = Expression::parse(e.as_str());
            prop_assert_eq!(again.as_ref().map(Expression::as_str), Ok(e.as_str()));
        }
    }

    #[test]
    fn cron_next_is_strictly_increasing_and_stable(
        s in valid_cron(),
        zone in 0usize..ZONES.len(),
        after in instant(),
        offsets in prop::collection::vec(0.0f64..1.0, 3),
    ) {
        let e = Expression::parse(&s).map_err(|err| TestCaseError::fail(format!("{s}: {err}")))?;
        let tz = ZONES[zone];
        let mut cursor = after;
        for frac in offsets {
            let Some(next) = e.next_after(cursor, tz, None) else { break };
            prop_assert!(next > cursor);
            prop_assert!(is_fire(&e, tz, next), "{} is no fire of {}", next, s);
            // Same answer again, and from any instant between cursor and next.
            prop_assert_eq!(e.next_after(cursor, tz, None), Some(next));
            let span = (next - cursor).num_seconds();
            let mid = cursor + TimeDelta::seconds((span as f64 * frac) as i64);
            if mid < next {
                prop_assert_eq!(e.next_after(mid, tz, None), Some(next));
            }
            cursor = next;
        }
    }

    #[test]
    fn cron_next_matches_minute_scan(
        s in valid_cron(),
        zone in 0usize..ZONES.len(),
        after in instant(),
    ) {
        let e = Expression::parse(&s).map_err(|err| TestCaseError::fail(format!("{s}: {err}")))?;
        let tz = ZONES[zone];
        let next = e.next_after(after, tz, None);
        // Scan the minutes of the next two days (or up to `next`): no fire is
        // missed, and `next` is the first one.
        let mut t = after.with_timezone(&Utc);
        t = DateTime::from_timestamp(t.timestamp() - t.timestamp().rem_euclid(60) + 60, 0)
            .unwrap_or(t);
        let end = after + TimeDelta::days(2);
        while t <= end {
            if is_fire(&e, tz, t) {
                prop_assert_eq!(next, Some(t), "{} in {} after {}", s, tz, after);
                return Ok(());
            }
            if Some(t) == next {
                prop_assert!(false, "{} in {}: {} returned but is no fire", s, tz, t);
            }
            t += TimeDelta::minutes(1);
        }
        prop_assert!(next.is_none_or(|n| n > end));
    }

    #[test]
    fn rate_next_is_on_the_grid(
        value in 1u32..500,
        unit in prop::sample::select(vec!["minutes", "hours", "days"]),
        start in instant(),
        after in instant(),
    ) {
        let unit = if value == 1 { unit.trim_end_matches('s') } else { unit };
        let e = Expression::parse(&format!("rate({value} {unit})")).map_err(|err| TestCaseError::fail(err.to_string()))?;
        let period = e.rate_interval().ok_or_else(|| TestCaseError::fail("no interval"))?;
        let next = e.next_after(after, BERLIN, Some(start)).ok_or_else(|| TestCaseError::fail("no next"))?;
        prop_assert!(next > after && next >= start);
        let k = (next - start).num_seconds() / period.num_seconds();
        prop_assert_eq!(start + period * k as i32, next);
        // The grid point before `next` is not a valid answer.
        prop_assert!(next == start || next - period <= after);
        prop_assert_eq!(e.next_after(after, BERLIN, Some(start)), Some(next));
        prop_assert!(e.next_after(next, BERLIN, Some(start)) > Some(next));
    }
}
