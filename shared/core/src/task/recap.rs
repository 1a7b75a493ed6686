//! What a conversation keeps of its ended tasks, so that the next task on
//! the same thread (a Slack thread, a direct-message conversation, an HTTP
//! `thread`) begins with the turns before it.
//!
//! Kept on the thread record, bounded: at most [`MAX_TURNS`] turns and
//! [`MAX_CHARS`] characters word for word. Older turns move to
//! [`Recap::overflow`], where they wait for a model call (made after a
//! task's answer is delivered) to summarise them into [`Recap::summary`]
//! with the summary before it ([`Pending`], [`Recap::settle`]); until it
//! has, and when it fails, they are folded as a short digest of each turn's
//! start. Both are bounded, so what a new task is given stays the same size
//! however long the conversation grows. Within a task, the context
//! pipeline's compaction summarises as usual.

use crate::clock::{self, Instant};
use crate::ids::TaskId;
use crate::llm::Message;
use serde::{Deserialize, Serialize};

/// The most turns kept word for word.
pub const MAX_TURNS: usize = 40;
/// The most characters kept word for word, over all turns.
pub const MAX_CHARS: usize = 24_000;
/// The longest summary (a model's, or the digest of folded turns).
pub const MAX_SUMMARY_CHARS: usize = 4_000;
/// The most turns waiting to be summarised, and their characters: past
/// them the oldest are folded, so the thread record stays bounded when no
/// summary can be made for a long time.
pub const MAX_OVERFLOW_TURNS: usize = 40;
pub const MAX_OVERFLOW_CHARS: usize = 24_000;
/// The recap summariser's instructions (the scripted model knows them).
pub const SUMMARISER_PROMPT: &str = "You keep the memory of a long conversation between people and an \
AI agent. You are given the summary of its oldest part (it may be empty) and the turns that followed, \
which no longer fit word for word. Write the new summary that replaces both.\n\
Keep: decisions and their reasons; names, ids, numbers, amounts, dates, URLs and file paths exactly as \
written; what each person asked for and what was answered or done; open questions and promises. Say \
who said what when it matters.\n\
Drop: pleasantries and repetition. Do not invent anything. At most 3,500 characters, plain text or \
short Markdown lists, without a preamble.";
/// How much of a folded turn the digest keeps.
const FOLDED_TURN_CHARS: usize = 200;
/// How an agent turn that used tools begins: the digest of what they
/// returned (text from outside), then the answer.
pub const TOOLS_USED_PREFIX: &str = "[Tools used for this answer: ";
/// How the message carrying a recap's summary begins (the context pipeline
/// keeps it when it leaves older turns out).
pub const SUMMARY_HEADER: &str = "[Earlier in this conversation, in short:]";
/// How many recorded task ids are remembered (a retried end records once).
const RECORDED_IDS: usize = 20;

/// Who said a turn.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Speaker {
    /// A person: the task's requester, or someone else in the thread.
    User,
    /// The agent's final answer.
    Agent,
}

/// One turn of a conversation.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Turn {
    pub speaker: Speaker,
    /// The Slack user who wrote it, for a person's turn in Slack.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub author: Option<String>,
    pub text: String,
    /// Integer milliseconds on the thread record, as it always was.
    #[serde(with = "clock::as_millis")]
    pub at: Instant,
}

/// A conversation's earlier turns.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Recap {
    /// A digest of turns folded away to keep the recap bounded.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub summary: Option<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub turns: Vec<Turn>,
    /// Turns that no longer fit word for word, oldest first, waiting to be
    /// summarised into `summary`. Kept whole until then, so a summary made
    /// later (by the next task, after a crash) still has them; a new task
    /// meanwhile sees them folded ([`Recap::carried_summary`]).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub overflow: Vec<Turn>,
    /// Tasks whose turns are in, newest last (bounded).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub recorded: Vec<TaskId>,
}

impl Recap {
    /// Nothing to carry into a new task.
    pub fn is_empty(&self) -> bool {
        self.summary.is_none() && self.turns.is_empty() && self.overflow.is_empty()
    }

    /// Nothing kept at all, not even which tasks were recorded.
    pub fn is_unset(&self) -> bool {
        self.is_empty() && self.recorded.is_empty()
    }

