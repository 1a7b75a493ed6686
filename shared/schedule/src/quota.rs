//! How many schedules people may make, and how often they may fire: a
//! schedule runs a task (and may post) at every firing, so one person in
//! Slack could otherwise fill a channel and the month's budget with a few
//! mentions. Applies to schedules people make through the agent; the HTTP
//! API and schedule admins are operators, and are not limited.

use crate::record::{Schedule, ScheduleState};
use crate::validate::ValidSpec;
use baton_core::Instant;
use std::time::Duration;

/// The limits (the agents file's `[schedules]` table).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Quota {
    /// Schedules one person may own.
    pub max_per_user: u32,
    /// Schedules the people of one Slack workspace may own together.
    pub max_per_team: u32,
    /// The shortest time between two firings of a person's schedule.
    pub min_interval: Duration,
}

impl Default for Quota {
    fn default() -> Self {
        Quota {
            max_per_user: 10,
            max_per_team: 100,
            min_interval: Duration::from_secs(15 * 60),
        }
    }
}

/// How many firings are looked at to find a cron's shortest gap: enough
/// for any pattern that repeats within a day, a month or a year's few
/// dates (every-minute bursts at 9:00 on the 1st show in the first pair).
const FIRINGS_LOOKED_AT: usize = 200;

/// The shortest time between two firings of `spec` from `now` on (among
/// its next [`FIRINGS_LOOKED_AT`]); `None` for one that fires at most once.
pub fn shortest_interval(spec: &ValidSpec, now: Instant) -> Option<Duration> {
    if let Some(rate) = spec.expression.rate_interval() {
        return rate.to_std().ok();
    }
    if !spec.expression.is_recurring() {
        return None;
    }
    let start = now.to_utc()?;
    let fires: Vec<_> = spec
        .expression
        .upcoming(start, spec.timezone.tz(), Some(start))
        .take(FIRINGS_LOOKED_AT)
        .collect();
    fires
        .windows(2)
        .filter_map(|w| (w[1] - w[0]).to_std().ok())
        .min()
}

/// The workspace of a person's owner name (`slack:TEAM:USER`).
fn team_of(owner: &str) -> Option<&str> {
    let rest = owner.strip_prefix("slack:")?;
    rest.split_once(':').map(|(team, _)| team)
}

impl Quota {
    /// Whether `owner` (a person: `slack:TEAM:USER`) may add a schedule of
    /// `spec` to `existing`; the refusal says why and which setting rules.
    pub fn admits(
        &self,
        owner: &str,
        spec: &ValidSpec,
        existing: &[Schedule],
        now: Instant,
    ) -> Result<(), String> {
        if let Some(gap) = shortest_interval(spec, now) {
            if gap < self.min_interval {
                return Err(format!(
                    "`{}` fires every {}, more often than schedules may (at most every {}, the deployment's `schedules.min_interval`); choose a longer interval",
                    spec.expression.as_str(),
                    human(gap),
                    human(self.min_interval)
                ));
            }
        }
        let live: Vec<&Schedule> = existing
            .iter()
            .filter(|s| s.state != ScheduleState::Deleting)
            .collect();
        let mine = live.iter().filter(|s| s.owner == owner).count();
        if mine >= self.max_per_user as usize {
            return Err(format!(
                "you already have {mine} schedules, as many as one person may (`schedules.max_per_user` = {}); delete one first (schedule_list, schedule_delete)",
                self.max_per_user
            ));
        }
        if let Some(team) = team_of(owner) {
            let ours = live
                .iter()
                .filter(|s| team_of(&s.owner) == Some(team))
                .count();
            if ours >= self.max_per_team as usize {
                return Err(format!(
                    "this workspace already has {ours} schedules, as many as it may (`schedules.max_per_team` = {})",
                    self.max_per_team
                ));
            }
        }
        Ok(())
    }
}

