//! A model that is stuck, handled the way users of agent loops expect:
//!
//! * an **empty answer** (no text, no tool calls) gets one nudge to go on,
//!   then the escalation model when one is configured, then the user is
//!   told; only an explicit `NO_REPLY` posts nothing;
//! * **the same call again and again** — `max_identical_calls` times in a
//!   row, or twice that many among the last `loop_window` calls — is
//!   refused once with a warning, and stops the task the next time (a
//!   polling agent, `sleep` then the same GET, is not in a row);
//! * **tools failing** [`TOOL_ERRORS_ADVICE_AFTER`] times in a row get a
//!   note to try a different approach (escalation, when configured, follows
//!   its own `after_tool_errors`).
//!
//! Every decision is taken from the transcript, so a retried segment takes
//! the same one.

use super::result::result_entry;
use super::{Segment, Step};
use crate::model_choice::tool_error_runs;
use baton_core::{Entry, EntryKind, NoteReason, TaskStatus, ToolCall, ToolOutput};
use baton_settings::AgentConfig;

/// Failed tool results in a row after which the model is advised to change
/// course.
pub(super) const TOOL_ERRORS_ADVICE_AFTER: u32 = 3;

/// What the transcript says about the last turn's calls.
#[derive(Debug, PartialEq)]
pub(super) enum Repetition {
    /// Nothing repeats too often.
    No,
    /// A call repeats: the turn is refused and the model warned (once).
    Warn { tool: String, times: u32 },
    /// A call repeats after the warning: the task stops.
    Stop { tool: String, times: u32 },
}

/// Checks the calls of the last assistant message against the calls before.
pub(super) fn repetition(agent: &AgentConfig, transcript: &[Entry]) -> Repetition {
    fn assistant_calls(e: &Entry) -> Option<&Vec<ToolCall>> {
        match &e.kind {
            EntryKind::AssistantMessage { tool_calls, .. } => Some(tool_calls),
            _ => None,
        }
    }
    let last_turn = match transcript.iter().rev().find_map(assistant_calls) {
        Some(calls) if !calls.is_empty() => calls.len(),
        _ => return Repetition::No,
    };
    let in_a_row = agent.max_identical_calls.max(2);
    let in_window = in_a_row.saturating_mul(2);
    let loop_window = agent.loop_window.max(1) as usize;
    // Only the latest calls can make a run or fill the window: a longer
    // run would have been caught when it reached `in_a_row`. Reading just
    // those keeps the check's cost flat as the task grows.
    let reach = last_turn.saturating_add(loop_window.max(in_a_row as usize));
    let mut calls: Vec<&ToolCall> = transcript
        .iter()
        .rev()
        .filter_map(assistant_calls)
        .flat_map(|calls| calls.iter().rev())
        .take(reach)
        .collect();
    calls.reverse();
    let same = |a: &ToolCall, b: &ToolCall| a.name == b.name && a.arguments == b.arguments;
    let mut worst: Option<(String, u32)> = None;
    for end in calls.len() - last_turn..calls.len() {
        let me = calls[end];
        let run = calls[..=end]
            .iter()
            .rev()
            .take_while(|c| same(c, me))
            .count() as u32;
        let window_start = (end + 1).saturating_sub(loop_window);
        let seen = calls[window_start..=end]
            .iter()
            .filter(|c| same(c, me))
            .count() as u32;
        if run >= in_a_row || seen >= in_window {
            let times = run.max(seen);
            if worst.as_ref().is_none_or(|(_, t)| times > *t) {
                worst = Some((me.name.clone(), times));
            }
        }
    }
    let Some((tool, times)) = worst else {
        return Repetition::No;
    };
    let warned = transcript.iter().any(|e| {
        matches!(
            e.kind,
            EntryKind::Note {
                reason: NoteReason::Repeating,
                ..
            }
        )
    });
    if warned {
        Repetition::Stop { tool, times }
    } else {
        Repetition::Warn { tool, times }
    }
}

/// The rung of the empty-answer ladder the model is on.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum EmptyAnswer {
    /// The first empty answer since the user spoke: a note asks it to go on.
    Nudge,
    /// Empty again: the escalation model takes over (when there is one).
    Escalate,
    /// Empty after all that: the task fails and the user is told.
    GiveUp,
}

