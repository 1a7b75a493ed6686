//! `cron(minutes hours day-of-month month day-of-week year)` as EventBridge
//! reads it: parsing into per-field sets, and finding the next matching local
//! minute by skipping field by field (year → month → day → hour → minute), so
//! even an expression that never fires is settled after at most
//! 230 years × 12 months of cheap set operations.
//!
//! Where the EventBridge documentation is silent we follow Quartz, the cron
//! dialect EventBridge's syntax comes from, or — when unsure what EventBridge
//! accepts — refuse, since refusing early with a clear message beats a
//! schedule that EventBridge Scheduler later rejects:
//!
//! * `a/n` means `a`, `a+n`, … up to the field's maximum; `*/n` starts at the
//!   field's minimum; `a-b/n` (Quartz) is accepted too. An increment must be
//!   between 1 and the field's span minus one (`0/59` in minutes is the
//!   largest that can apply twice).
//! * Ranges must not run backwards (`22-2`, `SAT-SUN` are refused: write a
//!   list instead) — EventBridge's handling of wrapping ranges is undocumented.
//! * `L`, `LW`, `nW` (day-of-month) and `L`, `nL`, `n#k` (day-of-week) must
//!   stand alone, not in lists or ranges (the docs state this for `#`; Quartz
//!   for the others). They take numbers only (`6L`, `3#2`, not `FRIL`,
//!   `TUE#2`), as in every documented example.
//! * `L` alone in day-of-week is the last day of the week: Saturday (7).
//! * `nW` is the weekday (Mon–Fri) nearest to day `n` without leaving the
//!   month: `1W` on a Saturday is Monday the 3rd, `31W` on a Sunday is Friday
//!   the 29th; in a month shorter than `n` days it does not fire.
//! * `n#k` takes `k` 1-5; a month without a k-th such day does not fire.
//! * Names and letters (`JAN`, `mon`, `l`, `15w`) are case-insensitive;
//!   the canonical text is upper case. Errors echo the input as written.

use chrono::{Datelike, NaiveDate, NaiveDateTime, TimeDelta, Timelike};

use crate::bits::BitSet;
use crate::error::{snippet, CronField, ExpressionError};

const MONTHS: [&str; 12] = [
    "JAN", "FEB", "MAR", "APR", "MAY", "JUN", "JUL", "AUG", "SEP", "OCT", "NOV", "DEC",
];
const WEEKDAYS: [&str; 7] = ["SUN", "MON", "TUE", "WED", "THU", "FRI", "SAT"];

/// Which days of a month fire, from the day-of-month field.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
enum DayOfMonth {
    /// Explicit days 1-31 (days a month lacks never fire).
    Days(BitSet),
    /// `L`: the last day of the month.
    Last,
    /// `LW`: the last weekday (Mon–Fri) of the month.
    LastWeekday,
    /// `nW`: the weekday nearest to day `n` within the month.
    NearestWeekday(u32),
}

/// Which days of a month fire, from the day-of-week field (1 = Sunday).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
enum DayOfWeek {
    /// Explicit weekdays 1-7 (`L` alone is {7}).
    Weekdays(BitSet),
    /// `nL`: the last weekday `n` of the month.
    Last(u32),
    /// `n#k`: the k-th weekday `n` of the month.
    Nth(u32, u32),
}

/// The day part: exactly one of the two day fields is `?`.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
enum Days {
    Month(DayOfMonth),
    Week(DayOfWeek),
}

/// A parsed cron expression.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub(crate) struct Cron {
    minutes: BitSet,
    hours: BitSet,
    days: Days,
    months: BitSet,
    /// Years as `year - 1970`.
    years: BitSet,
}

/// One field after parsing, before the two day fields are combined.
enum Parsed {
    /// `?`
    Any,
    Set(BitSet),
    DomLast,
    DomLastWeekday,
    DomNearest(u32),
    DowLast(u32),
    DowNth(u32, u32),
}

