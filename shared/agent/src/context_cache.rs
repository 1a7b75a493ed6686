//! The context kept between the steps of a segment, so a step does not
//! rebuild it from the whole transcript.
//!
//! What the pipeline ([`crate::context`]) and the compaction check
//! ([`crate::compaction::needs_compaction`]) read of the transcript is the
//! latest summary, the conversational messages after it and the first user
//! message. [`ContextCache`] keeps those, each message with its token
//! estimate, and is extended with the entries each commit appends: every
//! entry is converted and estimated once per segment instead of at every
//! step. The results are those of the functions over the transcript (the
//! tests below compare them).

use crate::compaction::is_compact_command;
use crate::context::{self, History, Thresholds};
use crate::tokens::ModelProfile;
use baton_core::{CompletionRequest, Entry, EntryKind, Message, ToolSpec};
use baton_settings::AgentConfig;

/// The conversation since the latest summary, with token estimates.
#[derive(Clone, Debug)]
pub struct ContextCache {
    profile: ModelProfile,
    thresholds: Thresholds,
    /// The latest summary's text and the last seq it stands for.
    summary: Option<(String, u64)>,
    /// The conversational messages after the summary, with their entries'
    /// seqs.
    items: Vec<(u64, Message)>,
    /// The estimate of each of `items`.
    tokens: Vec<u64>,
    /// The task's first user message (its instructions), kept even when
    /// it is older than the summary.
    first_user: Option<(u64, Message)>,
    /// The last seq taken in.
    last_seq: Option<u64>,
}

impl ContextCache {
    /// The cache of `agent`'s context over `entries`.
    pub fn new(agent: &AgentConfig, entries: &[Entry]) -> Self {
        let thresholds = Thresholds::for_agent(agent);
        let mut cache = ContextCache {
            profile: thresholds.profile(agent),
            thresholds,
            summary: None,
            items: Vec::new(),
            tokens: Vec::new(),
            first_user: None,
            last_seq: None,
        };
        cache.extend(entries);
        cache
    }

    /// Takes in `entries` appended to the transcript (ones already taken
    /// in are skipped).
    pub fn extend(&mut self, entries: &[Entry]) {
        for e in entries {
            if self.last_seq.is_some_and(|last| e.seq <= last) {
                continue;
            }
            self.last_seq = Some(e.seq);
            match &e.kind {
                EntryKind::Summary { text, through_seq } => {
                    let keep_from = self.items.partition_point(|(s, _)| *s <= *through_seq);
                    self.items.drain(..keep_from);
                    self.tokens.drain(..keep_from);
                    self.summary = Some((text.clone(), *through_seq));
                }
                EntryKind::UserMessage { text } if is_compact_command(text) => {}
                kind => {
                    if let (None, EntryKind::UserMessage { text }) = (&self.first_user, kind) {
                        self.first_user = Some((
                            e.seq,
                            Message::User {
                                content: text.clone(),
                            },
                        ));
                    }
                    for m in kind.to_messages() {
                        self.tokens.push(self.profile.message(&m));
                        self.items.push((e.seq, m));
                    }
                }
            }
        }
    }

    /// Whether the history is due for compaction: what
    /// [`crate::compaction::needs_compaction`] says of the transcript.
    pub fn needs_compaction(&self, agent: &AgentConfig) -> bool {
        crate::compaction::needs_compaction_of(
            agent,
            &self.thresholds,
            &self.profile,
            self.summary.as_ref().map(|(s, _)| s.as_str()),
            &self.items,
            &self.tokens,
        )
    }

    /// The request for the next call: what
    /// [`context::build_request`] builds from the transcript.
    pub fn request(&self, agent: &AgentConfig, tools: Vec<ToolSpec>) -> CompletionRequest {
        let history: History = context::select_items(
            self.summary.as_ref().map(|(s, _)| s.as_str()),
            self.items.iter().cloned().zip(self.tokens.iter().copied()),
            self.first_user.clone(),
            self.thresholds.keep_last_turns,
            &self.profile,
        );
        context::finish_request(agent, &self.thresholds, &self.profile, history, tools).0
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::compaction::needs_compaction;
    use crate::context::build_request;
    use baton_core::{ToolCall, Usage};
    use serde_json::json;

    fn agent(window: u32) -> AgentConfig {
        let mut a = AgentConfig::new("t", "gpt-4o");
        a.system_prompt = "sys".into();
        a.context.window_tokens = Some(window);
        a
    }

    fn push(entries: &mut Vec<Entry>, kind: EntryKind) {
        let seq = entries.len() as u64 + 1;
        entries.push(Entry { seq, at: 0, kind });
    }

    fn step(entries: &mut Vec<Entry>, n: u32, result: &str) {
        let id = format!("c{n}");
        push(
            entries,
            EntryKind::AssistantMessage {
                step: n,
                text: String::new(),
                tool_calls: vec![ToolCall {
                    id: id.clone(),
                    name: "read".into(),
                    arguments: json!({"n": n}),
                }],
                usage: Usage::default(),
                model: "m".into(),
            },
        );
        push(
            entries,
            EntryKind::ToolResult {
                step: n,
                call_id: id,
                name: "read".into(),
                content: result.into(),
                is_error: false,
                truncated_chars: 0,
            },
        );
    }

    /// The cache, built up one entry at a time as commits append them,
    /// agrees with the pipeline over the whole transcript at every point.
    #[test]
    fn the_kept_context_is_the_rebuilt_one_at_every_step() {
        for window in [2_000, 20_000, 200_000] {
            let a = agent(window);
            let mut entries = Vec::new();
            push(
                &mut entries,
                EntryKind::UserMessage {
                    text: "the instructions".into(),
                },
            );
            let mut cache = ContextCache::new(&a, &entries);
            for n in 1..=80u32 {
                let size = if n % 7 == 0 { 9_000 } else { 40 };
                step(&mut entries, n, &"x".repeat(size));
                if n % 15 == 0 {
                    push(
                        &mut entries,
                        EntryKind::UserMessage {
                            text: format!("and now {n}"),
                        },
                    );
                }
                if n % 33 == 0 {
                    let through = entries.len() as u64 - 4;
                    push(
                        &mut entries,
                        EntryKind::Summary {
                            text: "so far".into(),
                            through_seq: through,
                        },
                    );
                }
                if n == 50 {
                    push(
                        &mut entries,
                        EntryKind::UserMessage {
                            text: "/compact".into(),
                        },
                    );
                }
                let start = entries.len().saturating_sub(3);
                cache.extend(&entries[start..]);
                assert_eq!(
                    cache.request(&a, Vec::new()),
                    build_request(&a, &entries, Vec::new()),
                    "window {window}, step {n}"
                );
                assert_eq!(
                    cache.needs_compaction(&a),
                    needs_compaction(&a, &entries),
                    "window {window}, step {n}"
                );
            }
        }
    }
}