/// What follows an empty answer: a nudge first, then the escalation
/// model (when configured and not yet taken over since the user spoke),
/// then giving up. Read from the notes since the last user message, so a
/// retried segment takes the same rung.
pub(super) fn empty_answer(agent: &AgentConfig, transcript: &[Entry]) -> EmptyAnswer {
    let (nudges, escalated) = empty_answer_notes(transcript);
    if nudges == 0 {
        EmptyAnswer::Nudge
    } else if agent.escalation.is_some() && !escalated {
        EmptyAnswer::Escalate
    } else {
        EmptyAnswer::GiveUp
    }
}

/// Empty answers since the last user message: the nudges already given
/// and whether the escalation model took over.
fn empty_answer_notes(transcript: &[Entry]) -> (usize, bool) {
    let since = transcript
        .iter()
        .rposition(|e| matches!(e.kind, EntryKind::UserMessage { .. }))
        .map_or(0, |p| p + 1);
    let notes = transcript[since..].iter().filter_map(|e| match &e.kind {
        EntryKind::Note { reason, .. } => Some(*reason),
        _ => None,
    });
    let (mut nudges, mut escalated) = (0, false);
    for r in notes {
        match r {
            NoteReason::EmptyAnswer => nudges += 1,
            NoteReason::Escalated => escalated = true,
            _ => {}
        }
    }
    (nudges, escalated)
}

impl Segment<'_> {
    /// The model answered with nothing: the note of `rung` (a nudge, the
    /// escalation), or the user told. `None`: the loop goes on.
    pub(super) async fn after_empty_answer(&mut self, rung: EmptyAnswer) -> Step {
        let (reason, text) = match rung {
            EmptyAnswer::Nudge => (
                NoteReason::EmptyAnswer,
                "Your last answer was empty. Continue: answer the user, or call a tool if you need one.",
            ),
            EmptyAnswer::Escalate => (
                NoteReason::Escalated,
                "Your answer was empty again. Continue: answer the user, or call a tool if you need one.",
            ),
            EmptyAnswer::GiveUp => {
                let reason = "the model gave no answer, even when asked again".to_owned();
                let told = "Sorry, I could not produce an answer: the model replied with nothing, \
                            even when asked again. Please try rephrasing your request."
                    .to_owned();
                return self
                    .finish(TaskStatus::Failed, None, Some(reason), Some(told))
                    .await
                    .map(Some);
            }
        };
        let entry = EntryKind::Note {
            reason,
            text: text.to_owned(),
        };
        self.commit(|_| Some(vec![entry.clone()])).await?;
        Ok(None)
    }

    /// A turn that repeats a call too often ([`repetition`] warns, and
    /// [`super::next`] decides): its `calls` are refused with a warning;
    /// the next time the task stops.
    pub(super) async fn refuse_repeated(
        &mut self,
        step: u32,
        calls: Vec<ToolCall>,
        tool: String,
        times: u32,
    ) -> Result<(), crate::WorkerError> {
        let warning = format!(
            "You asked for `{tool}` with the same arguments {times} times without making \
             progress, so this turn's calls were not run. Try a different approach, or \
             answer the user with what you have. Asking for the same call again ends the task."
        );
        let max_chars = self.agent.max_tool_result_chars;
        let mut entries: Vec<EntryKind> = calls
            .iter()
            .map(|call| {
                let out = ToolOutput::error(
                    "not run: this turn repeats a call that is not making progress",
                );
                result_entry(step, call, out, max_chars, self.deps.input_guard)
            })
            .collect();
        entries.push(EntryKind::Note {
            reason: NoteReason::Repeating,
            text: warning,
        });
        self.commit(|_| Some(entries.clone())).await
    }

    /// After a batch of tool results: several failures in a row get a note
    /// to try something else, when [`tool_errors_advice`] says so.
    pub(super) async fn advise_after_tool_errors(&mut self) -> Result<(), crate::WorkerError> {
        let Some(run) = tool_errors_advice(&self.transcript) else {
            return Ok(());
        };
        let entry = EntryKind::Note {
            reason: NoteReason::ToolErrors,
            text: format!(
                "The last {run} tool calls failed. Do not repeat them as they were: read the errors, \
                 then try a different approach, or tell the user what is blocking you."
            ),
        };
        self.commit(|_| Some(vec![entry.clone()])).await
    }
}

