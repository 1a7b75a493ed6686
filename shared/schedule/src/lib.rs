//! Schedules: expressions exactly as Amazon EventBridge Scheduler reads
//! them and their next fire times (pure logic, no I/O); the validation of a
//! schedule request ([`validate`]); and the schedule records, their store
//! and the [`Scheduler`] port ([`record`]).
//!
//! Used by `POST /schedules` (a refused expression becomes a 400 with the
//! error's message), by the embedded scheduler (which calls
//! [`Expression::next_after`]) and by the AWS adapter (which passes
//! [`Expression::as_str`] and [`Timezone::name`] to EventBridge Scheduler).
//!
//! ```
//! use baton_schedule::{Expression, Timezone};
//! use chrono::{TimeZone, Utc};
//!
//! let expr = Expression::parse("cron(0 9 ? * mon-fri *)")?;
//! assert_eq!(expr.as_str(), "cron(0 9 ? * MON-FRI *)");
//! let tz = Timezone::parse("Europe/Berlin")?;
//! // Friday 2025-03-28 10:00 UTC → Monday 09:00 CEST (DST began on Sunday).
//! let next = expr.next_after(Utc.with_ymd_and_hms(2025, 3, 28, 10, 0, 0).unwrap(), tz.tz(), None);
//! assert_eq!(next, Some(Utc.with_ymd_and_hms(2025, 3, 31, 7, 0, 0).unwrap()));
//!
//! let err = Expression::parse("cron(0 9 * * MON *)").unwrap_err();
//! assert_eq!(err.to_string(), "day-of-month and day-of-week cannot both be specified; use ? in one of them");
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//!
//! # Grammar (from the EventBridge documentation)
//!
//! * `cron(minutes hours day-of-month month day-of-week year)`: six fields
//!   separated by white space.
//!
//!   | field | values | wildcards |
//!   | --- | --- | --- |
//!   | minutes | 0-59 | `, - * /` |
//!   | hours | 0-23 | `, - * /` |
//!   | day-of-month | 1-31 | `, - * ? / L W` |
//!   | month | 1-12 or JAN-DEC | `, - * /` |
//!   | day-of-week | 1-7 (1 = Sunday) or SUN-SAT | `, - * ? L #` |
//!   | year | 1970-2199 | `, - * /` |
//!
//!   Exactly one of day-of-month and day-of-week is `?` (a value or `*` in
//!   both is refused, and so is `?` in both). `#` must be the only
//!   expression in day-of-week (`3#1,6#3` is refused). A cron expression
//!   cannot fire more often than once a minute, so the documented "no rate
//!   faster than 1 minute" limit holds by construction. Undocumented corners
//!   and the choices made for them are listed in the `cron` module docs
//!   (reversed ranges and L/W/# in lists are refused; `nW` stays in its
//!   month; `L` in day-of-week is Saturday).
//! * `rate(value unit)`: a positive whole number and `minute`, `minutes`,
//!   `hour`, `hours`, `day` or `days`; the unit is singular exactly when
//!   the value is 1 (`rate(1 hours)` and `rate(5 hour)` are refused).
//! * `at(yyyy-mm-ddThh:mm:ss)`: one time, a local time in the schedule's
//!   time zone (no offset, no fraction).
//! * At most 256 characters (EventBridge Scheduler's limit).
//!
//! # Daylight saving time
//!
//! EventBridge Scheduler evaluates cron expressions in the schedule's time
//! zone and documents: when clocks go forward, an invocation whose local
//! time does not exist is skipped; when clocks go back, a local time that
//! occurs twice runs only once. Rate schedules count elapsed time (a day is
//! 24 hours). [`Expression::next_after`] implements exactly that and states
//! its choices where the documentation is silent.
//!
//! Zone rules come from chrono-tz, whose tables end with 2099; for the years
//! 2100-2199 that cron allows, the rules of a 2072-2099 year with the same
//! calendar are used (summer time does not silently stop).

mod bits;
mod cron;
mod error;
mod expression;
pub mod quota;
pub mod record;
mod timezone;
pub mod validate;
mod zone;

#[cfg(test)]
mod tests;

pub use chrono_tz::Tz;
pub use error::{CronField, ExpressionError, TimezoneError};
pub use expression::{Expression, ExpressionKind, RateUnit};
pub use quota::Quota;
pub use record::{
    new_schedule_id, parse_schedule_id, plan_for, Schedule, ScheduleError, ScheduleKind,
    SchedulePlan, ScheduleService, ScheduleState, ScheduleStore, ScheduleTarget, Scheduler,
    SchedulerError, MAX_SCHEDULES, REPAIR_GRACE, SCHEDULE_INDEX,
};
pub use timezone::Timezone;
