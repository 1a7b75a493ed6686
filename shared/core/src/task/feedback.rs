//! Feedback on a task's answer: a thumbs up or down from a person (Slack's
//! feedback buttons), kept on the task.
//!
//! One vote per person: a second click by the same person with the same
//! rating changes nothing (so a redelivered click counts once), a click
//! with the other rating replaces the vote. Clicks carry Slack's
//! `action_ts`; a click older than the vote on record (a late redelivery
//! of an earlier click) is ignored rather than undoing a newer one.

use crate::clock::Instant;
pub use crate::task::parts::{Feedback, Rating};
use crate::task::{Task, TaskStatus};
use crate::transcript::EntryKind;

/// Most votes kept on one task: a bound on the task record whatever a
/// workspace does with the buttons.
pub const MAX_VOTES: usize = 200;

/// A click to record.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Vote<'a> {
    pub user: &'a str,
    pub rating: Rating,
    pub action_ts: Option<&'a str>,
}

/// Why a vote changed nothing.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub enum Unchanged {
    /// The same person's vote is already this one (a repeated or
    /// redelivered click).
    #[error("this vote is already recorded")]
    Same,
    /// A newer click of the same person is on record.
    #[error("a newer vote is already recorded")]
    Stale,
    /// The task holds [`MAX_VOTES`] votes.
    #[error("the task has as many votes as it keeps")]
    Full,
    /// The task gave no answer in Slack to rate (an HTTP task, a
    /// sub-agent, a task that failed, was cancelled or stayed silent).
    #[error("the task has no answer in Slack to rate")]
    NoAnswer,
}

/// Records `vote` on `t` at `now`: the transcript entry to append, or why
/// nothing changed (then `t` is untouched).
pub fn record(t: &mut Task, vote: &Vote<'_>, now: Instant) -> Result<Vec<EntryKind>, Unchanged> {
    if !has_slack_answer(t) {
        return Err(Unchanged::NoAnswer);
    }
    let entry = Feedback {
        user: vote.user.to_owned(),
        rating: vote.rating,
        at: now,
        action_ts: vote.action_ts.map(str::to_owned),
    };
    let full = t.answer.feedback.len() >= MAX_VOTES;
    match t.answer.feedback.iter_mut().find(|f| f.user == vote.user) {
        Some(f) if f.rating == vote.rating => return Err(Unchanged::Same),
        Some(f) if is_older(vote.action_ts, f.action_ts.as_deref()) => {
            return Err(Unchanged::Stale)
        }
        Some(f) => *f = entry,
        None if full => return Err(Unchanged::Full),
        None => t.answer.feedback.push(entry),
    }
    Ok(vec![EntryKind::Feedback {
        user: vote.user.to_owned(),
        rating: vote.rating,
    }])
}

/// Whether the task posts (or posted) an answer in Slack that a vote can be
/// about: a Slack task of its own, not failed or cancelled, whose answer,
/// once it has one, is not silent. (A running task may already have
/// answered a first message of its thread.)
fn has_slack_answer(t: &Task) -> bool {
    if !matches!(t.source.origin, crate::Origin::Slack { .. }) || t.source.parent.is_some() {
        return false;
    }
    match t.status {
        TaskStatus::Succeeded => t
            .answer
            .result
            .as_deref()
            .is_some_and(|r| !r.trim().is_empty() && r.trim() != "NO_REPLY"),
        TaskStatus::Failed | TaskStatus::Cancelled => false,
        _ => true,
    }
}

/// Whether Slack timestamp `a` ("1700000000.000100") is before `b`; `false`
/// when either is missing or unreadable (the newest click wins then).
fn is_older(a: Option<&str>, b: Option<&str>) -> bool {
    let parse = |ts: &str| -> Option<(u64, u64)> {
        let (s, us) = ts.split_once('.').unwrap_or((ts, "0"));
        Some((s.parse().ok()?, us.parse().ok()?))
    };
    match (a.and_then(parse), b.and_then(parse)) {
        (Some(a), Some(b)) => a < b,
        _ => false,
    }
}

/// What the votes on a task say together: the majority's rating, a tie
/// counting as [`Rating::Negative`] (as many people found fault as
/// approved: not an answer to hold up as a reference); `None` without
/// votes. `GET /tasks?feedback=` and `baton eval export` both decide by it.
pub fn verdict(votes: &[Feedback]) -> Option<Rating> {
    if votes.is_empty() {
        return None;
    }
    let up = votes
        .iter()
        .filter(|f| f.rating == Rating::Positive)
        .count();
    Some(if up * 2 > votes.len() {
        Rating::Positive
    } else {
        Rating::Negative
    })
}

