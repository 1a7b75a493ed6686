//! What the segment does next, as a value: [`next`] looks at the task, its
//! transcript, the segment's budget, the kept context, the time, and what
//! the monthly budgets and the policies said when asked, and names one
//! action.
//! It reads nothing else and writes nothing, so every rule of the loop is
//! here, in order, and tested from tables below; the segment
//! ([`super::Segment::steps`]) only carries the action out and asks again.
//!
//! Waits are decided per tool call by [`super::plan`] and, for the turn,
//! by [`super::plan::TurnPlan::batch`]; waits end in [`super::acquire`].

use super::budget::SegmentBudget;
use super::limit::Limit;
use super::monthly::Monthly;
use super::stuck::{self, EmptyAnswer, Repetition};
use crate::compaction;
use crate::context_cache::ContextCache;
use crate::judgment::{self, Gate};
use baton_core::transcript::pending_tool_calls;
use baton_core::{Entry, EntryKind, Instant, Task, ToolCall};
use baton_settings::AgentConfig;
use std::time::Duration;

/// One action of the segment.
#[derive(Clone, Debug, PartialEq)]
pub(super) enum Next {
    /// The lease is no longer this segment's: stop without writing.
    LeaseLost,
    /// The policies refuse the task's start (the reason names the policy):
    /// it fails before anything of it runs.
    Refuse(String),
    /// The segment's start: the tools it offers taken (its MCP servers'
    /// listing, once per task) and the plan shown again.
    Begin,
    /// Cancellation was asked for: end the task as cancelled.
    Cancel,
    /// A limit forbids going on: end with a summary of the work.
    Stop(Limit),
    /// Mentioned in a Slack thread it has not read: read its earlier
    /// messages into the transcript first.
    ReadThread,
    /// Files came with the input: take them into the transcript.
    TakeFiles,
    /// The next unit of work may not fit the time left: checkpoint, send
    /// the next wake, release the lease.
    HandOver,
    /// Phase two of step `step`: run its calls that have no result yet
    /// (`true`: started before and never recorded).
    RunTools {
        step: u32,
        pending: Vec<(ToolCall, bool)>,
    },
    /// Step `step`'s turn repeats a call too often (`tool`, `times`): its
    /// `calls` are refused and the model warned, once (the next time it
    /// stops, [`Limit::Loop`]).
    RefuseRepeated {
        step: u32,
        calls: Vec<ToolCall>,
        tool: String,
        times: u32,
    },
    /// The model's final answer is empty: nudge it, escalate, or give up
    /// ([`stuck::empty_answer`] names the rung).
    EmptyAnswer(EmptyAnswer),
    /// Deliver the final answer and finish (or go on with a message that
    /// arrived meanwhile).
    Deliver(String),
    /// The quality gate judges step `step`'s answer first (a `verdict`
    /// call); `retried`: it is the turn's second answer, delivered
    /// whatever the verdict.
    Judge {
        step: u32,
        answer: String,
        retried: bool,
    },
    /// Step `step`'s answer only narrates what the model will do: sent
    /// back by rule, without a call.
    SendBack { step: u32 },
    /// The task's routing call: its tier and prompt modules.
    Route,
    /// The planning call: the task's plan, or a new one after a replan.
    Plan,
    /// A supervision checkpoint before the next step.
    Supervise,
    /// Messages arrived while the task ran: they are the next input.
    TakeInbox,
    /// The context is large, or `/compact` was asked for: summarise older
    /// turns (not again in a segment where it failed). `ends`: a bare
    /// `/compact` (nothing else to answer, no parent to report to): its
    /// outcome is told as the answer and the task ends.
    Compact { ends: bool },
    /// The monthly budgets, kept in the table rather than on the task, are
    /// read before a model call: the next decision takes what they say.
    ReadMonthly,
    /// Phase one of a step: call the model.
    CallModel,
}

/// What [`next`] looks at besides the task and its transcript.
pub(super) struct Situation<'a> {
    pub(super) agent: &'a AgentConfig,
    /// This segment's lease owner id.
    pub(super) owner: &'a str,
    /// The context as the transcript makes it (for the size check).
    pub(super) context: &'a ContextCache,
    pub(super) budget: &'a SegmentBudget,
    /// The segment's time left, read once by the caller with `now`:
    /// [`next`] reads no clock.
    pub(super) time_left: Duration,
    /// A compaction failed in this segment already.
    pub(super) compaction_failed: bool,
    /// What the monthly budgets say of a model call now.
    pub(super) monthly: &'a Monthly,
    /// Why the policies refuse the task's start, as they said at the
    /// segment's start (`None` without policies); it counts only before
    /// the task's first model call.
    pub(super) refusal: Option<&'a str>,
    /// The segment has begun ([`Next::Begin`]).
    pub(super) begun: bool,
    pub(super) now: Instant,
}

