//! What a conversation keeps of its ended tasks, so that the next task on
//! the same thread (a Slack thread, a direct-message conversation, an HTTP
//! `thread`) begins with the turns before it.
//!
//! Kept on the thread record, bounded: at most [`MAX_TURNS`] turns and
//! [`MAX_CHARS`] characters; older turns are folded into a short digest
//! ([`Recap::summary`], itself bounded), so what a new task is given stays
//! the same size however long the conversation grows. Within a task, the
//! context pipeline's compaction summarises as usual.

use crate::clock::{self, Instant};
use crate::ids::TaskId;
use crate::llm::Message;
use serde::{Deserialize, Serialize};

/// The most turns kept word for word.
pub const MAX_TURNS: usize = 40;
/// The most characters kept word for word, over all turns.
pub const MAX_CHARS: usize = 24_000;
/// The longest digest of folded turns.
pub const MAX_SUMMARY_CHARS: usize = 4_000;
/// How much of a folded turn the digest keeps.
const FOLDED_TURN_CHARS: usize = 200;
/// How an agent turn that used tools begins: the digest of what they
/// returned (text from outside), then the answer.
pub const TOOLS_USED_PREFIX: &str = "[Tools used for this answer: ";
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
    /// Tasks whose turns are in, newest last (bounded).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub recorded: Vec<TaskId>,
}

impl Recap {
    /// Nothing to carry into a new task.
    pub fn is_empty(&self) -> bool {
        self.summary.is_none() && self.turns.is_empty()
    }

    /// Nothing kept at all, not even which tasks were recorded.
    pub fn is_unset(&self) -> bool {
        self.is_empty() && self.recorded.is_empty()
    }

    /// Adds a turn, folding the oldest away while over the bounds.
    pub fn push(&mut self, turn: Turn) {
        if turn.text.trim().is_empty() {
            return;
        }
        self.turns.push(turn);
        self.fold();
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
        self.turns.iter().map(|t| t.text.chars().count()).sum()
    }

    fn fold(&mut self) {
        while self.turns.len() > 1 && (self.turns.len() > MAX_TURNS || self.chars() > MAX_CHARS) {
            let old = self.turns.remove(0);
            let line: String = old.text.chars().take(FOLDED_TURN_CHARS).collect();
            let who = label(&old);
            let mut summary = self.summary.take().unwrap_or_default();
            if !summary.is_empty() {
                summary.push('\n');
            }
            summary.push_str(&format!("{who}: {line}"));
            // Keep the digest's newest part.
            let n = summary.chars().count();
            if n > MAX_SUMMARY_CHARS {
                summary = summary.chars().skip(n - MAX_SUMMARY_CHARS).collect();
            }
            self.summary = Some(summary);
        }
    }
}

/// What the model is shown of carried turns: the digest, then each turn as
/// a user or an assistant message (a person's turn says who wrote it).
pub fn messages(summary: Option<&str>, turns: &[Turn]) -> Vec<Message> {
    let mut out = Vec::with_capacity(turns.len() + 2);
    if let Some(s) = summary {
        out.push(Message::User {
            content: format!("[Earlier in this conversation, in short:]\n{s}"),
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
        let s = r.summary.as_deref().unwrap();
        assert!(s.chars().count() <= MAX_SUMMARY_CHARS);
        let newest_folded = 4999 - r.turns.len();
        assert!(
            s.contains(&format!("message {newest_folded} ")),
            "the digest keeps the newest folded turns"
        );
        assert_eq!(r.turns.last().unwrap().text.split(' ').nth(1), Some("4999"));
    }

    #[test]
    fn a_stored_recap_reads_and_writes_as_before() {
        let old = r#"{"summary":"user: hi","turns":[{"speaker":"user","author":"U1","text":"hi","at":1767225600123},{"speaker":"agent","text":"hello","at":1767225604120}]}"#;
        let r: Recap = serde_json::from_str(old).unwrap();
        assert_eq!(r.turns[1].at, Instant(1_767_225_604_120));
        assert_eq!(serde_json::to_string(&r).unwrap(), old);
    }
}
