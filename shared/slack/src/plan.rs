//! A task's plan as Slack shows it ([`baton_core::ReplySink::plan`] for
//! [`crate::SlackReplies`]).
//!
//! Slack's streaming methods take the plan as chunks ([`crate::stream`]):
//! a `plan_update` titles the plan block and each step is a `task_update`
//! (by id: sent again, it updates the task). So the plan goes into the
//! message the answer streams into — with the stream's start when the plan
//! is known by then, appended when the plan is written or a step is marked
//! done while the stream is open. Where no stream takes it (none open yet,
//! one Slack has closed, an agent that does not stream, Slack refusing
//! chunks), the plan is the thread's status, which is one line: first the
//! checklist, then, while the plan is in no message, each later status
//! ends with how far it is (`is thinking… · plan: 1 of 3 done`).
//!
//! What the sink knows of a task's plan is kept in memory ([`PlanBoard`]),
//! like the status limiter's state: a segment on another worker learns it
//! at the plan's next update.

use crate::stream::{Chunk, TaskStatus};
use baton_core::judgment::PlanStep;
use baton_core::StreamedMessage;
use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// The longest step title shown (the model writes them).
pub const STEP_TITLE_CHARS: usize = 150;

/// Tasks whose plan is remembered before the oldest are dropped.
const MAX_PLANS: usize = 4_096;
/// Plans untouched this long are dropped first when the board is full.
const FORGET_AFTER: Duration = Duration::from_secs(6 * 60 * 60);

/// A plan's steps as shown: plain titles, and which are done.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PlanView {
    titles: Vec<String>,
    done: Vec<bool>,
}

impl PlanView {
    /// The view of `steps`, `done` marking the completed ones. Titles are
    /// made plain text on one line: Slack shows them as written.
    pub fn new(steps: &[PlanStep], done: &[bool]) -> Self {
        let titles = steps
            .iter()
            .enumerate()
            .map(|(i, s)| {
                crate::assistant::plain_line(&s.title, STEP_TITLE_CHARS)
                    .unwrap_or_else(|| format!("Step {}", i + 1))
            })
            .collect::<Vec<_>>();
        let done = (0..titles.len())
            .map(|i| done.get(i).copied().unwrap_or(false))
            .collect();
        PlanView { titles, done }
    }

    /// How many steps the plan has.
    pub fn len(&self) -> usize {
        self.titles.len()
    }

    pub fn is_empty(&self) -> bool {
        self.titles.is_empty()
    }

    fn done_count(&self) -> usize {
        self.done.iter().filter(|d| **d).count()
    }

    /// The first step not done: the one being worked on, as far as the
    /// marks tell.
    fn current(&self) -> Option<usize> {
        self.done.iter().position(|d| !d)
    }

    /// How far the plan is: `1 of 3 steps done`, `all 3 steps done`.
    fn progress(&self) -> String {
        let (done, all) = (self.done_count(), self.len());
        let steps = if all == 1 { "step" } else { "steps" };
        if done == all {
            format!("all {all} {steps} done")
        } else {
            format!("{done} of {all} {steps} done")
        }
    }

    /// The plan block's title.
    pub fn title(&self) -> String {
        format!("Plan: {}", self.progress())
    }

    /// The chunks that show the plan in a stream which showed
    /// `shown_before` tasks of an earlier plan (a plan revised to fewer
    /// steps leaves tasks that cannot be removed: they are marked dropped).
    /// Each step is task `step-N`; done steps are complete, the first other
    /// one in progress, the rest pending.
    pub fn chunks(&self, shown_before: usize) -> Vec<Chunk> {
        let current = self.current();
        let mut chunks = vec![Chunk::PlanUpdate {
            title: self.title(),
        }];
        chunks.extend(self.titles.iter().enumerate().map(|(i, title)| {
            let status = if self.done[i] {
                TaskStatus::Complete
            } else if Some(i) == current {
                TaskStatus::InProgress
            } else {
                TaskStatus::Pending
            };
            Chunk::TaskUpdate {
                id: step_id(i),
                title: title.clone(),
                status,
                details: None,
            }
        }));
        chunks.extend((self.len()..shown_before).map(|i| Chunk::TaskUpdate {
            id: step_id(i),
            title: format!("Step {} (dropped)", i + 1),
            status: TaskStatus::Error,
            details: Some("Dropped when the plan was revised".to_owned()),
        }));
        chunks
    }