/// The failed tool results in a row the model is to be advised about, if
/// it is: [`TOOL_ERRORS_ADVICE_AFTER`] or more, and no advice since the
/// last success (once per run of failures).
pub(super) fn tool_errors_advice(transcript: &[Entry]) -> Option<u32> {
    let (run, _) = tool_error_runs(transcript);
    if run < TOOL_ERRORS_ADVICE_AFTER {
        return None;
    }
    let since_success = transcript
        .iter()
        .rposition(|e| {
            matches!(
                e.kind,
                EntryKind::ToolResult {
                    is_error: false,
                    ..
                }
            )
        })
        .map_or(0, |p| p + 1);
    let advised = transcript[since_success..].iter().any(|e| {
        matches!(
            e.kind,
            EntryKind::Note {
                reason: NoteReason::ToolErrors,
                ..
            }
        )
    });
    (!advised).then_some(run)
}

#[cfg(test)]
mod tests {
    use super::*;
    use baton_core::Usage;
    use serde_json::json;

    fn turn(calls: &[(&str, serde_json::Value)]) -> EntryKind {
        EntryKind::AssistantMessage {
            step: 0,
            text: String::new(),
            tool_calls: calls
                .iter()
                .enumerate()
                .map(|(i, (name, args))| ToolCall {
                    id: format!("c{i}"),
                    name: (*name).into(),
                    arguments: args.clone(),
                })
                .collect(),
            usage: Usage::default(),
            model: "m".into(),
        }
    }

    fn entries(kinds: Vec<EntryKind>) -> Vec<Entry> {
        kinds
            .into_iter()
            .enumerate()
            .map(|(i, kind)| Entry {
                seq: i as u64 + 1,
                at: baton_core::Instant(0),
                kind,
            })
            .collect()
    }

    fn agent() -> AgentConfig {
        AgentConfig::new("default", "m")
    }

    /// The empty-answer ladder, from the notes since the user last spoke:
    /// (with an escalation model, notes since the user's message, rung).
    #[test]
    fn an_empty_answer_is_nudged_then_escalated_then_given_up() {
        use EmptyAnswer::{Escalate, GiveUp, Nudge};
        let note = |reason| EntryKind::Note {
            reason,
            text: "go on".into(),
        };
        let (nudged, escalated) = (NoteReason::EmptyAnswer, NoteReason::Escalated);
        let cases = [
            (false, vec![], Nudge),
            (true, vec![], Nudge),
            (false, vec![nudged], GiveUp),
            (true, vec![nudged], Escalate),
            (true, vec![nudged, escalated], GiveUp),
            // Escalated for another reason (a refused request): given up
            // after the nudge all the same.
            (true, vec![escalated, nudged], GiveUp),
            // Other notes are not rungs of this ladder.
            (true, vec![NoteReason::Repeating], Nudge),
            (true, vec![NoteReason::ToolErrors, nudged], Escalate),
        ];
        for (with_escalation, notes, rung) in cases {
            let mut a = agent();
            if with_escalation {
                a.escalation = Some(baton_settings::Escalation {
                    model: "big".into(),
                    after_tool_errors: 3,
                });
            }
            // The notes of an earlier message do not count.
            let mut kinds = vec![
                user("first"),
                note(NoteReason::EmptyAnswer),
                note(NoteReason::Escalated),
                user("again"),
            ];
            kinds.extend(notes.iter().map(|r| note(*r)));
            assert_eq!(
                empty_answer(&a, &entries(kinds)),
                rung,
                "escalation: {with_escalation}, notes: {notes:?}"
            );
        }
    }

    /// (results and notes in order — `x` failed, `o` succeeded, `n` the
    /// advice, `u` a user message — the run to advise about).
    #[test]
    fn failing_tools_are_advised_about_once_per_run() {
        let cases = [
            ("xx", None),
            ("xxx", Some(3)),
            ("xxxx", Some(4)),
            ("oxxx", Some(3)),
            ("xxoxx", None),
            ("xxxn", None),
            ("xxxnx", None),
            ("xxxnoxxx", Some(3)),
            // Other entries do not break a run.
            ("xuxx", Some(3)),
        ];
        for (shape, run) in cases {
            let kinds = shape
                .chars()
                .map(|c| match c {
                    'n' => EntryKind::Note {
                        reason: NoteReason::ToolErrors,
                        text: "try another way".into(),
                    },
                    'u' => user("and?"),
                    c => EntryKind::ToolResult {
                        step: 1,
                        call_id: "c".into(),
                        name: "http_request".into(),
                        content: "out".into(),
                        is_error: c == 'x',
                        truncated_chars: 0,
                    },
                })
                .collect();
            assert_eq!(tool_errors_advice(&entries(kinds)), run, "{shape}");
        }
    }