impl Situation<'_> {
    /// Whether another unit of work may fit in the time left.
    fn fits_another(&self) -> bool {
        self.budget.fits_in(self.time_left)
    }
}

/// The segment's next action. The order is the loop's priority: a lost
/// lease, then a refused start, then the segment's beginning, then a
/// cancel, then the deadline and the hop limit, then the step in
/// progress, then a new step.
pub(super) fn next(task: &Task, transcript: &[Entry], s: &Situation<'_>) -> Next {
    if !task.lease().is_held_by(s.owner) {
        return Next::LeaseLost;
    }
    // Asked before anything of the task runs, even its tools' listing
    // (which may act for its person); once it started, no longer.
    if let Some(reason) = s.refusal.filter(|_| !started(transcript)) {
        return Next::Refuse(reason.to_owned());
    }
    if !s.begun {
        return Next::Begin;
    }
    if task.cancel_requested {
        return Next::Cancel;
    }
    if task.budget.limits.deadline_at.is_some_and(|d| s.now >= d) {
        return Next::Stop(Limit::Deadline);
    }
    if task.budget.segments > task.budget.limits.max_segments {
        return Next::Stop(Limit::Segments(task.budget.limits.max_segments));
    }
    if let Some(reason) = judgment::stopped(transcript) {
        return Next::Stop(Limit::Supervisor(reason));
    }
    // The thread's earlier discussion, before the model's first call.
    if super::thread::unread(task) {
        return Next::ReadThread;
    }
    // Files follow the message they came with: while that message waits
    // in the inbox, so do they.
    if !task.conversation.pending_files.is_empty() && task.conversation.inbox.is_empty() {
        return Next::TakeFiles;
    }
    // Phase two of an unfinished step: its missing tool results; but not
    // of a turn that repeats a call too often, refused before any runs.
    let (step, pending) = pending_tool_calls(transcript);
    if !pending.is_empty() {
        match stuck::repetition(s.agent, transcript) {
            Repetition::No => {}
            Repetition::Warn { tool, times } => {
                let calls = pending.into_iter().map(|(call, _)| call).collect();
                return Next::RefuseRepeated {
                    step,
                    calls,
                    tool,
                    times,
                };
            }
            Repetition::Stop { tool, times } => return Next::Stop(Limit::Loop { tool, times }),
        }
        if !s.fits_another() {
            return Next::HandOver;
        }
        return Next::RunTools { step, pending };
    }
    if let Some((step, answer)) = final_answer(transcript) {
        if crate::sanitize::sanitize(&answer).is_empty() {
            return Next::EmptyAnswer(stuck::empty_answer(s.agent, transcript));
        }
        // Judging costs a call, and sending back another: not past a
        // limit or the segment's time (the answer is delivered as it is).
        let room = over_limit(task, s.agent).is_none() && s.fits_another();
        return match judgment::gate(s.agent, task, transcript, step, &answer) {
            Gate::Judge { retried } if room => Next::Judge {
                step,
                answer,
                retried,
            },
            Gate::Narrates if room => Next::SendBack { step },
            _ => Next::Deliver(answer),
        };
    }
    // Steering: messages that arrived while we ran.
    if !task.conversation.inbox.is_empty() {
        return Next::TakeInbox;
    }
    if let Some(limit) = over_limit(task, s.agent) {
        return Next::Stop(limit);
    }
    if !s.fits_another() {
        return Next::HandOver;
    }
    let asked = compaction::compact_requested(transcript);
    if !s.compaction_failed && (asked || s.context.needs_compaction(s.agent)) {
        // The summary it writes leaves what needs an answer as it was.
        let ends = asked && !compaction::answer_needed(transcript) && task.source.parent.is_none();
        return Next::Compact { ends };
    }
    // Thinking before acting: the route, then the plan, then checkpoints.
    if judgment::needs_route(s.agent, transcript) {
        return Next::Route;
    }
    if judgment::needs_plan(s.agent, transcript) {
        return Next::Plan;
    }
    if judgment::supervision_due(s.agent, task, transcript, s.now) {
        return Next::Supervise;
    }
    match s.monthly {
        Monthly::Unread => Next::ReadMonthly,
        Monthly::Spent(whose) => Next::Stop(Limit::Monthly(whose.clone())),
        Monthly::Within => Next::CallModel,
    }
}

/// Whether the task has started: the model has answered once.
fn started(transcript: &[Entry]) -> bool {
    transcript
        .iter()
        .any(|e| matches!(e.kind, EntryKind::AssistantMessage { .. }))
}