    /// Adds a turn; the oldest move to the overflow while over the bounds.
    pub fn push(&mut self, turn: Turn) {
        if turn.text.trim().is_empty() {
            return;
        }
        self.turns.push(turn);
        self.spill();
    }

    /// Adds the turns of task `id` unless they are in already.
    pub fn record(&mut self, id: &TaskId, turns: Vec<Turn>) -> bool {
        if self.recorded.contains(id) {
            return false;
        }
        for t in turns {
            self.push(t);
        }
        self.recorded.push(id.clone());
        let excess = self.recorded.len().saturating_sub(RECORDED_IDS);
        self.recorded.drain(..excess);
        true
    }

    fn chars(&self) -> usize {
        chars(&self.turns)
    }

    /// Moves the oldest turns to the overflow while over the bounds, and
    /// folds the oldest of the overflow while it is over its own.
    fn spill(&mut self) {
        while self.turns.len() > 1 && (self.turns.len() > MAX_TURNS || self.chars() > MAX_CHARS) {
            let old = self.turns.remove(0);
            self.overflow.push(old);
        }
        while !self.overflow.is_empty()
            && (self.overflow.len() > MAX_OVERFLOW_TURNS
                || chars(&self.overflow) > MAX_OVERFLOW_CHARS)
        {
            let old = self.overflow.remove(0);
            self.fold(&old);
        }
    }

    /// Today's digest of a turn that leaves the recap without a model
    /// summary: its start, after the summary, whose newest part is kept.
    fn fold(&mut self, old: &Turn) {
        let line: String = old.text.chars().take(FOLDED_TURN_CHARS).collect();
        let mut summary = self.summary.take().unwrap_or_default();
        if !summary.is_empty() {
            summary.push('\n');
        }
        summary.push_str(&format!("{}: {line}", label(old)));
        let n = summary.chars().count();
        if n > MAX_SUMMARY_CHARS {
            summary = summary.chars().skip(n - MAX_SUMMARY_CHARS).collect();
        }
        self.summary = Some(summary);
    }

    /// The summary a new task is given: the summary with the overflow
    /// still waiting for its model summary folded in.
    pub fn carried_summary(&self) -> Option<String> {
        let mut folded = Recap {
            summary: self.summary.clone(),
            ..Recap::default()
        };
        for t in &self.overflow {
            folded.fold(t);
        }
        folded.summary
    }

    /// What a summariser is to fold together, when turns wait for it.
    pub fn pending(&self) -> Option<Pending> {
        (!self.overflow.is_empty()).then(|| Pending {
            summary: self.summary.clone(),
            turns: self.overflow.clone(),
        })
    }

    /// Puts the result of summarising `pending` in: the model's `summary`
    /// (bounded), or with `None` (the call failed) the turns folded as
    /// before. Only while the recap still holds what was summarised: the
    /// same summary and the same oldest overflow turns; `false` otherwise
    /// (another summariser came first, or the overflow was folded
    /// meanwhile), and nothing changes, so no turn is ever lost. Turns that
    /// overflowed since stay for the next summary.
    pub fn settle(&mut self, pending: &Pending, summary: Option<&str>) -> bool {
        if self.summary != pending.summary || !self.overflow.starts_with(&pending.turns) {
            return false;
        }
        let turns: Vec<Turn> = self.overflow.drain(..pending.turns.len()).collect();
        match summary.map(str::trim).filter(|s| !s.is_empty()) {
            Some(s) => self.summary = Some(bounded_summary(s)),
            None => {
                for t in &turns {
                    self.fold(t);
                }
            }
        }
        true
    }
}

/// A summary cut to [`MAX_SUMMARY_CHARS`], its start and end kept (the
/// model is asked for less; this only guards the record's size).
fn bounded_summary(s: &str) -> String {
    let n = s.chars().count();
    if n <= MAX_SUMMARY_CHARS {
        return s.to_owned();
    }
    const CUT: &str = "\n…\n";
    let room = MAX_SUMMARY_CHARS - CUT.chars().count();
    let head = room * 3 / 4;
    let tail = room - head;
    let start: String = s.chars().take(head).collect();
    let end: String = s.chars().skip(n - tail).collect();
    format!("{start}{CUT}{end}")
}