impl Cron {
    /// Parses the inside of `cron(...)`. Returns the cron and its canonical
    /// field text (fields upper-cased, joined by single spaces).
    pub(crate) fn parse(inner: &str) -> Result<(Cron, String), ExpressionError> {
        let fields: Vec<&str> = inner.split_ascii_whitespace().collect();
        if fields.len() != 6 {
            return Err(ExpressionError::CronFieldCount(fields.len()));
        }
        let mut parsed = Vec::with_capacity(6);
        for (field, text) in CronField::ALL.into_iter().zip(&fields) {
            parsed.push(parse_field(field, text)?);
        }
        let set = |p: &Parsed| match p {
            Parsed::Set(s) => *s,
            // parse_field only yields other variants for the day fields.
            _ => BitSet::default(),
        };
        let days = match (&parsed[2], &parsed[4]) {
            (Parsed::Any, Parsed::Any) => return Err(ExpressionError::BothDaysAny),
            (Parsed::Any, dow) => Days::Week(match dow {
                Parsed::DowLast(w) => DayOfWeek::Last(*w),
                Parsed::DowNth(w, k) => DayOfWeek::Nth(*w, *k),
                other => DayOfWeek::Weekdays(set(other)),
            }),
            (dom, Parsed::Any) => Days::Month(match dom {
                Parsed::DomLast => DayOfMonth::Last,
                Parsed::DomLastWeekday => DayOfMonth::LastWeekday,
                Parsed::DomNearest(n) => DayOfMonth::NearestWeekday(*n),
                other => DayOfMonth::Days(set(other)),
            }),
            _ => return Err(ExpressionError::BothDaysSpecified),
        };
        let cron = Cron {
            minutes: set(&parsed[0]),
            hours: set(&parsed[1]),
            days,
            months: set(&parsed[3]),
            years: set(&parsed[5]),
        };
        Ok((cron, fields.join(" ").to_ascii_uppercase()))
    }

    /// The first local minute strictly after `t` that the expression matches.
    pub(crate) fn next_local_after(&self, t: NaiveDateTime) -> Option<NaiveDateTime> {
        let start = t
            .with_second(0)?
            .with_nanosecond(0)?
            .checked_add_signed(TimeDelta::minutes(1))?;
        let (sy, smo, sd, sh, smi) = (
            start.year(),
            start.month(),
            start.day(),
            start.hour(),
            start.minute(),
        );
        let first_year = u32::try_from(sy.max(1970) - 1970).ok()?;
        let mut yi = self.years.next_from(first_year);
        while let Some(idx) = yi {
            let year = 1970 + idx as i32;
            let on_y = year == sy;
            let mut mo = self.months.next_from(if on_y { smo } else { 1 });
            while let Some(month) = mo {
                let on_m = on_y && month == smo;
                let days = self.day_set(year, month);
                let mut d = days.next_from(if on_m { sd } else { 1 });
                while let Some(day) = d {
                    let on_d = on_m && day == sd;
                    let mut h = self.hours.next_from(if on_d { sh } else { 0 });
                    while let Some(hour) = h {
                        let on_h = on_d && hour == sh;
                        if let Some(minute) = self.minutes.next_from(if on_h { smi } else { 0 }) {
                            return NaiveDate::from_ymd_opt(year, month, day)?
                                .and_hms_opt(hour, minute, 0);
                        }
                        h = self.hours.next_from(hour + 1);
                    }
                    d = days.next_from(day + 1);
                }
                mo = self.months.next_from(month + 1);
            }
            yi = self.years.next_from(idx + 1);
        }
        None
    }

    /// Whether the local time `t` (at minute precision) matches. Used by tests
    /// as an independent oracle for [`Cron::next_local_after`].
    #[cfg(test)]
    pub(crate) fn matches(&self, t: NaiveDateTime) -> bool {
        t.second() == 0
            && self.minutes.contains(t.minute())
            && self.hours.contains(t.hour())
            && self.months.contains(t.month())
            && u32::try_from(t.year() - 1970).is_ok_and(|y| self.years.contains(y))
            && self.day_set(t.year(), t.month()).contains(t.day())
    }