/// The task's own limit that forbids another model call (steps, tokens,
/// cost), if one does. The monthly budgets are read apart
/// ([`Situation::monthly`]).
fn over_limit(task: &Task, agent: &AgentConfig) -> Option<Limit> {
    let limits = &task.budget.limits;
    if task.budget.steps >= limits.max_steps {
        return Some(Limit::Steps(limits.max_steps));
    }
    if limits.max_tokens > 0 && task.budget.usage.total() >= limits.max_tokens {
        return Some(Limit::Tokens(limits.max_tokens));
    }
    baton_settings::price::exhausted(task, agent).map(Limit::Cost)
}

/// The step and text of the final answer, if the conversation's last
/// message is an assistant message without tool calls (a runtime note or
/// an answer sent back after it asks for more).
pub(super) fn final_answer(transcript: &[Entry]) -> Option<(u32, String)> {
    let last = transcript.iter().rev().find(|e| {
        matches!(
            e.kind,
            EntryKind::UserMessage { .. }
                | EntryKind::AssistantMessage { .. }
                | EntryKind::ToolResult { .. }
                | EntryKind::Note { .. }
                | EntryKind::Verdict {
                    sent_back: true,
                    ..
                }
        )
    })?;
    match &last.kind {
        EntryKind::AssistantMessage {
            step,
            text,
            tool_calls,
            ..
        } if tool_calls.is_empty() => Some((*step, text.clone())),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use baton_core::{NoteReason, Origin, TaskId, Usage};
    use serde_json::json;
    use std::time::Duration;

    const OWNER: &str = "segment-1";
    const NOW: Instant = Instant(1_800_000_000_000);

    fn agent() -> AgentConfig {
        let mut a = AgentConfig::new("default", "gpt-4o");
        a.context.window_tokens = Some(100_000);
        // No fast tier: no judgment (its own table is
        // `judging_comes_before_acting_and_delivering`).
        a
    }

    /// A running task whose lease this segment holds.
    fn task() -> Task {
        let limits = baton_core::Limits {
            max_steps: 10,
            max_segments: 5,
            max_tokens: 0,
            deadline_at: None,
        };
        let mut t = Task::new(
            TaskId::generate(),
            "default",
            Origin::Http,
            None,
            limits,
            NOW - Duration::from_secs(1),
        );
        t.budget.segments = 1;
        assert!(t.start(
            OWNER,
            NOW - Duration::from_millis(500),
            Duration::from_secs(30)
        ));
        t
    }

    fn entries(kinds: Vec<EntryKind>) -> Vec<Entry> {
        kinds
            .into_iter()
            .enumerate()
            .map(|(i, kind)| Entry {
                seq: i as u64 + 1,
                at: NOW - Duration::from_millis(100),
                kind,
            })
            .collect()
    }

    fn user(text: &str) -> EntryKind {
        EntryKind::UserMessage {
            text: text.into(),
            from: None,
        }
    }

    fn answer(step: u32, text: &str, calls: &[&str]) -> EntryKind {
        EntryKind::AssistantMessage {
            step,
            text: text.into(),
            tool_calls: calls.iter().map(|id| read(id)).collect(),
            usage: Usage::default(),
            model: "m".into(),
        }
    }

    /// A call of `read`, its arguments its own (the same call repeated is
    /// [`same_call`]).
    fn read(id: &str) -> ToolCall {
        ToolCall {
            id: id.into(),
            name: "read".into(),
            arguments: json!({ "call": id }),
        }
    }

    /// Step `step`'s call of `get`, the same as every other step's.
    fn get_call(step: u32) -> ToolCall {
        ToolCall {
            id: format!("g{step}"),
            name: "get".into(),
            arguments: json!({ "url": "https://x.test/status" }),
        }
    }

    /// Step `step`'s turn asking for [`get_call`].
    fn same_call(step: u32) -> EntryKind {
        EntryKind::AssistantMessage {
            step,
            text: String::new(),
            tool_calls: vec![get_call(step)],
            usage: Usage::default(),
            model: "m".into(),
        }
    }

    fn result(step: u32, id: &str) -> EntryKind {
        EntryKind::ToolResult {
            step,
            call_id: id.into(),
            name: "read".into(),
            content: "ok".into(),
            is_error: false,
            truncated_chars: 0,
        }
    }

    fn started(step: u32, id: &str) -> EntryKind {
        EntryKind::ToolStarted {
            step,
            call_id: id.into(),
            name: "read".into(),
        }
    }

    /// A budget that has run one unit of `step` and has `left` after it.
    fn budget(step: Duration, left: Duration) -> SegmentBudget {
        let mut b = SegmentBudget::new(left);
        b.record(step);
        b
    }

    fn roomy() -> SegmentBudget {
        SegmentBudget::new(Duration::from_secs(600))
    }

    fn spent() -> SegmentBudget {
        budget(Duration::from_secs(60), Duration::from_secs(10))
    }

    /// What a case knows besides the agent, the task and its transcript.
    /// The default: a roomy budget and its own time left, no failed
    /// compaction, the monthly budgets within, no refusal, a begun segment.
    struct Facts {
        budget: SegmentBudget,
        /// The time left given, when not the budget's own.
        time_left: Option<Duration>,
        compaction_failed: bool,
        monthly: Monthly,
        refusal: Option<&'static str>,
        begun: bool,
    }

    impl Default for Facts {
        fn default() -> Self {
            Facts {
                budget: roomy(),
                time_left: None,
                compaction_failed: false,
                monthly: Monthly::Within,
                refusal: None,
                begun: true,
            }
        }
    }

    fn decide_on(agent: &AgentConfig, t: &Task, kinds: Vec<EntryKind>, f: &Facts) -> Next {
        let transcript = entries(kinds);
        let s = Situation {
            agent,
            owner: OWNER,
            context: &ContextCache::new(agent, &transcript),
            budget: &f.budget,
            time_left: f.time_left.unwrap_or_else(|| f.budget.time_left()),
            compaction_failed: f.compaction_failed,
            monthly: &f.monthly,
            refusal: f.refusal,
            begun: f.begun,
            now: NOW,
        };
        next(t, &transcript, &s)
    }

    fn decide(t: &Task, kinds: Vec<EntryKind>, b: &SegmentBudget) -> Next {
        decide_with(t, kinds, b, false)
    }

    fn decide_with(t: &Task, kinds: Vec<EntryKind>, b: &SegmentBudget, failed: bool) -> Next {
        let facts = Facts {
            budget: b.clone(),
            compaction_failed: failed,
            ..Facts::default()
        };
        decide_on(&agent(), t, kinds, &facts)
    }

    #[test]
    fn the_time_left_is_what_it_is_given_not_what_a_clock_says() {
        // A budget whose own clock says plenty is left (600 s), with a
        // step of 60 s recorded: the decision follows the time left given.
        let mut b = roomy();
        b.record(Duration::from_secs(60));
        let decide_at = |time_left: Duration| {
            let facts = Facts {
                budget: b.clone(),
                time_left: Some(time_left),
                ..Facts::default()
            };
            decide_on(&agent(), &task(), vec![user("go")], &facts)
        };
        for (left, hands_over) in [
            (Duration::from_secs(10), true),
            (Duration::from_secs(60), true),
            (Duration::from_secs(61), false),
            (Duration::from_secs(600), false),
        ] {
            assert_eq!(
                matches!(decide_at(left), Next::HandOver),
                hands_over,
                "{left:?} left"
            );
        }
    }

    fn pending(ids: &[(&str, bool)]) -> Vec<(ToolCall, bool)> {
        ids.iter()
            .map(|(id, was_started)| (read(id), *was_started))
            .collect()
    }

    #[test]
    fn a_new_task_calls_the_model_and_a_final_answer_is_delivered() {
        let t = task();
        assert_eq!(decide(&t, vec![user("hi")], &roomy()), Next::CallModel);
        assert_eq!(
            decide(&t, vec![user("hi"), answer(1, "hello", &[])], &roomy()),
            Next::Deliver("hello".into())
        );
        // Reasoning only is no answer at all.
        let thought = "<thinking>they said hi</thinking>\n ";
        assert_eq!(
            decide(&t, vec![user("hi"), answer(1, thought, &[])], &roomy()),
            Next::EmptyAnswer(EmptyAnswer::Nudge)
        );
        // A note after the answer asks for more: the model is called.
        let nudged = vec![
            user("hi"),
            answer(1, "", &[]),
            EntryKind::Note {
                reason: NoteReason::EmptyAnswer,
                text: "continue".into(),
            },
        ];
        assert_eq!(decide(&t, nudged, &roomy()), Next::CallModel);
    }

    #[test]
    fn phase_two_runs_what_has_no_result_and_says_what_was_started() {
        let t = task();
        let step = vec![
            user("go"),
            answer(1, "", &["a", "b", "c"]),
            started(1, "b"),
            result(1, "a"),
        ];
        assert_eq!(
            decide(&t, step.clone(), &roomy()),
            Next::RunTools {
                step: 1,
                pending: pending(&[("b", true), ("c", false)]),
            }
        );
        // Every result in: the model is called again.
        let mut done = step;
        done.extend([result(1, "b"), result(1, "c")]);
        assert_eq!(decide(&t, done, &roomy()), Next::CallModel);
    }

    /// A turn that repeats a call too often is refused before its calls
    /// run (the first time) or stops the task (after the warning): as
    /// soon as it is written, whatever the time left, but after a cancel
    /// and the deadline.
    #[test]
    fn a_turn_that_repeats_a_call_is_refused_then_stops_the_task() {
        // Steps 1..=n asking for the same call, the last one's not run yet
        // (`ran`: run too).
        let calls = |n: u32, ran: bool| {
            let mut kinds = vec![user("poll")];
            for step in 1..=n {
                kinds.push(same_call(step));
                if step < n || ran {
                    kinds.push(result(step, &format!("g{step}")));
                }
            }
            kinds
        };
        let warned = |n: u32| {
            let mut kinds = calls(n, false);
            kinds.insert(
                1,
                EntryKind::Note {
                    reason: NoteReason::Repeating,
                    text: "stop".into(),
                },
            );
            kinds
        };
        let refused = |step: u32| Next::RefuseRepeated {
            step,
            calls: vec![get_call(step)],
            tool: "get".into(),
            times: step,
        };
        let stopped = |times| {
            Next::Stop(Limit::Loop {
                tool: "get".into(),
                times,
            })
        };
        let runs = Next::RunTools {
            step: 2,
            pending: vec![(get_call(2), false)],
        };
        let mut cancelled = task();
        cancelled.cancel_requested = true;
        let mut late = task();
        late.budget.limits.deadline_at = Some(NOW);
        let (call, cancel, over) = (Next::CallModel, Next::Cancel, Next::Stop(Limit::Deadline));
        let cases = [
            ("twice", task(), calls(2, false), roomy(), runs),
            ("thrice", task(), calls(3, false), roomy(), refused(3)),
            ("no time left", task(), calls(3, false), spent(), refused(3)),
            ("thrice, run", task(), calls(3, true), roomy(), call),
            ("warned", task(), warned(3), roomy(), stopped(3)),
            ("warned, no time", task(), warned(4), spent(), stopped(4)),
            ("cancelled", cancelled, calls(3, false), roomy(), cancel),
            ("late", late, calls(3, false), roomy(), over),
        ];
        for (case, t, kinds, b, expected) in cases {
            assert_eq!(decide(&t, kinds, &b), expected, "{case}");
        }
    }

    /// The segment's start: a start the policies refuse fails before the
    /// segment begins (its tools taken), even cancelled; a task that has
    /// started is not refused; the beginning comes before a cancel.
    #[test]
    fn a_refused_start_fails_before_the_segment_begins() {
        let decide_at_start = |t: &Task, kinds: Vec<EntryKind>, refusal, begun| {
            let facts = Facts {
                refusal,
                begun,
                ..Facts::default()
            };
            decide_on(&agent(), t, kinds, &facts)
        };
        let why = "refused by policy `no-api`";
        let (no, refused) = (Some(why), || Next::Refuse(why.into()));
        let cancelled = || {
            let mut t = task();
            t.cancel_requested = true;
            t
        };
        let mut stolen = task();
        baton_core::testing::lose_lease(&mut stolen);
        let go = || vec![user("go")];
        let tools = vec![user("go"), answer(1, "", &["a"])];
        let again = vec![user("go"), answer(1, "hi", &[]), user("more")];
        let (begin, call) = (|| Next::Begin, || Next::CallModel);
        let (lost, cancel) = (Next::LeaseLost, Next::Cancel);
        let cases = [
            ("refused", task(), go(), no, false, refused()),
            ("refused, begun", task(), go(), no, true, refused()),
            ("cancelled", cancelled(), go(), no, false, refused()),
            ("lease lost", stolen, go(), no, false, lost),
            ("started", task(), tools, no, false, begin()),
            ("started, begun", task(), again, no, true, call()),
            ("allowed", task(), go(), None, false, begin()),
            ("allowed, begun", task(), go(), None, true, call()),
            ("cancelled, begun", cancelled(), go(), None, true, cancel),
        ];
        for (case, t, kinds, refusal, begun, expected) in cases {
            assert_eq!(
                decide_at_start(&t, kinds, refusal, begun),
                expected,
                "{case}"
            );
        }
    }

    /// The monthly budgets are read just before a model call, and only
    /// then: what they say decides whether it is made.
    #[test]
    fn the_monthly_budgets_are_read_before_a_model_call_and_may_stop_it() {
        let decide_reading = |t: &Task, kinds: Vec<EntryKind>, monthly: Monthly| {
            let facts = Facts {
                monthly,
                ..Facts::default()
            };
            decide_on(&agent(), t, kinds, &facts)
        };
        use Monthly::{Unread, Within};
        let whose = "the workspace's monthly budget is spent";
        let spent = || Monthly::Spent(whose.into());
        let over = Next::Stop(Limit::Monthly(whose.into()));
        let (read, call) = (Next::ReadMonthly, Next::CallModel);
        let deliver = Next::Deliver("done".into());
        let (compact, steps) = (Next::Compact { ends: true }, Next::Stop(Limit::Steps(10)));
        let mut at_limit = task();
        at_limit.budget.steps = 10;
        let go = || vec![user("go")];
        let tools = vec![user("go"), answer(1, "", &["a"])];
        let done = vec![user("go"), answer(1, "done", &[])];
        let asked = vec![user("/compact")];
        let cases = [
            ("unread", task(), go(), Unread, read),
            ("within", task(), go(), Within, call),
            ("spent", task(), go(), spent(), over),
            // Only a model call needs them: not running tools, delivering,
            // compacting, nor a task at its own limit.
            ("tools", task(), tools, Unread, runs("a")),
            ("done", task(), done, spent(), deliver),
            ("compact", task(), asked, spent(), compact),
            ("own limit", at_limit, go(), Unread, steps),
        ];
        for (case, t, kinds, monthly, expected) in cases {
            assert_eq!(decide_reading(&t, kinds, monthly), expected, "{case}");
        }
    }

    /// Step 1's call `id`, to run.
    fn runs(id: &str) -> Next {
        Next::RunTools {
            step: 1,
            pending: vec![(read(id), false)],
        }
    }

    #[test]
    fn the_budget_hands_over_before_a_unit_that_may_not_fit() {
        let t = task();
        let cases: &[(&str, Vec<EntryKind>)] = &[
            ("before a model call", vec![user("go")]),
            ("before the tools", vec![user("go"), answer(1, "", &["a"])]),
        ];
        for (case, kinds) in cases {
            assert_eq!(
                decide(&t, kinds.clone(), &spent()),
                Next::HandOver,
                "{case}"
            );
            assert_ne!(
                decide(&t, kinds.clone(), &roomy()),
                Next::HandOver,
                "{case}"
            );
        }
        // Ten seconds left after a one-second step: another fits.
        let ample = budget(Duration::from_secs(1), Duration::from_secs(10));
        assert_eq!(decide(&t, vec![user("go")], &ample), Next::CallModel);
        // The first unit of a segment always runs, however small the budget.
        let tiny = SegmentBudget::new(Duration::ZERO);
        assert_eq!(decide(&t, vec![user("go")], &tiny), Next::CallModel);
        // Delivering an answer needs no model call: it is never handed over.
        let answered = vec![user("go"), answer(1, "done", &[])];
        assert_eq!(decide(&t, answered, &spent()), Next::Deliver("done".into()));
    }

    #[test]
    fn a_cancel_arriving_mid_step_wins_over_everything_but_a_lost_lease() {
        let mut t = task();
        t.cancel_requested = true;
        let mid_step = vec![user("go"), answer(1, "", &["a", "b"]), result(1, "a")];
        assert_eq!(decide(&t, mid_step, &roomy()), Next::Cancel);
        assert_eq!(
            decide(&t, vec![user("go"), answer(1, "done", &[])], &roomy()),
            Next::Cancel
        );
        t.budget.limits.deadline_at = Some(NOW - Duration::from_millis(1));
        t.budget.steps = 10;
        assert_eq!(decide(&t, vec![user("go")], &spent()), Next::Cancel);
        baton_core::testing::lose_lease(&mut t);
        assert_eq!(decide(&t, vec![user("go")], &roomy()), Next::LeaseLost);
    }

    #[test]
    fn a_lost_lease_stops_the_segment_before_anything_else() {
        let mut t = task();
        baton_core::testing::lose_lease(&mut t);
        assert!(t.start("segment-2", NOW, Duration::from_secs(30)));
        for kinds in [
            vec![user("go")],
            vec![user("go"), answer(1, "", &["a"])],
            vec![user("go"), answer(1, "done", &[])],
        ] {
            assert_eq!(decide(&t, kinds, &roomy()), Next::LeaseLost);
        }
    }

    #[test]
    fn every_limit_stops_the_task() {
        let go = || vec![user("go")];
        let mut deadline = task();
        deadline.budget.limits.deadline_at = Some(NOW);
        let mut hops = task();
        hops.budget.segments = 6;
        let mut steps = task();
        steps.budget.steps = 10;
        let mut tokens = task();
        tokens.budget.limits.max_tokens = 1_000;
        tokens.budget.usage.add(Usage {
            input_tokens: 900,
            output_tokens: 100,
        });
        let cases = [
            ("deadline", deadline, Limit::Deadline),
            ("segments", hops, Limit::Segments(5)),
            ("steps", steps, Limit::Steps(10)),
            ("tokens", tokens, Limit::Tokens(1_000)),
        ];
        for (case, t, limit) in cases {
            assert_eq!(decide(&t, go(), &roomy()), Next::Stop(limit), "{case}");
        }
        // The per-task cost budget, from the agent's prices.
        let mut t = task();
        t.budget.cost_usd = 2.0;
        let mut priced = agent();
        priced.max_cost_usd = Some(1.0);
        assert!(matches!(
            decide_on(&priced, &t, go(), &Facts::default()),
            Next::Stop(Limit::Cost(_))
        ));
    }

    #[test]
    fn limits_on_model_calls_let_the_step_in_progress_finish() {
        // At the step limit, the last step's tools still run and its final
        // answer is still delivered; the deadline stops both.
        let mut t = task();
        t.budget.steps = 10;
        let tools = vec![user("go"), answer(10, "", &["a"])];
        assert!(matches!(
            decide(&t, tools.clone(), &roomy()),
            Next::RunTools { step: 10, .. }
        ));
        let done = vec![user("go"), answer(10, "done", &[])];
        assert_eq!(
            decide(&t, done.clone(), &roomy()),
            Next::Deliver("done".into())
        );
        t.budget.limits.deadline_at = Some(NOW - Duration::from_millis(1));
        assert_eq!(decide(&t, tools, &roomy()), Next::Stop(Limit::Deadline));
        assert_eq!(decide(&t, done, &roomy()), Next::Stop(Limit::Deadline));
    }

    #[test]
    fn steering_messages_and_files_are_taken_before_the_next_call() {
        let mut t = task();
        t.conversation.inbox.push(baton_core::InboxMessage {
            text: "and also this".into(),
            from: None,
        });
        let tools_done = vec![user("go"), answer(1, "", &["a"]), result(1, "a")];
        assert_eq!(decide(&t, tools_done, &roomy()), Next::TakeInbox);
        // Not before the step in progress has its results.
        let mid = vec![user("go"), answer(1, "", &["a"])];
        assert!(matches!(decide(&t, mid, &roomy()), Next::RunTools { .. }));
        // Not before the answer to the earlier message is delivered.
        let done = vec![user("go"), answer(1, "done", &[])];
        assert_eq!(decide(&t, done, &roomy()), Next::Deliver("done".into()));
        // Files follow their message: taken once it is, before all else.
        t.conversation
            .pending_files
            .push(baton_core::attachment::PendingFile {
                id: "F1".into(),
                name: "a.txt".into(),
                media_type: None,
                size: 3,
                url: String::new(),
                stashed: None,
            });
        let mid = vec![user("go"), answer(1, "", &["a"])];
        assert!(matches!(
            decide(&t, mid.clone(), &roomy()),
            Next::RunTools { .. }
        ));
        t.conversation.inbox.clear();
        assert_eq!(decide(&t, mid.clone(), &roomy()), Next::TakeFiles);
        // The thread's earlier messages come before even the files; a
        // cancel still wins.
        t.conversation.unread_thread = Some(baton_core::UnreadThread { after: None });
        assert_eq!(decide(&t, mid.clone(), &roomy()), Next::ReadThread);
        t.cancel_requested = true;
        assert_eq!(decide(&t, mid, &roomy()), Next::Cancel);
    }

    #[test]
    fn a_failed_compaction_is_not_asked_for_again_in_the_segment() {
        let t = task();
        let asked = vec![user("/compact")];
        assert_eq!(
            decide(&t, asked.clone(), &roomy()),
            Next::Compact { ends: true }
        );
        assert_eq!(
            decide_with(&t, asked, &roomy(), true),
            Next::CallModel,
            "failed already: the model is called"
        );
        // A long history compacts by itself.
        let mut long = vec![user("go")];
        for i in 1..=30 {
            let id = format!("c{i}");
            long.push(answer(i, "", &[id.as_str()]));
            long.push(result(i, &id));
        }
        assert_eq!(decide(&t, long, &roomy()), Next::Compact { ends: false });
    }

    /// A bare `/compact` is answered with its outcome and ends the task;
    /// one with something else to answer, or in a sub-agent, goes on.
    #[test]
    fn a_bare_compact_ends_the_task() {
        let mut child = task();
        child.source.parent = Some(baton_core::ParentLink {
            task_id: TaskId::generate(),
            call_id: "d1".into(),
            root_task_id: None,
            actor: None,
        });
        let compact = |ends| Next::Compact { ends };
        let bare = || vec![user("/compact")];
        let answered = vec![user("go"), answer(1, "done", &[]), user("/compact")];
        let unanswered = vec![user("go"), user("/compact")];
        let mid_step = vec![
            user("go"),
            answer(1, "", &["a"]),
            result(1, "a"),
            user("/compact"),
        ];
        let cases = [
            ("bare", task(), bare(), compact(true)),
            ("after an answer", task(), answered, compact(true)),
            ("a message unanswered", task(), unanswered, compact(false)),
            ("tool results unanswered", task(), mid_step, compact(false)),
            ("a sub-agent", child, bare(), compact(false)),
        ];
        for (case, t, kinds, expected) in cases {
            assert_eq!(decide(&t, kinds, &roomy()), expected, "{case}");
        }
    }

    /// The agent's judgment, in order: routed, planned, supervised, and
    /// its answers judged; a sent-back answer calls the model again; the
    /// supervisor's stop ends the task; no judging past a limit.
    #[test]
    fn judging_comes_before_acting_and_delivering() {
        use baton_core::judgment::{PlanStep, SupervisorAction, Tier};
        let mut a = agent();
        a.tiers.fast = Some("small".into());
        a.quality_gate = true;
        a.supervision = baton_settings::Supervision::On(baton_settings::Cadence {
            every_steps: 2,
            every: Duration::from_secs(3600),
        });
        let decide_as = |t: &Task, kinds: Vec<EntryKind>, b: &SegmentBudget| {
            let facts = Facts {
                budget: b.clone(),
                ..Facts::default()
            };
            decide_on(&a, t, kinds, &facts)
        };
        let route = EntryKind::Route {
            tier: Tier::Default,
            modules: vec![],
            needs_plan: true,
            fallback: None,
        };
        let plan = EntryKind::Plan {
            steps: vec![PlanStep {
                title: "look".into(),
                done_when: "seen".into(),
            }],
        };
        let mut t = task();
        assert_eq!(decide_as(&t, vec![user("go")], &roomy()), Next::Route);
        let routed = vec![user("go"), route];
        assert_eq!(decide_as(&t, routed.clone(), &roomy()), Next::Plan);
        let mut planned = routed;
        planned.push(plan);
        assert_eq!(decide_as(&t, planned.clone(), &roomy()), Next::CallModel);
        let mut working = planned.clone();
        working.extend([answer(1, "", &["c1"]), result(1, "c1")]);
        working.extend([answer(2, "", &["c2"]), result(2, "c2")]);
        t.budget.steps = 2;
        assert_eq!(decide_as(&t, working.clone(), &roomy()), Next::Supervise);
        let checkpoint = |action| EntryKind::Supervision {
            step: 2,
            action,
            note: Some("it loops".into()),
            question: None,
            done: vec![0],
        };
        let mut stopped = working.clone();
        stopped.push(checkpoint(SupervisorAction::Stop));
        assert_eq!(
            decide_as(&t, stopped, &roomy()),
            Next::Stop(Limit::Supervisor("it loops".into()))
        );
        let mut replanned = working.clone();
        replanned.push(checkpoint(SupervisorAction::Replan));
        assert_eq!(decide_as(&t, replanned, &roomy()), Next::Plan);
        working.push(checkpoint(SupervisorAction::Continue));
        assert_eq!(decide_as(&t, working.clone(), &roomy()), Next::CallModel);
        // The answer is judged, a narration sent back by rule.
        t.budget.steps = 3;
        let mut answered = working.clone();
        answered.push(answer(3, "Here it is.", &[]));
        assert_eq!(
            decide_as(&t, answered.clone(), &roomy()),
            Next::Judge {
                step: 3,
                answer: "Here it is.".into(),
                retried: false
            }
        );
        let mut narrated = working.clone();
        narrated.push(answer(3, "Let me look that up...", &[]));
        assert_eq!(
            decide_as(&t, narrated, &roomy()),
            Next::SendBack { step: 3 }
        );
        // Sent back: the model is called again; judged and passed: delivered.
        let verdict = |pass: bool, sent_back: bool| EntryKind::Verdict {
            step: 3,
            pass,
            problems: vec![],
            rule: false,
            sent_back,
        };
        let mut failed = answered.clone();
        failed.push(verdict(false, true));
        assert_eq!(decide_as(&t, failed, &roomy()), Next::CallModel);
        let mut passed = answered.clone();
        passed.push(verdict(true, false));
        assert_eq!(
            decide_as(&t, passed, &roomy()),
            Next::Deliver("Here it is.".into())
        );
        // No room for another call: delivered as it is.
        assert_eq!(
            decide_as(&t, answered, &spent()),
            Next::Deliver("Here it is.".into())
        );
    }
}