    /// The plan as the thread's status (Slack puts the app's name before
    /// it): the checklist when it fits on the status line, else how far it
    /// is and the next step.
    pub fn status(&self) -> String {
        let items: Vec<String> = self
            .titles
            .iter()
            .zip(&self.done)
            .map(|(t, d)| format!("{} {t}", if *d { "☑" } else { "☐" }))
            .collect();
        let checklist = format!("is working on a plan: {}", items.join(" "));
        if checklist.chars().count() <= crate::status::MAX_STATUS_CHARS {
            return checklist;
        }
        match self.current() {
            Some(next) => format!(
                "is working on a plan ({}), next: {}",
                self.progress(),
                self.titles[next]
            ),
            None => format!("is working on a plan ({})", self.progress()),
        }
    }

    /// What a later status adds while the plan is in no message.
    pub fn note(&self) -> String {
        format!("plan: {}", self.progress())
    }
}

/// The streamed task id of step `i` (0-based).
fn step_id(i: usize) -> String {
    format!("step-{}", i + 1)
}

/// Where a plan is shown: the streamed message and how many tasks it has
/// (to mark dropped ones when the plan shrinks).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Shown {
    pub message: StreamedMessage,
    pub tasks: usize,
}

#[derive(Debug)]
struct Memo {
    view: PlanView,
    shown: Option<Shown>,
    touched: Instant,
}

/// Each task's latest plan and where it is shown, by task id. In memory
/// only, bounded; one segment of a task runs at a time.
#[derive(Debug, Default)]
pub struct PlanBoard {
    plans: Mutex<HashMap<String, Memo>>,
}

impl PlanBoard {
    fn plans(&self) -> std::sync::MutexGuard<'_, HashMap<String, Memo>> {
        // The map holds no invariant a panicking holder could break.
        self.plans.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Remembers `view` as `task`'s plan; returns where the plan was shown.
    pub fn remember(&self, task: &str, view: PlanView) -> Option<Shown> {
        let now = Instant::now();
        let mut plans = self.plans();
        if plans.len() >= MAX_PLANS && !plans.contains_key(task) {
            plans.retain(|_, m| now.saturating_duration_since(m.touched) < FORGET_AFTER);
            if plans.len() >= MAX_PLANS {
                let oldest = plans
                    .iter()
                    .min_by_key(|(_, m)| m.touched)
                    .map(|(k, _)| k.clone());
                if let Some(k) = oldest {
                    plans.remove(&k);
                }
            }
        }
        let shown = plans.get(task).and_then(|m| m.shown.clone());
        plans.insert(
            task.to_owned(),
            Memo {
                view,
                shown: shown.clone(),
                touched: now,
            },
        );
        shown
    }

    /// `task`'s plan, if one is remembered.
    pub fn view(&self, task: &str) -> Option<PlanView> {
        self.plans().get(task).map(|m| m.view.clone())
    }

    /// The plan now shows in `shown`, or (`None`) in no message.
    pub fn set_shown(&self, task: &str, shown: Option<Shown>) {
        if let Some(m) = self.plans().get_mut(task) {
            m.shown = shown;
        }
    }

    /// What a status of `task` adds: the plan's progress, while the plan is
    /// in no message.
    pub fn note(&self, task: &str) -> Option<String> {
        self.plans()
            .get(task)
            .filter(|m| m.shown.is_none())
            .map(|m| m.view.note())
    }