    /// The days of `year`-`month` that fire.
    fn day_set(&self, year: i32, month: u32) -> BitSet {
        let dim = days_in_month(year, month);
        // Weekday of the 1st, 1 = Sunday … 7 = Saturday.
        let Some(w1) =
            NaiveDate::from_ymd_opt(year, month, 1).map(|d| d.weekday().number_from_sunday())
        else {
            return BitSet::default();
        };
        let weekday = |day: u32| (w1 - 1 + day - 1) % 7 + 1;
        let mut out = BitSet::default();
        match &self.days {
            Days::Month(DayOfMonth::Days(days)) => return days.intersect(BitSet::range(1, dim)),
            Days::Month(DayOfMonth::Last) => out.insert(dim),
            Days::Month(DayOfMonth::LastWeekday) => out.insert(match weekday(dim) {
                7 => dim - 1,
                1 => dim - 2,
                _ => dim,
            }),
            Days::Month(DayOfMonth::NearestWeekday(n)) => {
                let n = *n;
                if n <= dim {
                    out.insert(match weekday(n) {
                        7 if n == 1 => 3,
                        7 => n - 1,
                        1 if n == dim => n - 2,
                        1 => n + 1,
                        _ => n,
                    });
                }
            }
            Days::Week(DayOfWeek::Weekdays(wds)) => {
                for day in 1..=dim {
                    if wds.contains(weekday(day)) {
                        out.insert(day);
                    }
                }
            }
            Days::Week(DayOfWeek::Last(w)) => out.insert(dim - (weekday(dim) + 7 - w) % 7),
            Days::Week(DayOfWeek::Nth(w, k)) => {
                let day = 1 + (w + 7 - w1) % 7 + 7 * (k - 1);
                if day <= dim {
                    out.insert(day);
                }
            }
        }
        out
    }
}

fn days_in_month(year: i32, month: u32) -> u32 {
    match month {
        4 | 6 | 9 | 11 => 30,
        2 if NaiveDate::from_ymd_opt(year, 2, 29).is_some() => 29,
        2 => 28,
        _ => 31,
    }
}

fn parse_field(field: CronField, text: &str) -> Result<Parsed, ExpressionError> {
    let items: Vec<&str> = text.split(',').collect();
    if items.iter().any(|i| i.is_empty()) {
        return Err(ExpressionError::EmptyValue {
            field,
            value: snippet(text),
        });
    }
    let alone = items.len() == 1;
    let mut set = BitSet::default();
    for item in items {
        if let Some(special) = parse_special(field, item)? {
            if !alone {
                return Err(ExpressionError::MustStandAlone {
                    field,
                    token: snippet(item),
                });
            }
            return Ok(special);
        }
        set = set.union(parse_plain(field, item)?);
    }
    Ok(Parsed::Set(set))
}

/// `?` and the L / W / # forms; `Ok(None)` for anything else.
fn parse_special(field: CronField, item: &str) -> Result<Option<Parsed>, ExpressionError> {
    if item == "?" {
        return match field {
            CronField::DayOfMonth | CronField::DayOfWeek => Ok(Some(Parsed::Any)),
            _ => Err(not_allowed(field, '?')),
        };
    }
    let digits = |s: &str| !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit());
    match field {
        CronField::DayOfMonth => {
            if item.eq_ignore_ascii_case("L") {
                return Ok(Some(Parsed::DomLast));
            }
            if item.eq_ignore_ascii_case("LW") {
                return Ok(Some(Parsed::DomLastWeekday));
            }
            if let Some(n) = item.strip_suffix(['W', 'w']).filter(|n| digits(n)) {
                return Ok(Some(Parsed::DomNearest(number(field, n)?)));
            }
        }
        CronField::DayOfWeek => {
            if item.eq_ignore_ascii_case("L") {
                let mut sat = BitSet::default();
                sat.insert(7);
                return Ok(Some(Parsed::Set(sat)));
            }
            if let Some(n) = item.strip_suffix(['L', 'l']).filter(|n| digits(n)) {
                return Ok(Some(Parsed::DowLast(number(field, n)?)));
            }
            if let Some((w, k)) = item.split_once('#') {
                if !digits(w) || !digits(k) {
                    return Err(invalid(field, item));
                }
                let w = number(field, w)?;
                let k_num: u32 = k.parse().unwrap_or(u32::MAX);
                if !(1..=5).contains(&k_num) {
                    return Err(ExpressionError::NthOutOfRange(snippet(item)));
                }
                return Ok(Some(Parsed::DowNth(w, k_num)));
            }
        }
        _ => {}
    }
    Ok(None)
}