fn chars(turns: &[Turn]) -> usize {
    turns.iter().map(|t| t.text.chars().count()).sum()
}

/// A recap's summary and the overflowing turns after it: what one
/// summarising call folds into the next summary.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Pending {
    pub summary: Option<String>,
    pub turns: Vec<Turn>,
}

impl Pending {
    /// The summariser's input: the previous summary, then the turns, each
    /// labelled with who said it.
    pub fn render(&self) -> String {
        let mut out = String::from("<previous_summary>\n");
        if let Some(s) = &self.summary {
            out.push_str(s);
            out.push('\n');
        }
        out.push_str("</previous_summary>\n\n<turns>\n");
        for t in &self.turns {
            out.push_str(&format!("[{}]\n{}\n\n", label(t), t.text.trim_end()));
        }
        out.push_str("</turns>");
        out
    }
}

/// What the model is shown of carried turns: the digest, then each turn as
/// a user or an assistant message (a person's turn says who wrote it).
pub fn messages(summary: Option<&str>, turns: &[Turn]) -> Vec<Message> {
    let mut out = Vec::with_capacity(turns.len() + 2);
    if let Some(s) = summary {
        out.push(Message::User {
            content: format!("{SUMMARY_HEADER}\n{s}"),
        });
        out.push(Message::Assistant {
            content: "Noted.".into(),
            tool_calls: Vec::new(),
        });
    }
    for t in turns {
        out.push(match t.speaker {
            Speaker::User => Message::User {
                content: match &t.author {
                    Some(a) => crate::task::attributed(a, &t.text),
                    None => t.text.clone(),
                },
            },
            Speaker::Agent => Message::Assistant {
                content: t.text.clone(),
                tool_calls: Vec::new(),
            },
        });
    }
    out
}