    /// `task` ended: its plan is shown no more.
    pub fn forget(&self, task: &str) {
        self.plans().remove(task);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn steps(titles: &[&str]) -> Vec<PlanStep> {
        titles
            .iter()
            .map(|t| PlanStep {
                title: (*t).to_owned(),
                done_when: "done".to_owned(),
            })
            .collect()
    }

    #[test]
    fn a_plan_is_a_titled_block_of_tasks_by_step() {
        let view = PlanView::new(
            &steps(&["Look up", "Compare", "Answer"]),
            &[true, false, false],
        );
        let sent = serde_json::to_value(view.chunks(0)).unwrap();
        assert_eq!(
            sent,
            json!([
                {"type": "plan_update", "title": "Plan: 1 of 3 steps done"},
                {"type": "task_update", "id": "step-1", "title": "Look up", "status": "complete"},
                {"type": "task_update", "id": "step-2", "title": "Compare", "status": "in_progress"},
                {"type": "task_update", "id": "step-3", "title": "Answer", "status": "pending"},
            ])
        );
        let all = PlanView::new(&steps(&["Only"]), &[true]);
        assert_eq!(all.title(), "Plan: all 1 step done");
        // Marks past the plan's end (a shorter `done`) change nothing.
        assert_eq!(
            PlanView::new(&steps(&["a", "b"]), &[true]).done,
            [true, false]
        );
    }

    #[test]
    fn steps_dropped_by_a_revision_are_marked() {
        let view = PlanView::new(&steps(&["New one"]), &[]);
        let chunks = view.chunks(3);
        assert_eq!(chunks.len(), 1 + 3);
        for (chunk, id) in chunks[2..].iter().zip(["step-2", "step-3"]) {
            let Chunk::TaskUpdate {
                id: got, status, ..
            } = chunk
            else {
                panic!("{chunk:?}");
            };
            assert_eq!((got.as_str(), *status), (id, TaskStatus::Error));
        }
    }

    #[test]
    fn titles_are_plain_and_bounded() {
        let long = "x".repeat(STEP_TITLE_CHARS * 2);
        let view = PlanView::new(
            &steps(&["Tell <!everyone> via <https://e.io|this>", "  ", &long]),
            &[],
        );
        assert_eq!(view.titles[0], "Tell everyone via this");
        assert_eq!(view.titles[1], "Step 2");
        assert_eq!(view.titles[2].chars().count(), STEP_TITLE_CHARS);
    }

    #[test]
    fn the_status_is_a_checklist_when_it_fits() {
        let short = PlanView::new(&steps(&["Look up", "Answer"]), &[true]);
        assert_eq!(short.status(), "is working on a plan: ☑ Look up ☐ Answer");
        let titles: Vec<String> = (1..=6).map(|i| format!("A rather long step {i}")).collect();
        let refs: Vec<&str> = titles.iter().map(String::as_str).collect();
        let long = PlanView::new(&steps(&refs), &[true, true]);
        assert_eq!(
            long.status(),
            "is working on a plan (2 of 6 steps done), next: A rather long step 3"
        );
        assert_eq!(long.note(), "plan: 2 of 6 steps done");
    }

    #[test]
    fn the_board_remembers_where_a_plan_shows_until_forgotten() {
        let board = PlanBoard::default();
        let view = PlanView::new(&steps(&["a"]), &[]);
        assert_eq!(board.remember("t1", view.clone()), None);
        assert_eq!(board.note("t1").as_deref(), Some("plan: 0 of 1 step done"));
        let shown = Shown {
            message: StreamedMessage {
                channel: "C1".into(),
                ts: "1.1".into(),
            },
            tasks: 1,
        };
        board.set_shown("t1", Some(shown.clone()));
        assert_eq!(board.note("t1"), None, "in the message, not the status");
        assert_eq!(board.remember("t1", view.clone()), Some(shown));
        assert_eq!(board.view("t1"), Some(view));
        board.forget("t1");
        assert_eq!(board.view("t1"), None);
        assert_eq!(board.note("t2"), None);
    }
}