/// A duration as people say it: "1 minute", "15 minutes", "2 hours".
fn human(d: Duration) -> String {
    let secs = d.as_secs();
    let (n, unit) = if secs.is_multiple_of(86_400) && secs >= 86_400 {
        (secs / 86_400, "day")
    } else if secs.is_multiple_of(3600) && secs >= 3600 {
        (secs / 3600, "hour")
    } else if secs.is_multiple_of(60) && secs >= 60 {
        (secs / 60, "minute")
    } else {
        (secs, "second")
    };
    format!("{n} {unit}{}", if n == 1 { "" } else { "s" })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::validate::{new_schedule, validate};
    use crate::ScheduleKind;

    const NOW: Instant = Instant(1_767_225_600_000); // 2026-01-01T00:00:00Z

    fn spec(expression: &str) -> ValidSpec {
        validate(expression, None, NOW).unwrap()
    }

    fn owned(owner: &str, n: usize) -> Vec<Schedule> {
        (0..n)
            .map(|i| {
                new_schedule(
                    format!("{owner}-{i}"),
                    &spec("rate(1 day)"),
                    "x".into(),
                    ScheduleKind::Task,
                    None,
                    owner.into(),
                    "default".into(),
                    NOW,
                )
            })
            .collect()
    }

    #[test]
    fn intervals_of_rates_and_crons() {
        let minutes = |m: u64| Some(Duration::from_secs(m * 60));
        assert_eq!(shortest_interval(&spec("rate(1 minute)"), NOW), minutes(1));
        assert_eq!(shortest_interval(&spec("rate(2 hours)"), NOW), minutes(120));
        assert_eq!(
            shortest_interval(&spec("cron(0/5 9 * * ? *)"), NOW),
            minutes(5)
        );
        assert_eq!(
            shortest_interval(&spec("cron(0 9 ? * MON-FRI *)"), NOW),
            minutes(24 * 60)
        );
        // A burst on one day of the month is found.
        assert_eq!(
            shortest_interval(&spec("cron(0,1 9 1 * ? *)"), NOW),
            minutes(1)
        );
        assert_eq!(
            shortest_interval(&spec("at(2026-06-01T09:00:00)"), NOW),
            None
        );
    }

    #[test]
    fn refusals_name_the_setting() {
        let q = Quota::default();
        let err = q
            .admits("slack:T1:U1", &spec("rate(1 minute)"), &[], NOW)
            .unwrap_err();
        assert!(err.contains("every 1 minute"), "{err}");
        assert!(err.contains("schedules.min_interval"), "{err}");
        assert!(err.contains("15 minutes"), "{err}");
        assert!(q
            .admits("slack:T1:U1", &spec("rate(15 minutes)"), &[], NOW)
            .is_ok());

        let ten = owned("slack:T1:U1", 10);
        let err = q
            .admits("slack:T1:U1", &spec("rate(1 hour)"), &ten, NOW)
            .unwrap_err();
        assert!(err.contains("schedules.max_per_user"), "{err}");
        // Someone else in the workspace may still.
        assert!(q
            .admits("slack:T1:U2", &spec("rate(1 hour)"), &ten, NOW)
            .is_ok());

        let small = Quota {
            max_per_team: 12,
            ..Quota::default()
        };
        let mut team = owned("slack:T1:U1", 10);
        team.extend(owned("slack:T1:U2", 2));
        let err = small
            .admits("slack:T1:U3", &spec("rate(1 hour)"), &team, NOW)
            .unwrap_err();
        assert!(err.contains("schedules.max_per_team"), "{err}");
        // Another workspace is counted apart.
        assert!(small
            .admits("slack:T2:U1", &spec("rate(1 hour)"), &team, NOW)
            .is_ok());
        // Schedules being deleted do not count.
        for s in &mut team {
            s.state = ScheduleState::Deleting;
        }
        assert!(small
            .admits("slack:T1:U1", &spec("rate(1 hour)"), &team, NOW)
            .is_ok());
    }
}