    fn user(text: &str) -> EntryKind {
        EntryKind::UserMessage {
            text: text.into(),
            from: None,
        }
    }

    /// Through the interpreter: the third time in a row the call is not
    /// run and the model is warned; the fourth ends the task.
    #[tokio::test]
    async fn a_model_repeating_a_call_is_warned_then_stopped() {
        use super::super::harness::{roomy, says, Harness};
        use super::super::SegmentEnd;
        let h = Harness::new(|_| {});
        let same = |id: &str| baton_core::Completion {
            tool_calls: vec![ToolCall {
                id: id.into(),
                name: "count".into(),
                arguments: json!({ "label": "again" }),
            }],
            ..baton_core::Completion::default()
        };
        h.llm
            .then(same("c1"))
            .then(same("c2"))
            .then(same("c3"))
            .then(same("c4"))
            .then(says("I kept counting."));
        let id = h.task("count").await;
        assert_eq!(
            h.run(&id, roomy()).await,
            SegmentEnd::Finished(TaskStatus::Failed)
        );
        assert_eq!(h.tool.calls(), 2, "the third and fourth never ran");
        let task = h.get(&id).await;
        let error = task.answer.error.unwrap_or_default();
        assert!(
            error.contains("same `count` call") && error.contains("4 times"),
            "{error}"
        );
        let transcript = h.transcript(&id).await;
        let warnings = transcript
            .iter()
            .filter(|e| {
                matches!(
                    e.kind,
                    EntryKind::Note {
                        reason: NoteReason::Repeating,
                        ..
                    }
                )
            })
            .count();
        assert_eq!(warnings, 1);
        let refused: Vec<&str> = transcript
            .iter()
            .filter_map(|e| match &e.kind {
                EntryKind::ToolResult {
                    call_id,
                    is_error: true,
                    ..
                } => Some(call_id.as_str()),
                _ => None,
            })
            .collect();
        assert_eq!(refused, ["c3"]);
        let told = h.replies.endings();
        assert!(
            told.len() == 1 && told[0].contains("I kept counting."),
            "{told:?}"
        );
    }

    #[test]
    fn polling_with_sleep_in_between_is_not_repeating() {
        let get = ("http_request", json!({"url": "https://x.test/status"}));
        let sleep = ("sleep", json!({"seconds": 60}));
        let mut kinds = Vec::new();
        for _ in 0..10 {
            kinds.push(turn(std::slice::from_ref(&sleep)));
            kinds.push(turn(std::slice::from_ref(&get)));
            assert_eq!(
                repetition(&agent(), &entries(kinds.clone())),
                Repetition::No
            );
        }
    }

    #[test]
    fn the_same_call_in_a_row_is_warned_once_then_stopped() {
        let get = ("http_request", json!({"url": "https://x.test/a"}));
        let once = std::slice::from_ref(&get);
        let mut kinds = vec![turn(once), turn(once)];
        assert_eq!(
            repetition(&agent(), &entries(kinds.clone())),
            Repetition::No
        );
        kinds.push(turn(std::slice::from_ref(&get)));
        assert_eq!(
            repetition(&agent(), &entries(kinds.clone())),
            Repetition::Warn {
                tool: "http_request".into(),
                times: 3
            }
        );
        kinds.push(EntryKind::Note {
            reason: NoteReason::Repeating,
            text: "stop".into(),
        });
        kinds.push(turn(&[get]));
        assert!(matches!(
            repetition(&agent(), &entries(kinds)),
            Repetition::Stop { times: 4, .. }
        ));
    }

    #[test]
    fn the_same_call_often_in_the_window_is_repeating_too() {
        let a = ("http_request", json!({"url": "https://x.test/a"}));
        let other = |i: i32| ("current_time", json!({"timezone": format!("Etc/GMT+{i}")}));
        // a, a, o0, a, a, o1: never three in a row, four of six.
        let mut kinds = Vec::new();
        for i in 0..2 {
            kinds.push(turn(&[a.clone(), a.clone()]));
            kinds.push(turn(&[other(i)]));
        }
        assert_eq!(
            repetition(&agent(), &entries(kinds.clone())),
            Repetition::No
        );
        // Six of the last ten calls.
        kinds.push(turn(&[a.clone(), a]));
        assert!(matches!(
            repetition(&agent(), &entries(kinds)),
            Repetition::Warn { times: 6, .. }
        ));
    }
}
