//! Typed errors with messages a user can act on (they go straight into a 400
//! answer of `POST /schedules`).

use std::fmt;

/// The six fields of a cron expression, in order.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum CronField {
    /// Minutes, 0-59.
    Minutes,
    /// Hours, 0-23.
    Hours,
    /// Day of month, 1-31.
    DayOfMonth,
    /// Month, 1-12 or JAN-DEC.
    Month,
    /// Day of week, 1-7 (1 = Sunday) or SUN-SAT.
    DayOfWeek,
    /// Year, 1970-2199.
    Year,
}

impl CronField {
    /// All fields in the order they appear in `cron(...)`.
    pub const ALL: [CronField; 6] = [
        CronField::Minutes,
        CronField::Hours,
        CronField::DayOfMonth,
        CronField::Month,
        CronField::DayOfWeek,
        CronField::Year,
    ];

    /// Smallest value the field accepts.
    pub const fn min(self) -> u32 {
        match self {
            CronField::Minutes | CronField::Hours => 0,
            CronField::DayOfMonth | CronField::Month | CronField::DayOfWeek => 1,
            CronField::Year => 1970,
        }
    }

    /// Largest value the field accepts.
    pub const fn max(self) -> u32 {
        match self {
            CronField::Minutes => 59,
            CronField::Hours => 23,
            CronField::DayOfMonth => 31,
            CronField::Month => 12,
            CronField::DayOfWeek => 7,
            CronField::Year => 2199,
        }
    }

    /// The wildcards EventBridge allows in this field, as documented.
    pub const fn wildcards(self) -> &'static str {
        match self {
            CronField::Minutes | CronField::Hours | CronField::Month | CronField::Year => ", - * /",
            CronField::DayOfMonth => ", - * ? / L W",
            CronField::DayOfWeek => ", - * ? L #",
        }
    }
}

impl fmt::Display for CronField {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            CronField::Minutes => "minutes",
            CronField::Hours => "hours",
            CronField::DayOfMonth => "day-of-month",
            CronField::Month => "month",
            CronField::DayOfWeek => "day-of-week",
            CronField::Year => "year",
        })
    }
}