/// The `feedback` of the task status JSON.
pub fn status_json(t: &Task) -> serde_json::Value {
    crate::task::parts::feedback_json(&t.answer.feedback)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{Limits, Origin, TaskId};

    fn task() -> Task {
        let mut t = Task::new(
            TaskId::generate(),
            "default",
            Origin::Slack {
                team_id: "T1".into(),
                channel: "C1".into(),
                thread_ts: "1700000000.000100".into(),
                user: "U1".into(),
                channel_type: None,
            },
            None,
            Limits::default(),
            0,
        );
        t.finish(TaskStatus::Succeeded);
        t.answer.result = Some("the answer".into());
        t
    }

    #[test]
    fn the_majority_decides_and_a_tie_is_a_thumbs_down() {
        let v = |rating| Feedback {
            user: "U".into(),
            rating,
            at: Instant(0),
            action_ts: None,
        };
        let (up, down) = (Rating::Positive, Rating::Negative);
        assert_eq!(verdict(&[]), None);
        assert_eq!(verdict(&[v(up)]), Some(up));
        assert_eq!(verdict(&[v(down)]), Some(down));
        assert_eq!(verdict(&[v(up), v(down), v(up)]), Some(up));
        assert_eq!(verdict(&[v(down), v(up), v(down)]), Some(down));
        assert_eq!(verdict(&[v(up), v(down)]), Some(down));
    }

    #[test]
    fn only_an_answer_given_in_slack_is_rated() {
        let up = vote("U1", Rating::Positive, "1700000000.000100");
        let mut http = task();
        http.source.origin = Origin::Http;
        let mut silent = task();
        silent.answer.result = Some("NO_REPLY".into());
        let mut failed = task();
        failed.finish(TaskStatus::Failed);
        let mut child = task();
        child.source.parent = Some(crate::ParentLink {
            task_id: TaskId::generate(),
            call_id: "c".into(),
            root_task_id: None,
            actor: None,
        });
        for mut t in [http, silent, failed, child] {
            assert_eq!(
                record(&mut t, &up, Instant(5)),
                Err(Unchanged::NoAnswer),
                "{t:?}"
            );
            assert!(t.answer.feedback.is_empty());
        }
        assert!(record(&mut task(), &up, Instant(5)).is_ok());
    }

    fn vote<'a>(user: &'a str, rating: Rating, ts: &'a str) -> Vote<'a> {
        Vote {
            user,
            rating,
            action_ts: Some(ts),
        }
    }

    #[test]
    fn one_vote_per_person_latest_wins_and_repeats_count_once() {
        let mut t = task();
        let up = vote("U1", Rating::Positive, "1700000000.000100");
        let entries = record(&mut t, &up, Instant(5)).expect("recorded");
        assert_eq!(
            entries,
            vec![EntryKind::Feedback {
                user: "U1".into(),
                rating: Rating::Positive
            }]
        );
        // Slack delivers the same click again.
        assert_eq!(record(&mut t, &up, Instant(6)), Err(Unchanged::Same));
        // Another person.
        record(
            &mut t,
            &vote("U2", Rating::Negative, "1700000001.0"),
            Instant(7),
        )
        .expect("recorded");
        // U1 changes their mind...
        record(
            &mut t,
            &vote("U1", Rating::Negative, "1700000002.000001"),
            Instant(8),
        )
        .expect("changed");
        // ...and a late redelivery of their first click does not undo it.
        let late = vote("U1", Rating::Positive, "1700000000.000100");
        assert_eq!(record(&mut t, &late, Instant(9)), Err(Unchanged::Stale));
        assert_eq!(t.answer.feedback.len(), 2);
        assert_eq!(t.answer.feedback[0].rating, Rating::Negative);
        assert_eq!(t.answer.feedback[0].at, Instant(8));
        let json = status_json(&t);
        assert_eq!(json[0]["user"], "U1");
        assert_eq!(json[0]["value"], "negative");
        assert!(json[0]["at"].as_str().unwrap().starts_with("1970-01-01T"));
    }

    #[test]
    fn votes_are_bounded_and_ratings_parse() {
        let mut t = task();
        for i in 0..MAX_VOTES {
            let user = format!("U{i}");
            let v = Vote {
                user: &user,
                rating: Rating::Positive,
                action_ts: None,
            };
            record(&mut t, &v, Instant(1)).expect("room");
        }
        let v = Vote {
            user: "UX",
            rating: Rating::Positive,
            action_ts: None,
        };
        assert_eq!(record(&mut t, &v, Instant(1)), Err(Unchanged::Full));
        assert_eq!(Rating::parse("positive"), Some(Rating::Positive));
        assert_eq!(Rating::parse("Positive"), None);
        assert!(!is_older(Some("x"), Some("1.0")));
        assert!(is_older(Some("1.000009"), Some("1.000010")));
    }
}