fn label(t: &Turn) -> String {
    match (t.speaker, &t.author) {
        (Speaker::Agent, _) => "assistant".into(),
        (Speaker::User, Some(a)) => format!("<@{a}>"),
        (Speaker::User, None) => "user".into(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::transcript::EntryKind;

    fn turn(speaker: Speaker, text: &str) -> Turn {
        Turn {
            speaker,
            author: (speaker == Speaker::User).then(|| "U1".to_owned()),
            text: text.into(),
            at: Instant(0),
        }
    }

    #[test]
    fn a_task_is_recorded_once_and_becomes_entries() {
        let mut r = Recap::default();
        let id = TaskId::generate();
        let turns = vec![turn(Speaker::User, "hi"), turn(Speaker::Agent, "hello")];
        assert!(r.record(&id, turns.clone()));
        assert!(!r.record(&id, turns), "a retried end records nothing");
        let Some(EntryKind::Recap { summary, turns }) = r.entry() else {
            panic!("one recap entry");
        };
        let messages = messages(summary.as_deref(), &turns);
        assert_eq!(messages.len(), 2);
        assert_eq!(
            messages[0],
            Message::User {
                content: "[from <@U1>] hi".into()
            }
        );
        assert!(matches!(&messages[1], Message::Assistant { content, .. } if content == "hello"));
        assert_eq!(Recap::default().entry(), None, "nothing to carry");
    }

    #[test]
    fn it_stays_bounded_however_long_the_conversation() {
        let mut r = Recap::default();
        for i in 0..5_000 {
            r.push(turn(
                Speaker::User,
                &format!("message {i} {}", "x".repeat(500)),
            ));
        }
        assert!(r.turns.len() <= MAX_TURNS);
        assert!(r.chars() <= MAX_CHARS);
        assert!(r.overflow.len() <= MAX_OVERFLOW_TURNS);
        assert!(chars(&r.overflow) <= MAX_OVERFLOW_CHARS);
        let s = r.summary.as_deref().unwrap();
        assert!(s.chars().count() <= MAX_SUMMARY_CHARS);
        let newest_folded = 4999 - r.turns.len() - r.overflow.len();
        assert!(
            s.contains(&format!("message {newest_folded} ")),
            "the digest keeps the newest folded turns"
        );
        assert_eq!(
            r.overflow[0].text.split(' ').nth(1),
            Some(format!("{}", newest_folded + 1).as_str()),
            "the overflow follows the folded turns, whole"
        );
        assert_eq!(r.turns.last().unwrap().text.split(' ').nth(1), Some("4999"));
        let carried = r.carried_summary().unwrap();
        assert!(carried.chars().count() <= MAX_SUMMARY_CHARS);
        assert!(
            carried.contains(&format!("message {} ", 4999 - r.turns.len())),
            "a new task sees the waiting turns folded"
        );
    }

    fn overflowing(n: usize) -> Recap {
        let mut r = Recap::default();
        for i in 0..MAX_TURNS + n {
            r.push(turn(Speaker::User, &format!("turn {i}")));
        }
        r
    }

    #[test]
    fn overflowing_turns_wait_whole_for_their_summary() {
        let r = overflowing(3);
        assert_eq!(r.turns.len(), MAX_TURNS);
        assert_eq!(r.summary, None, "nothing is cut before a summary is tried");
        let p = r.pending().unwrap();
        assert_eq!(p.turns.len(), 3);
        assert_eq!(p.turns[0].text, "turn 0");
        let input = p.render();
        assert!(
            input.starts_with("<previous_summary>\n</previous_summary>"),
            "{input}"
        );
        assert!(input.contains("[<@U1>]\nturn 2\n"), "{input}");
        let Some(EntryKind::Recap { summary, turns }) = r.entry() else {
            panic!("one recap entry");
        };
        assert_eq!(
            summary.as_deref(),
            Some("<@U1>: turn 0\n<@U1>: turn 1\n<@U1>: turn 2")
        );
        assert_eq!(turns.len(), MAX_TURNS);
        assert_eq!(Recap::default().pending(), None);
    }

    #[test]
    fn a_summary_folds_into_the_next_and_stays_bounded() {
        let mut r = overflowing(2);
        let first = r.pending().unwrap();
        assert!(r.settle(&first, Some("  id ORD-7 agreed  ")));
        assert_eq!(r.summary.as_deref(), Some("id ORD-7 agreed"));
        assert!(r.overflow.is_empty());
        assert!(!r.settle(&first, Some("again")), "settled once");
        assert_eq!(r.summary.as_deref(), Some("id ORD-7 agreed"));

        r.push(turn(Speaker::Agent, "more"));
        let second = r.pending().unwrap();
        assert_eq!(second.summary.as_deref(), Some("id ORD-7 agreed"));
        assert!(second
            .render()
            .contains("id ORD-7 agreed\n</previous_summary>"));
        let long = format!("START {} END", "y".repeat(10_000));
        assert!(r.settle(&second, Some(&long)));
        let s = r.summary.as_deref().unwrap();
        assert_eq!(s.chars().count(), MAX_SUMMARY_CHARS);
        assert!(
            s.starts_with("START ") && s.ends_with(" END"),
            "both ends kept"
        );
    }

    #[test]
    fn a_failed_summary_folds_and_a_stale_one_changes_nothing() {
        let mut r = overflowing(2);
        let seen = r.pending().unwrap();
        // Turns overflow while the summary is being made.
        r.push(turn(Speaker::User, "late"));
        r.push(turn(Speaker::User, "later"));
        let mut raced = r.clone();
        assert!(raced.settle(&raced.pending().unwrap(), Some("the other summariser")));
        assert!(!raced.settle(&seen, Some("stale")), "came second: dropped");
        assert_eq!(raced.summary.as_deref(), Some("the other summariser"));

        assert!(r.settle(&seen, None), "the call failed: folded as before");
        assert_eq!(r.summary.as_deref(), Some("<@U1>: turn 0\n<@U1>: turn 1"));
        assert_eq!(
            r.overflow.len(),
            2,
            "the turns since wait for the next summary"
        );
        assert_eq!(r.overflow[0].text, "turn 2");
        assert!(!r.settle(&seen, None), "folded once");
    }

    #[test]
    fn a_stored_recap_reads_and_writes_as_before() {
        let old = r#"{"summary":"user: hi","turns":[{"speaker":"user","author":"U1","text":"hi","at":1767225600123},{"speaker":"agent","text":"hello","at":1767225604120}]}"#;
        let r: Recap = serde_json::from_str(old).unwrap();
        assert_eq!(r.turns[1].at, Instant(1_767_225_604_120));
        assert_eq!(serde_json::to_string(&r).unwrap(), old);
    }
}