/// Why a schedule expression was refused.
///
/// Every message says what is wrong and how to fix it. Echoed user input is
/// shortened to 64 characters so a huge body cannot make a huge error.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ExpressionError {
    /// Nothing but white space.
    #[error("schedule expression is empty; use cron(...), rate(...) or at(...)")]
    Empty,
    /// Longer than the 256 characters EventBridge Scheduler accepts.
    #[error("schedule expression is {0} characters long; at most 256 are allowed")]
    TooLong(usize),
    /// Not of the form `cron(...)`, `rate(...)` or `at(...)`.
    #[error("unknown schedule expression '{0}'; use cron(minutes hours day-of-month month day-of-week year), rate(value unit) or at(yyyy-mm-ddThh:mm:ss)")]
    UnknownKind(String),
    /// A cron expression without exactly six fields.
    #[error("cron expression needs exactly 6 fields (minutes hours day-of-month month day-of-week year), got {0}")]
    CronFieldCount(usize),
    /// An empty item in a list, e.g. `1,,2`.
    #[error("{field} field '{value}' has an empty value; separate values with single commas")]
    EmptyValue {
        /// The field.
        field: CronField,
        /// The whole field as written.
        value: String,
    },
    /// A token that is neither a number, a name nor an allowed wildcard.
    #[error("{field} field: '{token}' is not a valid value; use {min}-{max} with the wildcards {wildcards}")]
    InvalidValue {
        /// The field.
        field: CronField,
        /// The offending token.
        token: String,
        /// Smallest allowed value.
        min: u32,
        /// Largest allowed value.
        max: u32,
        /// The wildcards allowed in this field.
        wildcards: &'static str,
    },
    /// A number outside the field's range.
    #[error("{field} value {value} is out of range; use {min}-{max}")]
    OutOfRange {
        /// The field.
        field: CronField,
        /// The value as written.
        value: String,
        /// Smallest allowed value.
        min: u32,
        /// Largest allowed value.
        max: u32,
    },
    /// A three-letter name in the month field that is not a month.
    #[error("unknown month '{0}'; use 1-12 or JAN-DEC")]
    UnknownMonth(String),
    /// A name in the day-of-week field that is not a day.
    #[error("unknown day of week '{0}'; use 1-7 (1 = Sunday) or SUN-SAT")]
    UnknownWeekday(String),
    /// A wildcard the field does not allow, e.g. `/` in day-of-week.
    #[error("'{wildcard}' is not allowed in the {field} field (allowed there: {allowed})")]
    WildcardNotAllowed {
        /// The field.
        field: CronField,
        /// The wildcard character.
        wildcard: char,
        /// The wildcards allowed in this field.
        allowed: &'static str,
    },
    /// A range whose start is after its end, e.g. `22-2` or `SAT-SUN`.
    #[error(
        "{field} range '{range}' runs backwards; write it as two ranges or a list (e.g. 22-23,0-2)"
    )]
    ReversedRange {
        /// The field.
        field: CronField,
        /// The range as written.
        range: String,
    },
    /// An increment of 0 or one larger than the field's span.
    #[error("{field} increment in '{token}' must be between 1 and {max_step}")]
    BadIncrement {
        /// The field.
        field: CronField,
        /// The token as written.
        token: String,
        /// Largest useful increment for this field.
        max_step: u32,
    },
    /// `?`, `L`, `W`, `LW`, `nL` or `n#k` combined with other values.
    #[error("{field} field: '{token}' must stand alone, not in a list or range")]
    MustStandAlone {
        /// The field.
        field: CronField,
        /// The special token.
        token: String,
    },
    /// `n#k` with `k` outside 1-5.
    #[error(
        "day-of-week '{0}': the number after # must be 1-5 (the 1st to 5th such day of the month)"
    )]
    NthOutOfRange(String),
    /// Both day fields have a value or `*`.
    #[error("day-of-month and day-of-week cannot both be specified; use ? in one of them")]
    BothDaysSpecified,
    /// Both day fields are `?`.
    #[error("day-of-month and day-of-week cannot both be ?; give a value or * in one of them")]
    BothDaysAny,
    /// A rate value that is not a positive whole number.
    #[error("rate value '{0}' must be a positive whole number, e.g. rate(5 minutes)")]
    RateValue(String),
    /// A rate unit other than minute(s), hour(s), day(s).
    #[error("unknown rate unit '{0}'; use minute, minutes, hour, hours, day or days")]
    RateUnit(String),
    /// Singular unit with a value other than 1, or plural with 1.
    #[error("rate({value} {unit}) is not valid: write rate({value} {expected}) (singular unit only when the value is 1)")]
    RateUnitNumber {
        /// The value as written.
        value: String,
        /// The unit as written.
        unit: String,
        /// The unit that fits the value.
        expected: String,
    },
    /// `rate(...)` without exactly a value and a unit.
    #[error("rate expression needs a value and a unit, e.g. rate(5 minutes), got '{0}'")]
    RateShape(String),
    /// `at(...)` not in the layout `yyyy-mm-ddThh:mm:ss`.
    #[error("at() needs a local date and time as yyyy-mm-ddThh:mm:ss without offset or fraction (set the time zone separately), got '{0}'")]
    AtFormat(String),
    /// `at(...)` with a date or time that does not exist, e.g. February 30.
    #[error("at({0}) is not a real date and time")]
    AtInvalid(String),
}

/// Why a time zone name was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TimezoneError {
    /// Empty name.
    #[error("time zone is empty; use an IANA name such as Europe/Berlin or UTC")]
    Empty,
    /// Not an IANA name, but one differing only in case exists.
    #[error(
        "unknown time zone '{given}'; did you mean '{suggestion}'? (names are case-sensitive)"
    )]
    WrongCase {
        /// The name as given.
        given: String,
        /// The correctly spelled name.
        suggestion: &'static str,
    },
    /// Not an IANA name.
    #[error(
        "unknown time zone '{0}'; use an IANA name such as Europe/Berlin, America/New_York or UTC"
    )]
    Unknown(String),
}

/// Shortens user input echoed in an error to at most 64 characters.
pub(crate) fn snippet(s: &str) -> String {
    const MAX: usize = 64;
    if s.chars().count() <= MAX {
        s.to_string()
    } else {
        let mut out: String = s.chars().take(MAX).collect();
        out.push('…');
        out
    }
}