/// `*`, `a`, `a-b`, each optionally followed by `/step`.
fn parse_plain(field: CronField, item: &str) -> Result<BitSet, ExpressionError> {
    let (base, step) = match item.split_once('/') {
        Some((b, s)) => (b, Some(s)),
        None => (item, None),
    };
    if step.is_some() && field == CronField::DayOfWeek {
        return Err(not_allowed(field, '/'));
    }
    let (lo, hi) = if base == "*" {
        (field.min(), field.max())
    } else if let Some((a, b)) = base.split_once('-') {
        let (lo, hi) = (value(field, a, item)?, value(field, b, item)?);
        if lo > hi {
            return Err(ExpressionError::ReversedRange {
                field,
                range: snippet(base),
            });
        }
        (lo, hi)
    } else {
        let v = value(field, base, item)?;
        (v, if step.is_some() { field.max() } else { v })
    };
    // Years are stored as `year - 1970` so they fit the 256-bit set.
    let base = if field == CronField::Year { 1970 } else { 0 };
    let Some(step) = step else {
        return Ok(BitSet::range(lo - base, hi - base));
    };
    let max_step = field.max() - field.min();
    let step_num = if !step.is_empty() && step.bytes().all(|b| b.is_ascii_digit()) {
        step.parse::<u32>().unwrap_or(u32::MAX)
    } else {
        return Err(invalid(field, item));
    };
    if step_num == 0 || step_num > max_step {
        return Err(ExpressionError::BadIncrement {
            field,
            token: snippet(item),
            max_step,
        });
    }
    let mut set = BitSet::default();
    let mut v = lo;
    while v <= hi {
        set.insert(v - base);
        v += step_num;
    }
    Ok(set)
}

/// One number or name inside a plain item.
fn value(field: CronField, tok: &str, item: &str) -> Result<u32, ExpressionError> {
    if !tok.is_empty() && tok.bytes().all(|b| b.is_ascii_digit()) {
        return number(field, tok);
    }
    if !tok.is_empty() && tok.bytes().all(|b| b.is_ascii_alphabetic()) {
        let names: &[&str] = match field {
            CronField::Month => &MONTHS,
            CronField::DayOfWeek => &WEEKDAYS,
            _ => &[],
        };
        if let Some(i) = names.iter().position(|n| n.eq_ignore_ascii_case(tok)) {
            return Ok(i as u32 + 1);
        }
        let upper = tok.to_ascii_uppercase();
        if matches!(upper.as_str(), "L" | "W" | "LW") {
            // L / W inside a list, range or step, or in a field without them.
            for wc in upper.chars() {
                if !field.wildcards().contains(wc) {
                    return Err(not_allowed(field, wc));
                }
            }
            return Err(misplaced(field, tok, item));
        }
        return Err(match field {
            CronField::Month => ExpressionError::UnknownMonth(snippet(tok)),
            CronField::DayOfWeek => ExpressionError::UnknownWeekday(snippet(tok)),
            _ => invalid(field, item),
        });
    }
    for wc in ['?', '#', 'L', 'W'] {
        if tok.contains(wc) || tok.contains(wc.to_ascii_lowercase()) {
            return Err(if field.wildcards().contains(wc) {
                misplaced(field, tok, item)
            } else {
                not_allowed(field, wc)
            });
        }
    }
    Err(invalid(field, item))
}

/// A decimal number within the field's range.
fn number(field: CronField, digits: &str) -> Result<u32, ExpressionError> {
    match digits.parse::<u32>() {
        Ok(v) if (field.min()..=field.max()).contains(&v) => Ok(v),
        _ => Err(ExpressionError::OutOfRange {
            field,
            value: snippet(digits),
            min: field.min(),
            max: field.max(),
        }),
    }
}

/// A wildcard the field allows, but in a form it does not: inside a range
/// or step (`1-L`, `15W/2`) it must stand alone; on its own (`W`, `5L` in
/// day-of-month) the form itself is wrong.
fn misplaced(field: CronField, tok: &str, item: &str) -> ExpressionError {
    if tok == item {
        invalid(field, item)
    } else {
        ExpressionError::MustStandAlone {
            field,
            token: snippet(tok),
        }
    }
}

fn not_allowed(field: CronField, wildcard: char) -> ExpressionError {
    ExpressionError::WildcardNotAllowed {
        field,
        wildcard,
        allowed: field.wildcards(),
    }
}

fn invalid(field: CronField, token: &str) -> ExpressionError {
    ExpressionError::InvalidValue {
        field,
        token: snippet(token),
        min: field.min(),
        max: field.max(),
        wildcards: field.wildcards(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cron(s: &str) -> Cron {
        match Cron::parse(s) {
            Ok((c, _)) => c,
            Err(e) => panic!("{s}: {e}"),
        }
    }

    fn days(c: &Cron, y: i32, m: u32) -> Vec<u32> {
        let set = c.day_set(y, m);
        (1..=31).filter(|d| set.contains(*d)).collect()
    }

    #[test]
    fn day_forms() {
        // March 2025: the 1st is a Saturday, the 15th a Saturday, the 31st a Monday.
        assert_eq!(days(&cron("0 0 L * ? *"), 2024, 2), vec![29]);
        assert_eq!(days(&cron("0 0 L * ? *"), 2025, 2), vec![28]);
        assert_eq!(days(&cron("0 0 15W * ? *"), 2025, 3), vec![14]); // Sat → Fri
        assert_eq!(days(&cron("0 0 15W * ? *"), 2025, 6), vec![16]); // Sun → Mon
        assert_eq!(days(&cron("0 0 15W * ? *"), 2025, 4), vec![15]); // Tue stays
        assert_eq!(days(&cron("0 0 1W * ? *"), 2025, 3), vec![3]); // Sat 1st → Mon 3rd
        assert_eq!(days(&cron("0 0 31W * ? *"), 2025, 8), vec![29]); // Sun 31st → Fri 29th
        assert_eq!(days(&cron("0 0 31W * ? *"), 2025, 4), Vec::<u32>::new()); // no 31st
        assert_eq!(days(&cron("0 0 LW * ? *"), 2025, 5), vec![30]); // Sat 31st → Fri 30th
        assert_eq!(days(&cron("0 0 LW * ? *"), 2025, 8), vec![29]); // Sun 31st → Fri 29th
        assert_eq!(days(&cron("0 0 LW * ? *"), 2025, 3), vec![31]); // Mon
        assert_eq!(days(&cron("0 0 ? * 3#2 *"), 2025, 4), vec![8]); // 2nd Tuesday
        assert_eq!(days(&cron("0 0 ? * 1#5 *"), 2025, 4), Vec::<u32>::new());
        assert_eq!(days(&cron("0 0 ? * 3#5 *"), 2025, 9), vec![30]);
        assert_eq!(days(&cron("0 0 ? * 6L *"), 2025, 4), vec![25]); // last Friday
        assert_eq!(days(&cron("0 0 ? * 2L *"), 2025, 3), vec![31]); // last Monday = last day
        assert_eq!(days(&cron("0 0 ? * L *"), 2025, 3), vec![1, 8, 15, 22, 29]); // Saturdays
        assert_eq!(days(&cron("0 0 ? * MON-FRI *"), 2025, 3).len(), 21);
        assert_eq!(days(&cron("0 0 30 * ? *"), 2025, 2), Vec::<u32>::new());
        assert_eq!(days(&cron("0 0 1/10 * ? *"), 2025, 1), vec![1, 11, 21, 31]);
    }

    #[test]
    fn field_sets() {
        let c = cron("0/15 */6 * JAN,mar-may/2 ? 2030-2032");
        assert_eq!(c.minutes, {
            let mut s = BitSet::default();
            for v in [0, 15, 30, 45] {
                s.insert(v)
            }
            s
        });
        assert!(c.hours.contains(0) && c.hours.contains(18) && !c.hours.contains(1));
        assert!(c.months.contains(1) && c.months.contains(3) && c.months.contains(5));
        assert!(!c.months.contains(4) && !c.months.contains(2));
        assert!(c.years.contains(60) && c.years.contains(62) && !c.years.contains(63));
        let c = cron("1/10 10-20/5 ? * SUN *");
        assert!(c.minutes.contains(11) && c.minutes.contains(51) && !c.minutes.contains(10));
        assert!(c.hours.contains(10) && c.hours.contains(20) && !c.hours.contains(21));
    }

    #[test]
    fn canonical_text() {
        let (_, text) = Cron::parse("  0   9 ?  *\tmon-fri  * ").unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(text, "0 9 ? * MON-FRI *");
    }
}
